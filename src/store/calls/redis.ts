import { redisMasters, type RedisClient } from '../redis/client.js';
import { RedisBacked, unavailable, type RedisStoreOptions } from '../redis/backed.js';
import { globEscape } from '../redis/keys.js';
import { jsonObject } from '../redis/json.js';
import { LuaScript } from '../redis/script.js';
import {
  CDR_MAX,
  CDR_RETENTION_MS,
  DEAD_LETTER_MAX,
  cdrMatches,
  cdrTotals,
  type CdrPage,
  type CallStart,
  type CallStore,
  type CdrFilter,
  type CdrRecord,
  type DeadLetter,
  type OutboxItem,
} from './calls.js';
import { newestFirst } from './memory.js';

/*
 * Key layout (docs/events.md "Storage"). Every key of an account carries its SIP
 * domain as the hash tag: one Redis Cluster slot, so one script changes a call,
 * writes its CDR and queues its callback together.
 *
 *   sipedge:call:{<domain>}:<Call-ID>  hash    json (the CallStart), ringAt, answerAt; TTL = longest call
 *   sipedge:cdr:{<domain>}             hash    call_uuid → CDR JSON
 *   sipedge:cdrt:{<domain>}            zset    call_uuid → created_at ms (order, dates, retention)
 *   sipedge:cb:{<domain>}              hash    CallbackId → outbox item JSON
 *   sipedge:cbq:{<domain>}             zset    CallbackId → when it is due (or its lease ends), ms
 *   sipedge:cbdead:{<domain>}          list    dead letters, newest first
 *   sipedge:cbsecret:{<domain>}        string  the account's callback signing secret
 *   sipedge:{cbq}:due                  zset    domain → earliest due callback (a hint; not atomic)
 */

const START_LUA = `
if redis.call('HSETNX', KEYS[1], 'json', ARGV[1]) == 1 then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 1
`;

/** KEYS: call, cbq, cb. ARGV: field (ringAt|answerAt), at, item id, item json, carrier ('' = none). */
const MARK_LUA = `
if redis.call('EXISTS', KEYS[1]) == 0 then return 0 end
if ARGV[1] == 'ringAt' and redis.call('HEXISTS', KEYS[1], 'answerAt') == 1 then return 0 end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
if ARGV[5] ~= '' then redis.call('HSET', KEYS[1], 'carrier', ARGV[5]) end
if ARGV[3] ~= '' and redis.call('HSETNX', KEYS[3], ARGV[3], ARGV[4]) == 1 then
  redis.call('ZADD', KEYS[2], ARGV[2], ARGV[3])
end
return 1
`;

/**
 * The end of a call, if its state is still the one read (compare-and-delete).
 * KEYS: call, cdr, cdrt, cbq, cb. ARGV: state json as read, cdr json, call_uuid,
 * created ms, retention cutoff ms, most CDRs, item id, item json, due ms.
 */
const END_LUA = `
if redis.call('HGET', KEYS[1], 'json') ~= ARGV[1] then return 0 end
redis.call('DEL', KEYS[1])
redis.call('HSET', KEYS[2], ARGV[3], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[3])
local old = redis.call('ZRANGEBYSCORE', KEYS[3], '-inf', '(' .. ARGV[5], 'LIMIT', 0, 1000)
local n = redis.call('ZCARD', KEYS[3]) - #old - tonumber(ARGV[6])
if n > 0 then
  for _, id in ipairs(redis.call('ZRANGE', KEYS[3], #old, #old + n - 1)) do old[#old + 1] = id end
end
for _, id in ipairs(old) do
  redis.call('HDEL', KEYS[2], id)
  redis.call('ZREM', KEYS[3], id)
end
if ARGV[7] ~= '' and redis.call('HSETNX', KEYS[5], ARGV[7], ARGV[8]) == 1 then
  redis.call('ZADD', KEYS[4], ARGV[9], ARGV[7])
end
return 1
`;

