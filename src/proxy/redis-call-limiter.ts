import type { RedisClient } from '../store/redis/client.js';
import { evalScript, LuaScript } from '../store/redis/script.js';
import { StoreUnavailableError } from '../errors.js';
import { DEFAULT_MAX_CALL_DURATION_MS, type Admission, type CallLimiter, type CallLimiterOptions, type CallLimits } from './call-limiter.js';

/**
 * KEYS[1] zset `sipedge:calls:{<account>}`: Call-ID → expiry (ms).
 * KEYS[2] string `sipedge:cps:{<account>}:<second>`: INCR'd, EXPIRE 2.
 * ARGV: now, expiry, Call-ID, cps limit, concurrent limit, zset TTL (ms).
 * One round trip; both keys carry the account hash tag (one Cluster slot).
 */
const ADMIT = `
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', ARGV[1])
if redis.call('ZSCORE', KEYS[1], ARGV[3]) then return 'ok' end
if redis.call('ZCARD', KEYS[1]) >= tonumber(ARGV[5]) then return 'concurrent' end
local n = redis.call('INCR', KEYS[2])
if n == 1 then redis.call('EXPIRE', KEYS[2], 2) end
if n > tonumber(ARGV[4]) then return 'cps' end
redis.call('ZADD', KEYS[1], ARGV[2], ARGV[3])
redis.call('PEXPIRE', KEYS[1], ARGV[6])
return 'ok'`;
const ADMIT_SCRIPT = new LuaScript(ADMIT);

/** Call counters shared by every node through Redis. */
export class RedisCallLimiter implements CallLimiter {
  private readonly maxMs: number;
  private readonly prefix: string;

  /** `prefix` of every key, as the stores use. @default 'sipedge:' */
  constructor(
    private readonly redis: RedisClient,
    opts: CallLimiterOptions & { prefix?: string } = {},
  ) {
    this.maxMs = opts.maxCallDurationMs ?? DEFAULT_MAX_CALL_DURATION_MS;
    this.prefix = opts.prefix ?? 'sipedge:';
  }

  async admit(accountId: string, callId: string, limits: CallLimits, now = Date.now()): Promise<Admission> {
    const keys = [`${this.prefix}calls:{${accountId}}`, `${this.prefix}cps:{${accountId}}:${Math.floor(now / 1000)}`];
    const args = [now, now + this.maxMs, callId, limits.cps, limits.concurrent, this.maxMs];
    let r: unknown;
    try {
      r = await evalScript(this.redis, ADMIT_SCRIPT, keys, args);
    } catch (e) {
      throw new StoreUnavailableError(`call limits: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
    return r === 'cps' || r === 'concurrent' ? r : 'ok';
  }

  async release(accountId: string, callId: string): Promise<void> {
    try {
      await this.redis.zrem(`${this.prefix}calls:{${accountId}}`, callId);
    } catch (e) {
      throw new StoreUnavailableError(`call limits: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }

  async active(accountId: string, now = Date.now()): Promise<number> {
    try {
      return await this.redis.zcount(`${this.prefix}calls:{${accountId}}`, `(${now}`, '+inf');
    } catch (e) {
      throw new StoreUnavailableError(`call limits: ${e instanceof Error ? e.message : String(e)}`, { cause: e });
    }
  }

  async close(): Promise<void> {}
}
