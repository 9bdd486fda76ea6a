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

/** Everything one account owns. */
interface Tenant {
  account: AccountRecord;
  subs: Map<string, SubAccountRecord>;
  apps: Map<string, ApplicationRecord>;
  /** Owner scope ('' = main account, else sub-account Auth ID) → default endpoint app id. */
  defaults: Map<string, string>;
  endpoints: Map<string, EndpointRecord>;
  /**
   * Every endpoint id in list order (creation time, then id): a page is a slice,
   * never a scan and sort of the whole account.
   */
  epOrder: OrderIndex;
  /** The same per sub-account (owner is fixed at creation). */
  epOrderBySub: Map<string, OrderIndex>;
  /** Lower-cased username → endpoint id. */
  usernames: Map<string, string>;
  /** Lower-cased usernames that can never be used again. */
  retired: Set<string>;
}

const clone = <T>(v: T): T => structuredClone(v);
/** An endpoint record holds only primitives: a spread is a full copy, far cheaper than structuredClone. */
const copyEndpoint = (e: EndpointRecord): EndpointRecord => ({ ...e });

/** One entry of an {@link OrderIndex}: creation time (ms) and id. */
interface OrderEntry {
  at: number;
  id: string;
}

/** The list order of the directories (compareByCreation), on parsed times. */
function entryBefore(a: OrderEntry, b: OrderEntry): boolean {
  return a.at < b.at || (a.at === b.at && a.id < b.id);
}

/** Creation time of a record as a number (an unparsable time sorts first, as 0). */
function creationMs(createdAt: string): number {
  const t = Date.parse(createdAt);
  return Number.isFinite(t) ? t : 0;
}

/**
 * Ids kept sorted by (creation time, id). Insert and remove find their place by
 * binary search; a page is a slice. Creation order is nearly always append order,
 * so the insert's copy is short.
 */
class OrderIndex {
  readonly #entries: OrderEntry[] = [];

  get size(): number {
    return this.#entries.length;
  }