/** KEYS: cbq, cb. ARGV: item id, item json, due ms. */
const ENQUEUE_LUA = `
if redis.call('HSETNX', KEYS[2], ARGV[1], ARGV[2]) == 1 then
  redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
end
return 1
`;

/** KEYS: cbq, cb. ARGV: now, lease ms, most. Reply: the leased items' JSON. */
const CLAIM_LUA = `
local now = tonumber(ARGV[1])
local ids = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', now, 'LIMIT', 0, tonumber(ARGV[3]))
local out = {}
for _, id in ipairs(ids) do
  local j = redis.call('HGET', KEYS[2], id)
  if j then
    redis.call('ZADD', KEYS[1], string.format('%d', now + tonumber(ARGV[2])), id)
    out[#out + 1] = j
  else
    redis.call('ZREM', KEYS[1], id)
  end
end
return out
`;

/** KEYS: cbq, cb. ARGV: item id, item json, due ms. Only while the item is still queued. */
const RETRY_LUA = `
if redis.call('HEXISTS', KEYS[2], ARGV[1]) == 0 then return 0 end
redis.call('HSET', KEYS[2], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[1], ARGV[3], ARGV[1])
return 1
`;

/** KEYS: cbq, cb, cbdead. ARGV: item id, dead-letter json (empty: just remove), most kept. */
const DONE_LUA = `
local had = redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[1], ARGV[1])
if had == 1 and ARGV[2] ~= '' then
  redis.call('LPUSH', KEYS[3], ARGV[2])
  redis.call('LTRIM', KEYS[3], 0, tonumber(ARGV[3]) - 1)
end
return had
`;

const SCRIPTS = {
  start: new LuaScript(START_LUA),
  mark: new LuaScript(MARK_LUA),
  end: new LuaScript(END_LUA),
  enqueue: new LuaScript(ENQUEUE_LUA),
  claim: new LuaScript(CLAIM_LUA),
  retry: new LuaScript(RETRY_LUA),
  done: new LuaScript(DONE_LUA),
};

/** Accounts looked at per claim. */
const CLAIM_ACCOUNTS = 50;
/** How often claim() also rescans every account's outbox (hints lost with a dead process). */
const RESCAN_MS = 60_000;

function parse<T>(json: unknown): T | null {
  return jsonObject(json) as T | null;
}

