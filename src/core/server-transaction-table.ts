/**
 * Non-INVITE server transactions (RFC 3261 §17.2.2) of the requests the edge
 * answers itself (REGISTER, OPTIONS): a retransmitted request (same branch,
 * sent-by and method, §17.2.3) is absorbed while the first copy is being
 * processed ("Trying") and answered with the last response once it is final
 * ("Completed"). Stream transports are reliable (Timer J is zero), so only UDP
 * requests are tracked.
 */

/**
 * How long a completed local transaction is remembered: 8 s, not Timer J's 32 s.
 * These requests are idempotent — a REGISTER retransmission met later is a no-op
 * in the store (same Call-ID and CSeq within 32 s), a late OPTIONS is answered
 * again — so keeping every response for 32–64 s only cost memory: ~270 MB of
 * heap and long GC pauses at 3,000 registrations/s, which overflowed the UDP
 * receive buffer. Kamailio keeps a completed transaction 5 s (tm wt_timer) and
 * answers REGISTER statelessly. A request retransmitted after its response was
 * lost arrives within T2 = 4 s, inside this window.
 */
export const LOCAL_LINGER_MS = 8_000;

export type TransactionState =
  | { state: 'new' }
  /** Being processed: the retransmission is absorbed. */
  | { state: 'trying' }
  /** Already answered: send this response again. */
  | { state: 'completed'; response: Buffer };

/** Logical ring positions are kept modulo 2^30, so Map values stay small integers (no heap objects). */
const POS_MOD = 2 ** 30;
/** Record header: u32 record length, u16 key length, u32 response length. */
const HEADER = 10;
const DEFAULT_RING_BYTES = 4 * 1024 * 1024;
const MAX_RING_BYTES = 64 * 1024 * 1024;

/** Options of {@link ServerTransactionTable}. */
export interface TransactionTableOptions {
  /** Bytes of the response ring to start with; it doubles (up to `maxRingBytes`) while it wraps faster than `linger`. */
  ringBytes?: number;
  maxRingBytes?: number;
  now?: () => number;
}

/**
 * The completed responses live in one ring buffer outside the JavaScript heap and
 * the tables map a 30-bit hash of the key to a ring position — small integers
 * only. A Map of key strings to response Buffers held ≈580 bytes of heap per
 * transaction (≈90 MB at 5,000 registrations/s), all of it surviving long enough
 * to be promoted, and garbage collection was the largest single cost of the
 * REGISTER path.
 *
 * Entries live between `linger` and 2*`linger`: two generations, rotated every
 * `linger`, so expiry costs one Map drop per rotation instead of a timer per
 * transaction. A record the ring has overwritten, or whose stored key differs
 * (a hash collision), reads as absent: the request is then processed again,
 * which for these idempotent requests only costs work (see LOCAL_LINGER_MS).
 */
export class ServerTransactionTable {
  /** hash → key of requests being processed (Trying). */
  private trying = new Map<number, string>();
  private tryingOld = new Map<number, string>();
  /** hash → ring position (mod 2^30) of the completed response. */
  private current = new Map<number, number>();
  private previous = new Map<number, number>();
  private ring: Buffer;
  /** Logical write position (bytes ever written, ring wraps included). */
  private pos = 0;
  private lastWrapAt: number;
  private readonly maxRingBytes: number;
  private readonly linger: number;
  private readonly now: () => number;
  private readonly timer: NodeJS.Timeout;

  constructor(linger: number = LOCAL_LINGER_MS, opts: TransactionTableOptions = {}) {
    this.linger = linger;
    this.now = opts.now ?? Date.now;
    this.maxRingBytes = opts.maxRingBytes ?? MAX_RING_BYTES;
    // Powers of two: a position mod 2^30 then also gives the offset in the ring.
    this.maxRingBytes = pow2(this.maxRingBytes);
    this.ring = Buffer.allocUnsafeSlow(Math.min(pow2(opts.ringBytes ?? DEFAULT_RING_BYTES), this.maxRingBytes));
    this.lastWrapAt = this.now();
    this.timer = setInterval(() => this.rotate(), linger);
    this.timer.unref();
  }

  /** Look up a request's transaction; a new one is entered in the Trying state. */
  receive(key: string): TransactionState {
    const h = hashKey(key);
    const t = this.trying.get(h) ?? this.tryingOld.get(h);
    if (t === key) return { state: 'trying' };
    const at = this.current.get(h) ?? this.previous.get(h);
    if (at !== undefined) {
      const response = this.read(at, key);
      if (response !== null) return { state: 'completed', response };
    }
    // A Trying entry of another key with the same hash keeps its slot; this one is untracked.
    if (t === undefined) this.trying.set(h, key);
    return { state: 'new' };
  }

