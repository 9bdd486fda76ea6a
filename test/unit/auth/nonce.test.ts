import { randomBytes } from 'node:crypto';
import { beforeEach, describe, expect, it } from 'vitest';
import { NONCE_COUNT_WINDOW, NonceManager } from '../../../src/auth/nonce.js';

const SECRET = Buffer.from('0123456789abcdef0123456789abcdef');
const REALM = 'acme.sip.localhost';
const TTL_S = 300;
const T0 = Date.UTC(2025, 0, 1);

/** A clock the test moves by hand. */
class FakeClock {
  t = T0;
  readonly now = (): number => this.t;
  advance(ms: number): void {
    this.t += ms;
  }
}

/** Changes one base64url character at index `i` to another valid one. */
function flipChar(s: string, i: number): string {
  const c = s[i] === 'A' ? 'B' : 'A';
  return s.slice(0, i) + c + s.slice(i + 1);
}

describe('NonceManager', () => {
  let clock: FakeClock;
  let nonces: NonceManager;

  beforeEach(() => {
    clock = new FakeClock();
    nonces = new NonceManager({ secret: SECRET, ttlSeconds: TTL_S, now: clock.now });
  });

  describe('#issue()', () => {
    it('returns base64url text that needs no escaping in a quoted-string (no ", comma or backslash)', () => {
      for (let i = 0; i < 200; i++) {
        const n = nonces.issue(REALM);
        expect(n).toMatch(/^[A-Za-z0-9_-]+$/);
      }
    });

    it('returns a different nonce on every call, even within one millisecond', () => {
      const seen = new Set<string>();
      for (let i = 0; i < 1000; i++) seen.add(nonces.issue(REALM));
      expect(seen.size).toBe(1000);
    });
  });

  describe('#check()', () => {
    it('is valid for a fresh nonce of the same realm', () => {
      expect(nonces.check(nonces.issue(REALM), REALM)).toBe('valid');
    });

    it('is valid up to exactly the TTL and stale one millisecond later', () => {
      const n = nonces.issue(REALM);
      clock.advance(TTL_S * 1000);
      expect(nonces.check(n, REALM)).toBe('valid');
      clock.advance(1);
      expect(nonces.check(n, REALM)).toBe('stale');
    });

    it('stays stale (not invalid) long after expiry, so the client can retry with stale=true', () => {
      const n = nonces.issue(REALM);
      clock.advance(30 * 24 * 3600 * 1000);
      expect(nonces.check(n, REALM)).toBe('stale');
    });

    it('is valid for a nonce from up to 5 s in the future (clock skew between nodes) and stale beyond', () => {
      const other = new FakeClock();
      const peer = new NonceManager({ secret: SECRET, ttlSeconds: TTL_S, now: other.now });
      other.advance(5_000);
      expect(nonces.check(peer.issue(REALM), REALM)).toBe('valid');
      other.advance(1);
      expect(nonces.check(peer.issue(REALM), REALM)).toBe('stale');
    });

    it('accepts a nonce issued by another node sharing the secret', () => {
      const peer = new NonceManager({ secret: Buffer.from(SECRET), ttlSeconds: TTL_S, now: clock.now });
      expect(nonces.check(peer.issue(REALM), REALM)).toBe('valid');
    });

    it('is invalid for a nonce issued for another realm', () => {
      expect(nonces.check(nonces.issue('other.sip.localhost'), REALM)).toBe('invalid');
    });

    it('is invalid for a nonce signed with another secret', () => {
      const foreign = new NonceManager({ secret: randomBytes(32), ttlSeconds: TTL_S, now: clock.now });
      expect(nonces.check(foreign.issue(REALM), REALM)).toBe('invalid');
    });

    it('is invalid when any character was tampered with (time, random or MAC part)', () => {
      const n = nonces.issue(REALM);
      for (let i = 0; i < n.length; i++) {
        expect(nonces.check(flipChar(n, i), REALM), `char ${i}`).toBe('invalid');
      }
    });

    it('is invalid, never stale, for a tampered expired nonce', () => {
      const n = nonces.issue(REALM);
      clock.advance(TTL_S * 1000 + 1);
      expect(nonces.check(flipChar(n, n.length - 1), REALM)).toBe('invalid');
    });

    it.each([
      ['empty', ''],
      ['too short', 'abc'],
      ['RFC 7616 example nonce', '7ypf/xlj9XXwfDPEoM4URrv/xwf94BcCAzFZH4GiTo0v'],
      ['standard base64 alphabet', 'A'.repeat(46) + '+/'],
      ['padding', 'A'.repeat(47) + '='],
      ['quote', 'A'.repeat(47) + '"'],
      ['one character too long', 'A'.repeat(49)],
    ])('is invalid for a malformed nonce (%s)', (_label, n) => {
      expect(nonces.check(n, REALM)).toBe('invalid');
    });

    it('is invalid for a valid nonce with junk appended', () => {
      expect(nonces.check(`${nonces.issue(REALM)}AAAA`, REALM)).toBe('invalid');
    });
  });

  describe('#acceptCount() (RFC 7616 §3.4 nonce-count)', () => {
    it('accepts nc=1 once and refuses its replay', () => {
      const n = nonces.issue(REALM);
      expect(nonces.acceptCount(n, 1)).toBe(true);
      expect(nonces.acceptCount(n, 1)).toBe(false);
    });

    it('accepts increasing counts and refuses each one replayed', () => {
      const n = nonces.issue(REALM);
      for (let nc = 1; nc <= 100; nc++) expect(nonces.acceptCount(n, nc)).toBe(true);
      for (let nc = 100 - NONCE_COUNT_WINDOW + 1; nc <= 100; nc++) expect(nonces.acceptCount(n, nc)).toBe(false);
    });

    it('accepts a first count above 1 (requests sent before ours may have been lost)', () => {
      const n = nonces.issue(REALM);
      expect(nonces.acceptCount(n, 7)).toBe(true);
      expect(nonces.acceptCount(n, 7)).toBe(false);
    });

    it('accepts counts that arrive out of order within the window, each once', () => {
      const n = nonces.issue(REALM);
      expect(nonces.acceptCount(n, 3)).toBe(true);
      expect(nonces.acceptCount(n, 1)).toBe(true);
      expect(nonces.acceptCount(n, 2)).toBe(true);
      expect(nonces.acceptCount(n, 1)).toBe(false);
      expect(nonces.acceptCount(n, 2)).toBe(false);
      expect(nonces.acceptCount(n, 3)).toBe(false);
      expect(nonces.acceptCount(n, 4)).toBe(true);
    });

    it('accepts the oldest count still inside the window and refuses the first one below it', () => {
      const n = nonces.issue(REALM);
      const top = 10 + NONCE_COUNT_WINDOW;
      expect(nonces.acceptCount(n, top)).toBe(true);
      expect(nonces.acceptCount(n, top - NONCE_COUNT_WINDOW + 1)).toBe(true);
      expect(nonces.acceptCount(n, top - NONCE_COUNT_WINDOW)).toBe(false);
      expect(nonces.acceptCount(n, 1)).toBe(false);
    });

    it('slides the window on a jump larger than the window, refusing everything left behind', () => {
      const n = nonces.issue(REALM);
      expect(nonces.acceptCount(n, 1)).toBe(true);
      expect(nonces.acceptCount(n, 2)).toBe(true);
      expect(nonces.acceptCount(n, 2 + NONCE_COUNT_WINDOW * 3)).toBe(true);
      expect(nonces.acceptCount(n, 3)).toBe(false);
      expect(nonces.acceptCount(n, 1 + NONCE_COUNT_WINDOW * 3)).toBe(true);
      expect(nonces.acceptCount(n, 1 + NONCE_COUNT_WINDOW * 3)).toBe(false);
    });

    it('keeps an unused count inside the window usable after a jump of less than the window', () => {
      const n = nonces.issue(REALM);
      expect(nonces.acceptCount(n, 1)).toBe(true);
      expect(nonces.acceptCount(n, 5)).toBe(true);
      expect(nonces.acceptCount(n, 1 + NONCE_COUNT_WINDOW - 1)).toBe(true);
      expect(nonces.acceptCount(n, 4)).toBe(true);
      expect(nonces.acceptCount(n, 5)).toBe(false);
      expect(nonces.acceptCount(n, 1)).toBe(false);
    });

    it('accepts the largest 8-hex-digit count, 0xffffffff', () => {
      const n = nonces.issue(REALM);
      expect(nonces.acceptCount(n, 0xffffffff)).toBe(true);
      expect(nonces.acceptCount(n, 0xffffffff)).toBe(false);
    });

    it.each([0, -1, 1.5, Number.NaN, 0x1_0000_0000])('refuses the out-of-range count %s', (nc) => {
      expect(nonces.acceptCount(nonces.issue(REALM), nc)).toBe(false);
    });

    it('tracks each nonce separately', () => {
      const a = nonces.issue(REALM);
      const b = nonces.issue(REALM);
      expect(nonces.acceptCount(a, 1)).toBe(true);
      expect(nonces.acceptCount(b, 1)).toBe(true);
      expect(nonces.acceptCount(a, 1)).toBe(false);
    });

    it('refuses a malformed nonce and remembers nothing for it', () => {
      expect(nonces.acceptCount('not-a-nonce', 1)).toBe(false);
      expect(nonces.tracked).toBe(0);
    });

    it('refuses counts for a nonce past its TTL and forgets it', () => {
      const n = nonces.issue(REALM);
      expect(nonces.acceptCount(n, 1)).toBe(true);
      clock.advance(TTL_S * 1000 + 1);
      expect(nonces.acceptCount(n, 2)).toBe(false);
      expect(nonces.tracked).toBe(0);
    });
  });

  describe('bounded tracking', () => {
    it('never remembers more than maxTracked nonces', () => {
      const small = new NonceManager({ secret: SECRET, ttlSeconds: TTL_S, now: clock.now, maxTracked: 50 });
      for (let i = 0; i < 500; i++) {
        clock.advance(1);
        expect(small.acceptCount(small.issue(REALM), 1)).toBe(true);
        expect(small.tracked).toBeLessThanOrEqual(50);
      }
      expect(small.tracked).toBe(50);
    });

    it('evicts expired nonces before live ones, even when the expired one was used more recently', () => {
      const small = new NonceManager({ secret: SECRET, ttlSeconds: TTL_S, now: clock.now, maxTracked: 2 });
      const old = small.issue(REALM);
      expect(small.acceptCount(old, 1)).toBe(true);
      clock.advance((TTL_S * 1000) / 2);
      const live = small.issue(REALM);
      expect(small.acceptCount(live, 1)).toBe(true);
      expect(small.acceptCount(old, 2)).toBe(true); // old is now the most recently used
      clock.advance((TTL_S * 1000) / 2 + 1); // old has expired, live has not
      expect(small.acceptCount(small.issue(REALM), 1)).toBe(true);
      // live kept its window: its replay is refused and its next count accepted.
      expect(small.acceptCount(live, 1)).toBe(false);
      expect(small.acceptCount(live, 2)).toBe(true);
    });

    it('evicts the least recently used nonce when all are live', () => {
      const small = new NonceManager({ secret: SECRET, ttlSeconds: TTL_S, now: clock.now, maxTracked: 2 });
      const a = small.issue(REALM);
      clock.advance(1);
      const b = small.issue(REALM);
      clock.advance(1);
      const c = small.issue(REALM);
      expect(small.acceptCount(a, 1)).toBe(true);
      expect(small.acceptCount(b, 1)).toBe(true);
      expect(small.acceptCount(a, 2)).toBe(true); // a is now more recent than b
      expect(small.acceptCount(c, 1)).toBe(true); // evicts b
      expect(small.acceptCount(a, 2)).toBe(false); // a's window survived
      expect(small.acceptCount(c, 1)).toBe(false);
    });

    it('never lets an evicted nonce replay a count: its counts are refused (the caller re-challenges with stale=true)', () => {
      const small = new NonceManager({ secret: SECRET, ttlSeconds: TTL_S, now: clock.now, maxTracked: 2 });
      const victim = small.issue(REALM);
      expect(small.acceptCount(victim, 1)).toBe(true);
      clock.advance(1);
      for (let i = 0; i < 2; i++) {
        clock.advance(1);
        expect(small.acceptCount(small.issue(REALM), 1)).toBe(true);
      }
      // victim's window is gone; replaying nc=1 (or any count) must not pass.
      expect(small.acceptCount(victim, 1)).toBe(false);
      expect(small.acceptCount(victim, 2)).toBe(false);
      // Nonces issued after the eviction are unaffected.
      clock.advance(1);
      expect(small.acceptCount(small.issue(REALM), 1)).toBe(true);
    });
  });

  describe('constructor', () => {
    it('refuses a secret shorter than 16 bytes', () => {
      expect(() => new NonceManager({ secret: Buffer.alloc(15), ttlSeconds: 300 })).toThrow(/NONCE_SECRET/);
    });

    it.each([0, -1, Number.NaN, Number.POSITIVE_INFINITY])('refuses ttlSeconds=%s', (ttlSeconds) => {
      expect(() => new NonceManager({ secret: SECRET, ttlSeconds })).toThrow(RangeError);
    });

    it.each([0, 1.5, -3])('refuses maxTracked=%s', (maxTracked) => {
      expect(() => new NonceManager({ secret: SECRET, ttlSeconds: 300, maxTracked })).toThrow(RangeError);
    });

    it('copies the secret, so later changes to the caller\'s buffer do not affect validation', () => {
      const secret = Buffer.from(SECRET);
      const m = new NonceManager({ secret, ttlSeconds: 300, now: clock.now });
      const n = m.issue(REALM);
      secret.fill(0);
      expect(m.check(n, REALM)).toBe('valid');
    });
  });
});
