/**
 * The numbers backend on Redis (single server, Sentinel master or Cluster). Every key
 * carries the one hash tag `{numbers}`: a record and all its index entries live in one
 * Cluster slot, so a compare-and-set of a record with its indexes is one Lua script —
 * atomic on every topology (docs/numbers.md "Storage" weighs this against one slot per
 * number).
 *
 * Keys (prefix `sipedge:`):
 * - `num:{numbers}:rec:<e164>` string: the record (JSON), one key per number;
 * - `num:{numbers}:inv` hash e164 → country (for sale);
 * - `num:{numbers}:claims` zset e164 → claim deadline;
 * - `num:{numbers}:due` zset e164 → next rental (ms);
 * - `num:{numbers}:acct:<auth_id>` zset e164 → purchase time;
 * - `num:{numbers}:ep:<auth_id>:<endpoint_id>` zset e164 → when routed;
 * - `num:{numbers}:lease:<name>` string with a PX expiry (sweeps across the fleet).
 */
import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { LuaScript } from '../redis/script.js';
import { NumbersStore, type IndexOp, type KvBackend } from './numbers.js';

/**
 * KEYS: the record, then one key per index op.
 * ARGV: has-expected ('1'|'0'), expected text, next text ('' = delete), n, then per op
 *   (3 each): op, member or field, score or value.
 * Reply: 1 written, 0 the record changed meanwhile.
 */
const CAS_LUA = `
local cur = redis.call('GET', KEYS[1])
if ARGV[1] == '1' then
  if cur ~= ARGV[2] then return 0 end
else
  if cur then return 0 end
end
if ARGV[3] == '' then redis.call('DEL', KEYS[1]) else redis.call('SET', KEYS[1], ARGV[3]) end
local n = tonumber(ARGV[4])
for i = 1, n do
  local o = 4 + (i - 1) * 3
  local key = KEYS[1 + i]
  local op = ARGV[o + 1]
  if op == 'zadd' then redis.call('ZADD', key, ARGV[o + 3], ARGV[o + 2])
  elseif op == 'zrem' then redis.call('ZREM', key, ARGV[o + 2])
  elseif op == 'hset' then redis.call('HSET', key, ARGV[o + 2], ARGV[o + 3])
  elseif op == 'hdel' then redis.call('HDEL', key, ARGV[o + 2]) end
end
return 1
`;

const CAS = new LuaScript(CAS_LUA);

export class RedisNumbersBackend extends RedisBacked implements KvBackend {
  readonly #base: string;

  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
    this.#base = `${this.prefix}num:{numbers}:`;
  }

  #rec(e164: string): string {
    return `${this.#base}rec:${e164}`;
  }

  #idx(name: string): string {
    return this.#base + name;
  }

  read(e164: string): Promise<string | null> {
    return this.guard('numbersRead', () => this.redis.get(this.#rec(e164)));
  }

  readMany(e164s: readonly string[]): Promise<Array<string | null>> {
    if (e164s.length === 0) return Promise.resolve([]);
    // One slot: MGET is allowed on a Cluster too.
    return this.guard('numbersReadMany', () => this.redis.mget(...e164s.map((e) => this.#rec(e))));
  }

  async cas(e164: string, expected: string | null, next: string | null, ops: readonly IndexOp[]): Promise<boolean> {
    const keys = [this.#rec(e164)];
    const args: string[] = [expected === null ? '0' : '1', expected ?? '', next ?? '', String(ops.length)];
    for (const o of ops) {
      keys.push(this.#idx(o.key));
      switch (o.op) {
        case 'zadd':
          args.push('zadd', o.member, String(o.score));
          break;
        case 'zrem':
          args.push('zrem', o.member, '');
          break;
        case 'hset':
          args.push('hset', o.field, o.value);
          break;
        case 'hdel':
          args.push('hdel', o.field, '');
          break;
      }
    }
    const r = await this.guard('numbersWrite', () => this.evalScript(CAS, keys, args));
    return Number(r) === 1;
  }

  hgetall(key: string): Promise<Record<string, string>> {
    return this.guard('numbersIndex', () => this.redis.hgetall(this.#idx(key)));
  }

  zrangeByScore(key: string, max: number, limit?: number): Promise<string[]> {
    const k = this.#idx(key);
    return this.guard('numbersIndex', () =>
      limit === undefined ? this.redis.zrangebyscore(k, '-inf', String(max)) : this.redis.zrangebyscore(k, '-inf', String(max), 'LIMIT', 0, limit),
    );
  }

  async lease(name: string, ttlMs: number): Promise<boolean> {
    const r = await this.guard('numbersLease', () => this.redis.set(this.#idx(`lease:${name}`), '1', 'PX', Math.max(1, Math.round(ttlMs)), 'NX'));
    return r === 'OK';
  }
}

/** The numbers store on Redis. */
export function redisNumbersStore(redis: RedisClient, opts: RedisStoreOptions = {}): NumbersStore {
  return new NumbersStore(new RedisNumbersBackend(redis, opts));
}
