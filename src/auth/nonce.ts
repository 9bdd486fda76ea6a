/**
 * Stateless HMAC digest nonces (RFC 7616 §3.3 "nonce", §3.4 nonce-count; RFC 3261 §22.4).
 *
 * A nonce carries its own issue time and is signed with a server secret, so any
 * node that shares `NONCE_SECRET` can validate it without shared state. Only the
 * nonce-count replay window (RFC 7616 §3.4 `nc`: "if the same nc value is seen
 * twice, then the request is a replay") needs memory, and that memory is bounded.
 */
import { createHash, hash, randomFillSync, timingSafeEqual } from 'node:crypto';

/** Bytes of the big-endian issue time (ms since the epoch). */
const TIME_LEN = 8;
/** Random bytes per nonce: two nonces issued in the same millisecond still differ. */
const RANDOM_LEN = 12;
/** The MAC: SHA-256 truncated to 128 bits: forging needs 2^128 work, and the nonce stays short. */
const MAC_LEN = 16;
/** Longest realm (bytes) the MAC scratch buffer holds in place; longer ones are hashed through createHash. */
const MAX_INLINE_REALM = 256;
const RAW_LEN = TIME_LEN + RANDOM_LEN + MAC_LEN; // 36 bytes → 48 base64url characters, no padding
const ENCODED_LEN = (RAW_LEN / 3) * 4;
/** Buffer.from(…, 'base64url') skips characters it does not know, so the alphabet is checked first. */
const NONCE_SHAPE = new RegExp(`^[A-Za-z0-9_-]{${ENCODED_LEN}}$`);

/** A nonce issued this far (ms) in the future of our clock is treated as stale, not valid. */
const MAX_CLOCK_SKEW_MS = 5_000;
/** Largest nc-value: 8 hex digits (RFC 7616 §3.4, `nc-value = 8LHEX`). */
const MAX_NC = 0xffff_ffff;
const MIN_SECRET_LEN = 16;
/** Entries the expired-window sweep looks at per insertion into a full table. */
const SWEEP_STEP = 32;

/**
 * Width of the nonce-count replay window. The highest nc seen for a nonce and the
 * 31 counts below it are remembered, so requests that
 * overtake each other on the wire (e.g. a REGISTER and a SUBSCRIBE sent together
 * over UDP) are both accepted once; anything older than the window is refused.
 * The same sliding-bitmap scheme as IPsec anti-replay (RFC 4303 §3.4.3).
 */
export const NONCE_COUNT_WINDOW = 32;

// ~150 bytes each: 100,000 nonces ≈ 15 MB, i.e. 25 s of history at 4,000 challenges/s.
const DEFAULT_MAX_TRACKED = 100_000;

/** Result of {@link NonceManager.check}. */
export type NonceStatus = 'valid' | 'stale' | 'invalid';

/** Options of {@link NonceManager}. */
export interface NonceManagerOptions {
  /** HMAC key, at least 16 bytes. Nodes sharing it accept each other's nonces. */
  secret: Buffer;
  /** Seconds a nonce stays fresh; an older, well-signed nonce is stale (RFC 7616 §3.3 `stale`). */
  ttlSeconds: number;
  /** Clock in milliseconds since the epoch. @default Date.now */
  now?: () => number;
  /** Most nonces whose nonce-count window is remembered at once. @default 10_000 */
  maxTracked?: number;
}

interface NcWindow {
  /** Issue time of the nonce (ms), for expiry sweeps and the eviction horizon. */
  issuedAt: number;
  /** Highest nc accepted so far. */
  highest: number;
  /** Bit i set ⇔ nc (highest - i) was accepted. Kept as an unsigned 32-bit integer. */
  seen: number;
}

/**
 * Issues and validates digest nonces, and enforces nonce-count replay protection.
 *
 * @remarks
 * Nonce layout before base64url encoding:
 * `issuedAt (8 bytes BE ms) ‖ random (12) ‖ SHA-256(secret ‖ issuedAt ‖ random ‖ realm)[0..16)`.
 * A secret-prefix hash is a sound MAC here because the output is truncated (a length-
 * extension attack needs the whole 256-bit state) and the secret has a fixed length;
 * it costs one one-shot hash instead of HMAC's object set-up and two hashes, and the
 * edge computes it twice per registration (issue, check).
 * The encoding uses only `[A-Za-z0-9_-]`, so the nonce never needs escaping inside
 * a quoted-string and never contains `"` or `,` (RFC 7616 §3.3: "the nonce is opaque
 * to the client").
 */
