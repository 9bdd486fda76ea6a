/**
 * The Redis directory's key layout, Lua scripts and reply parsing (README
 * "Storage"): every key of an account carries its Auth ID as hash tag, so each
 * script touches one Cluster slot. The class that uses them: ./redis.ts.
 */
import { StoreUnavailableError } from '../../errors.js';
import { jsonObject } from '../redis/json.js';
import { LuaScript } from '../redis/script.js';
import type { ApplicationRecord, EndpointRecord } from './directory.js';

/**
 * Keys of one account. Every key carries the hash tag `{<auth_id>}`, so each
 * multi-key operation of an account lands in one Cluster slot.
 */
export function accountKeys(prefix: string, authId: string) {
  const p = `${prefix}dir:{${authId}}:`;
  return {
    /** string: account JSON */
    account: `${p}account`,
    /** string: parent Auth ID — present when this Auth ID is a sub-account's (its own tag) */
    subOf: `${p}subof`,
    /** hash: sub-account id → JSON; zset: id by creation time */
    subs: `${p}sub`,
    subIdx: `${p}sub:idx`,
    /** hash: app id → JSON (without the default flag); zset: id by creation time */
    apps: `${p}app`,
    appIdx: `${p}app:idx`,
    /** zset per sub-account: its app ids */
    appSubIdx: (sub: string) => `${p}app:sub:${sub}`,
    /** set per app: endpoint ids using it */
    appEps: (appId: string) => `${p}app:eps:${appId}`,
    /** hash: owner scope ('' main, else sub id) → default endpoint app id */
    appDefaults: `${p}app:default`,
    /** hash: endpoint id → JSON (without appId); zset: id by creation time */
    eps: `${p}ep`,
    epIdx: `${p}ep:idx`,
    /** hash: endpoint id → app id */
    epApp: `${p}ep:app`,
    /** zset per sub-account: its endpoint ids */
    epSubIdx: (sub: string) => `${p}ep:sub:${sub}`,
    /** hash: lower-cased username → endpoint id; set: retired lower-cased usernames */
    usernames: `${p}ep:user`,
    retired: `${p}ep:retired`,
    idem: (id: string) => `${p}idem:${id}`,
  };
}


// Lua: HGET of a missing field is `false`; `or ''` turns it into the empty string
// the callers pass for "none". Every update is a compare-and-set on the record
// JSON read before, so concurrent writers on one shared connection never lose an
// update: a 'conflict' makes the caller re-read and retry.

/** KEYS: sub hash, sub idx. ARGV: id, json, score. */
export const CREATE_SUB = new LuaScript(
  `
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 'id_taken' end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 'ok'`,
);

/** KEYS: hash. ARGV: field, old json, new json. */
export const CAS_HASH = new LuaScript(
  `
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 'conflict' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 'ok'`,
);

/** KEYS: sub hash, sub idx, ep-sub idx, app-sub idx, app defaults. ARGV: id. */
export const DELETE_SUB = new LuaScript(
  `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 'not_found' end
if redis.call('ZCARD', KEYS[3]) > 0 or redis.call('ZCARD', KEYS[4]) > 0 then return 'not_empty' end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
return 'ok'`,
);

/** KEYS: apps, app idx, app defaults, subs, app-sub idx (or app idx). ARGV: id, json, score, scope, setDefault, sub. */
export const CREATE_APP = new LuaScript(
  `
if ARGV[6] ~= '' and redis.call('HEXISTS', KEYS[4], ARGV[6]) == 0 then return 'no_subaccount' end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 'id_taken' end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
if ARGV[6] ~= '' then redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1]) end
if ARGV[5] == '1' then redis.call('HSET', KEYS[3], ARGV[4], ARGV[1]) end
return 'ok'`,
);

/** KEYS: apps, app defaults. ARGV: id, old json, new json, default op (set|clear|keep), scope. */
export const UPDATE_APP = new LuaScript(
  `
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 'conflict' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
if ARGV[4] == 'set' then
  redis.call('HSET', KEYS[2], ARGV[5], ARGV[1])
elseif ARGV[4] == 'clear' and redis.call('HGET', KEYS[2], ARGV[5]) == ARGV[1] then
  redis.call('HDEL', KEYS[2], ARGV[5])
end
return 'ok'`,
);

