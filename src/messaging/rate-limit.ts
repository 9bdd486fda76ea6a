/**
 * The messaging rate limit (docs/messaging.md "Rate limit"): per API key, 1000 requests
 * a minute, 100 thousand an hour and 1 million a day, all three at once, over fixed
 * windows aligned to the epoch (a minute starts at :00). A request refused by one
 * window counts in none.
 *
 * With Redis, the counters are shared by the fleet: one script checks all three windows
 * and counts the request in all three, atomically (the three keys share the key's hash
 * tag, so the script also runs on a Cluster). Without Redis, each process counts its own.
 * A Redis failure lets the request through (as the rest of the API's rate limit does):
 * the stores answer 503 on their own.
 */
import type { RedisClient } from '../store/redis/client.js';
import { evalScript, LuaScript } from '../store/redis/script.js';

export interface RateWindow {
  /** A name for logs and the error message (`minute`). */
  name: string;
  ms: number;
  limit: number;
}

/** The seed's figures. */
export const MESSAGING_RATE_WINDOWS: readonly RateWindow[] = Object.freeze([
  { name: 'minute', ms: 60_000, limit: 1_000 },
  { name: 'hour', ms: 3_600_000, limit: 100_000 },
  { name: 'day', ms: 86_400_000, limit: 1_000_000 },
]);

export interface RateVerdict {
  allowed: boolean;
  /** The window that binds (the refusing one, else the one with the fewest requests left). */
  window: RateWindow;
  limit: number;
  remaining: number;
  /** Seconds until that window starts again (X-RateLimit-Reset, Retry-After). */
  resetS: number;
}

export interface RateLimiter {
  hit(key: string, now?: number): Promise<RateVerdict>;
}

/** KEYS: one counter per window. ARGV: per window its limit and lifetime ms. Reply: {allowed 1/0, refusing window (1-based) or 0, count…}. */
const HIT = new LuaScript(`
local n = #KEYS
local counts = {}
for i = 1, n do
  counts[i] = tonumber(redis.call('GET', KEYS[i]) or '0')
  if counts[i] >= tonumber(ARGV[2 * i - 1]) then
    local r = {0, i}
    for j = 1, n do r[j + 2] = tonumber(redis.call('GET', KEYS[j]) or '0') end
    return r
  end
end
local r = {1, 0}
for i = 1, n do
  local c = redis.call('INCR', KEYS[i])
  if c == 1 then redis.call('PEXPIRE', KEYS[i], ARGV[2 * i]) end
  r[i + 2] = c
end
return r`);

function verdict(windows: readonly RateWindow[], now: number, allowed: boolean, refusing: number, counts: number[]): RateVerdict {
  const resetOf = (w: RateWindow): number => Math.max(1, Math.ceil(((Math.floor(now / w.ms) + 1) * w.ms - now) / 1000));
  let idx = refusing;
  if (!allowed && idx >= 0) {
    // Refused: Retry-After is when every full window has room again (the longest reset among them).
    for (let i = 0; i < windows.length; i++) if ((counts[i] ?? 0) >= (windows[i] as RateWindow).limit && resetOf(windows[i] as RateWindow) > resetOf(windows[idx] as RateWindow)) idx = i;
  } else {
    idx = 0;
    for (let i = 1; i < windows.length; i++) {
      const left = (windows[i] as RateWindow).limit - (counts[i] ?? 0);
      if (left < (windows[idx] as RateWindow).limit - (counts[idx] ?? 0)) idx = i;
    }
  }
  const w = windows[idx] as RateWindow;
  return { allowed, window: w, limit: w.limit, remaining: Math.max(0, w.limit - (counts[idx] ?? 0)), resetS: resetOf(w) };
}

/** Counters of this process only (no Redis). */
export class MemoryRateLimiter implements RateLimiter {
  readonly #counts = new Map<string, { idx: number; n: number }>();
  constructor(private readonly windows: readonly RateWindow[] = MESSAGING_RATE_WINDOWS) {}

  async hit(key: string, now = Date.now()): Promise<RateVerdict> {
    if (this.#counts.size > 100_000) this.#sweep(now);
    const cells = this.windows.map((w) => {
      const k = `${key}\u0000${w.name}`;
      const idx = Math.floor(now / w.ms);
      let c = this.#counts.get(k);
      if (!c || c.idx !== idx) {
        c = { idx, n: 0 };
        this.#counts.set(k, c);
      }
      return c;
    });
    const refusing = cells.findIndex((c, i) => c.n >= (this.windows[i] as RateWindow).limit);
    if (refusing < 0) for (const c of cells) c.n++;
    return verdict(this.windows, now, refusing < 0, refusing, cells.map((c) => c.n));
  }

  #sweep(now: number): void {
    for (const [k, c] of this.#counts) {
      const w = this.windows.find((x) => k.endsWith(`\u0000${x.name}`));
      if (!w || c.idx !== Math.floor(now / w.ms)) this.#counts.delete(k);
    }
  }
}

/** Counters in Redis, shared by every node. */
export class RedisRateLimiter implements RateLimiter {
  constructor(
    private readonly redis: RedisClient,
    private readonly windows: readonly RateWindow[] = MESSAGING_RATE_WINDOWS,
    private readonly prefix = 'sipedge:msgrl:',
  ) {}

  async hit(key: string, now = Date.now()): Promise<RateVerdict> {
    const keys = this.windows.map((w) => `${this.prefix}{${key}}:${w.name}:${Math.floor(now / w.ms)}`);
    const args = this.windows.flatMap((w) => [w.limit, w.ms + 5_000]);
    const r = (await evalScript(this.redis, HIT, keys, args)) as number[];
    return verdict(this.windows, now, r[0] === 1, (r[1] ?? 0) - 1, r.slice(2).map(Number));
  }
}
