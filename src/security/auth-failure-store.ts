/**
 * Where failed-digest counters live: in this process (one node) or in Redis
 * (every node sees the same counters: src/security/redis-auth-failure-store.ts).
 *
 * A counter key is `src:<address>` or `ep:<realm>:<user>`; it counts failures in a
 * fixed window and, past its threshold, holds a "blocked until" time.
 */

/** Thresholds of one counter kind. */
export interface FailureLimits {
  /** Length of the counting window, ms. */
  windowMs: number;
  /** Failures within the window that start a block. */
  max: number;
  /** How long a block lasts, ms. */
  cooloffMs: number;
}

/** What {@link AuthFailureStore.read} knows about one request's source and endpoint. */
export interface GuardState {
  /** Blocked-until of the source, ms since the epoch; 0 = not blocked (or not asked). */
  sourceUntil: number;
  /** Blocked-until of the endpoint, ms since the epoch; 0 = not blocked. */
  endpointUntil: number;
  /** The source authenticated as this endpoint lately (exempt from the endpoint's block). */
  good: boolean;
}

export interface AuthFailureStore {
  /** One read of a source key (null = not counted) and an endpoint key. */
  read(sourceKey: string | null, endpointKey: string, source: string, now: number): Promise<GuardState>;
  /** Count one failure; `until` > 0 when the key is blocked, `started` when this failure started the block. */
  fail(key: string, now: number, limits: FailureLimits): Promise<{ until: number; started: boolean }>;
  /** Remember that `source` authenticated as the endpoint, for `ttlMs`. */
  markGood(endpointKey: string, source: string, now: number, ttlMs: number): Promise<void>;
  /**
   * Blocks started by other processes sharing this store are announced here
   * (`onBlock`), and `onReset` says that announcements may have been missed (the
   * listener drops what it learnt). Absent: this process is the only writer.
   */
  watchBlocks?(onBlock: (key: string, until: number) => void, onReset: () => void): void;
  /**
   * Whether every active block is known to this process (its own failures plus
   * announcements): then a request from a source and for an endpoint with no known
   * block needs no store read. False = read the store on every check.
   */
  blocksComplete(): boolean;
  stop(): void;
}

interface Counter {
  n: number;
  windowEnd: number;
  until: number;
}

/**
 * The in-process store (embedded mode, or no Redis). Bounded: past `maxKeys`
 * entries the oldest are forgotten, so a flood of made-up usernames cannot grow it
 * without limit.
 */
export class MemoryAuthFailureStore implements AuthFailureStore {
  private readonly counters = new Map<string, Counter>();
  private readonly good = new Map<string, number>();
  private readonly sweeper: NodeJS.Timeout;

  constructor(private readonly maxKeys = 100_000) {
    this.sweeper = setInterval(() => this.sweep(Date.now()), 30_000);
    this.sweeper.unref();
  }

  /** One process, one store: every block starts in this process's own guard. */
  blocksComplete(): boolean {
    return true;
  }

  async read(sourceKey: string | null, endpointKey: string, source: string, now: number): Promise<GuardState> {
    const until = (k: string | null): number => {
      const c = k === null ? undefined : this.counters.get(k);
      return c !== undefined && c.until > now ? c.until : 0;
    };
    const g = this.good.get(`${endpointKey}\u0000${source}`);
    return { sourceUntil: until(sourceKey), endpointUntil: until(endpointKey), good: g !== undefined && g > now };
  }

  async fail(key: string, now: number, limits: FailureLimits): Promise<{ until: number; started: boolean }> {
    let c = this.counters.get(key);
    if (c === undefined || (c.until <= now && c.windowEnd <= now)) {
      if (c === undefined) this.bound(this.counters);
      c = { n: 0, windowEnd: now + limits.windowMs, until: 0 };
      this.counters.set(key, c);
    }
    if (c.until > now) return { until: c.until, started: false };
    c.n++;
    if (c.n >= limits.max) {
      c.until = now + limits.cooloffMs;
      c.n = 0;
      c.windowEnd = c.until;
      return { until: c.until, started: true };
    }
    return { until: 0, started: false };
  }

  async markGood(endpointKey: string, source: string, now: number, ttlMs: number): Promise<void> {
    const k = `${endpointKey}\u0000${source}`;
    this.good.delete(k); // re-insert: Map order stays oldest-first for eviction
    this.bound(this.good);
    this.good.set(k, now + ttlMs);
  }

  private bound(m: Map<string, unknown>): void {
    if (m.size < this.maxKeys) return;
    this.sweep(Date.now());
    let n = m.size - Math.floor(this.maxKeys * 0.9);
    for (const k of m.keys()) {
      if (n-- <= 0) break;
      m.delete(k);
    }
  }

  private sweep(now: number): void {
    for (const [k, c] of this.counters) if (c.until <= now && c.windowEnd <= now) this.counters.delete(k);
    for (const [k, t] of this.good) if (t <= now) this.good.delete(k);
  }

  stop(): void {
    clearInterval(this.sweeper);
  }
}
