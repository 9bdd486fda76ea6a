/** Callback signatures (docs/callbacks.md "Signature"). */
import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { signCallback, verifyCallback } from '../../../src/events/signature.js';

const SECRET = 'whsec-test-0123456789abcdef';
const BODY = 'Event=Hangup&CallUUID=abc&CallbackId=cb-1';

describe('signCallback', () => {
  it('is the lowercase hex HMAC-SHA256 of timestamp "." body', () => {
    const want = createHmac('sha256', SECRET).update(`1700000000.${BODY}`).digest('hex');
    expect(signCallback(SECRET, '1700000000', BODY)).toBe(want);
    expect(signCallback(SECRET, 1700000000, BODY)).toBe(want);
    expect(want).toMatch(/^[0-9a-f]{64}$/);
  });

  it('matches a vector computed independently with openssl', () => {
    // printf '1700000000.Event=Ring&CallbackId=cb-1' | openssl dgst -sha256 -hmac 'whsec-test-0123456789abcdef'
    expect(signCallback(SECRET, '1700000000', 'Event=Ring&CallbackId=cb-1')).toBe('ae4716ac0624a3faa5af5c96cc326b581babd55a742c3631aa3c46403dc08c1e');
  });
});

describe('verifyCallback', () => {
  const now = 1_700_000_000_000;
  const ts = String(now / 1000);
  const sig = signCallback(SECRET, ts, BODY);

  it('accepts a fresh, correct signature', () => {
    expect(verifyCallback(SECRET, ts, BODY, sig, now)).toBe(true);
  });

  it('accepts timestamps up to 5 minutes old or ahead, refuses beyond', () => {
    for (const [offset, ok] of [[300, true], [-300, true], [301, false], [-301, false], [3600, false]] as const) {
      const t = String(now / 1000 - offset);
      expect(verifyCallback(SECRET, t, BODY, signCallback(SECRET, t, BODY), now), `offset ${offset}`).toBe(ok);
    }
  });

  it('refuses another body, timestamp, secret or a tampered signature', () => {
    expect(verifyCallback(SECRET, ts, `${BODY}&x=1`, sig, now)).toBe(false);
    expect(verifyCallback(SECRET, String(now / 1000 - 1), BODY, sig, now)).toBe(false);
    expect(verifyCallback(`${SECRET}x`, ts, BODY, sig, now)).toBe(false);
    const flipped = (sig[0] === 'a' ? 'b' : 'a') + sig.slice(1);
    expect(verifyCallback(SECRET, ts, BODY, flipped, now)).toBe(false);
  });

  it('refuses malformed input without throwing', () => {
    expect(verifyCallback(SECRET, ts, BODY, sig.toUpperCase(), now)).toBe(false);
    expect(verifyCallback(SECRET, ts, BODY, sig.slice(0, 63), now)).toBe(false);
    expect(verifyCallback(SECRET, ts, BODY, '', now)).toBe(false);
    expect(verifyCallback(SECRET, '', BODY, sig, now)).toBe(false);
    expect(verifyCallback(SECRET, `${ts}.5`, BODY, sig, now)).toBe(false);
    expect(verifyCallback(SECRET, '-1', BODY, sig, now)).toBe(false);
    expect(verifyCallback(SECRET, 'abc', BODY, sig, now)).toBe(false);
  });

  it('uses the current clock by default', () => {
    const t = String(Math.floor(Date.now() / 1000));
    expect(verifyCallback(SECRET, t, BODY, signCallback(SECRET, t, BODY))).toBe(true);
    expect(verifyCallback(SECRET, ts, BODY, sig)).toBe(false);
  });
});
