import type { RedisClient } from '../redis/client.js';
import { evalScript, LuaScript } from '../redis/script.js';
import { StoreUnavailableError } from '../../errors.js';
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

import {
  accountKeys,
  CREATE_SUB,
  CAS_HASH,
  DELETE_SUB,
  CREATE_APP,
  UPDATE_APP,
  DELETE_APP,
  CREATE_EP,
  UPDATE_EP,
  DELETE_EP,
  PAGE_EP,
  PAGE_SCRIPT_MAX,
  CAS_ATTEMPTS,
  parseJson,
  ACCOUNT_FIELDS,
  SUB_FIELDS,
  APP_FIELDS,
  EP_FIELDS,
  IDEM_FIELDS,
  endpointJson,
  appJson,
  score,
  endpointsOf,
  stringsOf,
  pipelineValue,
  pipelineString,
  pipelineArray,
  type PipelineResult,
  type StoredApplication,
} from './redis-schema.js';

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

  #eval(s: LuaScript, keys: string[], args: Array<string | number>): Promise<unknown> {
    return evalScript(this.#redis, s, keys, args);
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
