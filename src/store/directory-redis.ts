import { createHash } from 'node:crypto';
import type { RedisClient } from './redis-client.js';
import { StoreUnavailableError } from '../errors.js';
import {
  applyEndpointPatch,
  applySubAccountPatch,
  compareByCreation,
  endpointMatches,
  type AccountRecord,
  type ApplicationPatch,
  type ApplicationRecord,
  type CreateApplicationResult,
  type CreateEndpointResult,
  type DeleteSubAccountResult,
  type Directory,
  type EndpointPatch,
  type EndpointQuery,
  type EndpointRecord,
  type IdempotencyRecord,
  type Page,
  type PageRequest,
  type PrincipalRecord,
  type SubAccountPatch,
  type SubAccountRecord,
  type UpdateEndpointResult,
} from './directory.js';

/** Options of {@link RedisDirectory}. */
export interface RedisDirectoryOptions {
  /** Prefix of every key (the location stores use the same default). @default 'sipedge:' */
  prefix?: string;
  /**
   * Whether close() quits the connection. By default the connection belongs to
   * its creator (the composition root shares one with the location stores).
   * @default false
   */
  closeConnection?: boolean;
  /** Endpoints read per round trip when a filtered list must scan an account. @default 500 */
  scanBatch?: number;
}

/**
 * Keys of one account. Every key carries the hash tag `{<auth_id>}`, so each
 * multi-key operation of an account lands in one Cluster slot.
 */
