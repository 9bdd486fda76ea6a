import { redisMasters, type RedisClient } from '../redis/client.js';
import { RedisBacked, unavailable, type RedisStoreOptions } from '../redis/backed.js';
import { DEFAULT_REDIS_PREFIX, globEscape } from '../redis/keys.js';
import { jsonObject } from '../redis/json.js';
import { LuaScript } from '../redis/script.js';
import { SIP_TRANSPORT_NAMES } from '../../sip/transport-name.js';
import {
  aorKey,
  bindingFromWrite,
  compareBindings,
  type Aor,
  type Binding,
  type LocationStore,
  type RegisterOp,
  type RegisterResult,
  type RegistrationEvent,
  type RegistrationEventKind,
  type SipTransportName,
  EVENT_LOG_MAX,
  EVENT_LOG_RETENTION_MS,
  RETRANSMISSION_WINDOW_MS,
} from './location.js';

/*
 * Key layout (prefix defaults to `sipedge:`). The account SIP domain is the hash
 * tag, so every key of one account (all its endpoints and its index) lands in one
 * Redis Cluster slot and a Lua script may touch them together.
 *
 *   sipedge:loc:{<domain>}:<user>    hash   binding key → binding JSON    (per-endpoint)
 *   sipedge:locidx:{<domain>}        zset   user → latest expiry, ms       (per-account + time index)
 *   sipedge:cred:{<domain>}:<user>   hash   endpointId, ha1Md5, ha1Sha256, disabled
 *
 * The index is `locidx`, not `loc:{d}:idx`, so that no username (`idx` is a valid
 * one) can collide with it and a `loc:*` SCAN meets binding hashes only.
 */

/** The Redis keys of one AOR's bindings and of its account index. */
export function redisLocationKeys(aor: Aor, prefix: string = DEFAULT_REDIS_PREFIX): { bindings: string; index: string; events: string; lapses: string } {
  return {
    bindings: `${prefix}loc:{${aor.domain}}:${aor.user}`,
    index: `${prefix}locidx:{${aor.domain}}`,
    ...redisEventKeys(aor.domain, prefix),
  };
}

/**
 * The registration event log of one account (docs/events.md) and the time index the
 * expiry sweep reads, in the account's slot so that the scripts that change bindings
 * write their events in the same atomic step:
 *
 *   sipedge:regev:{<domain>}      stream  one entry per registration event
 *   sipedge:loclapse:{<domain>}   zset    user → earliest binding expiry, ms
 *   sipedge:{sweep}:due           zset    domain → earliest binding expiry of the account (not atomic: a hint)
 */
export function redisEventKeys(domain: string, prefix: string = DEFAULT_REDIS_PREFIX): { events: string; lapses: string } {
  return { events: `${prefix}regev:{${domain}}`, lapses: `${prefix}loclapse:{${domain}}` };
}

// ---------------------------------------------------------------------------
// Lua. Liveness uses ARGV `now` (the node clock), never Redis TIME, so that the
// Redis and memory stores decide identically and tests can pass their own clock.

