/**
 * Secrets at rest (README "Hardening", "Secrets at rest"): values the server must read
 * back in the clear (callback signing secrets; later provider tokens) are kept in the
 * store sealed with AES-256-GCM under a key of `DATA_ENCRYPTION_KEY`.
 *
 * The setting is a key ring, `kid:base64key[,kid:base64key…]` of 32-byte keys: the
 * first key seals, every key opens. A sealed value names its key:
 *
 *     enc:v1:<kid>:<iv b64>:<tag b64>:<ciphertext b64>
 *
 * (12-byte random IV, 16-byte tag; the additional authenticated data is
 * `enc:v1:<kid>:` followed by the caller's context, so a value cannot be moved to
 * another record when a context is given). A value without the `enc:` prefix is a
 * plaintext record written before encryption existed: it is returned as it is, and
 * sealed the next time it is written.
 *
 * Errors never carry key material or the plaintext.
 */
import { createCipheriv, createDecipheriv, hkdfSync, randomBytes } from 'node:crypto';

/** Bytes of an AES-256 key. */
export const DATA_KEY_BYTES = 32;
const IV_BYTES = 12;
const TAG_BYTES = 16;
const PREFIX = 'enc:';
const VERSION = 'v1';
const KID_RE = /^[A-Za-z0-9_-]{1,32}$/;

/** One key of the ring. */
export interface DataKey {
  kid: string;
  key: Buffer;
}

/** Seals and opens values kept at rest. */
export interface SecretBox {
  /** The kid new values are sealed with (the first key of the ring). */
  readonly kid: string;
  /** `enc:v1:<kid>:…` for `plain`; `context` (e.g. the record's name) is bound to it. */
  encrypt(plain: string, context?: string): string;
  /** The plaintext of a sealed value (a value without `enc:` is plaintext: returned as is). */
  decrypt(stored: string, context?: string): string;
  /** True when `stored` should be sealed again: plaintext, or sealed with a key other than the first. */
  needsReseal(stored: string): boolean;
}

/** Why a stored value could not be opened. */
export type SecretBoxFailure = 'malformed' | 'unknown_kid' | 'not_authentic';

/** A stored value that cannot be opened; the message names the kid, never a key or the value. */
export class SecretBoxError extends Error {
  readonly reason: SecretBoxFailure;
  readonly kid: string | null;
  constructor(reason: SecretBoxFailure, kid: string | null, message: string) {
    super(message);
    this.name = 'SecretBoxError';
    this.reason = reason;
    this.kid = kid;
  }
}

/**
 * Parses `kid:base64key[,kid:base64key…]`. Throws an Error whose message names the
 * offending entry by its kid or position, never the key.
 */
export function parseDataKeys(setting: string): DataKey[] {
  const entries = setting.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (entries.length === 0) throw new Error('must list at least one kid:base64key');
  const seen = new Set<string>();
  return entries.map((entry, i) => {
    const colon = entry.indexOf(':');
    const kid = colon < 0 ? '' : entry.slice(0, colon);
    if (!KID_RE.test(kid)) throw new Error(`entry ${i + 1} must be kid:base64key with a kid of 1-32 letters, digits, - or _`);
    const b64 = entry.slice(colon + 1);
    if (!/^[A-Za-z0-9+/_-]+={0,2}$/.test(b64)) throw new Error(`the key of kid "${kid}" is not base64`);
    const key = Buffer.from(b64.replace(/-/g, '+').replace(/_/g, '/'), 'base64');
    if (key.length !== DATA_KEY_BYTES) {
      throw new Error(`the key of kid "${kid}" must be ${DATA_KEY_BYTES} bytes (base64 of 32 random bytes: openssl rand -base64 32), got ${key.length}`);
    }
    if (seen.has(kid)) throw new Error(`kid "${kid}" is listed twice`);
    seen.add(kid);
    return { kid, key };
  });
}

/** A development key derived from another secret (HKDF-SHA256; its own label, so it says nothing of the source). */
export function deriveDataKey(kid: string, secret: string): DataKey {
  const key = Buffer.from(hkdfSync('sha256', Buffer.from(secret, 'utf8'), 'sip-edge', 'sip-edge data encryption key v1', DATA_KEY_BYTES));
  return { kid, key };
}

/** A random key for this process only. */
export function randomDataKey(kid: string): DataKey {
  return { kid, key: randomBytes(DATA_KEY_BYTES) };
}

/** The box of a key ring: the first key seals, all open. */
export function createSecretBox(keys: readonly DataKey[]): SecretBox {
  const first = keys[0];
  if (!first) throw new Error('a secret box needs at least one key');
  const ring = new Map<string, Buffer>();
  for (const k of keys) {
    if (k.key.length !== DATA_KEY_BYTES) throw new Error(`the key of kid "${k.kid}" must be ${DATA_KEY_BYTES} bytes`);
    if (!KID_RE.test(k.kid)) throw new Error(`kid "${k.kid}" is not 1-32 letters, digits, - or _`);
    ring.set(k.kid, Buffer.from(k.key));
  }
  const aad = (kid: string, context: string | undefined): Buffer => Buffer.from(`${PREFIX}${VERSION}:${kid}:${context ?? ''}`, 'utf8');

  return {
    kid: first.kid,
    encrypt(plain: string, context?: string): string {
      const iv = randomBytes(IV_BYTES);
      const c = createCipheriv('aes-256-gcm', ring.get(first.kid) as Buffer, iv, { authTagLength: TAG_BYTES });
      c.setAAD(aad(first.kid, context));
      const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
      return `${PREFIX}${VERSION}:${first.kid}:${iv.toString('base64')}:${c.getAuthTag().toString('base64')}:${ct.toString('base64')}`;
    },
    decrypt(stored: string, context?: string): string {
      if (!stored.startsWith(PREFIX)) return stored;
      const parts = stored.split(':');
      if (parts.length !== 6 || parts[1] !== VERSION) {
        throw new SecretBoxError('malformed', null, `a sealed value is not enc:${VERSION}:<kid>:<iv>:<tag>:<ciphertext>`);
      }
      const [, , kid, ivB64, tagB64, ctB64] = parts as [string, string, string, string, string, string];
      const key = ring.get(kid);
      if (!key) {
        throw new SecretBoxError('unknown_kid', kid, `a value was sealed with kid "${kid}", which DATA_ENCRYPTION_KEY does not hold (it holds ${[...ring.keys()].join(', ')})`);
      }
      const iv = Buffer.from(ivB64, 'base64');
      const tag = Buffer.from(tagB64, 'base64');
      if (iv.length !== IV_BYTES || tag.length !== TAG_BYTES) {
        throw new SecretBoxError('malformed', kid, `a value sealed with kid "${kid}" has a bad IV or tag length`);
      }
      try {
        const d = createDecipheriv('aes-256-gcm', key, iv, { authTagLength: TAG_BYTES });
        d.setAAD(aad(kid, context));
        d.setAuthTag(tag);
        return Buffer.concat([d.update(Buffer.from(ctB64, 'base64')), d.final()]).toString('utf8');
      } catch {
        throw new SecretBoxError('not_authentic', kid, `a value sealed with kid "${kid}" failed authentication (another key under that kid, or the value was altered)`);
      }
    },
    needsReseal(stored: string): boolean {
      return !stored.startsWith(`${PREFIX}${VERSION}:${first.kid}:`);
    },
  };
}