/** Production call store on Redis: same contract as MemoryCallStore (test/contract/call-store.test.ts). */
export class RedisCallStore extends RedisBacked implements CallStore {
  readonly #due: string;
  #rescannedAt = 0;

  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
    this.#due = `${this.prefix}{cbq}:due`;
  }

  #k(domain: string): { cdr: string; cdrt: string; cb: string; cbq: string; dead: string; secret: string } {
    const t = `{${domain}}`;
    const p = this.prefix;
    return { cdr: `${p}cdr:${t}`, cdrt: `${p}cdrt:${t}`, cb: `${p}cb:${t}`, cbq: `${p}cbq:${t}`, dead: `${p}cbdead:${t}`, secret: `${p}cbsecret:${t}` };
  }

  #call(domain: string, sipCallId: string): string {
    return `${this.prefix}call:{${domain}}:${sipCallId}`;
  }

  /** The account has a callback due at `at` (lower the hint; never raise it here). */
  async #hint(domain: string, at: number): Promise<void> {
    await this.redis.zadd(this.#due, 'LT', at, domain);
  }

  async start(call: CallStart): Promise<void> {
    await this.guard('callStart', () => this.evalScript(SCRIPTS.start, [this.#call(call.domain, call.sipCallId)], [JSON.stringify(call), Math.max(1, call.ttlMs)]));
  }

  async #mark(field: 'ringAt' | 'answerAt', domain: string, sipCallId: string, at: number, cb: OutboxItem | null, carrier = ''): Promise<boolean> {
    const k = this.#k(domain);
    const r = await this.guard('callMark', () =>
      this.evalScript(SCRIPTS.mark, [this.#call(domain, sipCallId), k.cbq, k.cb], [field, at, cb?.id ?? '', cb ? JSON.stringify(cb) : '', carrier]),
    );
    if (r === 1 && cb) await this.guard('callMark', () => this.#hint(domain, at));
    return r === 1;
  }

  ring(domain: string, sipCallId: string, at: number, callback: OutboxItem | null): Promise<boolean> {
    return this.#mark('ringAt', domain, sipCallId, at, callback);
  }

  answer(domain: string, sipCallId: string, at: number, callback: OutboxItem | null, carrier?: string): Promise<boolean> {
    return this.#mark('answerAt', domain, sipCallId, at, callback, carrier ?? '');
  }

  async #read(domain: string, sipCallId: string): Promise<{ json: string; state: CallStart & { ringAt: number | null; answerAt: number | null } } | null> {
    const h = await this.guard('callGet', () => this.redis.hgetall(this.#call(domain, sipCallId)));
    const json = h.json;
    const start = parse<CallStart>(json);
    if (!json || !start) return null;
    const num = (v: string | undefined): number | null => (v === undefined ? null : Number(v));
    if (h.carrier && start.pstn) start.pstn = { ...start.pstn, carrier: h.carrier };
    return { json, state: { ...start, ringAt: num(h.ringAt), answerAt: num(h.answerAt) } };
  }

  async get(domain: string, sipCallId: string): Promise<(CallStart & { ringAt: number | null; answerAt: number | null }) | null> {
    return (await this.#read(domain, sipCallId))?.state ?? null;
  }

  async end(domain: string, sipCallId: string, build: Parameters<CallStore['end']>[2]): Promise<CdrRecord | null> {
    const read = await this.#read(domain, sipCallId);
    if (!read) return null;
    const { cdr, callback } = build(read.state);
    const k = this.#k(domain);
    const due = Date.parse(cdr.ended_at);
    const r = await this.guard('callEnd', () =>
      this.evalScript(SCRIPTS.end, [this.#call(domain, sipCallId), k.cdr, k.cdrt, k.cbq, k.cb], [
        read.json,
        JSON.stringify(cdr),
        cdr.call_uuid,
        Date.parse(cdr.created_at),
        Date.now() - CDR_RETENTION_MS,
        CDR_MAX,
        callback?.id ?? '',
        callback ? JSON.stringify(callback) : '',
        due,
      ]),
    );
    if (r !== 1) return null;
    if (callback) await this.guard('callEnd', () => this.#hint(domain, due));
    return cdr;
  }

  async cdr(domain: string, callUuid: string): Promise<CdrRecord | null> {
    const j = await this.guard('cdr', () => this.redis.hget(this.#k(domain).cdr, callUuid));
    return parse<CdrRecord>(j);
  }

  async cdrs(domain: string, filter: CdrFilter, page: { limit: number; offset: number }): Promise<CdrPage> {
    const k = this.#k(domain);
    const ids = await this.guard('cdrs', () => this.redis.zrevrangebyscore(k.cdrt, filter.to ?? '+inf', filter.from ?? '-inf'));
    const out: CdrRecord[] = [];
    for (let i = 0; i < ids.length; i += 500) {
      const chunk = ids.slice(i, i + 500);
      const jsons = await this.guard('cdrs', () => this.redis.hmget(k.cdr, ...chunk));
      for (const j of jsons) {
        const c = parse<CdrRecord>(j);
        if (c && cdrMatches(c, filter)) out.push(c);
      }
    }
    out.sort(newestFirst);
    return { total: out.length, items: out.slice(page.offset, page.offset + page.limit), totals: cdrTotals(out) };
  }

  async enqueue(item: OutboxItem): Promise<void> {
    const k = this.#k(item.domain);
    await this.guard('enqueue', () => this.evalScript(SCRIPTS.enqueue, [k.cbq, k.cb], [item.id, JSON.stringify(item), item.createdAt]));
    await this.guard('enqueue', () => this.#hint(item.domain, item.createdAt));
  }

  async claim(now: number, max: number, leaseMs: number): Promise<OutboxItem[]> {
    if (now - this.#rescannedAt > RESCAN_MS) {
      this.#rescannedAt = now;
      await this.guard('claim', () => this.#rescan());
    }
    const domains = await this.guard('claim', () => this.redis.zrangebyscore(this.#due, '-inf', now, 'LIMIT', 0, CLAIM_ACCOUNTS));
    const out: OutboxItem[] = [];
    for (const domain of domains) {
      if (out.length >= max) break;
      const k = this.#k(domain);
      const r = await this.guard('claim', () => this.evalScript(SCRIPTS.claim, [k.cbq, k.cb], [now, leaseMs, max - out.length]));
      if (Array.isArray(r)) for (const j of r) {
        const item = parse<OutboxItem>(j);
        if (item) out.push(item);
      }
      // The hint: the account's next due time (leases included), lowered again from the
      // outbox so that a callback queued meanwhile is not left behind.
      await this.guard('claim', async () => {
        const first = async (): Promise<number | null> => {
          const top = await this.redis.zrange(k.cbq, 0, 0, 'WITHSCORES');
          return top.length === 2 ? Number(top[1]) : null;
        };
        const next = await first();
        if (next === null) await this.redis.zrem(this.#due, domain);
        else await this.redis.zadd(this.#due, next, domain);
        const again = await first();
        if (again !== null) await this.#hint(domain, again);
      });
    }
    return out;
  }

  async #rescan(): Promise<void> {
    const match = `${globEscape(this.prefix)}cbq:*`;
    for (const node of redisMasters(this.redis)) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', 500);
        cursor = next;
        for (const key of keys) {
          const top = await node.zrange(key, 0, 0, 'WITHSCORES');
          const domain = /\{(.*)\}$/.exec(key)?.[1];
          if (top.length === 2 && domain !== undefined) await this.#hint(domain, Number(top[1]));
        }
      } while (cursor !== '0');
    }
  }

  async complete(item: OutboxItem): Promise<void> {
    const k = this.#k(item.domain);
    await this.guard('complete', () => this.evalScript(SCRIPTS.done, [k.cbq, k.cb, k.dead], [item.id, '', DEAD_LETTER_MAX]));
  }

  async retry(item: OutboxItem, at: number): Promise<void> {
    const k = this.#k(item.domain);
    const r = await this.guard('retry', () => this.evalScript(SCRIPTS.retry, [k.cbq, k.cb], [item.id, JSON.stringify(item), at]));
    if (r === 1) await this.guard('retry', () => this.#hint(item.domain, at));
  }

  async deadLetter(item: OutboxItem, reason: string, at: number): Promise<void> {
    const k = this.#k(item.domain);
    const dead: DeadLetter = { item, reason, at };
    await this.guard('deadLetter', () => this.evalScript(SCRIPTS.done, [k.cbq, k.cb, k.dead], [item.id, JSON.stringify(dead), DEAD_LETTER_MAX]));
  }

  async deadLetters(domain: string, limit: number): Promise<DeadLetter[]> {
    const l = await this.guard('deadLetters', () => this.redis.lrange(this.#k(domain).dead, 0, limit - 1));
    return l.map((j) => parse<DeadLetter>(j)).filter((d): d is DeadLetter => d !== null);
  }

  async signingSecret(domain: string): Promise<string | null> {
    return this.guard('signingSecret', () => this.redis.get(this.#k(domain).secret));
  }

  async setSigningSecret(domain: string, secret: string): Promise<void> {
    const r = await this.guard('signingSecret', () => this.redis.set(this.#k(domain).secret, secret));
    if (r !== 'OK') throw unavailable('signingSecret', new Error('SET refused'));
  }
}
