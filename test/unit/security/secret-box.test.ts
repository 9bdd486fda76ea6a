/**
 * The secret box (src/security/secret-box.ts): AES-256-GCM values at rest with their
 * kid, a key ring for rotation, plaintext records of before read as they are, and
 * failures that say what went wrong without showing a key or a value.
 */
import { randomBytes } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  createSecretBox,
  deriveDataKey,
  parseDataKeys,
  randomDataKey,
  SecretBoxError,
  type DataKey,
} from '../../../src/security/secret-box.js';

const key = (kid: string): DataKey => randomDataKey(kid);
const SECRET = 'whsec-plain-9f8e7d6c5b4a39281706';

/** The SecretBoxError `fn` throws (fails the test when it throws nothing or something else). */
function failure(fn: () => unknown): SecretBoxError {
  try {
    fn();
  } catch (e) {
    expect(e).toBeInstanceOf(SecretBoxError);
    return e as SecretBoxError;
  }
  throw new Error('expected a SecretBoxError');
}

describe('secret box', () => {
  it('round trip: the sealed form names the kid, is not the plaintext, and opens to it', () => {
    const box = createSecretBox([key('k1')]);
    const sealed = box.encrypt(SECRET);
    expect(sealed).toMatch(/^enc:v1:k1:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+:[A-Za-z0-9+/=]+$/);
    expect(sealed).not.toContain(SECRET);
    expect(box.decrypt(sealed)).toBe(SECRET);
    // A fresh IV each time: the same plaintext never seals to the same value.
    expect(box.encrypt(SECRET)).not.toBe(sealed);
    expect(box.decrypt(box.encrypt(''))).toBe('');
    expect(box.decrypt(box.encrypt('ünïcødé ✓'))).toBe('ünïcødé ✓');
  });

  it('a value sealed under another key with the same kid fails cleanly (not_authentic), naming the kid only', () => {
    const a = createSecretBox([key('k1')]);
    const other = key('k1');
    const b = createSecretBox([other]);
    const e = failure(() => b.decrypt(a.encrypt(SECRET)));
    expect(e.reason).toBe('not_authentic');
    expect(e.kid).toBe('k1');
    expect(e.message).toContain('"k1"');
    expect(e.message).not.toContain(SECRET);
    expect(e.message).not.toContain(other.key.toString('base64'));
  });

  it('tampering is detected: a changed ciphertext, tag, IV or kid, or another context', () => {
    const box = createSecretBox([key('k1'), key('k2')]);
    const sealed = box.encrypt(SECRET, 'cbsecret:a.sip.test');
    const parts = sealed.split(':');
    const flip = (b64: string): string => {
      const b = Buffer.from(b64, 'base64');
      b[0] = (b[0] as number) ^ 1;
      return b.toString('base64');
    };
    for (const i of [3, 4, 5]) {
      const bad = [...parts];
      bad[i] = flip(bad[i] as string);
      expect(failure(() => box.decrypt(bad.join(':'), 'cbsecret:a.sip.test')).reason).toBe('not_authentic');
    }
    const moved = [...parts];
    moved[2] = 'k2';
    expect(failure(() => box.decrypt(moved.join(':'), 'cbsecret:a.sip.test')).reason).toBe('not_authentic');
    // The context is bound: the value of one record does not open as another's.
    expect(failure(() => box.decrypt(sealed, 'cbsecret:b.sip.test')).reason).toBe('not_authentic');
    expect(box.decrypt(sealed, 'cbsecret:a.sip.test')).toBe(SECRET);
    expect(failure(() => box.decrypt('enc:v1:k1:abc')).reason).toBe('malformed');
    expect(failure(() => box.decrypt('enc:v9:k1:a:b:c')).reason).toBe('malformed');
    expect(failure(() => box.decrypt(`enc:v1:k1:${Buffer.alloc(5).toString('base64')}:${parts[4]}:${parts[5]}`)).reason).toBe('malformed');
  });

  it('rotation: a value sealed with the old kid opens after a new kid is put first; new values use the new kid', () => {
    const old = key('2024');
    const next = key('2025');
    const before = createSecretBox([old]).encrypt(SECRET);
    const after = createSecretBox([next, old]);
    expect(after.kid).toBe('2025');
    expect(after.decrypt(before)).toBe(SECRET);
    expect(after.needsReseal(before)).toBe(true);
    const resealed = after.encrypt(after.decrypt(before));
    expect(resealed.startsWith('enc:v1:2025:')).toBe(true);
    expect(after.needsReseal(resealed)).toBe(false);
    // Once the old key is gone, only the re-sealed value opens.
    const retired = createSecretBox([next]);
    expect(retired.decrypt(resealed)).toBe(SECRET);
    expect(failure(() => retired.decrypt(before)).reason).toBe('unknown_kid');
  });

  it('an unknown kid is a clear error naming that kid and the kids held', () => {
    const box = createSecretBox([key('a'), key('b')]);
    const sealed = createSecretBox([key('gone')]).encrypt(SECRET);
    const e = failure(() => box.decrypt(sealed));
    expect(e.reason).toBe('unknown_kid');
    expect(e.kid).toBe('gone');
    expect(e.message).toMatch(/kid "gone".*DATA_ENCRYPTION_KEY.*a, b/);
  });

  it('a value without the enc: prefix is a plaintext record of before: returned as is, and due for sealing', () => {
    const box = createSecretBox([key('k1')]);
    expect(box.decrypt('legacy-plain-secret')).toBe('legacy-plain-secret');
    expect(box.needsReseal('legacy-plain-secret')).toBe(true);
  });
});

describe('DATA_ENCRYPTION_KEY parsing', () => {
  const b64 = (n: number): string => randomBytes(n).toString('base64');

  it('reads kid:base64key entries in order (standard and URL-safe base64)', () => {
    const k1 = randomBytes(32);
    const k2 = randomBytes(32);
    const keys = parseDataKeys(` new:${k1.toString('base64')} , old:${k2.toString('base64url')}`);
    expect(keys.map((k) => k.kid)).toEqual(['new', 'old']);
    expect(keys[0]?.key.equals(k1)).toBe(true);
    expect(keys[1]?.key.equals(k2)).toBe(true);
  });

  it('refuses bad entries with a message that never holds the key', () => {
    const short = b64(16);
    const cases: Array<[string, RegExp]> = [
      ['', /at least one/],
      [b64(32), /kid:base64key/],
      [`k1:${short}`, /kid "k1" must be 32 bytes/],
      ['k1:not*base64!', /kid "k1" is not base64/],
      [`bad kid:${b64(32)}`, /kid:base64key/],
      [`k1:${b64(32)},k1:${b64(32)}`, /"k1" is listed twice/],
    ];
    for (const [setting, message] of cases) {
      let err: Error | null = null;
      try {
        parseDataKeys(setting);
      } catch (e) {
        err = e as Error;
      }
      expect(err?.message, setting).toMatch(message);
      expect(err?.message).not.toContain(short);
    }
  });

  it('a derived development key is stable for one secret and differs for another', () => {
    expect(deriveDataKey('dev', 'nonce-secret-aaaa').key.equals(deriveDataKey('dev', 'nonce-secret-aaaa').key)).toBe(true);
    expect(deriveDataKey('dev', 'nonce-secret-aaaa').key.equals(deriveDataKey('dev', 'nonce-secret-bbbb').key)).toBe(false);
    expect(deriveDataKey('dev', 'nonce-secret-aaaa').key).toHaveLength(32);
  });
});