export class NonceManager {
  readonly #secret: Buffer;
  /** secret ‖ issuedAt ‖ random ‖ realm, rewritten in place for every MAC. */
  readonly #scratch: Buffer;
  readonly #ttlMs: number;
  readonly #now: () => number;
  readonly #maxTracked: number;
  /** Insertion order = least recently used first. */
  readonly #windows = new Map<string, NcWindow>();
  /**
   * Greatest issue time of any nonce evicted while still fresh. An untracked nonce
   * issued at or before it may have been seen already, so its counts are refused:
   * eviction can cost a client one extra challenge, never allow a replay.
   */
  #evictedHorizon = Number.NEGATIVE_INFINITY;
  /** Where the expired-window sweep resumes (a live Map iterator survives deletes). */
  #sweep: MapIterator<[string, NcWindow]> | null = null;
  /** Where eviction resumes: every window before it is gone or was used again (moved to the back). */
  #lru: MapIterator<[string, NcWindow]> | null = null;

  constructor(opts: NonceManagerOptions) {
    if (opts.secret.length < MIN_SECRET_LEN) {
      throw new RangeError(`NonceManager secret must be at least ${MIN_SECRET_LEN} bytes (NONCE_SECRET)`);
    }
    if (!Number.isFinite(opts.ttlSeconds) || opts.ttlSeconds <= 0) {
      throw new RangeError('NonceManager ttlSeconds must be a positive number (NONCE_TTL)');
    }
    const maxTracked = opts.maxTracked ?? DEFAULT_MAX_TRACKED;
    if (!Number.isInteger(maxTracked) || maxTracked < 1) {
      throw new RangeError('NonceManager maxTracked must be a positive integer');
    }
    this.#secret = Buffer.from(opts.secret);
    this.#scratch = Buffer.alloc(this.#secret.length + TIME_LEN + RANDOM_LEN + MAX_INLINE_REALM);
    this.#secret.copy(this.#scratch);
    this.#ttlMs = opts.ttlSeconds * 1000;
    this.#now = opts.now ?? Date.now;
    this.#maxTracked = maxTracked;
  }

  /** Number of nonces whose nonce-count window is currently remembered (≤ `maxTracked`). */
  get tracked(): number {
    return this.#windows.size;
  }

