/**
 * The numbers store service (docs/numbers.md "Storage"): one record per phone number —
 * for sale, claimed by a purchase in progress, or owned by an account — and the indexes
 * derived from it (unsold numbers, claims, an account's numbers, an endpoint's numbers,
 * rentals due).
 *
 * Every change is a compare-and-set of one record together with its index entries
 * ({@link KvBackend.cas}): the logic lives here once ({@link NumbersStore}); a backend
 * (memory.ts, redis.ts) only provides the atomic primitive and a few reads. On Redis all
 * keys share one hash tag, so the compare-and-set is one Lua script in one Cluster slot.
 */
import type { Page, PageRequest } from '../directory/directory.js';

/** What the operator's inventory file says of a number (fees in minor units). */
export interface NumberInfo {
  /** E.164 with its `+`, normalised (libphonenumber-js). */
  e164: string;
  /** ISO 3166-1 alpha-2, upper case. */
  country: string;
  region: string;
  /** mobile | landline | toll_free */
  numberType: string;
  /** Minor units (1/100000). */
  setupFee: number;
  monthlyFee: number;
  currency: string;
  provider: string;
}

export type NumberStatus = 'active' | 'inactive';

/** The owner's side of a sold number. */
export interface Ownership {
  authId: string;
  subAccount: string | null;
  status: NumberStatus;
  /** Why it is inactive (`rental_unpaid`), null when active. */
  inactiveReason: string | null;
  /** At most one of the three is set. */
  endpointId: string | null;
  applicationId: string | null;
  trunkGroupId: string | null;
  /** When the current route was set, ms (the earliest routed number is an endpoint's caller ID). */
  routedAt: number | null;
  purchasedAt: string;
  /** The prices at purchase (the rental keeps them; a later inventory reprice does not change them). */
  setupFee: number;
  monthlyFee: number;
  currency: string;
  /** Months paid, the first one at purchase; month k starts at purchasedAt + k months. */
  paidPeriods: number;
  lastBillingDate: string | null;
  /** purchasedAt + paidPeriods months: when the next rental is due. */
  nextBillingDate: string;
}

/** A purchase in progress holding the number (docs/numbers.md "Purchase"). */
export interface Claim {
  token: string;
  authId: string;
  /** ms; after it the claim no longer holds and the number is for sale again. */
  deadline: number;
  at: string;
}

export interface NumberRecord extends NumberInfo {
  state: 'available' | 'claimed' | 'owned';
  claim: Claim | null;
  owner: Ownership | null;
  createdAt: string;
  updatedAt: string;
}

/** One change of an index, applied with the record in the same atomic step. */
export type IndexOp =
  | { op: 'zadd'; key: string; member: string; score: number }
  | { op: 'zrem'; key: string; member: string }
  | { op: 'hset'; key: string; field: string; value: string }
  | { op: 'hdel'; key: string; field: string };

/** Index names (logical; a backend maps them to its keys). */
export const IDX = {
  /** hash e164 → country: numbers for sale. */
  inventory: 'inv',
  /** zset e164 → claim deadline (ms). */
  claims: 'claims',
  /** zset e164 → next billing (ms): owned numbers by rental due. */
  due: 'due',
  /** zset e164 → purchase time (ms): an account's numbers. */
  account: (authId: string): string => `acct:${encodeURIComponent(authId)}`,
  /** zset e164 → routedAt: the numbers routed to an endpoint. */
  endpoint: (authId: string, endpointId: string): string => `ep:${encodeURIComponent(authId)}:${encodeURIComponent(endpointId)}`,
} as const;

/** The primitive a backend provides. */
export interface KvBackend {
  /** The record's text, or null. */
  read(e164: string): Promise<string | null>;
  readMany(e164s: readonly string[]): Promise<Array<string | null>>;
  /**
   * Write `next` (null: delete) if the record's text is still `expected` (null: absent),
   * and apply `ops` — all or nothing. False when the record changed meanwhile.
   */
  cas(e164: string, expected: string | null, next: string | null, ops: readonly IndexOp[]): Promise<boolean>;
  hgetall(key: string): Promise<Record<string, string>>;
  /** Members by score ascending, scores ≤ max. */
  zrangeByScore(key: string, max: number, limit?: number): Promise<string[]>;
  /** Take a lease `name` for ttlMs unless someone holds it; true when taken. */
  lease(name: string, ttlMs: number): Promise<boolean>;
  close(): Promise<void>;
}

