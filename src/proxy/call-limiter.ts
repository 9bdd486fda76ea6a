/**
 * Account call limits at the edge (the interface specification's Account: cps_limit,
 * concurrent_calls_limit): calls placed by an account's endpoints are counted
 * per account, in Redis when configured (shared by every node) or in this
 * process.
 */
import { DEFAULTS } from '../config.js';

export interface CallLimits {
  /** New calls per second. A limit of 0 admits none. */
  cps: number;
  /** Calls at once (ringing or answered). A limit of 0 admits none. */
  concurrent: number;
}

/** The limiter key of a trunk's calls (beside account Auth IDs, which never start so). */
export const TRUNK_LIMIT_KEY = 'trunk:';

/** ok, or which limit refused the call. */
export type Admission = 'ok' | 'cps' | 'concurrent';

export interface CallLimiter {
  /**
   * Count a new call of the account unless a limit is reached. The same Call-ID
   * admitted twice (a re-sent INVITE after a challenge, a retransmission) counts once.
   */
  admit(accountId: string, callId: string, limits: CallLimits, now?: number): Promise<Admission>;
  /** The call ended (non-2xx final, BYE, CANCEL): its slot is free. */
  release(accountId: string, callId: string): Promise<void>;
  /** Calls of the account (or trunk, {@link TRUNK_LIMIT_KEY}) counted now. */
  active(accountId: string, now?: number): Promise<number>;
  close(): Promise<void>;
}

export interface CallLimiterOptions {
  /**
   * A call whose end was never seen (a device vanished without BYE) stops
   * counting after this long, ms. @default 4 hours
   */
  maxCallDurationMs?: number;
}

export const DEFAULT_MAX_CALL_DURATION_MS = DEFAULTS.maxCallDuration * 1000;

/** One process's counters (the embedded default, without Redis). */
export class MemoryCallLimiter implements CallLimiter {
  /** account → Call-ID → expiry (ms). */
  private readonly calls = new Map<string, Map<string, number>>();
  /** account → [second, count]. */
  private readonly rate = new Map<string, [number, number]>();
  private readonly maxMs: number;

  constructor(opts: CallLimiterOptions = {}) {
    this.maxMs = opts.maxCallDurationMs ?? DEFAULT_MAX_CALL_DURATION_MS;
  }

  async admit(accountId: string, callId: string, limits: CallLimits, now = Date.now()): Promise<Admission> {
    let calls = this.calls.get(accountId);
    if (!calls) this.calls.set(accountId, (calls = new Map()));
    for (const [id, exp] of calls) if (exp <= now) calls.delete(id);
    if (calls.has(callId)) return 'ok';
    if (calls.size >= limits.concurrent) return 'concurrent';
    const second = Math.floor(now / 1000);
    const r = this.rate.get(accountId);
    const count = r && r[0] === second ? r[1] + 1 : 1;
    this.rate.set(accountId, [second, count]);
    if (count > limits.cps) return 'cps';
    calls.set(callId, now + this.maxMs);
    return 'ok';
  }

  async active(accountId: string, now = Date.now()): Promise<number> {
    let n = 0;
    for (const exp of this.calls.get(accountId)?.values() ?? []) if (exp > now) n++;
    return n;
  }

  async release(accountId: string, callId: string): Promise<void> {
    const calls = this.calls.get(accountId);
    if (!calls) return;
    calls.delete(callId);
    if (calls.size === 0) this.calls.delete(accountId);
  }

  async close(): Promise<void> {
    this.calls.clear();
    this.rate.clear();
  }
}
