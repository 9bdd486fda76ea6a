import type { TrustedAddresses } from './trusted-addresses.js';

/** Options of {@link SourceRateLimiter}. */
export interface SourceRateLimiterOptions {
  /** Messages per window one address may send; 0 = no limit (nothing is ever banned). */
  limit: number;
  /** Length of one sampling window, ms (pike sampling_time_unit). */
  windowMs: number;
  /** How long an address over the limit is banned, ms. */
  banMs: number;
  trusted: TrustedAddresses;
  /**
   * Most addresses tracked at once; past it the oldest entries are forgotten (a
   * spoofed-source flood must not grow memory without bound). @default 200000
   */
  maxTracked?: number;
  /** Called once when an address becomes banned (logs). */
  onBan?: (address: string, until: number) => void;
  now?: () => number;
}

interface Entry {
  trusted: boolean;
  windowStart: number;
  count: number;
  /** ms since the epoch; 0 = not banned. */
  bannedUntil: number;
}

/** Why {@link SourceRateLimiter.admit} refused a message. */
export type DropReason = 'banned' | 'rate';

/**
 * Per-source-address message rate limit with a temporary ban, the idea of
 * kamailio's pike module: every message of an address is counted in fixed
 * windows; an address that sends more than `limit` in one window is banned for
 * `banMs`, and a banned address that keeps flooding stays banned. Checked before
 * a message is parsed, so banned traffic costs one Map lookup.
 */
export class SourceRateLimiter {
  private readonly entries = new Map<string, Entry>();
  private readonly maxTracked: number;
  private readonly now: () => number;
  private readonly sweeper: NodeJS.Timeout;
  /** Messages dropped since start, by reason (metrics read these; no per-packet label hashing). */
  readonly dropped: Record<DropReason, number> = { banned: 0, rate: 0 };
  /** Bans started since start. */
  bans = 0;
  /** Why the last refusal by {@link admit} happened. */
  lastDrop: DropReason = 'rate';

  constructor(private readonly opts: SourceRateLimiterOptions) {
    this.maxTracked = opts.maxTracked ?? 200_000;
    this.now = opts.now ?? Date.now;
    this.sweeper = setInterval(() => this.sweep(), Math.max(1000, opts.windowMs));
    this.sweeper.unref();
  }

  /** Count one message from `address`; false = drop it unread ({@link lastDrop} tells why). */
  admit(address: string): boolean {
    if (this.opts.limit === 0) return true;
    const now = this.now();
    let e = this.entries.get(address);
    if (e === undefined) {
      e = { trusted: this.opts.trusted.has(address), windowStart: now, count: 0, bannedUntil: 0 };
      if (this.entries.size >= this.maxTracked) this.evict();
      this.entries.set(address, e);
    }
    if (e.trusted) return true;
    if (now - e.windowStart >= this.opts.windowMs) {
      e.windowStart = now;
      e.count = 0;
    }
    e.count++;
    if (e.bannedUntil !== 0) {
      if (now < e.bannedUntil) {
        // Still flooding while banned: the ban runs on (pike keeps a hot source blocked).
        if (e.count > this.opts.limit) e.bannedUntil = now + this.opts.banMs;
        this.dropped.banned++;
        this.lastDrop = 'banned';
        return false;
      }
      e.bannedUntil = 0;
    }
    if (e.count > this.opts.limit) {
      e.bannedUntil = now + this.opts.banMs;
      this.bans++;
      this.dropped.rate++;
      this.lastDrop = 'rate';
      this.opts.onBan?.(address, e.bannedUntil);
      return false;
    }
    return true;
  }

  /** Whether `address` is banned now (new connections from it are refused). */
  isBanned(address: string): boolean {
    const e = this.entries.get(address);
    return e !== undefined && e.bannedUntil !== 0 && this.now() < e.bannedUntil;
  }

  /** Addresses banned now (a gauge; walks the table). */
  bannedCount(): number {
    const now = this.now();
    let n = 0;
    for (const e of this.entries.values()) if (e.bannedUntil > now) n++;
    return n;
  }

  get tracked(): number {
    return this.entries.size;
  }

  /** Forget addresses whose window and ban are over. */
  sweep(): void {
    const now = this.now();
    for (const [a, e] of this.entries) {
      if (e.bannedUntil > now) continue;
      if (now - e.windowStart >= this.opts.windowMs) this.entries.delete(a);
    }
  }

  /** Full: drop the oldest tenth, banned or not (Map order is insertion order). */
  private evict(): void {
    this.sweep();
    let n = this.entries.size - Math.floor(this.maxTracked * 0.9);
    for (const a of this.entries.keys()) {
      if (n-- <= 0) break;
      this.entries.delete(a);
    }
  }

  stop(): void {
    clearInterval(this.sweeper);
    this.entries.clear();
  }
}