/** Why a purchase claim was not taken. */
export type ClaimResult = { ok: true; record: NumberRecord } | { ok: false; reason: 'not_found' | 'taken' };

export interface UpsertResult {
  added: number;
  updated: number;
  unchanged: number;
  /** Numbers in the file that are sold or being bought: left as they are. */
  skippedSold: number;
}

export interface InventoryQuery {
  country?: string;
  /** Substring of the E.164 (with or without its `+`). */
  search?: string;
  /** E.164 prefixes (with or without `+`) to leave out (the vendor's `exclude`). */
  exclude?: string[];
}

export interface OwnedQuery {
  /** Only the numbers handed to this sub-account. */
  subAccount?: string;
  search?: string;
}

/** Numbers upserted concurrently. */
const UPSERT_BATCH = 200;

/** Attempts of one compare-and-set loop before giving up as contended. */
const CAS_ATTEMPTS = 50;

function parse(text: string | null): NumberRecord | null {
  if (text === null) return null;
  try {
    const r = JSON.parse(text) as NumberRecord;
    return typeof r.e164 === 'string' && typeof r.state === 'string' ? r : null;
  } catch {
    return null;
  }
}

/** The index entries a record belongs to. */
function memberships(r: NumberRecord | null): IndexOp[] {
  if (r === null) return [];
  const out: IndexOp[] = [];
  if (r.state === 'available') out.push({ op: 'hset', key: IDX.inventory, field: r.e164, value: r.country });
  if (r.state === 'claimed' && r.claim) out.push({ op: 'zadd', key: IDX.claims, member: r.e164, score: r.claim.deadline });
  if (r.state === 'owned' && r.owner) {
    const o = r.owner;
    out.push({ op: 'zadd', key: IDX.account(o.authId), member: r.e164, score: Date.parse(o.purchasedAt) });
    out.push({ op: 'zadd', key: IDX.due, member: r.e164, score: Date.parse(o.nextBillingDate) });
    if (o.endpointId !== null) out.push({ op: 'zadd', key: IDX.endpoint(o.authId, o.endpointId), member: r.e164, score: o.routedAt ?? 0 });
  }
  return out;
}

/** The index changes taking `prev`'s entries to `next`'s: removals first, then additions. */
export function indexDiff(prev: NumberRecord | null, next: NumberRecord | null): IndexOp[] {
  const ops: IndexOp[] = [];
  const nextKeys = new Set(memberships(next).map((m) => m.key));
  for (const m of memberships(prev)) {
    if (nextKeys.has(m.key)) continue; // overwritten below
    ops.push(m.op === 'hset' ? { op: 'hdel', key: m.key, field: m.field } : { op: 'zrem', key: m.key, member: (m as { member: string }).member });
  }
  return [...ops, ...memberships(next)];
}

/** Whether a claim no longer holds at `now`. */
export function claimExpired(r: NumberRecord, now: number): boolean {
  return r.state === 'claimed' && (r.claim === null || r.claim.deadline <= now);
}

/** For sale at `now`: available, or claimed by a purchase that passed its deadline. */
export function forSale(r: NumberRecord, now: number): boolean {
  return r.state === 'available' || claimExpired(r, now);
}

function sortE164(a: string, b: string): number {
  return a < b ? -1 : a > b ? 1 : 0;
}

/**
 * The numbers store: the same logic on every backend (test/contract/numbers.test.ts runs
 * it on memory, a redis-server and a 3-master Redis Cluster).
 */
export class NumbersStore {
  constructor(readonly kv: KvBackend) {}

  async get(e164: string): Promise<NumberRecord | null> {
    return parse(await this.kv.read(e164));
  }

  /**
   * Read-modify-write one record: `f` gets the current record (null when absent) and
   * returns the next one, null to delete it, or `undefined` to leave it (the loop ends).
   * Retried while another writer changed the record meanwhile.
   */
  async update<T>(e164: string, f: (cur: NumberRecord | null) => { next: NumberRecord | null | undefined; result: T }): Promise<T> {
    for (let i = 0; i < CAS_ATTEMPTS; i++) {
      const text = await this.kv.read(e164);
      const cur = parse(text);
      const { next, result } = f(cur === null ? null : structuredClone(cur));
      if (next === undefined) return result;
      const ok = await this.kv.cas(e164, text, next === null ? null : JSON.stringify(next), indexDiff(cur, next));
      if (ok) return result;
    }
    throw new Error(`numbers store: ${e164} is contended; gave up after ${CAS_ATTEMPTS} attempts`);
  }