/** Shared by every script: decoding and index upkeep. */
const LUA_PRELUDE = `
-- A value without the fields the rules need is no binding: it reads as absent and
-- the next accepted REGISTER drops it.
local function decode(json)
  local ok, b = pcall(cjson.decode, json)
  if ok and type(b) == 'table' and type(b.expiresAt) == 'number'
      and type(b.callId) == 'string' and type(b.cseq) == 'number' then
    return b
  end
  return nil
end

-- Keep the binding hash TTL and the account index in step with the latest live
-- expiry. The TTL is relative to now (PEXPIRE, not PEXPIREAT) so that a skew
-- between the node clock and the RedisClient clock cannot expire a live binding.
-- Registration events (docs/events.md), when the script was given the event keys
-- (KEYS[3] stream, KEYS[4] lapse index): collected while the script decides, written
-- at its end with the endpoint's registered state after the change.
local evKey, lapseKey = KEYS[3], KEYS[4]
local pending = {}
local function event(kind, json)
  if evKey then pending[#pending + 1] = { kind, json } end
end
local function flush(user, now, registered)
  if not evKey then return end
  for _, e in ipairs(pending) do
    redis.call('XADD', evKey, 'MAXLEN', '~', '${EVENT_LOG_MAX}', '*', 'e', e[1], 'u', user, 'b', e[2], 'r', registered and '1' or '0', 't', string.format('%d', now))
  end
  if #pending > 0 then
    redis.call('XTRIM', evKey, 'MINID', '~', string.format('%d', now - ${EVENT_LOG_RETENTION_MS}))
    redis.call('PEXPIRE', evKey, '${EVENT_LOG_RETENTION_MS}')
  end
end
-- The lapse index: the earliest expiry of each user, read by the sweep.
local function relapse(user, now, margin, minExp, maxExp)
  if not lapseKey then return end
  if minExp == nil then
    redis.call('ZREM', lapseKey, user)
  else
    redis.call('ZADD', lapseKey, string.format('%d', minExp), user)
    local want = maxExp - now + margin
    if redis.call('PTTL', lapseKey) < want then redis.call('PEXPIRE', lapseKey, string.format('%d', want)) end
  end
end

local function reindex(hashKey, idxKey, user, now, margin, maxExp, minExp)
  relapse(user, now, margin, minExp, maxExp)
  if maxExp == nil then
    redis.call('DEL', hashKey)
    redis.call('ZREM', idxKey, user)
  else
    redis.call('PEXPIRE', hashKey, string.format('%d', maxExp - now + margin))
    redis.call('ZADD', idxKey, string.format('%d', maxExp), user)
  end
  -- Users whose every binding has expired leave the index; the index key lives at
  -- least as long as its latest entry (a PTTL check instead of reading the top entry
  -- when this user's expiry is known: it may outlive a shrunk latest entry, which is
  -- harmless since reads filter on the scores).
  redis.call('ZREMRANGEBYSCORE', idxKey, '-inf', string.format('%d', now))
  if maxExp ~= nil then
    local want = maxExp - now + margin
    if redis.call('PTTL', idxKey) < want then redis.call('PEXPIRE', idxKey, string.format('%d', want)) end
    return
  end
  local top = redis.call('ZRANGE', idxKey, -1, -1, 'WITHSCORES')
  if top[2] then
    redis.call('PEXPIRE', idxKey, string.format('%d', tonumber(top[2]) - now + margin))
  end
end
`;

/**
 * One REGISTER (RFC 3261 §10.3 steps 6-8), atomically.
 * KEYS: bindings hash, account index.
 * ARGV: user, now, callId, cseq, removeAll (1|0), maxContacts, ttlMarginMs,
 *       nRemoves, <remove keys...>, then triples <key, expiresAt, json> per write.
 * Reply: { 'OK' | 'OUT_OF_ORDER' | 'TOO_MANY', <live binding json...> }.
 */
