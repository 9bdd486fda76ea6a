/**
 * The live set of rated calls per paying account (docs/billing.md "Calls"): what prepaid
 * enforcement reads to know how fast an account's money drains. One hash per account on
 * Redis (`sipedge:live:{<auth_id>}`, call key → JSON), so every node sees the calls the
 * others answered; a call whose end was never seen leaves with the key's TTL (the
 * longest call) or, entry by entry, once past its own expiry.
 */
import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { LuaScript } from '../redis/script.js';

/** One answered rated call: when it was answered and its price terms (minor units, seconds). */
export interface LiveCall {
  key: string;
  answerAt: number;
  ratePerMinute: number;
  initialIncrement: number;
  subsequentIncrement: number;
  connectFee: number;
}

export interface LiveCallStore {
  /** The call joins the payer's set for at most `ttlMs`. */
  add(payer: string, call: LiveCall, ttlMs: number): Promise<void>;
  remove(payer: string, key: string): Promise<void>;
  /** The payer's calls alive at `now`. */
  list(payer: string, now: number): Promise<LiveCall[]>;
  close(): Promise<void>;
}

interface Stored extends LiveCall {
  until: number;
}

export class MemoryLiveCallStore implements LiveCallStore {
  readonly #sets = new Map<string, Map<string, Stored>>();

  async add(payer: string, call: LiveCall, ttlMs: number): Promise<void> {
    let m = this.#sets.get(payer);
    if (!m) this.#sets.set(payer, (m = new Map()));
    m.set(call.key, { ...call, until: Date.now() + ttlMs });
  }

  async remove(payer: string, key: string): Promise<void> {
    const m = this.#sets.get(payer);
    m?.delete(key);
    if (m && m.size === 0) this.#sets.delete(payer);
  }

  async list(payer: string, now: number): Promise<LiveCall[]> {
    const m = this.#sets.get(payer);
    if (!m) return [];
    const out: LiveCall[] = [];
    for (const [k, c] of m) {
      if (c.until <= now) m.delete(k);
      else out.push(strip(c));
    }
    return out;
  }

  async close(): Promise<void> {}
}

/** KEYS: the payer's hash. ARGV: field, JSON, ttl ms. The key lives as long as its longest call. */
const ADD_LUA = `
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
local ttl = tonumber(ARGV[3])
if redis.call('PTTL', KEYS[1]) < ttl then redis.call('PEXPIRE', KEYS[1], ttl) end
return 1
`;
const SCRIPTS = { add: new LuaScript(ADD_LUA) };

export class RedisLiveCallStore extends RedisBacked implements LiveCallStore {
  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
  }

  #key(payer: string): string {
    return `${this.prefix}live:{${payer}}`;
  }

  async add(payer: string, call: LiveCall, ttlMs: number): Promise<void> {
    const stored: Stored = { ...call, until: Date.now() + ttlMs };
    await this.guard('liveAdd', () => this.evalScript(SCRIPTS.add, [this.#key(payer)], [call.key, JSON.stringify(stored), Math.max(1, ttlMs)]));
  }

  async remove(payer: string, key: string): Promise<void> {
    await this.guard('liveRemove', () => this.redis.hdel(this.#key(payer), key));
  }

  async list(payer: string, now: number): Promise<LiveCall[]> {
    const all = await this.guard('liveList', () => this.redis.hgetall(this.#key(payer)));
    const out: LiveCall[] = [];
    const stale: string[] = [];
    for (const [k, v] of Object.entries(all)) {
      let c: Stored;
      try {
        c = JSON.parse(v) as Stored;
      } catch {
        stale.push(k);
        continue;
      }
      if (c.until <= now) stale.push(k);
      else out.push(strip(c));
    }
    if (stale.length > 0) await this.guard('liveRemove', () => this.redis.hdel(this.#key(payer), ...stale));
    return out;
  }
}

function strip(c: Stored): LiveCall {
  return { key: c.key, answerAt: c.answerAt, ratePerMinute: c.ratePerMinute, initialIncrement: c.initialIncrement, subsequentIncrement: c.subsequentIncrement, connectFee: c.connectFee };
}
