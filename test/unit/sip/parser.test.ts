import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { getHeader, getHeaders, getListValues } from '../../../src/sip/headers.js';
import type { SipMessage, SipRequest, SipResponse } from '../../../src/sip/message.js';
import { DEFAULT_LIMITS, parseMessage, type ParseResult } from '../../../src/sip/parser.js';

function fixture(name: string): Buffer {
  return readFileSync(new URL(`../../fixtures/sip/${name}`, import.meta.url));
}

function wire(lines: string[], body = ''): Buffer {
  return Buffer.from(lines.join('\r\n') + '\r\n\r\n' + body, 'utf8');
}

const MANDATORY = [
  'Via: SIP/2.0/UDP 192.0.2.1:5060;branch=z9hG4bK776asdhds',
  'To: <sip:bob@example.com>',
  'From: <sip:alice@example.com>;tag=1928301774',
  'Call-ID: a84b4c76e66710@pc33.example.com',
];

function request(extra: string[] = [], opts: { method?: string; cseq?: string; body?: string; start?: string } = {}): Buffer {
  const method = opts.method ?? 'OPTIONS';
  return wire(
    [opts.start ?? `${method} sip:bob@example.com SIP/2.0`, ...MANDATORY, `CSeq: ${opts.cseq ?? `1 ${method}`}`, ...extra],
    opts.body ?? '',
  );
}

function ok(r: ParseResult): SipMessage {
  if (!r.ok) throw new Error(`expected ok, got: ${r.reason}`);
  return r.msg;
}

function okRequest(r: ParseResult): SipRequest {
  const m = ok(r);
  if (m.kind !== 'request') throw new Error('expected a request');
  return m;
}

function okResponse(r: ParseResult): SipResponse {
  const m = ok(r);
  if (m.kind !== 'response') throw new Error('expected a response');
  return m;
}

function failure(r: ParseResult): { reason: string; request?: SipRequest } {
  if (r.ok) throw new Error('expected a parse failure');
  return r;
}