  /** Record the final response sent for a transaction. */
  complete(key: string, response: Buffer): void {
    const h = hashKey(key);
    this.forgetTrying(h, key);
    const at = this.write(key, response);
    this.previous.delete(h);
    if (at === null) this.current.delete(h);
    else this.current.set(h, at);
  }

  /** Forget a transaction that produced no response (e.g. dropped request). */
  abandon(key: string): void {
    const h = hashKey(key);
    this.forgetTrying(h, key);
    this.current.delete(h);
    this.previous.delete(h);
  }

  get size(): number {
    return this.trying.size + this.tryingOld.size + this.current.size + this.previous.size;
  }

  /** Bytes of the response ring (metrics, tests). */
  get ringBytes(): number {
    return this.ring.length;
  }

  rotate(): void {
    this.previous = this.current;
    this.current = new Map();
    this.tryingOld = this.trying;
    this.trying = new Map();
  }

  stop(): void {
    clearInterval(this.timer);
    this.current.clear();
    this.previous.clear();
    this.trying.clear();
    this.tryingOld.clear();
  }

  private forgetTrying(h: number, key: string): void {
    if (this.trying.get(h) === key) this.trying.delete(h);
    else if (this.tryingOld.get(h) === key) this.tryingOld.delete(h);
  }

  /** Append a record; its ring position mod 2^30, or null when it cannot be kept. */
  private write(key: string, response: Buffer): number | null {
    const keyLen = Buffer.byteLength(key, 'utf8');
    const len = HEADER + keyLen + response.length;
    if (keyLen > 0xffff || len > this.ring.length / 4) return null;
    let off = this.pos % this.ring.length;
    if (off + len > this.ring.length) {
      this.wrapped();
      off = this.pos % this.ring.length;
      if (off !== 0) {
        this.pos += this.ring.length - off;
        off = 0;
      }
    }
    const r = this.ring;
    r.writeUInt32LE(len, off);
    r.writeUInt16LE(keyLen, off + 4);
    r.writeUInt32LE(response.length, off + 6);
    r.write(key, off + HEADER, keyLen, 'utf8');
    response.copy(r, off + HEADER + keyLen);
    const at = this.pos % POS_MOD;
    this.pos += len;
    return at;
  }

  /**
   * The ring came round. If the oldest records it now overwrites are younger than
   * `linger`, it is too small for the load: start a bigger one (what the old one
   * held reads as absent from now on).
   */
  private wrapped(): void {
    const now = this.now();
    if (now - this.lastWrapAt < this.linger && this.ring.length < this.maxRingBytes) {
      this.ring = Buffer.allocUnsafeSlow(Math.min(this.ring.length * 2, this.maxRingBytes));
      this.current.clear();
      this.previous.clear();
      this.pos = 0;
    }
    this.lastWrapAt = now;
  }

  /** The response stored at `at` for `key` (a copy), or null if overwritten or another key's. */
  private read(at: number, key: string): Buffer | null {
    const r = this.ring;
    // Bytes written since this record started (mod 2^30): it is intact if the ring has not come round onto it.
    const since = (this.pos % POS_MOD - at + POS_MOD) % POS_MOD;
    const off = at % r.length;
    if (since > r.length || off + HEADER > r.length) return null;
    const len = r.readUInt32LE(off);
    const keyLen = r.readUInt16LE(off + 4);
    const respLen = r.readUInt32LE(off + 6);
    if (since < len || len !== HEADER + keyLen + respLen || off + len > r.length) return null;
    if (r.toString('utf8', off + HEADER, off + HEADER + keyLen) !== key) return null;
    return Buffer.from(r.subarray(off + HEADER + keyLen, off + len));
  }
}

function pow2(n: number): number {
  return 2 ** Math.ceil(Math.log2(Math.max(1024, Math.min(n, 2 ** 29))));
}

/** 30-bit FNV-1a of the key's UTF-16 code units: a small integer, so Maps hold no key strings. */
function hashKey(key: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < key.length; i++) {
    h ^= key.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return (h >>> 0) & (POS_MOD - 1);
}

/**
 * RFC 3261 §17.2.3 matching key: branch + sent-by + method (ACK matches INVITE).
 * Requests whose branch lacks the magic cookie (RFC 2543 peers) fall back to
 * Call-ID, CSeq, From tag and the top Via as written.
 */
export function transactionKey(
  method: string,
  branch: string | null,
  sentBy: string,
  callId: string,
  cseq: number,
  fromTag: string | null,
  topVia: string,
): string {
  const m = method === 'ACK' ? 'INVITE' : method;
  if (branch && branch.startsWith('z9hG4bK')) return `${branch}\u0000${sentBy}\u0000${m}`;
  return `2543\u0000${callId}\u0000${cseq}\u0000${fromTag ?? ''}\u0000${topVia}\u0000${m}`;
}