function accountKeys(prefix: string, authId: string) {
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

interface LuaScript {
  lua: string;
  sha: string;
  numKeys: number;
}

function script(numKeys: number, lua: string): LuaScript {
  return { lua, numKeys, sha: createHash('sha1').update(lua).digest('hex') };
}

// Lua: HGET of a missing field is `false`; `or ''` turns it into the empty string
// the callers pass for "none". Every update is a compare-and-set on the record
// JSON read before, so concurrent writers on one shared connection never lose an
// update: a 'conflict' makes the caller re-read and retry.

/** KEYS: sub hash, sub idx. ARGV: id, json, score. */
const CREATE_SUB = script(
  2,
  `
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 'id_taken' end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
return 'ok'`,
);

/** KEYS: hash. ARGV: field, old json, new json. */
const CAS_HASH = script(
  1,
  `
if (redis.call('HGET', KEYS[1], ARGV[1]) or '') ~= ARGV[2] then return 'conflict' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[3])
return 'ok'`,
);

/** KEYS: sub hash, sub idx, ep-sub idx, app-sub idx, app defaults. ARGV: id. */
const DELETE_SUB = script(
  5,
  `
if redis.call('HEXISTS', KEYS[1], ARGV[1]) == 0 then return 'not_found' end
if redis.call('ZCARD', KEYS[3]) > 0 or redis.call('ZCARD', KEYS[4]) > 0 then return 'not_empty' end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
redis.call('HDEL', KEYS[5], ARGV[1])
return 'ok'`,
);

/** KEYS: apps, app idx, app defaults, subs, app-sub idx (or app idx). ARGV: id, json, score, scope, setDefault, sub. */
const CREATE_APP = script(
  5,
  `
if ARGV[6] ~= '' and redis.call('HEXISTS', KEYS[4], ARGV[6]) == 0 then return 'no_subaccount' end
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 'id_taken' end
redis.call('ZADD', KEYS[2], ARGV[3], ARGV[1])
if ARGV[6] ~= '' then redis.call('ZADD', KEYS[5], ARGV[3], ARGV[1]) end
if ARGV[5] == '1' then redis.call('HSET', KEYS[3], ARGV[4], ARGV[1]) end
return 'ok'`,
);

/** KEYS: apps, app defaults. ARGV: id, old json, new json, default op (set|clear|keep), scope. */
const UPDATE_APP = script(
  2,
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
const DELETE_APP = script(
  6,
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
const CREATE_EP = script(
  9,
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
const UPDATE_EP = script(
  5,
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
const DELETE_EP = script(
  7,
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
const PAGE_EP = script(
  3,
  `
local ids = redis.call('ZRANGE', KEYS[1], ARGV[1], ARGV[2])
local total = redis.call('ZCARD', KEYS[1])
if #ids == 0 then return {total, {}, {}, {}} end
return {total, ids, redis.call('HMGET', KEYS[2], unpack(ids)), redis.call('HMGET', KEYS[3], unpack(ids))}`,
);

/** Largest page read by {@link PAGE_EP} (its ids are unpacked onto the Lua stack). */
const PAGE_SCRIPT_MAX = 1000;

/** How many times a compare-and-set is retried under contention before giving up. */
const CAS_ATTEMPTS = 20;

function isRecord(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

/**
 * Parse a stored record, checking the fields it must have. The directory wrote
 * every record itself; a record that does not parse is treated as absent rather
 * than trusted.
 */
function parseJson<T>(json: string | null | undefined, required: readonly string[]): T | null {
  if (typeof json !== 'string') return null;
  let v: unknown;
  try {
    v = JSON.parse(json);
  } catch {
    return null;
  }
  if (!isRecord(v)) return null;
  for (const k of required) if (!(k in v)) return null;
  return v as T;
}

const ACCOUNT_FIELDS = ['authId', 'tokenHash', 'sipDomain', 'createdAt'] as const;
const SUB_FIELDS = ['authId', 'parentAuthId', 'tokenHash', 'kycMode', 'createdAt'] as const;
const APP_FIELDS = ['appId', 'accountAuthId', 'settings', 'createdAt'] as const;
const EP_FIELDS = ['endpointId', 'accountAuthId', 'username', 'alias', 'createdAt'] as const;
const IDEM_FIELDS = ['state', 'fingerprint', 'status', 'body'] as const;

type StoredEndpoint = Omit<EndpointRecord, 'appId'>;
type StoredApplication = Omit<ApplicationRecord, 'defaultEndpointApp'>;

function endpointJson(e: EndpointRecord): string {
  const { appId: _appId, ...rest } = e;
  return JSON.stringify(rest);
}

function appJson(a: ApplicationRecord): string {
  const { defaultEndpointApp: _d, ...rest } = a;
  return JSON.stringify(rest);
}

const score = (iso: string): number => Date.parse(iso);

/**
 * The production directory on Redis (ioredis).
 *
 * @remarks
 * Layout (prefix `sipedge:`): every key of an account is
 * `sipedge:dir:{<auth_id>}:…` — the account JSON, hashes of sub-accounts,
 * applications and endpoints (id → JSON), creation-time sorted sets indexing each
 * (lists page with ZRANGE, never KEYS or SCAN), a username index and a retired
 * username set, per-sub-account and per-application indexes, and idempotency
 * records with a TTL. A sub-account's Auth ID additionally owns one key
 * `sipedge:dir:{<sub_auth_id>}:subof` naming its parent, so authentication finds it
 * in one round trip plus one. Each mutation is one Lua script (atomic, one slot);
 * updates are compare-and-set on the JSON read before. Every Redis failure rejects
 * with StoreUnavailableError.
 */
export class RedisDirectory implements Directory {
  readonly #redis: RedisClient;
  readonly #prefix: string;
  readonly #closeConnection: boolean;
  readonly #scanBatch: number;

  constructor(redis: RedisClient, opts: RedisDirectoryOptions = {}) {
    if (redis.options.keyPrefix) {
      throw new Error('RedisDirectory: do not set the ioredis `keyPrefix` option; pass `prefix` in the options');
    }
    this.#redis = redis;
    this.#prefix = opts.prefix ?? 'sipedge:';
    this.#closeConnection = opts.closeConnection ?? false;
    this.#scanBatch = opts.scanBatch ?? 500;
  }

  #keys(authId: string) {
    return accountKeys(this.#prefix, authId);
  }

  async #guard<T>(what: string, f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      if (err instanceof StoreUnavailableError) throw err;
      const msg = err instanceof Error ? err.message : String(err);
      throw new StoreUnavailableError(`redis directory ${what} failed: ${msg}`, { cause: err });
    }
  }

  async #eval(s: LuaScript, keys: string[], args: Array<string | number>): Promise<unknown> {
    try {
      return await this.#redis.evalsha(s.sha, s.numKeys, ...keys, ...args);
    } catch (err) {
      if (err instanceof Error && err.message.includes('NOSCRIPT')) {
        return await this.#redis.eval(s.lua, s.numKeys, ...keys, ...args);
      }
      throw err;
    }
  }

  // --- accounts -------------------------------------------------------------

  async createAccount(account: AccountRecord): Promise<boolean> {
    const k = this.#keys(account.authId);
    return this.#guard('createAccount', async () => {
      // Same slot: the account key and the sub-account pointer of this Auth ID.
      if ((await this.#redis.exists(k.subOf)) === 1) return false;
      const r = await this.#redis.set(k.account, JSON.stringify(account), 'NX');
      return r === 'OK';
    });
  }

  async getAccount(authId: string): Promise<AccountRecord | null> {
    const k = this.#keys(authId);
    const json = await this.#guard('getAccount', () => this.#redis.get(k.account));
    return parseJson<AccountRecord>(json, ACCOUNT_FIELDS);
  }

  async findPrincipal(authId: string): Promise<PrincipalRecord | null> {
    const k = this.#keys(authId);
    const [accountJson, parent] = await this.#guard('findPrincipal', () => this.#redis.mget(k.account, k.subOf));
    const account = parseJson<AccountRecord>(accountJson, ACCOUNT_FIELDS);
    if (account) return { kind: 'account', account };
    if (typeof parent !== 'string') return null;
    const pk = this.#keys(parent);
    const res = await this.#guard('findPrincipal', () =>
      this.#redis.pipeline().get(pk.account).hget(pk.subs, authId).exec(),
    );
    const parentAccount = parseJson<AccountRecord>(pipelineString(res, 0), ACCOUNT_FIELDS);
    const sub = parseJson<SubAccountRecord>(pipelineString(res, 1), SUB_FIELDS);
    if (!parentAccount || !sub) return null;
    return { kind: 'subaccount', account: parentAccount, subAccount: sub };
  }

  // --- sub-accounts -----------------------------------------------------------

  async createSubAccount(sub: SubAccountRecord): Promise<boolean> {
    const own = this.#keys(sub.authId);
    const k = this.#keys(sub.parentAuthId);
    return this.#guard('createSubAccount', async () => {
      if ((await this.#redis.exists(own.account)) === 1) return false;
      // The pointer first (its own slot): it reserves the Auth ID. A pointer without
      // a record names nothing (findPrincipal returns null).
      if ((await this.#redis.set(own.subOf, sub.parentAuthId, 'NX')) !== 'OK') return false;
      const r = await this.#eval(CREATE_SUB, [k.subs, k.subIdx], [sub.authId, JSON.stringify(sub), score(sub.createdAt)]);
      if (r !== 'ok') {
        await this.#redis.del(own.subOf);
        return false;
      }
      return true;
    });
  }

  async getSubAccount(accountAuthId: string, subAuthId: string): Promise<SubAccountRecord | null> {
    const k = this.#keys(accountAuthId);
    const json = await this.#guard('getSubAccount', () => this.#redis.hget(k.subs, subAuthId));
    return parseJson<SubAccountRecord>(json, SUB_FIELDS);
  }

  async listSubAccounts(accountAuthId: string, p: PageRequest): Promise<Page<SubAccountRecord>> {
    const k = this.#keys(accountAuthId);
    const { total, ids } = await this.#zpage(k.subIdx, p);
    const jsons = ids.length ? await this.#guard('listSubAccounts', () => this.#redis.hmget(k.subs, ...ids)) : [];
    const items = jsons.map((j) => parseJson<SubAccountRecord>(j, SUB_FIELDS)).filter((s): s is SubAccountRecord => s !== null);
    return { total, items };
  }

  async updateSubAccount(accountAuthId: string, subAuthId: string, patch: SubAccountPatch): Promise<SubAccountRecord | null> {
    const k = this.#keys(accountAuthId);
    for (let i = 0; i < CAS_ATTEMPTS; i++) {
      const old = await this.#guard('updateSubAccount', () => this.#redis.hget(k.subs, subAuthId));
      const cur = parseJson<SubAccountRecord>(old, SUB_FIELDS);
      if (!cur || old === null) return null;
      const next = applySubAccountPatch(cur, patch);
      const r = await this.#guard('updateSubAccount', () => this.#eval(CAS_HASH, [k.subs], [subAuthId, old, JSON.stringify(next)]));
      if (r === 'ok') return next;
    }
    throw new StoreUnavailableError('redis directory updateSubAccount: too much contention');
  }

  async deleteSubAccount(accountAuthId: string, subAuthId: string): Promise<DeleteSubAccountResult> {
    const k = this.#keys(accountAuthId);
    const r = await this.#guard('deleteSubAccount', () =>
      this.#eval(DELETE_SUB, [k.subs, k.subIdx, k.epSubIdx(subAuthId), k.appSubIdx(subAuthId), k.appDefaults], [subAuthId]),
    );
    if (r === 'ok') {
      await this.#guard('deleteSubAccount', () => this.#redis.del(this.#keys(subAuthId).subOf));
      return 'ok';
    }
    return r === 'not_empty' ? 'not_empty' : 'not_found';
  }

  // --- applications -----------------------------------------------------------

  async createApplication(app: ApplicationRecord): Promise<CreateApplicationResult> {
    const k = this.#keys(app.accountAuthId);
    const sub = app.subAccount ?? '';
    const r = await this.#guard('createApplication', () =>
      this.#eval(
        CREATE_APP,
        [k.apps, k.appIdx, k.appDefaults, k.subs, sub ? k.appSubIdx(sub) : k.appIdx],
        [app.appId, appJson(app), score(app.createdAt), sub, app.defaultEndpointApp ? '1' : '0', sub],
      ),
    );
    return r === 'ok' ? 'ok' : r === 'no_subaccount' ? 'no_subaccount' : 'id_taken';
  }

  async #appsWithDefaults(k: ReturnType<typeof accountKeys>, jsons: Array<string | null>): Promise<ApplicationRecord[]> {
    const stored = jsons
      .map((j) => parseJson<StoredApplication>(j, APP_FIELDS))
      .filter((a): a is StoredApplication => a !== null);
    if (stored.length === 0) return [];
    const defaults = await this.#guard('applications', () => this.#redis.hgetall(k.appDefaults));
    return stored.map((a) => ({ ...a, defaultEndpointApp: defaults[a.subAccount ?? ''] === a.appId }));
  }

  async getApplication(accountAuthId: string, appId: string): Promise<ApplicationRecord | null> {
    const k = this.#keys(accountAuthId);
    const json = await this.#guard('getApplication', () => this.#redis.hget(k.apps, appId));
    const [a] = await this.#appsWithDefaults(k, [json]);
    return a ?? null;
  }

  async getApplications(accountAuthId: string, appIds: string[]): Promise<Map<string, ApplicationRecord>> {
    const out = new Map<string, ApplicationRecord>();
    if (appIds.length === 0) return out;
    const k = this.#keys(accountAuthId);
    const jsons = await this.#guard('getApplications', () => this.#redis.hmget(k.apps, ...appIds));
    for (const a of await this.#appsWithDefaults(k, jsons)) out.set(a.appId, a);
    return out;
  }

  async listApplications(accountAuthId: string, q: { subAccount?: string }, p: PageRequest): Promise<Page<ApplicationRecord>> {
    const k = this.#keys(accountAuthId);
    const idx = q.subAccount !== undefined ? k.appSubIdx(q.subAccount) : k.appIdx;
    const { total, ids } = await this.#zpage(idx, p);
    const jsons = ids.length ? await this.#guard('listApplications', () => this.#redis.hmget(k.apps, ...ids)) : [];
    return { total, items: await this.#appsWithDefaults(k, jsons) };
  }

  async updateApplication(accountAuthId: string, appId: string, patch: ApplicationPatch): Promise<ApplicationRecord | null> {
    const k = this.#keys(accountAuthId);
    for (let i = 0; i < CAS_ATTEMPTS; i++) {
      const old = await this.#guard('updateApplication', () => this.#redis.hget(k.apps, appId));
      const cur = parseJson<StoredApplication>(old, APP_FIELDS);
      if (!cur || old === null) return null;
      const next: StoredApplication = { ...cur, settings: { ...cur.settings, ...patch.settings }, updatedAt: patch.updatedAt };
      const op = patch.defaultEndpointApp === true ? 'set' : patch.defaultEndpointApp === false ? 'clear' : 'keep';
      const r = await this.#guard('updateApplication', () =>
        this.#eval(UPDATE_APP, [k.apps, k.appDefaults], [appId, old, JSON.stringify(next), op, cur.subAccount ?? '']),
      );
      if (r === 'ok') return this.getApplication(accountAuthId, appId);
    }
    throw new StoreUnavailableError('redis directory updateApplication: too much contention');
  }

  async deleteApplication(accountAuthId: string, appId: string): Promise<boolean> {
    const k = this.#keys(accountAuthId);
    const old = await this.getApplication(accountAuthId, appId);
    if (!old) return false;
    const sub = old.subAccount ?? '';
    const r = await this.#guard('deleteApplication', () =>
      this.#eval(DELETE_APP, [k.apps, k.appIdx, k.appEps(appId), k.epApp, k.appDefaults, sub ? k.appSubIdx(sub) : k.appIdx], [appId, sub]),
    );
    return r === 1;
  }

  async getDefaultEndpointApp(accountAuthId: string, subAccount: string | null): Promise<ApplicationRecord | null> {
    const k = this.#keys(accountAuthId);
    const id = await this.#guard('getDefaultEndpointApp', () => this.#redis.hget(k.appDefaults, subAccount ?? ''));
    return id ? this.getApplication(accountAuthId, id) : null;
  }

  // --- endpoints --------------------------------------------------------------

  async createEndpoint(e: EndpointRecord): Promise<CreateEndpointResult> {
    const k = this.#keys(e.accountAuthId);
    const sub = e.subAccount ?? '';
    const app = e.appId ?? '';
    const r = await this.#guard('createEndpoint', () =>
      this.#eval(
        CREATE_EP,
        [
          k.eps,
          k.epApp,
          k.epIdx,
          k.usernames,
          k.retired,
          sub ? k.epSubIdx(sub) : k.epIdx,
          k.subs,
          k.apps,
          app ? k.appEps(app) : k.epApp,
        ],
        [e.endpointId, endpointJson(e), e.username.toLowerCase(), score(e.createdAt), sub, app],
      ),
    );
    switch (r) {
      case 'ok':
      case 'username_taken':
      case 'username_retired':
      case 'id_taken':
      case 'no_application':
      case 'no_subaccount':
        return r;
      default:
        throw new StoreUnavailableError(`redis directory createEndpoint: unexpected reply ${String(r)}`);
    }
  }

  /** Read endpoints (JSON and app id) of the given ids, in order, skipping missing ones. */
  async #readEndpoints(k: ReturnType<typeof accountKeys>, ids: string[]): Promise<Array<{ rec: EndpointRecord; json: string; app: string }>> {
    if (ids.length === 0) return [];
    const res = await this.#guard('readEndpoints', () =>
      this.#redis
        .pipeline()
        .hmget(k.eps, ...ids)
        .hmget(k.epApp, ...ids)
        .exec(),
    );
    return endpointsOf(ids, pipelineArray(res, 0), pipelineArray(res, 1));
  }

  async getEndpoint(accountAuthId: string, endpointId: string): Promise<EndpointRecord | null> {
    const [e] = await this.#readEndpoints(this.#keys(accountAuthId), [endpointId]);
    return e?.rec ?? null;
  }

  async listEndpoints(accountAuthId: string, q: EndpointQuery, p: PageRequest): Promise<Page<EndpointRecord>> {
    const k = this.#keys(accountAuthId);
    const onlySub = Object.entries(q).every(([key, v]) => v === undefined || key === 'subAccount');
    const idx = q.subAccount !== undefined ? k.epSubIdx(q.subAccount) : k.epIdx;

    // No filter beyond the owner: the sorted index pages by itself, and one script
    // reads the page (size, ids, records, application ids) in one round trip.
    if (onlySub && p.limit > PAGE_SCRIPT_MAX) {
      const { total, ids } = await this.#zpage(idx, p);
      return { total, items: (await this.#readEndpoints(k, ids)).map((e) => e.rec) };
    }
    if (onlySub) {
      if (p.limit <= 0) return { total: Number(await this.#guard('listEndpoints', () => this.#redis.zcard(idx))), items: [] };
      const reply = await this.#guard('listEndpoints', () => this.#eval(PAGE_EP, [idx, k.eps, k.epApp], [p.offset, p.offset + p.limit - 1]));
      if (!Array.isArray(reply) || reply.length !== 4 || typeof reply[0] !== 'number') {
        throw new StoreUnavailableError('redis directory listEndpoints: unexpected script reply');
      }
      const [total, ids, jsons, apps] = reply as [number, unknown, unknown, unknown];
      const idList = stringsOf(ids).filter((x): x is string => x !== null);
      return { total, items: endpointsOf(idList, stringsOf(jsons), stringsOf(apps)).map((e) => e.rec) };
    }

    // An exact username names at most one endpoint through the username index.
    if (q.usernameExact !== undefined) {
      const id = await this.#guard('listEndpoints', () => this.#redis.hget(k.usernames, q.usernameExact!.toLowerCase()));
      const found = id ? (await this.#readEndpoints(k, [id])).map((e) => e.rec).filter((e) => endpointMatches(e, q)) : [];
      return { total: found.length, items: found.slice(p.offset, p.offset + p.limit) };
    }

    // An application's endpoints come from its own index.
    if (q.appIdExact !== undefined) {
      const ids = await this.#guard('listEndpoints', () => this.#redis.smembers(k.appEps(q.appIdExact!)));
      const all = (await this.#readEndpoints(k, ids)).map((e) => e.rec).filter((e) => endpointMatches(e, q));
      all.sort((a, b) => compareByCreation({ createdAt: a.createdAt, id: a.endpointId }, { createdAt: b.createdAt, id: b.endpointId }));
      return { total: all.length, items: all.slice(p.offset, p.offset + p.limit) };
    }

    // Substring filters: walk the (owner's) index in batches, bounded by the
    // account's own endpoints; keep only the requested page.
    let total = 0;
    const items: EndpointRecord[] = [];
    for (let start = 0; ; start += this.#scanBatch) {
      const ids = await this.#guard('listEndpoints', () => this.#redis.zrange(idx, start, start + this.#scanBatch - 1));
      for (const { rec } of await this.#readEndpoints(k, ids)) {
        if (!endpointMatches(rec, q)) continue;
        if (total >= p.offset && items.length < p.limit) items.push(rec);
        total++;
      }
      if (ids.length < this.#scanBatch) break;
    }
    return { total, items };
  }

  async updateEndpoint(accountAuthId: string, endpointId: string, patch: EndpointPatch): Promise<UpdateEndpointResult> {
    const k = this.#keys(accountAuthId);
    for (let i = 0; i < CAS_ATTEMPTS; i++) {
      const [cur] = await this.#readEndpoints(k, [endpointId]);
      if (!cur) return { ok: false, reason: 'not_found' };
      const next = applyEndpointPatch(cur.rec, patch);
      const op = patch.appId === undefined ? 'keep' : patch.appId === null ? 'clear' : 'set';
      const newApp = patch.appId ?? '';
      const r = await this.#guard('updateEndpoint', () =>
        this.#eval(
          UPDATE_EP,
          [k.eps, k.epApp, k.apps, newApp ? k.appEps(newApp) : k.epApp, cur.app ? k.appEps(cur.app) : k.epApp],
          [endpointId, cur.json, endpointJson(next), op, newApp, cur.app],
        ),
      );
      if (r === 'ok') return { ok: true, endpoint: next };
      if (r === 'no_application') return { ok: false, reason: 'no_application' };
    }
    throw new StoreUnavailableError('redis directory updateEndpoint: too much contention');
  }

  async deleteEndpoint(accountAuthId: string, endpointId: string, opts: { retire: boolean }): Promise<EndpointRecord | null> {
    const k = this.#keys(accountAuthId);
    for (let i = 0; i < CAS_ATTEMPTS; i++) {
      const [cur] = await this.#readEndpoints(k, [endpointId]);
      if (!cur) return null;
      const sub = cur.rec.subAccount;
      const r = await this.#guard('deleteEndpoint', () =>
        this.#eval(
          DELETE_EP,
          [k.eps, k.epApp, k.epIdx, k.usernames, k.retired, sub ? k.epSubIdx(sub) : k.epIdx, cur.app ? k.appEps(cur.app) : k.epApp],
          [endpointId, cur.json, cur.rec.username.toLowerCase(), opts.retire ? '1' : '0', cur.app],
        ),
      );
      if (r === 'ok') return cur.rec;
    }
    throw new StoreUnavailableError('redis directory deleteEndpoint: too much contention');
  }

  // --- idempotency ------------------------------------------------------------

  async beginIdempotent(scope: string, id: string, pending: IdempotencyRecord, ttlMs: number): Promise<IdempotencyRecord | null> {
    const key = this.#keys(scope).idem(id);
    return this.#guard('beginIdempotent', async () => {
      for (let i = 0; i < CAS_ATTEMPTS; i++) {
        const r = await this.#redis.set(key, JSON.stringify(pending), 'PX', ttlMs, 'NX');
        if (r === 'OK') return null;
        const cur = parseJson<IdempotencyRecord>(await this.#redis.get(key), IDEM_FIELDS);
        // Gone between SET and GET (expired): try to reserve again.
        if (cur) return cur;
      }
      throw new StoreUnavailableError('redis directory beginIdempotent: too much contention');
    });
  }

  async completeIdempotent(scope: string, id: string, done: IdempotencyRecord, ttlMs: number): Promise<void> {
    const key = this.#keys(scope).idem(id);
    await this.#guard('completeIdempotent', () => this.#redis.set(key, JSON.stringify(done), 'PX', ttlMs));
  }

  async abandonIdempotent(scope: string, id: string): Promise<void> {
    const key = this.#keys(scope).idem(id);
    await this.#guard('abandonIdempotent', () => this.#redis.del(key));
  }

  // --- plumbing ---------------------------------------------------------------

  async #zpage(idx: string, p: PageRequest): Promise<{ total: number; ids: string[] }> {
    const res = await this.#guard('page', () =>
      this.#redis
        .pipeline()
        .zcard(idx)
        .zrange(idx, p.offset, p.offset + p.limit - 1)
        .exec(),
    );
    const total = pipelineValue(res, 0);
    const ids = pipelineArray(res, 1).filter((x): x is string => typeof x === 'string');
    return { total: typeof total === 'number' ? total : 0, ids };
  }

  async ping(): Promise<boolean> {
    try {
      return (await this.#redis.ping()) === 'PONG';
    } catch {
      return false;
    }
  }

  async close(): Promise<void> {
    if (!this.#closeConnection) return;
    const st = this.#redis.status;
    if (st === 'end' || st === 'close') return;
    try {
      if (st === 'ready') {
        await this.#redis.quit();
        return;
      }
    } catch {
      // The connection broke under us: drop it below.
    }
    this.#redis.disconnect();
  }
}

/**
 * Endpoint records from the replies of HMGET on the records and on the app ids
 * of `ids` (same order); missing or unparsable records are skipped.
 */
function endpointsOf(ids: string[], jsons: Array<string | null>, apps: Array<string | null>): Array<{ rec: EndpointRecord; json: string; app: string }> {
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
function stringsOf(v: unknown): Array<string | null> {
  return Array.isArray(v) ? v.map((x) => (typeof x === 'string' ? x : null)) : [];
}

type PipelineResult = Array<[Error | null, unknown]> | null;

/** The value of one pipelined command, rethrowing its error. */
function pipelineValue(res: PipelineResult, i: number): unknown {
  const entry = res?.[i];
  if (!entry) throw new StoreUnavailableError('redis pipeline returned no result');
  if (entry[0]) throw new StoreUnavailableError(`redis pipeline command failed: ${entry[0].message}`, { cause: entry[0] });
  return entry[1];
}

function pipelineString(res: PipelineResult, i: number): string | null {
  const v = pipelineValue(res, i);
  return typeof v === 'string' ? v : null;
}

function pipelineArray(res: PipelineResult, i: number): Array<string | null> {
  return stringsOf(pipelineValue(res, i));
}