const REGISTER_LUA = `${LUA_PRELUDE}
local hashKey, idxKey = KEYS[1], KEYS[2]
local user = ARGV[1]
local now = tonumber(ARGV[2])
local callId = ARGV[3]
local cseq = tonumber(ARGV[4])
local removeAll = ARGV[5] == '1'
local maxContacts = tonumber(ARGV[6])
local margin = tonumber(ARGV[7])
local nRemoves = tonumber(ARGV[8])

-- Step 1: bindings with expiresAt <= now are absent.
local all = redis.call('HGETALL', hashKey)
local liveB, liveJ, liveKeys = {}, {}, {}
for i = 1, #all, 2 do
  local b = decode(all[i + 1])
  if b and b.expiresAt > now then
    liveB[all[i]] = b
    liveJ[all[i]] = all[i + 1]
    liveKeys[#liveKeys + 1] = all[i]
  elseif b then
    -- Lapsed and not yet swept: it goes now, and says so.
    event('expired', all[i + 1])
  end
end

local function fail(code)
  local r = { code }
  for _, k in ipairs(liveKeys) do r[#r + 1] = liveJ[k] end
  return r
end

-- A retransmission of the REGISTER that wrote one of its contacts changes nothing
-- (RETRANSMISSION_WINDOW_MS in location.ts).
if not removeAll then
  for i = 9 + nRemoves, #ARGV, 3 do
    local b = liveB[ARGV[i]]
    if b and b.callId == callId and b.cseq == cseq and type(b.updatedAt) == 'number'
        and now - b.updatedAt <= ${RETRANSMISSION_WINDOW_MS} then
      return fail('OK')
    end
  end
end

-- RFC 3261 §10.3 step 7: same Call-ID with a CSeq not lower than the request's.
local function outOfOrder(b)
  return b ~= nil and b.callId == callId and b.cseq >= cseq
end

if removeAll then
  for _, k in ipairs(liveKeys) do
    if outOfOrder(liveB[k]) then return fail('OUT_OF_ORDER') end
  end
  for _, k in ipairs(liveKeys) do event('unregistered', liveJ[k]) end
  reindex(hashKey, idxKey, user, now, margin, nil, nil)
  flush(user, now, false)
  return { 'OK' }
end

local firstWrite = 9 + nRemoves
for i = 9, firstWrite - 1 do
  if outOfOrder(liveB[ARGV[i]]) then return fail('OUT_OF_ORDER') end
end
for i = firstWrite, #ARGV, 3 do
  if outOfOrder(liveB[ARGV[i]]) then return fail('OUT_OF_ORDER') end
end

-- Removes, then writes. A write already expired acts as a removal.
local nextJ, nextExp = {}, {}
for _, k in ipairs(liveKeys) do
  nextJ[k] = liveJ[k]
  nextExp[k] = liveB[k].expiresAt
end
for i = 9, firstWrite - 1 do
  nextJ[ARGV[i]] = nil
  nextExp[ARGV[i]] = nil
end
for i = firstWrite, #ARGV, 3 do
  local exp = tonumber(ARGV[i + 1])
  if exp ~= nil and exp > now then
    nextJ[ARGV[i]] = ARGV[i + 2]
    nextExp[ARGV[i]] = exp
  else
    nextJ[ARGV[i]] = nil
    nextExp[ARGV[i]] = nil
  end
end

local count, maxExp, minExp = 0, nil, nil
local hset = { 'HSET', hashKey }
local reply = { 'OK' }
for k, j in pairs(nextJ) do
  count = count + 1
  if maxExp == nil or nextExp[k] > maxExp then maxExp = nextExp[k] end
  if minExp == nil or nextExp[k] < minExp then minExp = nextExp[k] end
  -- Only what changed is written (a refresh rewrites one field, not the hash).
  if liveJ[k] ~= j then
    hset[#hset + 1] = k
    hset[#hset + 1] = j
  end
  reply[#reply + 1] = j
end
if count > maxContacts then return fail('TOO_MANY') end

-- Step 8: the new state. Fields not in it go: removed, replaced by an expired write,
-- expired, or not a binding at all. A hash left empty disappears with its last field.
local hdel = { 'HDEL', hashKey }
for i = 1, #all, 2 do
  if nextJ[all[i]] == nil then hdel[#hdel + 1] = all[i] end
end
if #hdel > 2 then redis.call(unpack(hdel)) end
if #hset > 2 then redis.call(unpack(hset)) end
if evKey then
  for _, k in ipairs(liveKeys) do
    if nextJ[k] == nil then event('unregistered', liveJ[k]) end
  end
  for i = firstWrite, #ARGV, 3 do
    local k = ARGV[i]
    if nextJ[k] ~= nil then event(liveB[k] and 'refreshed' or 'registered', nextJ[k]) end
  end
end
reindex(hashKey, idxKey, user, now, margin, maxExp, minExp)
flush(user, now, count > 0)
return reply
`;

