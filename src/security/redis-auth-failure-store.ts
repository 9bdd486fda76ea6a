import { redisMasters, type RedisClient } from '../store/redis/client.js';
import type { AuthFailureStore, FailureLimits, GuardState } from './auth-failure-store.js';
import type { RedisEvents } from '../store/redis/notices.js';
import { globEscape } from '../store/redis/keys.js';
import { evalScript, LuaScript } from '../store/redis/script.js';

/** Notice topic: `<counter key>\0<until ms>` of a block that just started. */
const BLOCK_TOPIC = 'auth-block';

/*
 * Failed-digest counters shared by every node through Redis. Each counter is one
 * hash, its key's hash tag the counter key itself:
 *
 *   sipedge:authfail:{src:<address>}          hash  n (failures in window), until (ms)
 *   sipedge:authfail:{ep:<realm>:<user>}      hash  n, until
 *   sipedge:authgood:{ep:<realm>:<user>}      hash  <address> → good-until (ms)
 *
 * TTLs do the forgetting: a counter lives one window (or one cooling-off once it
 * blocks), a good-source hash a day after its last success.
 */

// One failure, atomically: count within the window, and start the block at the
// threshold. Returns {until, started}.
const FAIL_LUA = `
local now = tonumber(ARGV[1])
local untilv = tonumber(redis.call('HGET', KEYS[1], 'until') or '0')
if untilv > now then return {untilv, 0} end
local n = redis.call('HINCRBY', KEYS[1], 'n', 1)
if n == 1 then redis.call('PEXPIRE', KEYS[1], ARGV[2]) end
if n >= tonumber(ARGV[3]) then
  untilv = now + tonumber(ARGV[4])
  redis.call('HSET', KEYS[1], 'until', tostring(untilv), 'n', '0')
  redis.call('PEXPIRE', KEYS[1], ARGV[4])
  return {untilv, 1}
end
return {0, 0}
`;

// Remember a good source; prune lapsed ones once the hash grows.
const GOOD_LUA = `
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if redis.call('HLEN', KEYS[1]) > 32 then
  local all = redis.call('HGETALL', KEYS[1])
  for i = 1, #all, 2 do
    if tonumber(all[i + 1]) <= tonumber(ARGV[4]) then redis.call('HDEL', KEYS[1], all[i]) end
  end
end
redis.call('PEXPIRE', KEYS[1], ARGV[3])
return 1
`;

const FAIL_SCRIPT = new LuaScript(FAIL_LUA);
const GOOD_SCRIPT = new LuaScript(GOOD_LUA);

/** Counters in Redis (REDIS_URL set): a source refused on one node is refused on all. */
export class RedisAuthFailureStore implements AuthFailureStore {
  /** Active blocks were loaded since the last (re)subscription. */
  #loaded = false;
  /** Bumped by every reset: only the latest load may declare the blocks complete. */
  #epoch = 0;
  #onBlock: ((key: string, until: number) => void) | null = null;

  /** `events` absent: no announcements, so every check reads Redis. */
  constructor(
    private readonly redis: RedisClient,
    private readonly prefix = 'sipedge:',
    private readonly events: RedisEvents | null = null,
  ) {}

  blocksComplete(): boolean {
    return this.events !== null && this.events.complete && this.#loaded;
  }

  watchBlocks(onBlock: (key: string, until: number) => void, onReset: () => void): void {
    if (!this.events) return;
    this.#onBlock = onBlock;
    this.events.on(
      BLOCK_TOPIC,
      (message) => {
        const i = message.lastIndexOf('\u0000');
        const until = Number(message.slice(i + 1));
        if (i > 0 && until > 0) onBlock(message.slice(0, i), until);
      },
      () => {
        // Announcements may have been missed: forget, then learn the active blocks again.
        this.#loaded = false;
        onReset();
        void this.#loadActive(++this.#epoch);
      },
    );
  }

  /** Every counter currently blocking (SCAN of the counter keys; once per (re)subscription). */
  async #loadActive(epoch: number): Promise<void> {
    const start = this.prefix + 'authfail:{';
    const match = `${globEscape(this.prefix)}authfail:*`;
    try {
      // Every master of a cluster: a SCAN through the cluster client sees one node only.
      for (const node of redisMasters(this.redis)) {
        let cursor = '0';
        do {
          const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', 1000);
          cursor = next;
          if (keys.length === 0) continue;
          const p = node.pipeline();
          for (const k of keys) p.hget(k, 'until');
          const replies = (await p.exec()) ?? [];
          const now = Date.now();
          keys.forEach((k, i) => {
            const v = Number(replies[i]?.[1] ?? 0);
            if (v > now && k.startsWith(start) && k.endsWith('}')) this.#onBlock?.(k.slice(start.length, -1), v);
          });
        } while (cursor !== '0' && epoch === this.#epoch);
      }
      if (epoch === this.#epoch) this.#loaded = true;
    } catch {
      // Stay incomplete (checks read Redis); the next reset tries again.
    }
  }

  private failKey(key: string): string {
    return `${this.prefix}authfail:{${key}}`;
  }

  private goodKey(endpointKey: string): string {
    return `${this.prefix}authgood:{${endpointKey}}`;
  }

  async read(sourceKey: string | null, endpointKey: string, source: string, now: number): Promise<GuardState> {
    const p = this.redis.pipeline();
    if (sourceKey !== null) p.hget(this.failKey(sourceKey), 'until');
    p.hget(this.failKey(endpointKey), 'until');
    p.hget(this.goodKey(endpointKey), source);
    const replies = await p.exec();
    if (replies === null) throw new Error('pipeline aborted');
    const values = replies.map(([err, v]) => {
      if (err) throw err;
      return typeof v === 'string' ? Number(v) : 0;
    });
    const [s, e, g] = sourceKey === null ? [0, values[0] ?? 0, values[1] ?? 0] : [values[0] ?? 0, values[1] ?? 0, values[2] ?? 0];
    return { sourceUntil: s > now ? s : 0, endpointUntil: e > now ? e : 0, good: g > now };
  }

  async fail(key: string, now: number, limits: FailureLimits): Promise<{ until: number; started: boolean }> {
    const reply = await evalScript(this.redis, FAIL_SCRIPT, [this.failKey(key)], [now, limits.windowMs, limits.max, limits.cooloffMs]);
    if (!Array.isArray(reply)) throw new Error('unexpected script reply');
    const until = Number(reply[0]);
    const started = Number(reply[1]) === 1;
    // Every process must refuse this counter from now on without reading Redis.
    if (started && this.events) await this.events.publish(BLOCK_TOPIC, `${key}\u0000${until}`);
    return { until, started };
  }

  async markGood(endpointKey: string, source: string, now: number, ttlMs: number): Promise<void> {
    await evalScript(this.redis, GOOD_SCRIPT, [this.goodKey(endpointKey)], [source, now + ttlMs, ttlMs, now]);
  }


  stop(): void {}
}
