/**
 * The bencode codec of the rtpengine NG protocol (src/media/bencode.ts, docs/media.md):
 * BEP 3's four types, sorted dictionary keys, and untrusted input that only ever
 * ends in a BencodeError.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BencodeError, decode, encode, type BencodeText } from '../../../src/media/bencode.js';

const b = (s: string) => Buffer.from(s, 'latin1');

describe('encode', () => {
  it('writes strings, integers, lists and dictionaries as BEP 3 does', () => {
    expect(encode('spam').toString()).toBe('4:spam');
    expect(encode('').toString()).toBe('0:');
    expect(encode(3).toString()).toBe('i3e');
    expect(encode(-3).toString()).toBe('i-3e');
    expect(encode(0).toString()).toBe('i0e');
    expect(encode(12345678901234567890n).toString()).toBe('i12345678901234567890e');
    expect(encode(['spam', 'eggs']).toString()).toBe('l4:spam4:eggse');
    expect(encode({ cow: 'moo', spam: 'eggs' }).toString()).toBe('d3:cow3:moo4:spam4:eggse');
    expect(encode({ spam: ['a', 'b'] }).toString()).toBe('d4:spaml1:a1:bee');
  });

  it('sorts dictionary keys by their bytes and leaves undefined entries out', () => {
    expect(encode({ 'to-tag': 't', command: 'offer', 'call-id': 'c', ICE: 'remove', missing: undefined }).toString()).toBe(
      'd3:ICE6:remove7:call-id1:c7:command5:offer6:to-tag1:te',
    );
  });

  it('counts string lengths in UTF-8 bytes and passes Buffers through', () => {
    expect(encode('é').toString('utf8')).toBe('2:é');
    expect(encode(Buffer.from([0, 255, 10])).equals(Buffer.concat([b('3:'), Buffer.from([0, 255, 10])]))).toBe(true);
  });

  it('refuses what bencode cannot carry', () => {
    expect(() => encode(1.5)).toThrowError(BencodeError);
    expect(() => encode(Number.NaN)).toThrowError(/whole numbers/);
    expect(() => encode(null as never)).toThrowError(/null/);
    expect(() => encode({ f: () => 1 } as never)).toThrowError(/function/);
  });
});

describe('decode', () => {
  it('reads what encode writes (UTF-8 text mode), for any value', () => {
    const key = fc.string({ maxLength: 12 });
    const value: fc.Arbitrary<BencodeText> = fc.letrec<{ v: BencodeText }>((tie) => ({
      v: fc.oneof(
        { depthSize: 'small', withCrossShrink: true },
        fc.string({ unit: 'grapheme', maxLength: 40 }),
        fc.integer({ min: Number.MIN_SAFE_INTEGER, max: Number.MAX_SAFE_INTEGER }),
        fc.array(tie('v'), { maxLength: 5 }),
        fc.dictionary(key, tie('v'), { maxKeys: 5 }).map((d) => Object.assign(Object.create(null) as Record<string, BencodeText>, d)),
      ),
    })).v;
    fc.assert(
      fc.property(value, (v) => {
        expect(decode(encode(v), { strings: 'utf8' })).toStrictEqual(v);
      }),
      { numRuns: 300 },
    );
  });

  it('keeps arbitrary bytes in Buffer mode', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 64 }), (bytes) => {
        const out = decode(encode([Buffer.from(bytes)])) as Buffer[];
        expect(Buffer.compare(out[0] as Buffer, Buffer.from(bytes))).toBe(0);
      }),
    );
  });

  it('reads an rtpengine reply', () => {
    const r = decode(b('d6:result2:ok3:sdp10:v=0\r\ns=-\r\n7:createdi1795500045e4:tagsd2:f1d5:label1:aeee'), { strings: 'utf8' }) as Record<string, BencodeText>;
    expect(r.result).toBe('ok');
    expect(r.sdp).toBe('v=0\r\ns=-\r\n');
    expect(r.created).toBe(1795500045);
    expect(r.tags).toEqual({ f1: { label: 'a' } });
  });

  it('makes a "__proto__" key an ordinary key, not a prototype', () => {
    const r = decode(b('d9:__proto__d1:xi1eee'), { strings: 'utf8' }) as Record<string, BencodeText>;
    expect(Object.getPrototypeOf(r)).toBeNull();
    expect(Object.keys(r)).toEqual(['__proto__']);
    expect(({} as Record<string, unknown>).x).toBeUndefined();
  });

  it.each([
    ['', /input ends early at byte 0/],
    ['4:spa', /runs past the end of the input at byte 0/],
    ['4spam', /expected ':' after a string length at byte 1/],
    ['i12', /input ends early at byte 3/],
    ['ie', /integer has no digits at byte 1/],
    ['i-e', /integer has no digits at byte 2/],
    ['i-0e', /integer -0/],
    ['i03e', /leading zero/],
    ['03:abc', /leading zero/],
    ['i1.5e', /expected 'e' after an integer/],
    ['i99999999999999999e', /integer too long/],
    ['9999999999999999:x', /string length too (long|large)/],
    ['l4:spam', /input ends early at byte 7/],
    ['d3:cowe', /dictionary key "cow" has no value at byte 6/],
    ['d3:cow', /input ends early at byte 6/],
    ['di1e3:mooe', /dictionary key is not a string at byte 1/],
    ['d1:ai1e1:ai2ee', /duplicate dictionary key "a"/],
    ['x', /unexpected byte 0x78 at byte 0/],
    ['i1ei2e', /1 trailing byte|3 trailing byte/],
    ['4:spam ', /1 trailing byte/],
  ])('refuses %j with a BencodeError at the right place', (input, re) => {
    expect(() => decode(b(input))).toThrowError(BencodeError);
    expect(() => decode(b(input))).toThrowError(re);
  });

  it('refuses nesting deeper than maxDepth without exhausting the stack', () => {
    const deep = b('l'.repeat(100_000) + 'e'.repeat(100_000));
    expect(() => decode(deep)).toThrowError(/nested deeper than 32 levels at byte 32/);
    expect(decode(b('l'.repeat(32) + 'e'.repeat(32)))).toBeInstanceOf(Array);
    expect(() => decode(b('lle' + 'e'), { maxDepth: 1 })).toThrowError(/nested deeper than 1 levels/);
  });

  it('ends in a BencodeError (never another error, never a hang) on any bytes', () => {
    fc.assert(
      fc.property(fc.uint8Array({ maxLength: 200 }), (bytes) => {
        try {
          decode(bytes, { strings: 'utf8' });
        } catch (e) {
          expect(e).toBeInstanceOf(BencodeError);
        }
      }),
      { numRuns: 2000 },
    );
  });

  it('ends in a BencodeError on every truncation and every one-byte change of a valid message', () => {
    const msg = encode({ command: 'offer', 'call-id': 'abc', flags: ['trust-address', 'SDES-off'], n: -42, sdp: 'v=0\r\n' });
    let errors = 0;
    for (let i = 0; i < msg.length; i++) {
      expect(() => decode(msg.subarray(0, i))).toThrowError(BencodeError);
      for (const byte of [0x00, 0x30, 0x39, 0x3a, 0x65, 0x69, 0x6c, 0x64, 0xff]) {
        const m = Buffer.from(msg);
        m[i] = byte;
        try {
          decode(m);
        } catch (e) {
          expect(e).toBeInstanceOf(BencodeError);
          errors++;
        }
      }
    }
    expect(errors).toBeGreaterThan(msg.length); // most changes break it
  });
});