/**
 * Remove the listed keys (all when none are listed and ARGV[4] is '1').
 * KEYS: bindings hash, account index. ARGV: user, now, ttlMarginMs, all (1|0), <keys...>.
 * Reply: how many of the removed bindings were live.
 */
const REMOVE_LUA = `${LUA_PRELUDE}
local hashKey, idxKey = KEYS[1], KEYS[2]
local user = ARGV[1]
local now = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])
local removed = 0
local function gone(j)
  local b = decode(j)
  if b and b.expiresAt > now then
    removed = removed + 1
    event('removed', j)
  elseif b then
    event('expired', j)
  end
end
if ARGV[4] == '1' then
  local vals = redis.call('HVALS', hashKey)
  for _, j in ipairs(vals) do gone(j) end
  reindex(hashKey, idxKey, user, now, margin, nil, nil)
  flush(user, now, false)
  return removed
end
for i = 5, #ARGV do
  local j = redis.call('HGET', hashKey, ARGV[i])
  if j then
    gone(j)
    redis.call('HDEL', hashKey, ARGV[i])
  end
end
local maxExp, minExp = nil, nil
local vals = redis.call('HVALS', hashKey)
for _, j in ipairs(vals) do
  local b = decode(j)
  if b and b.expiresAt > now then
    if maxExp == nil or b.expiresAt > maxExp then maxExp = b.expiresAt end
    if minExp == nil or b.expiresAt < minExp then minExp = b.expiresAt end
  end
end
reindex(hashKey, idxKey, user, now, margin, maxExp, minExp)
flush(user, now, maxExp ~= nil)
return removed
`;

/**
 * The expiry sweep of one user (docs/events.md): lapsed bindings go, each with an
 * `expired` event. KEYS: bindings hash, account index, event stream, lapse index.
 * ARGV: user, now, ttlMarginMs. Reply: how many lapsed.
 */
const SWEEP_LUA = `${LUA_PRELUDE}
local hashKey, idxKey = KEYS[1], KEYS[2]
local user = ARGV[1]
local now = tonumber(ARGV[2])
local margin = tonumber(ARGV[3])
local all = redis.call('HGETALL', hashKey)
local lapsed, maxExp, minExp = 0, nil, nil
for i = 1, #all, 2 do
  local b = decode(all[i + 1])
  if b and b.expiresAt > now then
    if maxExp == nil or b.expiresAt > maxExp then maxExp = b.expiresAt end
    if minExp == nil or b.expiresAt < minExp then minExp = b.expiresAt end
  else
    if b then
      lapsed = lapsed + 1
      event('expired', all[i + 1])
    end
    redis.call('HDEL', hashKey, all[i])
  end
end
reindex(hashKey, idxKey, user, now, margin, maxExp, minExp)
flush(user, now, maxExp ~= nil)
return lapsed
`;

/**
 * The bindings of many AORs of one account (one Cluster slot: the keys share the
 * domain's hash tag). KEYS: binding hashes. Reply: one array of values per key.
 * One command instead of one HGETALL each: ioredis turns every HGETALL reply into
 * an object, which was a fifth of the CPU of listing 100 endpoints.
 */
const LOOKUP_MANY_LUA = `
local out = {}
for i = 1, #KEYS do out[i] = redis.call('HVALS', KEYS[i]) end
return out
`;

const REGISTER_SCRIPT = new LuaScript(REGISTER_LUA);
const REMOVE_SCRIPT = new LuaScript(REMOVE_LUA);
const SWEEP_SCRIPT = new LuaScript(SWEEP_LUA);
const LOOKUP_MANY_SCRIPT = new LuaScript(LOOKUP_MANY_LUA);

// ---------------------------------------------------------------------------
// Narrowing what comes back from Redis: the data may be old, foreign or corrupt.