/** KEYS: apps, app idx, app eps, ep app, app defaults, app-sub idx (or app idx). ARGV: id, scope. */
export const DELETE_APP = new LuaScript(
  `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 0 end
for _, ep in ipairs(redis.call('SMEMBERS', KEYS[3])) do
  if redis.call('HGET', KEYS[4], ep) == ARGV[1] then redis.call('HDEL', KEYS[4], ep) end
end
redis.call('DEL', KEYS[3])
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
if redis.call('HGET', KEYS[5], ARGV[2]) == ARGV[1] then redis.call('HDEL', KEYS[5], ARGV[2]) end
return 1`,
);

/**
 * KEYS: eps, ep app, ep idx, usernames, retired, ep-sub idx (or ep idx), subs, apps, app eps (or ep app).
 * ARGV: id, json, lower username, score, sub ('' none), app ('' none).
 */
export const CREATE_EP = new LuaScript(
  `
if redis.call('SISMEMBER', KEYS[5], ARGV[3]) == 1 then return 'username_retired' end
if redis.call('HEXISTS', KEYS[4], ARGV[3]) == 1 then return 'username_taken' end
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 1 then return 'id_taken' end
if ARGV[5] ~= '' and redis.call('HEXISTS', KEYS[7], ARGV[5]) == 0 then return 'no_subaccount' end
if ARGV[6] ~= '' and redis.call('HEXISTS', KEYS[8], ARGV[6]) == 0 then return 'no_application' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
redis.call('ZADD', KEYS[3], ARGV[4], ARGV[1])
redis.call('HSET', KEYS[4], ARGV[3], ARGV[1])
if ARGV[5] ~= '' then redis.call('ZADD', KEYS[6], ARGV[4], ARGV[1]) end
if ARGV[6] ~= '' then
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[6])
  redis.call('SADD', KEYS[9], ARGV[1])
end
return 'ok'`,
);

/**
 * KEYS: eps, ep app, apps, new app eps (or ep app), old app eps (or ep app).
 * ARGV: id, old json, new json, app op (set|clear|keep), new app, old app.
 */
export const UPDATE_EP = new LuaScript(
  `
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 'conflict' end
local cur = redis.call('HGET', KEYS[2], ARGV[1]) or ''
if cur ~= ARGV[6] then return 'conflict' end
if ARGV[4] == 'set' then
  if redis.call('HEXISTS', KEYS[3], ARGV[5]) == 0 then return 'no_application' end
  if cur ~= '' then redis.call('SREM', KEYS[5], ARGV[1]) end
  redis.call('HSET', KEYS[2], ARGV[1], ARGV[5])
  redis.call('SADD', KEYS[4], ARGV[1])
elseif ARGV[4] == 'clear' then
  if cur ~= '' then redis.call('SREM', KEYS[5], ARGV[1]) end
  redis.call('HDEL', KEYS[2], ARGV[1])
end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 'ok'`,
);

/**
 * KEYS: eps, ep app, ep idx, usernames, retired, ep-sub idx (or ep idx), old app eps (or ep app).
 * ARGV: id, old json, lower username, retire, old app.
 */
export const DELETE_EP = new LuaScript(
  `
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 'conflict' end
local cur = redis.call('HGET', KEYS[2], ARGV[1]) or ''
if cur ~= ARGV[5] then return 'conflict' end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('HDEL', KEYS[2], ARGV[1])
redis.call('ZREM', KEYS[3], ARGV[1])
redis.call('ZREM', KEYS[6], ARGV[1])
if redis.call('HGET', KEYS[4], ARGV[3]) == ARGV[1] then redis.call('HDEL', KEYS[4], ARGV[3]) end
if ARGV[4] == '1' then redis.call('SADD', KEYS[5], ARGV[3]) end
if cur ~= '' then redis.call('SREM', KEYS[7], ARGV[1]) end
return 'ok'`,
);

/**
 * One page of endpoints in one round trip: the index's size, the page's ids in
 * index order (ZRANGE: score = creation ms, then id), their records and their
 * application ids. Read-only.
 * KEYS: index (ep idx or ep-sub idx), eps, ep app. ARGV: start, stop.
 * Reply: {total, ids, jsons, apps} (a missing record or app id is nil).
 */