  /**
   * A fresh nonce bound to `realm`, for a WWW-Authenticate / Proxy-Authenticate
   * challenge (RFC 3261 §22.4, RFC 7616 §3.3).
   */
  issue(realm: string): string {
    const raw = Buffer.allocUnsafe(RAW_LEN);
    raw.writeBigUInt64BE(BigInt(Math.max(0, Math.floor(this.#now()))), 0);
    takeRandom(raw, TIME_LEN);
    this.#mac(raw, realm).copy(raw, TIME_LEN + RANDOM_LEN, 0, MAC_LEN);
    return raw.toString('base64url');
  }

  /**
   * Validates a nonce echoed in credentials.
   *
   * @returns `'invalid'` for a nonce we did not sign for this realm (bad format,
   * bad MAC, other realm, other secret); `'stale'` for one we signed but that is
   * older than the TTL or issued more than 5 s in our future — the client should be
   * re-challenged with `stale=true` (RFC 7616 §3.3 `stale`) and may retry without
   * asking the user again; `'valid'` otherwise.
   */
  check(nonce: string, realm: string): NonceStatus {
    if (!NONCE_SHAPE.test(nonce)) return 'invalid';
    const raw = Buffer.from(nonce, 'base64url');
    if (raw.length !== RAW_LEN) return 'invalid';
    const expected = this.#mac(raw, realm).subarray(0, MAC_LEN);
    const got = raw.subarray(TIME_LEN + RANDOM_LEN);
    if (!timingSafeEqual(expected, got)) return 'invalid';
    const issuedAt = Number(raw.readBigUInt64BE(0));
    const now = this.#now();
    if (now - issuedAt > this.#ttlMs || issuedAt - now > MAX_CLOCK_SKEW_MS) return 'stale';
    return 'valid';
  }

  /**
   * Records nonce-count `nc` for `nonce`; `false` when it must be refused as a
   * replay (RFC 7616 §3.4 `nc`: "if the same nc value is seen twice, then the
   * request is a replay").
   *
   * @remarks
   * Call only after {@link check} returned `'valid'` and the digest response was
   * verified, so that unauthenticated requests consume no state. Refused: an nc
   * outside 1…0xffffffff, an nc already accepted for this nonce, an nc
   * {@link NONCE_COUNT_WINDOW} or more below the highest accepted, a nonce past its
   * TTL, and an untracked nonce that may have been evicted. On `false` answer with
   * a new challenge carrying `stale=true`.
   */
  acceptCount(nonce: string, nc: number): boolean {
    if (!Number.isInteger(nc) || nc < 1 || nc > MAX_NC) return false;
    const raw = decode(nonce);
    if (raw === null) return false;
    const issuedAt = Number(raw.readBigUInt64BE(0));
    // The key is the MAC (unique per nonce) as a fresh 16-character string: the nonce
    // itself is a slice of the request's Authorization header and would keep that alive.
    const key = raw.toString('latin1', TIME_LEN + RANDOM_LEN);
    const now = this.#now();
    if (now - issuedAt > this.#ttlMs) {
      this.#windows.delete(key);
      return false;
    }

    const w = this.#windows.get(key);
    if (w === undefined) {
      if (issuedAt <= this.#evictedHorizon) return false;
      this.#makeRoom(now);
      this.#windows.set(key, { issuedAt, highest: nc, seen: 1 });
      return true;
    }

    if (nc > w.highest) {
      const shift = nc - w.highest;
      w.seen = shift >= NONCE_COUNT_WINDOW ? 1 : ((w.seen << shift) | 1) >>> 0;
      w.highest = nc;
    } else {
      const offset = w.highest - nc;
      if (offset >= NONCE_COUNT_WINDOW) return false;
      const bit = (1 << offset) >>> 0;
      if ((w.seen & bit) !== 0) return false;
      w.seen = (w.seen | bit) >>> 0;
    }
    // Re-insert to mark as most recently used.
    this.#windows.delete(key);
    this.#windows.set(key, w);
    return true;
  }

  #mac(raw: Buffer, realm: string): Buffer {
    // Fixed-length fields first, then the realm: the MAC input cannot be ambiguous.
    const head = this.#secret.length;
    const fixed = TIME_LEN + RANDOM_LEN;
    if (typeof hash === 'function' && Buffer.byteLength(realm, 'utf8') <= MAX_INLINE_REALM) {
      raw.copy(this.#scratch, head, 0, fixed);
      const n = this.#scratch.write(realm, head + fixed, 'utf8');
      return hash('sha256', this.#scratch.subarray(0, head + fixed + n), 'buffer') as unknown as Buffer;
    }
    return createHash('sha256').update(this.#secret).update(raw.subarray(0, fixed)).update(realm, 'utf8').digest();
  }

  /**
   * Frees one slot when the table is full: expired windows first, found by a sweep
   * that resumes where it stopped and looks at no more than SWEEP_STEP entries per
   * call, then the least recently used one (which raises the eviction horizon).
   * A full pass over the table (100,000 entries, several ms) was a once-a-second
   * stall that showed in the registration p99.
   */
  #makeRoom(now: number): void {
    if (this.#windows.size < this.#maxTracked) return;
    for (let i = 0; i < SWEEP_STEP && this.#windows.size >= this.#maxTracked; i++) {
      this.#sweep ??= this.#windows.entries();
      const next = this.#sweep.next();
      if (next.done === true) {
        this.#sweep = null;
        if (i > 0) break; // one full lap per call at most
        continue;
      }
      const [key, w] = next.value;
      if (now - w.issuedAt > this.#ttlMs) this.#windows.delete(key);
    }
    // The least recently used comes from a cursor that stays where the last eviction
    // left it: `entries().next()` on a fresh iterator would first walk over every slot
    // freed at the front of the Map since its last rehash (tens of thousands in an LRU
    // that evicts at the front), and the cost per registration grew with time.
    while (this.#windows.size >= this.#maxTracked) {
      this.#lru ??= this.#windows.entries();
      const oldest = this.#lru.next();
      if (oldest.done === true) {
        this.#lru = null;
        continue;
      }
      const [key, w] = oldest.value;
      this.#windows.delete(key);
      if (w.issuedAt > this.#evictedHorizon) this.#evictedHorizon = w.issuedAt;
    }
  }
}

/** The bytes of a well-formed nonce, without checking its MAC; null when malformed. */
function decode(nonce: string): Buffer | null {
  if (!NONCE_SHAPE.test(nonce)) return null;
  const raw = Buffer.from(nonce, 'base64url');
  return raw.length === RAW_LEN ? raw : null;
}

/**
 * Random bytes from a pool refilled 4 KiB at a time: one CSPRNG call per ~340
 * nonces instead of one each (randomBytes per nonce showed at 2% of CPU under load).
 */
const pool = Buffer.alloc(4096);
let poolPos = pool.length;
function takeRandom(into: Buffer, offset: number): void {
  if (poolPos + RANDOM_LEN > pool.length) {
    randomFillSync(pool);
    poolPos = 0;
  }
  pool.copy(into, offset, poolPos, poolPos + RANDOM_LEN);
  poolPos += RANDOM_LEN;
}