function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}
function isStrOrNull(v: unknown): v is string | null {
  return v === null || typeof v === 'string';
}
function isNumOrNull(v: unknown): v is number | null {
  return v === null || (typeof v === 'number' && Number.isFinite(v));
}
function isNum(v: unknown): v is number {
  return typeof v === 'number' && Number.isFinite(v);
}
function isTransport(v: unknown): v is SipTransportName {
  return typeof v === 'string' && SIP_TRANSPORT_NAMES.has(v);
}

/** A stored binding, or null when the value is not one (it is then treated as absent). */
function parseBinding(json: unknown): Binding | null {
  const v = jsonObject(json);
  if (!v) return null;
  const { key, uri, contact, expiresAt, updatedAt, callId, cseq, userAgent, received, transport } = v;
  const { path, q, instanceId, regId, nodeId, connId, endpointId } = v;
  if (
    typeof key !== 'string' ||
    typeof uri !== 'string' ||
    typeof contact !== 'string' ||
    !isNum(expiresAt) ||
    !isNum(updatedAt) ||
    typeof callId !== 'string' ||
    !isNum(cseq) ||
    !isStrOrNull(userAgent) ||
    typeof received !== 'string' ||
    !isTransport(transport) ||
    !isStrOrNull(path) ||
    !isNumOrNull(q) ||
    !isStrOrNull(instanceId) ||
    !isNumOrNull(regId) ||
    !isStrOrNull(nodeId) ||
    !isStrOrNull(connId)
  ) {
    return null;
  }
  return {
    key, uri, contact, expiresAt, updatedAt, callId, cseq, userAgent, received, transport,
    path, q, instanceId, regId, nodeId, connId,
    ...(typeof endpointId === 'string' ? { endpointId } : {}),
  };
}

function liveSorted(values: readonly unknown[], now: number): Binding[] {
  const out: Binding[] = [];
  for (const j of values) {
    const b = parseBinding(j);
    if (b !== null && b.expiresAt > now) out.push(b);
  }
  return out.sort(compareBindings);
}

/** HGETALL replies as a flat field/value object; we only need the values. */
function hashValues(reply: unknown): unknown[] {
  return isRecord(reply) ? Object.values(reply) : [];
}

/**
 * Production location store on Redis (ioredis). Same semantics as
 * MemoryLocationStore, proven by test/contract/location-store.test.ts.
 *
 * @remarks
 * Keys: `<prefix>loc:{<domain>}:<user>` (hash: binding key → binding JSON) and
 * `<prefix>locidx:{<domain>}` (zset: user → latest expiry ms). The domain is the
 * Cluster hash tag. register() is one EVALSHA of a Lua script that applies RFC 3261
 * §10.3 steps 6-8, drops expired bindings it meets, rewrites the state, and
 * refreshes the hash TTL and the index on every accepted REGISTER. Every Redis
 * failure rejects with {@link StoreUnavailableError}.
 *
 * The connection is a single `Redis`: lookupMany pipelines keys of many slots,
 * which a Cluster client would refuse.
 */
export interface RedisLocationStoreOptions extends RedisStoreOptions {
  /** Keep registration events (docs/events.md). @default true */
  events?: boolean;
  /** Events may have been written for this account domain (the event streams of every node wake up). */
  onEvents?: (domain: string) => void;
}

/** Accounts swept per tick, and users per account (the rest wait for the next tick). */
const SWEEP_ACCOUNTS = 500;
const SWEEP_USERS = 1000;
/** How long due hints are gathered before they are written. */
const HINT_BATCH_MS = 100;
/** How often the sweep also rescans every account's lapse index (lost hints). */
const SWEEP_RESCAN_MS = 60_000;

export class RedisLocationStore extends RedisBacked implements LocationStore {
  readonly #ttlMarginMs: number;
  readonly #pingTimeoutMs: number;
  readonly #events: boolean;
  readonly #onEvents: ((domain: string) => void) | undefined;
  readonly #due: string;
  readonly #hints = new Map<string, number>();
  #hintTimer: NodeJS.Timeout | null = null;
  #rescannedAt = Date.now();