  /** Index of the first entry not before `e`. */
  #lowerBound(e: OrderEntry): number {
    let lo = 0;
    let hi = this.#entries.length;
    while (lo < hi) {
      const mid = (lo + hi) >>> 1;
      if (entryBefore(this.#entries[mid] as OrderEntry, e)) lo = mid + 1;
      else hi = mid;
    }
    return lo;
  }

  insert(e: OrderEntry): void {
    const last = this.#entries[this.#entries.length - 1];
    if (last === undefined || entryBefore(last, e)) {
      this.#entries.push(e);
      return;
    }
    const i = this.#lowerBound(e);
    const cur = this.#entries[i];
    if (cur !== undefined && cur.at === e.at && cur.id === e.id) return;
    this.#entries.splice(i, 0, e);
  }

  remove(e: OrderEntry): void {
    const i = this.#lowerBound(e);
    const cur = this.#entries[i];
    if (cur !== undefined && cur.at === e.at && cur.id === e.id) this.#entries.splice(i, 1);
  }

  /** Ids from `offset`, at most `limit` of them. */
  slice(offset: number, limit: number): string[] {
    const out: string[] = [];
    const end = Math.min(this.#entries.length, offset + limit);
    for (let i = offset; i < end; i++) out.push((this.#entries[i] as OrderEntry).id);
    return out;
  }

  /** Every id, in order. */
  *ids(): IterableIterator<string> {
    for (const e of this.#entries) yield e.id;
  }
}

function page<T>(all: T[], p: PageRequest): Page<T> {
  return { total: all.length, items: all.slice(p.offset, p.offset + p.limit) };
}

/**
 * The embedded directory: Maps in this process, gone at exit (the default when
 * `REDIS_URL` is unset). Every method runs synchronously inside its promise, so
 * each operation is atomic. Records are copied in and out, so callers never share
 * state with the store.
 */
export class MemoryDirectory implements Directory {
  readonly #tenants = new Map<string, Tenant>();
  /** Sub-account Auth ID → parent Auth ID. */
  readonly #subOf = new Map<string, string>();
  readonly #idem = new Map<string, { rec: IdempotencyRecord; expiresAt: number }>();

  async createAccount(account: AccountRecord): Promise<boolean> {
    if (this.#tenants.has(account.authId) || this.#subOf.has(account.authId)) return false;
    this.#tenants.set(account.authId, {
      account: clone(account),
      subs: new Map(),
      apps: new Map(),
      defaults: new Map(),
      endpoints: new Map(),
      epOrder: new OrderIndex(),
      epOrderBySub: new Map(),
      usernames: new Map(),
      retired: new Set(),
    });
    return true;
  }

  async getAccount(authId: string): Promise<AccountRecord | null> {
    const t = this.#tenants.get(authId);
    return t ? clone(t.account) : null;
  }

  async findPrincipal(authId: string): Promise<PrincipalRecord | null> {
    // Every API request authenticates here: records of primitives are copied by spread.
    const t = this.#tenants.get(authId);
    if (t) return { kind: 'account', account: { ...t.account } };
    const parent = this.#subOf.get(authId);
    const pt = parent === undefined ? undefined : this.#tenants.get(parent);
    const sub = pt?.subs.get(authId);
    if (!pt || !sub) return null;
    return { kind: 'subaccount', account: { ...pt.account }, subAccount: { ...sub } };
  }

  async createSubAccount(sub: SubAccountRecord): Promise<boolean> {
    const t = this.#tenants.get(sub.parentAuthId);
    if (!t || this.#tenants.has(sub.authId) || this.#subOf.has(sub.authId)) return false;
    t.subs.set(sub.authId, clone(sub));
    this.#subOf.set(sub.authId, sub.parentAuthId);
    return true;
  }

  async getSubAccount(accountAuthId: string, subAuthId: string): Promise<SubAccountRecord | null> {
    const s = this.#tenants.get(accountAuthId)?.subs.get(subAuthId);
    return s ? clone(s) : null;
  }

  async listSubAccounts(accountAuthId: string, p: PageRequest): Promise<Page<SubAccountRecord>> {
    const all = [...(this.#tenants.get(accountAuthId)?.subs.values() ?? [])];
    all.sort((a, b) => compareByCreation({ createdAt: a.createdAt, id: a.authId }, { createdAt: b.createdAt, id: b.authId }));
    return page(all.map(clone), p);
  }

  async updateSubAccount(accountAuthId: string, subAuthId: string, patch: SubAccountPatch): Promise<SubAccountRecord | null> {
    const t = this.#tenants.get(accountAuthId);
    const s = t?.subs.get(subAuthId);
    if (!t || !s) return null;
    const next = applySubAccountPatch(s, patch);
    t.subs.set(subAuthId, next);
    return clone(next);
  }

  async deleteSubAccount(accountAuthId: string, subAuthId: string): Promise<DeleteSubAccountResult> {
    const t = this.#tenants.get(accountAuthId);
    if (!t || !t.subs.has(subAuthId)) return 'not_found';
    if ((t.epOrderBySub.get(subAuthId)?.size ?? 0) > 0) return 'not_empty';
    for (const a of t.apps.values()) if (a.subAccount === subAuthId) return 'not_empty';
    t.subs.delete(subAuthId);
    t.defaults.delete(subAuthId);
    this.#subOf.delete(subAuthId);
    return 'ok';
  }

  #appOut(t: Tenant, a: ApplicationRecord): ApplicationRecord {
    return { ...clone(a), defaultEndpointApp: t.defaults.get(a.subAccount ?? '') === a.appId };
  }

  async createApplication(app: ApplicationRecord): Promise<CreateApplicationResult> {
    const t = this.#tenants.get(app.accountAuthId);
    if (!t) return 'no_subaccount';
    if (app.subAccount !== null && !t.subs.has(app.subAccount)) return 'no_subaccount';
    if (t.apps.has(app.appId)) return 'id_taken';
    t.apps.set(app.appId, clone(app));
    if (app.defaultEndpointApp) t.defaults.set(app.subAccount ?? '', app.appId);
    return 'ok';
  }

  async getApplication(accountAuthId: string, appId: string): Promise<ApplicationRecord | null> {
    const t = this.#tenants.get(accountAuthId);
    const a = t?.apps.get(appId);
    return t && a ? this.#appOut(t, a) : null;
  }

  async getApplications(accountAuthId: string, appIds: string[]): Promise<Map<string, ApplicationRecord>> {
    const out = new Map<string, ApplicationRecord>();
    const t = this.#tenants.get(accountAuthId);
    if (!t) return out;
    for (const id of appIds) {
      const a = t.apps.get(id);
      if (a) out.set(id, this.#appOut(t, a));
    }
    return out;
  }

  async listApplications(accountAuthId: string, q: { subAccount?: string }, p: PageRequest): Promise<Page<ApplicationRecord>> {
    const t = this.#tenants.get(accountAuthId);
    if (!t) return { total: 0, items: [] };
    const all = [...t.apps.values()].filter((a) => q.subAccount === undefined || a.subAccount === q.subAccount);
    all.sort((a, b) => compareByCreation({ createdAt: a.createdAt, id: a.appId }, { createdAt: b.createdAt, id: b.appId }));
    return page(
      all.map((a) => this.#appOut(t, a)),
      p,
    );
  }

  async updateApplication(accountAuthId: string, appId: string, patch: ApplicationPatch): Promise<ApplicationRecord | null> {
    const t = this.#tenants.get(accountAuthId);
    const a = t?.apps.get(appId);
    if (!t || !a) return null;
    const next: ApplicationRecord = { ...a, settings: { ...a.settings, ...patch.settings }, updatedAt: patch.updatedAt };
    t.apps.set(appId, next);
    const scope = a.subAccount ?? '';
    if (patch.defaultEndpointApp === true) t.defaults.set(scope, appId);
    else if (patch.defaultEndpointApp === false && t.defaults.get(scope) === appId) t.defaults.delete(scope);
    return this.#appOut(t, next);
  }

  async deleteApplication(accountAuthId: string, appId: string): Promise<boolean> {
    const t = this.#tenants.get(accountAuthId);
    const a = t?.apps.get(appId);
    if (!t || !a) return false;
    for (const [id, e] of t.endpoints) if (e.appId === appId) t.endpoints.set(id, { ...e, appId: null });
    t.apps.delete(appId);
    const scope = a.subAccount ?? '';
    if (t.defaults.get(scope) === appId) t.defaults.delete(scope);
    return true;
  }

  async getDefaultEndpointApp(accountAuthId: string, subAccount: string | null): Promise<ApplicationRecord | null> {
    const t = this.#tenants.get(accountAuthId);
    const id = t?.defaults.get(subAccount ?? '');
    const a = id === undefined ? undefined : t?.apps.get(id);
    return t && a ? this.#appOut(t, a) : null;
  }

  async createEndpoint(e: EndpointRecord): Promise<CreateEndpointResult> {
    const t = this.#tenants.get(e.accountAuthId);
    if (!t) return 'no_subaccount';
    const lower = e.username.toLowerCase();
    if (t.retired.has(lower)) return 'username_retired';
    if (t.usernames.has(lower)) return 'username_taken';
    if (t.endpoints.has(e.endpointId)) return 'id_taken';
    if (e.subAccount !== null && !t.subs.has(e.subAccount)) return 'no_subaccount';
    if (e.appId !== null && !t.apps.has(e.appId)) return 'no_application';
    t.endpoints.set(e.endpointId, copyEndpoint(e));
    t.usernames.set(lower, e.endpointId);
    const entry = { at: creationMs(e.createdAt), id: e.endpointId };
    t.epOrder.insert(entry);
    if (e.subAccount !== null) {
      let idx = t.epOrderBySub.get(e.subAccount);
      if (!idx) t.epOrderBySub.set(e.subAccount, (idx = new OrderIndex()));
      idx.insert(entry);
    }
    return 'ok';
  }

  async getEndpoint(accountAuthId: string, endpointId: string): Promise<EndpointRecord | null> {
    const e = this.#tenants.get(accountAuthId)?.endpoints.get(endpointId);
    return e ? copyEndpoint(e) : null;
  }

  async listEndpoints(accountAuthId: string, q: EndpointQuery, p: PageRequest): Promise<Page<EndpointRecord>> {
    const t = this.#tenants.get(accountAuthId);
    if (!t) return { total: 0, items: [] };
    const idx = q.subAccount !== undefined ? t.epOrderBySub.get(q.subAccount) : t.epOrder;
    if (!idx) return { total: 0, items: [] };
    const onlyOwner = Object.entries(q).every(([key, v]) => v === undefined || key === 'subAccount');
    // No filter beyond the owner: the page is a slice of the ordered index.
    if (onlyOwner) {
      const items: EndpointRecord[] = [];
      for (const id of idx.slice(p.offset, p.limit)) {
        const e = t.endpoints.get(id);
        if (e) items.push(copyEndpoint(e));
      }
      return { total: idx.size, items };
    }
    // Filters: one walk in order, copying only the page.
    let total = 0;
    const items: EndpointRecord[] = [];
    for (const id of idx.ids()) {
      const e = t.endpoints.get(id);
      if (!e || !endpointMatches(e, q)) continue;
      if (total >= p.offset && items.length < p.limit) items.push(copyEndpoint(e));
      total++;
    }
    return { total, items };
  }

  async updateEndpoint(accountAuthId: string, endpointId: string, patch: EndpointPatch): Promise<UpdateEndpointResult> {
    const t = this.#tenants.get(accountAuthId);
    const e = t?.endpoints.get(endpointId);
    if (!t || !e) return { ok: false, reason: 'not_found' };
    if (patch.appId !== undefined && patch.appId !== null && !t.apps.has(patch.appId)) {
      return { ok: false, reason: 'no_application' };
    }
    const next = applyEndpointPatch(e, patch);
    t.endpoints.set(endpointId, next);
    return { ok: true, endpoint: copyEndpoint(next) };
  }

  async deleteEndpoint(accountAuthId: string, endpointId: string, opts: { retire: boolean }): Promise<EndpointRecord | null> {
    const t = this.#tenants.get(accountAuthId);
    const e = t?.endpoints.get(endpointId);
    if (!t || !e) return null;
    const lower = e.username.toLowerCase();
    t.endpoints.delete(endpointId);
    const entry = { at: creationMs(e.createdAt), id: endpointId };
    t.epOrder.remove(entry);
    if (e.subAccount !== null) {
      const idx = t.epOrderBySub.get(e.subAccount);
      idx?.remove(entry);
      if (idx?.size === 0) t.epOrderBySub.delete(e.subAccount);
    }
    if (t.usernames.get(lower) === endpointId) t.usernames.delete(lower);
    if (opts.retire) t.retired.add(lower);
    return copyEndpoint(e);
  }

  #idemKey(scope: string, id: string): string {
    return `${scope}\u0000${id}`;
  }

  #sweepIdem(now: number): void {
    for (const [k, v] of this.#idem) if (v.expiresAt <= now) this.#idem.delete(k);
  }

  async beginIdempotent(scope: string, id: string, pending: IdempotencyRecord, ttlMs: number): Promise<IdempotencyRecord | null> {
    const now = Date.now();
    this.#sweepIdem(now);
    const k = this.#idemKey(scope, id);
    const cur = this.#idem.get(k);
    if (cur) return clone(cur.rec);
    this.#idem.set(k, { rec: clone(pending), expiresAt: now + ttlMs });
    return null;
  }

  async completeIdempotent(scope: string, id: string, done: IdempotencyRecord, ttlMs: number): Promise<void> {
    this.#idem.set(this.#idemKey(scope, id), { rec: clone(done), expiresAt: Date.now() + ttlMs });
  }

  async abandonIdempotent(scope: string, id: string): Promise<void> {
    this.#idem.delete(this.#idemKey(scope, id));
  }

  async ping(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    // Nothing to release: no timers, no connections.
  }
}