export const PAGE_EP = new LuaScript(
  `
local ids = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2])
local total = redis.call('ZCARD', KEYS[1])
if #ids == 0 then return {total, {}, {}, {}} end
return {total, ids, redis.call('HMGET', KEYS[2], unpack(ids)), redis.call('HMGET', KEYS[3], unpack(ids))}`,
);

/** Largest page read by {@link PAGE_EP} (its ids are unpacked onto the Lua stack). */
export const PAGE_SCRIPT_MAX = 1000;

/** How many times a compare-and-set is retried under contention before giving up. */
export const CAS_ATTEMPTS = 20;

/**
 * Parse a stored record, checking the fields it must have. The directory wrote
 * every record itself; a record that does not parse is treated as absent rather
 * than trusted.
 */
export function parseJson<T>(json: string | null | undefined, required: readonly string[]): T | null {
  const v = jsonObject(json);
  if (!v) return null;
  for (const k of required) if (!(k in v)) return null;
  return v as T;
}

export const ACCOUNT_FIELDS = ['authId', 'tokenHash', 'sipDomain', 'createdAt'] as const;
export const SUB_FIELDS = ['authId', 'parentAuthId', 'tokenHash', 'kycMode', 'createdAt'] as const;
export const APP_FIELDS = ['appId', 'accountAuthId', 'settings', 'createdAt'] as const;
export const EP_FIELDS = ['endpointId', 'accountAuthId', 'username', 'alias', 'createdAt'] as const;
export const IDEM_FIELDS = ['state', 'fingerprint', 'status', 'body'] as const;

type StoredEndpoint = Omit<EndpointRecord, 'appId'>;
export type StoredApplication = Omit<ApplicationRecord, 'defaultEndpointApp'>;

export function endpointJson(e: EndpointRecord): string {
  const { appId: _appId, ...rest } = e;
  return JSON.stringify(rest);
}

export function appJson(a: ApplicationRecord): string {
  const { defaultEndpointApp: _d, ...rest } = a;
  return JSON.stringify(rest);
}

export const score = (iso: string): number => Date.parse(iso);


/**
 * Endpoint records from the replies of HMGET on the records and on the app ids
 * of `ids` (same order); missing or unparsable records are skipped.
 */
export function endpointsOf(ids: string[], jsons: Array<string | null>, apps: Array<string | null>): Array<{ rec: EndpointRecord; json: string; app: string }> {
  const out: Array<{ rec: EndpointRecord; json: string; app: string }> = [];
  for (let i = 0; i < ids.length; i++) {
    const json = jsons[i];
    if (typeof json !== 'string') continue;
    const stored = parseJson<StoredEndpoint>(json, EP_FIELDS);
    if (!stored) continue;
    const app = apps[i];
    // The parsed object is ours alone: complete it in place rather than copy it.
    const rec = stored as EndpointRecord;
    rec.appId = typeof app === 'string' && app !== '' ? app : null;
    out.push({ rec, json, app: typeof app === 'string' ? app : '' });
  }
  return out;
}

/** A reply array as strings (anything else as null). */
export function stringsOf(v: unknown): Array<string | null> {
  return Array.isArray(v) ? v.map((x) => (typeof x === 'string' ? x : null)) : [];
}

export type PipelineResult = Array<[Error | null, unknown]> | null;

/** The value of one pipelined command, rethrowing its error. */
export function pipelineValue(res: PipelineResult, i: number): unknown {
  const entry = res?.[i];
  if (!entry) throw new StoreUnavailableError('redis pipeline returned no result');
  if (entry[0]) throw new StoreUnavailableError(`redis pipeline command failed: ${entry[0].message}`, { cause: entry[0] });
  return entry[1];
}

export function pipelineString(res: PipelineResult, i: number): string | null {
  const v = pipelineValue(res, i);
  return typeof v === 'string' ? v : null;
}

export function pipelineArray(res: PipelineResult, i: number): Array<string | null> {
  return stringsOf(pipelineValue(res, i));
}