  /**
   * Add or update numbers for sale (the inventory file). A number that is sold, or held
   * by a purchase in progress, is never touched.
   */
  async upsertInventory(rows: readonly NumberInfo[], at: string): Promise<UpsertResult> {
    const res: UpsertResult = { added: 0, updated: 0, unchanged: 0, skippedSold: 0 };
    const now = Date.parse(at);
    // In batches, so a file of many numbers does not open one write per number at once.
    for (let i = 0; i < rows.length; i += UPSERT_BATCH) await this.#upsertBatch(rows.slice(i, i + UPSERT_BATCH), at, now, res);
    return res;
  }

  async #upsertBatch(rows: readonly NumberInfo[], at: string, now: number, res: UpsertResult): Promise<void> {
    await Promise.all(
      rows.map((info) =>
        this.update(info.e164, (cur) => {
          if (cur === null) {
            return { next: { ...info, state: 'available', claim: null, owner: null, createdAt: at, updatedAt: at } satisfies NumberRecord, result: 'added' as const };
          }
          if (cur.state === 'owned' || (cur.state === 'claimed' && !claimExpired(cur, now))) return { next: undefined, result: 'skippedSold' as const };
          const same = (Object.keys(info) as Array<keyof NumberInfo>).every((k) => cur[k] === info[k]);
          if (same && cur.state === 'available') return { next: undefined, result: 'unchanged' as const };
          return { next: { ...cur, ...info, state: 'available', claim: null, owner: null, updatedAt: at }, result: 'updated' as const };
        }).then((r) => void res[r]++),
      ),
    );
  }

  /**
   * Numbers for sale, ordered by E.164. The `inv` index is written with its records, so
   * it is trusted for the filters and the total; only the page's records (and those of
   * claims past their deadline, which are for sale again) are read.
   */
  async listInventory(q: InventoryQuery, page: PageRequest, now: number): Promise<Page<NumberRecord>> {
    const inv = await this.kv.hgetall(IDX.inventory);
    const search = q.search?.replace(/^\+/, '');
    const country = q.country?.toUpperCase();
    const excluded = (q.exclude ?? []).map((x) => `+${x.replace(/^\+/, '')}`);
    const wanted = (e164: string, c: string): boolean =>
      (search === undefined || e164.includes(search)) && (country === undefined || c === country) && !excluded.some((x) => e164.startsWith(x));
    const matching = Object.entries(inv)
      .filter(([e164, c]) => wanted(e164, c))
      .map(([e164]) => e164);
    // Claims past their deadline (a purchase that crashed): for sale again.
    const expired = (await this.#records(await this.kv.zrangeByScore(IDX.claims, now))).filter((r) => forSale(r, now) && wanted(r.e164, r.country));
    for (const r of expired) if (!(r.e164 in inv)) matching.push(r.e164);
    matching.sort(sortE164);
    const items = (await this.#records(matching.slice(page.offset, page.offset + page.limit))).filter((r) => forSale(r, now));
    return { total: matching.length, items };
  }

  async #records(e164s: readonly string[]): Promise<NumberRecord[]> {
    if (e164s.length === 0) return [];
    const out: NumberRecord[] = [];
    for (let i = 0; i < e164s.length; i += 500) {
      const texts = await this.kv.readMany(e164s.slice(i, i + 500));
      for (const t of texts) {
        const r = parse(t);
        if (r) out.push(r);
      }
    }
    return out;
  }

  /**
   * Hold a number for sale for a purchase until `claim.deadline` (ms). A number sold,
   * or held by another purchase whose deadline has not passed, is `taken`.
   */
  claim(e164: string, claim: Claim, now: number): Promise<ClaimResult> {
    return this.update<ClaimResult>(e164, (cur) => {
      if (cur === null) return { next: undefined, result: { ok: false, reason: 'not_found' } };
      if (!forSale(cur, now)) return { next: undefined, result: { ok: false, reason: 'taken' } };
      const next: NumberRecord = { ...cur, state: 'claimed', claim, owner: null, updatedAt: claim.at };
      return { next, result: { ok: true, record: next } };
    });
  }

  /** Give a claim up (its purchase was refused): the number is for sale again. False when the claim is no longer held. */
  releaseClaim(e164: string, token: string, at: string): Promise<boolean> {
    return this.update(e164, (cur) => {
      if (cur === null || cur.state !== 'claimed' || cur.claim?.token !== token) return { next: undefined, result: false };
      return { next: { ...cur, state: 'available', claim: null, updatedAt: at }, result: true };
    });
  }

  /**
   * Turn a held claim into ownership. Null when the claim is no longer held (its deadline
   * passed and another purchase took the number, or a sweep returned it to sale).
   */
  commitClaim(e164: string, token: string, owner: Ownership, at: string): Promise<NumberRecord | null> {
    return this.update(e164, (cur) => {
      if (cur === null || cur.state !== 'claimed' || cur.claim?.token !== token) return { next: undefined, result: null };
      const next: NumberRecord = { ...cur, state: 'owned', claim: null, owner, updatedAt: at };
      return { next, result: next };
    });
  }

  /** Claims whose deadline has passed (the recovery sweep). */
  expiredClaims(now: number): Promise<string[]> {
    return this.kv.zrangeByScore(IDX.claims, now);
  }

  /** The numbers owned by `authId` (optionally only a sub-account's), ordered by purchase. */
  async listOwned(authId: string, q: OwnedQuery, page: PageRequest): Promise<Page<NumberRecord>> {
    const all = await this.owned(authId);
    const search = q.search?.replace(/^\+/, '');
    const hits = all.filter((r) => (q.subAccount === undefined || r.owner?.subAccount === q.subAccount) && (search === undefined || r.e164.includes(search)));
    return { total: hits.length, items: hits.slice(page.offset, page.offset + page.limit) };
  }

  /** Every number owned by `authId`. */
  async owned(authId: string): Promise<NumberRecord[]> {
    const members = await this.kv.zrangeByScore(IDX.account(authId), Number.MAX_SAFE_INTEGER);
    return (await this.#records(members)).filter((r) => r.state === 'owned' && r.owner?.authId === authId);
  }

  /** The number `e164` when `authId` owns it. */
  async ownedBy(authId: string, e164: string): Promise<NumberRecord | null> {
    const r = await this.get(e164);
    return r !== null && r.state === 'owned' && r.owner?.authId === authId ? r : null;
  }

  /**
   * Change the owner's side of a number `authId` owns: `f` gets the current ownership and
   * returns the next (or undefined to leave it). Null when `authId` does not own it.
   */
  changeOwned(authId: string, e164: string, at: string, f: (o: Ownership) => Ownership | undefined): Promise<NumberRecord | null> {
    return this.update(e164, (cur) => {
      if (cur === null || cur.state !== 'owned' || cur.owner?.authId !== authId) return { next: undefined, result: null };
      const o = f(cur.owner);
      if (o === undefined) return { next: undefined, result: cur };
      const next: NumberRecord = { ...cur, owner: o, updatedAt: at };
      return { next, result: next };
    });
  }

  /** Return an owned number to sale (routes, sub-account and billing state go with the owner). */
  releaseOwned(authId: string, e164: string, at: string): Promise<NumberRecord | null> {
    return this.update(e164, (cur) => {
      if (cur === null || cur.state !== 'owned' || cur.owner?.authId !== authId) return { next: undefined, result: null };
      const next: NumberRecord = { ...cur, state: 'available', owner: null, claim: null, updatedAt: at };
      return { next, result: next };
    });
  }

  /** The numbers routed to an endpoint, earliest routed first. */
  async byEndpoint(authId: string, endpointId: string): Promise<NumberRecord[]> {
    const members = await this.kv.zrangeByScore(IDX.endpoint(authId, endpointId), Number.MAX_SAFE_INTEGER);
    const recs = await this.#records(members);
    const order = new Map(members.map((m, i) => [m, i]));
    return recs
      .filter((r) => r.state === 'owned' && r.owner?.authId === authId && r.owner.endpointId === endpointId)
      .sort((a, b) => (order.get(a.e164) ?? 0) - (order.get(b.e164) ?? 0));
  }

  /**
   * Owned numbers whose next rental is due at `now` (ms), earliest first — all of them:
   * unpaid (inactive) numbers stay due, and a limit would let them crowd out the rest.
   */
  due(now: number): Promise<string[]> {
    return this.kv.zrangeByScore(IDX.due, now);
  }

  /** A lease across the fleet (SET NX PX on Redis): true when this caller took it. */
  lease(name: string, ttlMs: number): Promise<boolean> {
    return this.kv.lease(name, ttlMs);
  }

  close(): Promise<void> {
    return this.kv.close();
  }
}