describe('parseMessage', () => {
  describe('start line (RFC 3261 §7.1, §7.2)', () => {
    it('reads method and Request-URI from a request line', () => {
      const m = okRequest(parseMessage(fixture('register-basic.sip')));
      expect(m.method).toBe('REGISTER');
      expect(m.uri).toBe('sip:acme.sip.localhost');
    });

    it('reads status code and reason phrase from a status line', () => {
      const m = okResponse(parseMessage(fixture('response-401.sip')));
      expect(m.status).toBe(401);
      expect(m.reason).toBe('Unauthorized');
    });

    it('keeps a reason phrase with spaces and reads an absent one as empty', () => {
      const base = MANDATORY.concat('CSeq: 1 INVITE');
      expect(okResponse(parseMessage(wire(['SIP/2.0 183 Session Progress', ...base]))).reason).toBe('Session Progress');
      expect(okResponse(parseMessage(wire(['SIP/2.0 100 ', ...base]))).reason).toBe('');
      expect(okResponse(parseMessage(wire(['SIP/2.0 100', ...base]))).reason).toBe('');
    });

    it('keeps the method case-sensitive as sent', () => {
      expect(okRequest(parseMessage(request([], { method: 'options' }))).method).toBe('options');
    });

    it('treats the SIP-Version case-insensitively', () => {
      expect(okRequest(parseMessage(request([], { start: 'OPTIONS sip:bob@example.com sip/2.0' }))).method).toBe('OPTIONS');
    });

    it("refuses another SIP version with a reason starting 'version' and the request for a 505", () => {
      const f = failure(parseMessage(request([], { start: 'OPTIONS sip:bob@example.com SIP/3.0' })));
      expect(f.reason.startsWith('version')).toBe(true);
      expect(f.request?.method).toBe('OPTIONS');
      expect(getHeader(f.request!, 'call-id')).toBe('a84b4c76e66710@pc33.example.com');
    });

    it('refuses a malformed SIP-Version as a bad request line, not as a version', () => {
      for (const v of ['SIP/2', 'SIP/2.', 'HTTP/1.1', 'SIP/a.0', '']) {
        const f = failure(parseMessage(request([], { start: `OPTIONS sip:bob@example.com ${v}` })));
        expect(f.reason.startsWith('version')).toBe(false);
      }
    });

    it('refuses a status line whose code is not three digits in 100-699', () => {
      const base = MANDATORY.concat('CSeq: 1 INVITE');
      for (const line of ['SIP/2.0 20 OK', 'SIP/2.0 2000 OK', 'SIP/2.0 099 Low', 'SIP/2.0 700 High', 'SIP/2.0 abc OK', 'SIP/2.0']) {
        expect(parseMessage(wire([line, ...base])).ok).toBe(false);
      }
    });

    it('refuses a response in another SIP version', () => {
      expect(failure(parseMessage(wire(['SIP/1.0 200 OK', ...MANDATORY, 'CSeq: 1 INVITE']))).reason).toMatch(/^version/);
    });

    it('refuses extra spaces in the request line', () => {
      for (const start of ['OPTIONS  sip:bob@example.com SIP/2.0', 'OPTIONS sip:bob@example.com SIP/2.0 ', 'OPTIONS sip:bob@example.com']) {
        expect(parseMessage(request([], { start })).ok).toBe(false);
      }
    });

    it('refuses a method that is not a token', () => {
      expect(failure(parseMessage(request([], { start: 'OPT(ONS sip:bob@example.com SIP/2.0' }))).reason).toMatch(/method/);
    });

    it('refuses a Request-URI in angle brackets, with spaces, or carrying headers', () => {
      for (const uri of ['<sip:bob@example.com>', 'sip:bob@example.com?Subject=hi', 'sip:bob@exa mple.com', 'sip:']) {
        const r = failure(parseMessage(request([], { start: `OPTIONS ${uri} SIP/2.0` })));
        expect(r.reason).toMatch(/request-line/);
        expect(r.request).toBeDefined();
      }
    });

    it('accepts a Request-URI of another scheme (tel:, urn:)', () => {
      expect(okRequest(parseMessage(request([], { start: 'OPTIONS tel:+1-201-555-0123 SIP/2.0' }))).uri).toBe('tel:+1-201-555-0123');
      expect(parseMessage(request([], { start: 'OPTIONS urn:service:sos SIP/2.0' })).ok).toBe(true);
    });

    it('ignores CRLFs before the start line (RFC 3261 §7.5)', () => {
      const m = okRequest(parseMessage(fixture('register-odd-syntax.sip')));
      expect(m.method).toBe('REGISTER');
      expect(okRequest(parseMessage(Buffer.concat([Buffer.from('\r\n\n\r\n'), request()]))).method).toBe('OPTIONS');
    });
  });

  describe('header lines (RFC 3261 §7.3)', () => {
    const odd = okRequest(parseMessage(fixture('register-odd-syntax.sip')));

    it('unfolds header continuation lines into one space', () => {
      expect(getHeaders(odd, 'via')[1]).toBe('SIP / 2.0 / UDP 192.0.2.9 ; branch = z9hG4bKfolded');
      expect(getHeader(odd, 'cseq')).toBe('7 REGISTER');
      const m = ok(parseMessage(request(['Subject: first', ' \t second  ', '\tthird'])));
      expect(getHeader(m, 'subject')).toBe('first second third');
    });

    it('continues an empty header value without a leading space', () => {
      const m = ok(parseMessage(request(['Subject:', '   folded in'])));
      expect(getHeader(m, 'subject')).toBe('folded in');
    });

    it('expands compact header names to their canonical long names (§7.3.3)', () => {
      const names = odd.headers.map((h) => h.name);
      expect(names).toEqual([
        'via', 'via', 'from', 'to', 'call-id', 'cseq', 'contact', 'contact',
        'supported', 'supported', 'x-custom-header', 'subject', 'content-length',
      ]);
    });

    it('reads header names case-insensitively', () => {
      const m = ok(parseMessage(request(['mAx-FoRwArDs: 70', 'X-ODD-Name: 1', 'USER-AGENT: ua'])));
      expect(getHeader(m, 'max-forwards')).toBe('70');
      expect(getHeader(m, 'x-odd-name')).toBe('1');
      expect(getHeader(m, 'user-agent')).toBe('ua');
    });

    it('keeps every header line in wire order, repeated ones included', () => {
      expect(getHeaders(odd, 'supported')).toEqual(['path, outbound', 'gruu']);
      expect(getListValues(odd, 'supported')).toEqual(['path', 'outbound', 'gruu']);
    });

    it('allows whitespace before the colon and trims the value, keeping inner spaces', () => {
      expect(getHeader(odd, 'x-custom-header')).toBe('value with   inner   spaces');
    });

    it('keeps an empty header value', () => {
      expect(getHeader(odd, 'subject')).toBe('');
    });

    it('refuses a line without a colon', () => {
      expect(failure(parseMessage(request(['Bogus line here']))).reason).toMatch(/colon/);
    });

    it('refuses a header name that is not a token', () => {
      expect(failure(parseMessage(request(['Bad Name: x']))).reason).toMatch(/name/);
      expect(failure(parseMessage(request([': x']))).reason).toMatch(/name/);
    });

    it('refuses a continuation line before the first header', () => {
      const buf = wire(['OPTIONS sip:bob@example.com SIP/2.0', ' folded', ...MANDATORY, 'CSeq: 1 OPTIONS']);
      expect(failure(parseMessage(buf)).reason).toMatch(/continuation/);
    });

    it('refuses a bare CR inside a header line', () => {
      expect(failure(parseMessage(request(['Subject: a\rInjected: b']))).reason).toMatch(/CR/);
    });

    it('accepts bare LF line ends', () => {
      const buf = Buffer.from(request().toString('latin1').replace(/\r\n/g, '\n'), 'latin1');
      const m = okRequest(parseMessage(buf));
      expect(getHeader(m, 'call-id')).toBe('a84b4c76e66710@pc33.example.com');
    });

    it('decodes header values as UTF-8', () => {
      const m = ok(parseMessage(request(['Subject: Grüße, 世界'])));
      expect(getHeader(m, 'subject')).toBe('Grüße, 世界');
    });
  });

  describe('mandatory headers (RFC 3261 §8.1.1)', () => {
    const drop = (name: string): Buffer =>
      wire(['OPTIONS sip:bob@example.com SIP/2.0', ...MANDATORY, 'CSeq: 1 OPTIONS'].filter((l) => !l.startsWith(name + ':')));

    it.each(['From', 'To', 'Call-ID', 'CSeq'])('refuses a request without %s, keeping the request for a 400', (name) => {
      const f = failure(parseMessage(drop(name)));
      expect(f.reason).toContain(`missing ${name}`);
      expect(f.request?.method).toBe('OPTIONS');
    });

    it('refuses a request without Via and offers no request to answer', () => {
      const f = failure(parseMessage(drop('Via')));
      expect(f.reason).toContain('missing Via');
      expect(f.request).toBeUndefined();
    });

    it.each(['From: <sip:x@example.com>;tag=2', 'To: <sip:y@example.com>', 'Call-ID: other@host', 'CSeq: 2 OPTIONS'])(
      'refuses a second single-valued header (%s)',
      (line) => {
        expect(failure(parseMessage(request([line]))).reason).toMatch(/more than one/);
      },
    );

    it('accepts several Via lines and comma-joined Via values', () => {
      const m = ok(parseMessage(request(['Via: SIP/2.0/TCP a.example.com;branch=z9hG4bK1, SIP/2.0/UDP [2001:db8::1]:5062;branch=z9hG4bK2'])));
      expect(getListValues(m, 'via')).toHaveLength(3);
    });

    it('refuses a malformed Via, From or To value', () => {
      expect(failure(parseMessage(request(['Via: SIP/2.0/UDP host;;branch=x']))).reason).toMatch(/Via/);
      const badFrom = wire(['OPTIONS sip:bob@example.com SIP/2.0', MANDATORY[0], MANDATORY[1], 'From: "unterminated <sip:a@b>', MANDATORY[3], 'CSeq: 1 OPTIONS']);
      expect(failure(parseMessage(badFrom)).reason).toMatch(/From/);
      const badTo = wire(['OPTIONS sip:bob@example.com SIP/2.0', MANDATORY[0], 'To: Bell, Alexander <sip:a@b>', MANDATORY[2], MANDATORY[3], 'CSeq: 1 OPTIONS']);
      expect(failure(parseMessage(badTo)).reason).toMatch(/To/);
    });

    it('refuses a Call-ID with whitespace or an empty one', () => {
      const withCallId = (v: string): Buffer =>
        wire(['OPTIONS sip:bob@example.com SIP/2.0', MANDATORY[0], MANDATORY[1], MANDATORY[2], `Call-ID: ${v}`, 'CSeq: 1 OPTIONS']);
      expect(failure(parseMessage(withCallId('abc def'))).reason).toMatch(/Call-ID/);
      expect(failure(parseMessage(withCallId(''))).reason).toMatch(/Call-ID/);
      expect(failure(parseMessage(withCallId('@host'))).reason).toMatch(/Call-ID/);
      expect(parseMessage(withCallId('f81d4fae-7dec-11d0-a765-00a0c91e6bf6@foo.bar.com')).ok).toBe(true);
    });

    it('refuses a CSeq whose method differs from the request method', () => {
      const f = failure(parseMessage(request([], { cseq: '1 INVITE' })));
      expect(f.reason).toMatch(/CSeq method/);
      expect(f.request).toBeDefined();
    });

    it('refuses a CSeq number above 2**32-1 and accepts 2**32-1', () => {
      expect(failure(parseMessage(request([], { cseq: '4294967296 OPTIONS' }))).reason).toMatch(/CSeq/);
      expect(parseMessage(request([], { cseq: '4294967295 OPTIONS' })).ok).toBe(true);
    });

    it('requires the same headers in a response', () => {
      const f = failure(parseMessage(wire(['SIP/2.0 200 OK', MANDATORY[0], MANDATORY[1], MANDATORY[2], 'CSeq: 1 OPTIONS'])));
      expect(f.reason).toMatch(/Call-ID/);
      expect(f.request).toBeUndefined();
    });
  });

  describe('body (RFC 3261 §18.3, §20.14)', () => {
    it('reads exactly Content-Length bytes of body', () => {
      const buf = fixture('invite-sdp.sip');
      const m = ok(parseMessage(buf));
      expect(m.body.length).toBe(Number(getHeader(m, 'content-length')));
      expect(m.body.toString('latin1')).toMatch(/^v=0\r\n[\s\S]*a=rtpmap:0 PCMU\/8000\r\n$/);
    });

    it('returns the body as a view into the input rather than a copy', () => {
      const buf = fixture('invite-sdp.sip');
      const m = ok(parseMessage(buf));
      expect(m.body.buffer).toBe(buf.buffer);
    });

    it('discards bytes after Content-Length', () => {
      const m = ok(parseMessage(request(['Content-Length: 4'], { body: 'abcdEXTRA' })));
      expect(m.body.toString()).toBe('abcd');
    });

    it('takes the rest of the buffer as body when Content-Length is absent', () => {
      const m = ok(parseMessage(request([], { body: 'hello\r\n' })));
      expect(m.body.toString()).toBe('hello\r\n');
    });

    it('gives an empty body with Content-Length 0 or nothing after the headers', () => {
      expect(ok(parseMessage(request(['Content-Length: 0'], { body: 'junk' }))).body.length).toBe(0);
      expect(ok(parseMessage(request())).body.length).toBe(0);
    });

    it('counts Content-Length in bytes, not characters', () => {
      const m = ok(parseMessage(request(['Content-Length: 5'], { body: 'été!' })));
      expect(m.body.toString('utf8')).toBe('été');
    });

    it('refuses a Content-Length larger than the bytes available, keeping the request for a 400', () => {
      const f = failure(parseMessage(request(['Content-Length: 10'], { body: 'short' })));
      expect(f.reason).toMatch(/^body: Content-Length 10 exceeds the 5 bytes available/);
      expect(f.request).toBeDefined();
    });

    it('refuses a negative or non-numeric Content-Length', () => {
      expect(failure(parseMessage(request(['Content-Length: -1']))).reason).toMatch(/Content-Length/);
      expect(failure(parseMessage(request(['Content-Length: 1e3']))).reason).toMatch(/Content-Length/);
      expect(failure(parseMessage(request(['Content-Length: ']))).reason).toMatch(/Content-Length/);
    });

    it('refuses differing Content-Length values and accepts a repeated equal one', () => {
      expect(failure(parseMessage(request(['Content-Length: 2', 'l: 3'], { body: 'abc' }))).reason).toMatch(/conflicting/);
      expect(ok(parseMessage(request(['Content-Length: 2', 'l: 2'], { body: 'abc' }))).body.toString()).toBe('ab');
    });
  });

  describe('framing', () => {
    it('reads a datagram whose header block lacks the final empty line as headers without body', () => {
      const buf = Buffer.from(request().toString('latin1').replace(/\r\n\r\n$/, '\r\n'), 'latin1');
      expect(ok(parseMessage(buf)).body.length).toBe(0);
    });

    it('refuses a message cut inside a header line', () => {
      const full = request();
      expect(failure(parseMessage(full.subarray(0, full.length - 10))).reason).toMatch(/^framing/);
    });

    it('refuses an empty buffer and one holding only CRLFs', () => {
      expect(failure(parseMessage(Buffer.alloc(0))).reason).toMatch(/^empty/);
      expect(failure(parseMessage(Buffer.from('\r\n\r\n'))).reason).toMatch(/^empty/);
    });

    it('returns a failure, not an exception, for input that is not a Buffer', () => {
      for (const v of [null, undefined, 'OPTIONS sip:a SIP/2.0', 42, {}]) {
        expect(failure(parseMessage(v as unknown as Buffer)).reason).toMatch(/^input/);
      }
    });

    it('accepts a plain Uint8Array', () => {
      const b = request();
      const u8 = new Uint8Array(b.buffer.slice(b.byteOffset, b.byteOffset + b.length));
      expect(parseMessage(u8 as Buffer).ok).toBe(true);
    });
  });

  describe('limits', () => {
    it('uses 65535 bytes, 128 headers and 8192-character lines by default', () => {
      expect(DEFAULT_LIMITS).toEqual({ maxMessageSize: 65535, maxHeaders: 128, maxLineLength: 8192 });
    });

    it('refuses a message larger than maxMessageSize and accepts one of exactly that size', () => {
      const head = request(['Content-Length: 0']);
      const size = (n: number): Buffer => request([`X-Pad: ${'a'.repeat(n - head.length - 'X-Pad: \r\n'.length)}`, 'Content-Length: 0']);
      const limits = { ...DEFAULT_LIMITS, maxMessageSize: 1000 };
      expect(size(1000)).toHaveLength(1000);
      expect(parseMessage(size(1000), limits).ok).toBe(true);
      expect(failure(parseMessage(size(1001), limits)).reason).toMatch(/^size: message of 1001 bytes exceeds maxMessageSize 1000/);
      const big = Buffer.concat([request(), Buffer.alloc(65536 - request().length, 0x61)]);
      expect(failure(parseMessage(big)).reason).toMatch(/^size/);
    });

    it('refuses more header fields than maxHeaders, not counting continuation lines', () => {
      const pad = (n: number): string[] => Array.from({ length: n }, (_, i) => `X-H${i}: v`);
      // the request() helper already has 5 header fields
      expect(parseMessage(request(pad(123))).ok).toBe(true);
      expect(failure(parseMessage(request(pad(124)))).reason).toMatch(/^headers: more than maxHeaders 128/);
      const folded = request(['Subject: a', ...Array.from({ length: 300 }, () => ' more')]);
      expect(parseMessage(folded).ok).toBe(true);
      expect(parseMessage(request(pad(5)), { ...DEFAULT_LIMITS, maxHeaders: 9 }).ok).toBe(false);
    });

    it('refuses a header line longer than maxLineLength and accepts one of exactly that length', () => {
      const line = (n: number): string => 'Subject: ' + 'x'.repeat(n - 'Subject: '.length);
      expect(parseMessage(request([line(8192)])).ok).toBe(true);
      expect(failure(parseMessage(request([line(8193)]))).reason).toMatch(/^line: header line of 8193 characters/);
    });

    it('refuses a start line longer than maxLineLength', () => {
      const start = `OPTIONS sip:${'u'.repeat(100)}@example.com SIP/2.0`;
      const f = failure(parseMessage(request([], { start }), { ...DEFAULT_LIMITS, maxLineLength: 64 }));
      expect(f.reason).toMatch(/^line: start line/);
    });
  });
});