  constructor(redis: RedisClient, opts: RedisLocationStoreOptions = {}) {
    super(redis, opts);
    this.#ttlMarginMs = opts.ttlMarginMs ?? 10_000;
    this.#pingTimeoutMs = opts.pingTimeoutMs ?? 1_000;
    this.#events = opts.events !== false;
    this.#onEvents = opts.onEvents;
    this.#due = `${this.prefix}{sweep}:due`;
  }

  /** The script keys of an AOR: with the event keys when events are kept. */
  #keys(aor: Aor): string[] {
    const k = redisLocationKeys(aor, this.prefix);
    return this.#events ? [k.bindings, k.index, k.events, k.lapses] : [k.bindings, k.index];
  }

  /**
   * After a change: the account's earliest expiry may be earlier now (the sweep's
   * hint, `ZADD LT`: only ever lowered here), and every node's event streams wake up.
   */
  #changed(aor: Aor, earliest: number | null): void {
    if (!this.#events) return;
    if (earliest !== null) {
      // Gathered for HINT_BATCH_MS: one ZADD per account per batch, not one per REGISTER.
      const had = this.#hints.get(aor.domain);
      if (had === undefined || earliest < had) this.#hints.set(aor.domain, earliest);
      this.#hintTimer ??= setTimeout(() => this.#flushHints(), HINT_BATCH_MS);
    }
    this.#onEvents?.(aor.domain);
  }

  #flushHints(): void {
    this.#hintTimer = null;
    if (this.#hints.size === 0) return;
    const args: Array<string | number> = [];
    for (const [domain, at] of this.#hints) args.push(at, domain);
    this.#hints.clear();
    this.redis.zadd(this.#due, 'LT', ...args).catch(() => {
      // Lost hints: the sweep's slow pass (SWEEP_RESCAN_MS) finds those accounts again.
    });
  }

  /**
   * The sweep's slow pass: every account with a lapse index gets its earliest expiry
   * back into the due hint, in case a hint was lost (a process died within
   * HINT_BATCH_MS of a REGISTER, or Redis refused the write).
   */
  async #rescan(): Promise<void> {
    const match = `${globEscape(this.prefix)}loclapse:*`;
    for (const node of redisMasters(this.redis)) {
      let cursor = '0';
      do {
        const [next, keys] = await node.scan(cursor, 'MATCH', match, 'COUNT', 500);
        cursor = next;
        for (const key of keys) {
          const top = await node.zrange(key, 0, 0, 'WITHSCORES');
          const domain = /\{(.*)\}$/.exec(key)?.[1];
          if (top.length === 2 && domain !== undefined) await this.redis.zadd(this.#due, 'LT', Number(top[1]), domain);
        }
      } while (cursor !== '0');
    }
  }

  async register(aor: Aor, op: RegisterOp): Promise<RegisterResult> {
    const args: Array<string | number> = [
      aor.user,
      op.now,
      op.callId,
      op.cseq,
      op.removeAll ? '1' : '0',
      op.maxContacts,
      this.#ttlMarginMs,
      op.removes.length,
      ...op.removes,
    ];
    for (const w of op.writes) {
      args.push(w.key, w.expiresAt, JSON.stringify(bindingFromWrite(w, op.now)));
    }
    const reply = await this.guard('register', () => this.evalScript(REGISTER_SCRIPT, this.#keys(aor), args));
    if (!Array.isArray(reply) || reply.length === 0) throw unavailable('register', new Error('unexpected script reply'));
    const [status, ...jsons] = reply;
    const bindings = liveSorted(jsons, op.now);
    if (status === 'OK') {
      let earliest: number | null = null;
      for (const b of bindings) if (earliest === null || b.expiresAt < earliest) earliest = b.expiresAt;
      this.#changed(aor, earliest);
      return { ok: true, bindings };
    }
    if (status === 'OUT_OF_ORDER' || status === 'TOO_MANY') return { ok: false, code: status, bindings };
    throw unavailable('register', new Error(`unexpected script status ${String(status)}`));
  }

  async lookup(aor: Aor, now: number = Date.now()): Promise<Binding[]> {
    const key = redisLocationKeys(aor, this.prefix).bindings;
    const reply = await this.guard('lookup', () => this.redis.hgetall(key));
    return liveSorted(hashValues(reply), now);
  }

  async lookupMany(aors: Aor[], now: number = Date.now()): Promise<Map<string, Binding[]>> {
    const out = new Map<string, Binding[]>();
    if (aors.length === 0) return out;
    // One script per account domain (its keys share a hash tag), all sent together.
    const byDomain = new Map<string, Aor[]>();
    for (const aor of aors) {
      const list = byDomain.get(aor.domain);
      if (list) list.push(aor);
      else byDomain.set(aor.domain, [aor]);
    }
    const groups = [...byDomain.values()];
    const replies = await this.guard('lookupMany', () =>
      Promise.all(groups.map((g) => this.evalScript(LOOKUP_MANY_SCRIPT, g.map((a) => redisLocationKeys(a, this.prefix).bindings), []))),
    );
    const found = new Map<string, Binding[]>();
    groups.forEach((g, gi) => {
      const r = replies[gi];
      if (!Array.isArray(r) || r.length !== g.length) throw unavailable('lookupMany', new Error('unexpected script reply'));
      g.forEach((aor, i) => found.set(aorKey(aor), liveSorted(Array.isArray(r[i]) ? r[i] : [], now)));
    });
    // In the order asked.
    for (const aor of aors) {
      const k = aorKey(aor);
      out.set(k, found.get(k) ?? []);
    }
    return out;
  }

  removeAll(aor: Aor): Promise<number> {
    return this.#remove(aor, null);
  }

  removeKeys(aor: Aor, keys: string[]): Promise<number> {
    return this.#remove(aor, keys);
  }

  /** removeAll (keys = null) or removeKeys: one script call that also fixes the index. */
  async #remove(aor: Aor, keys: string[] | null): Promise<number> {
    if (keys !== null && keys.length === 0) return 0;
    const args: Array<string | number> = [aor.user, Date.now(), this.#ttlMarginMs, keys === null ? '1' : '0', ...(keys ?? [])];
    const reply = await this.guard('remove', () => this.evalScript(REMOVE_SCRIPT, this.#keys(aor), args));
    if (typeof reply !== 'number') throw unavailable('remove', new Error('unexpected script reply'));
    this.#changed(aor, null);
    return reply;
  }

  /**
   * The expiry sweep (docs/events.md "Expiry sweep"), run every second by every
   * process; one of them (a 900 ms lock) does the work of each tick. Accounts are
   * found through the due hint (domain → earliest expiry), users through the
   * account's lapse index; each user is swept by one script that removes its lapsed
   * bindings and writes their `expired` events. The hint is then set to the
   * account's next expiry and re-lowered from the index, so that a REGISTER racing
   * with the sweep cannot leave it too late.
   */
  async sweepExpired(now: number = Date.now()): Promise<number> {
    if (!this.#events) return 0;
    const lock = await this.guard('sweep', () => this.redis.set(`${this.prefix}{sweep}:lock`, '1', 'PX', 900, 'NX'));
    if (lock !== 'OK') return 0;
    if (now - this.#rescannedAt > SWEEP_RESCAN_MS) {
      this.#rescannedAt = now;
      await this.guard('sweep', () => this.#rescan());
    }
    const domains = await this.guard('sweep', () => this.redis.zrangebyscore(this.#due, '-inf', now, 'LIMIT', 0, SWEEP_ACCOUNTS));
    let n = 0;
    for (const domain of domains) {
      const { lapses } = redisEventKeys(domain, this.prefix);
      const users = await this.guard('sweep', () => this.redis.zrangebyscore(lapses, '-inf', now, 'LIMIT', 0, SWEEP_USERS));
      for (const user of users) {
        const r = await this.guard('sweep', () => this.evalScript(SWEEP_SCRIPT, this.#keys({ domain, user }), [user, now, this.#ttlMarginMs]));
        if (typeof r === 'number') n += r;
      }
      const earliest = async (): Promise<number | null> => {
        const top = await this.redis.zrange(lapses, 0, 0, 'WITHSCORES');
        return top.length === 2 ? Number(top[1]) : null;
      };
      await this.guard('sweep', async () => {
        const next = await earliest();
        if (next === null) await this.redis.zrem(this.#due, domain);
        else await this.redis.zadd(this.#due, next, domain);
        const again = await earliest();
        if (again !== null) await this.redis.zadd(this.#due, 'LT', again, domain);
      });
      if (users.length > 0) this.#onEvents?.(domain);
    }
    return n;
  }

  async newestRegistrationEventId(domain: string): Promise<string | null> {
    if (!this.#events) return null;
    const { events } = redisEventKeys(domain, this.prefix);
    const reply = await this.guard('events', () => this.redis.xrevrange(events, '+', '-', 'COUNT', 1));
    return reply[0]?.[0] ?? null;
  }

  async registrationEvents(domain: string, after: string | null, limit: number): Promise<RegistrationEvent[]> {
    if (!this.#events) return [];
    const { events } = redisEventKeys(domain, this.prefix);
    const reply = await this.guard('events', () => this.redis.xrange(events, after === null ? '-' : `(${after}`, '+', 'COUNT', limit));
    const out: RegistrationEvent[] = [];
    for (const [id, fields] of reply) {
      const f = new Map<string, string>();
      for (let i = 0; i + 1 < fields.length; i += 2) f.set(fields[i] as string, fields[i + 1] as string);
      const binding = parseBinding(f.get('b'));
      const event = f.get('e') as RegistrationEventKind | undefined;
      const user = f.get('u');
      if (!binding || !event || !user) continue;
      out.push({ id, event, at: Number(f.get('t')), aor: { domain, user }, binding, registered: f.get('r') === '1' });
    }
    return out;
  }

  /** Whole-keyspace count by SCAN: metrics and tests only, never a request path. */
  async countLive(now: number = Date.now()): Promise<Record<SipTransportName, number>> {
    const counts: Record<SipTransportName, number> = { udp: 0, tcp: 0, tls: 0, ws: 0, wss: 0 };
    const match = `${globEscape(this.prefix)}loc:*`;
    // Every master of a cluster (a SCAN through the cluster client sees one node only).
    for (const node of redisMasters(this.redis)) {
      let cursor = '0';
      do {
        const [next, keys] = await this.guard('countLive', () => node.scan(cursor, 'MATCH', match, 'COUNT', 500));
        cursor = next;
        if (keys.length === 0) continue;
        const p = node.pipeline();
        for (const key of keys) p.hvals(key);
        const replies = await this.guard('countLive', () => p.exec());
        for (const r of replies ?? []) {
          const [err, vals] = r;
          // A key that changed type under us (not ours) is skipped, not fatal.
          if (err || !Array.isArray(vals)) continue;
          for (const b of liveSorted(vals, now)) counts[b.transport]++;
        }
      } while (cursor !== '0');
    }
    return counts;
  }

  override async close(): Promise<void> {
    if (this.#hintTimer) clearTimeout(this.#hintTimer);
    this.#flushHints();
    await super.close();
  }

  async ping(): Promise<boolean> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), this.#pingTimeoutMs);
      timer.unref();
    });
    try {
      return await Promise.race([this.redis.ping().then((r) => r === 'PONG', () => false), timeout]);
    } finally {
      clearTimeout(timer);
    }
  }
}
