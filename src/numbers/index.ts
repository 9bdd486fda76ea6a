/**
 * The numbers capability (docs/numbers.md): the inventory for sale, numbers owned by
 * accounts, their routes, the purchase and the monthly rental — built by
 * {@link createNumbers}, the one builder the composition root (src/app.ts) calls. It
 * implements {@link NumberLookup} for routing (src/routing/) and what the API
 * (src/api/numbers.ts) needs.
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../config.js';
import { createLogger, type Logger } from '../logger.js';
import type { CustomerRef, Ledger } from '../billing/ledger.js';
import type { RedisClient } from '../store/redis/client.js';
import type { Directory, Page, PageRequest } from '../store/directory/directory.js';
import type { TrunkLookup } from '../trunks/lookup.js';
import { forSale, type InventoryQuery, type NumberRecord, type NumbersStore, type Ownership } from '../store/numbers/numbers.js';
import { memoryNumbersStore } from '../store/numbers/memory.js';
import { redisNumbersStore } from '../store/numbers/redis.js';
import type { NumberLookup, NumberRoute } from './lookup.js';
import { E164_PROBLEM, normalizeE164 } from './e164.js';
import { Inventory } from './inventory.js';
import { newOwnership, RentalSweep, setupDescription, setupKey } from './rental.js';

export type { NumberLookup, NumberRoute } from './lookup.js';
export { normalizeE164 } from './e164.js';

/** Why an operation on numbers was refused; the API maps `kind` to a status. */
export class NumbersError extends Error {
  constructor(
    /** not_found 404, invalid 400 (naming `field`), conflict 409, payment_required 402. */
    readonly kind: 'not_found' | 'invalid' | 'conflict' | 'payment_required',
    message: string,
    readonly field: string | null = null,
    readonly code: string = kind,
  ) {
    super(message);
    this.name = 'NumbersError';
  }
}

/** Who looks at numbers: an account, or one of its sub-accounts (sees only the numbers handed to it). */
export interface Viewer {
  authId: string;
  subAccount: string | null;
}

/** The three routes of a number; at most one is set. */
export type RouteKind = 'trunk' | 'application' | 'endpoint';

const ROUTE_FIELD: Record<RouteKind, string> = { trunk: 'trunk_group_id', application: 'application_id', endpoint: 'endpoint_id' };

/** How long a purchase holds its number before a crash returns it to sale, ms. */
export const PURCHASE_CLAIM_MS = 30_000;

export interface Numbers extends NumberLookup {
  readonly store: NumbersStore;
  readonly inventory: Inventory;
  readonly rental: RentalSweep;
  /** Numbers for sale. */
  listInventory(q: InventoryQuery, page: PageRequest): Promise<Page<NumberRecord>>;
  /**
   * Buy `e164` for `account`: claim it, debit setup + first month, make it the account's.
   * Throws NumbersError: not_found, conflict (taken), invalid (currency), payment_required.
   */
  purchase(account: CustomerRef, e164: string, currency: string | null): Promise<NumberRecord>;
  list(v: Viewer, q: { search?: string }, page: PageRequest): Promise<Page<NumberRecord>>;
  /** A number the viewer sees (not_found otherwise). */
  get(v: Viewer, e164: string): Promise<NumberRecord>;
  /** Return a number to the inventory; its routes and sub-account go. */
  release(authId: string, e164: string): Promise<NumberRecord>;
  /** Route a number (`id`) or clear that route (null). Setting one route clears the other two. */
  setRoute(authId: string, e164: string, kind: RouteKind, id: string | null): Promise<NumberRecord>;
  /** Hand a number to a sub-account of its account, or take it back (null). */
  setSubAccount(authId: string, e164: string, subAccount: string | null): Promise<NumberRecord>;
  /** The account's numbers routed to trunk `trunkId` (the trunks side asks before deleting one). */
  numbersUsingTrunk(authId: string, trunkId: string): Promise<string[]>;
  /** Clear every route of the account's numbers to `trunkId`; the numbers changed. */
  unrouteTrunk(authId: string, trunkId: string): Promise<string[]>;
  /**
   * Start the rental sweep and load the inventory. Throws ConfigError for a bad inventory
   * file, StoreUnavailableError when the store does not answer (the sweep runs regardless).
   */
  start(): Promise<void>;
  /** Read the inventory again (SIGHUP). A bad file throws and leaves the inventory as it was. */
  reload(): Promise<{ source: string; size: number; added: number; updated: number; skippedSold: number }>;
  stop(): void;
}

export interface NumbersDeps {
  config: Readonly<Config>;
  /** The shared Redis client; the embedded store when null. */
  redis: RedisClient | null;
  ledger: Ledger;
  /** Accounts, sub-accounts, applications and endpoints the routes name. */
  directory: Directory;
  /** When given, a trunk_group_id must name a trunk of the same account (wired with the trunks capability). */
  trunks?: Pick<TrunkLookup, 'trunk'>;
  log?: Logger;
  /** A store in place of the one `redis` selects (tests). */
  store?: NumbersStore;
  now?: () => number;
  /** How long a purchase holds its number, ms. @default PURCHASE_CLAIM_MS */
  claimMs?: number;
}

/** A path or body number, normalised, or a 400 naming `field`. */
export function e164Of(text: unknown, field: string): string {
  const e = normalizeE164(text);
  if (e === null) throw new NumbersError('invalid', E164_PROBLEM, field);
  return e;
}

/** Build the numbers capability. Throws ConfigError for a bad inventory file. */
export function createNumbers(d: NumbersDeps): Numbers {
  const log = d.log ?? createLogger('silent');
  const now = d.now ?? Date.now;
  const iso = (): string => new Date(now()).toISOString();
  const store = d.store ?? (d.redis ? redisNumbersStore(d.redis) : memoryNumbersStore(now));
  const inventory = new Inventory(store, d.config.numberInventoryFile, d.config.production ? null : d.config.defaultCurrency, now);
  // A bad inventory file is a configuration error at build time (exit 2, naming the line).
  const firstRead = inventory.read();
  const account = async (authId: string): Promise<CustomerRef | null> => d.directory.getAccount(authId);
  const rental = new RentalSweep({ store, ledger: d.ledger, account, log, now });
  const claimMs = d.claimMs ?? PURCHASE_CLAIM_MS;

  const owned = async (authId: string, e164: string): Promise<NumberRecord> => {
    const r = await store.ownedBy(authId, e164);
    if (!r) throw new NumbersError('not_found', `This account owns no number ${e164}.`);
    return r;
  };
  const change = async (authId: string, e164: string, f: (o: Ownership) => Ownership | undefined): Promise<NumberRecord> => {
    const r = await store.changeOwned(authId, e164, iso(), f);
    if (!r) throw new NumbersError('not_found', `This account owns no number ${e164}.`);
    return r;
  };

  const checkRouteTarget = async (authId: string, kind: RouteKind, id: string): Promise<void> => {
    const field = ROUTE_FIELD[kind];
    if (kind === 'application') {
      if (!(await d.directory.getApplication(authId, id))) throw new NumbersError('invalid', 'no application with this id on this account', field);
    } else if (kind === 'endpoint') {
      if (!(await d.directory.getEndpoint(authId, id))) throw new NumbersError('invalid', 'no endpoint with this id on this account', field);
    } else if (d.trunks) {
      const t = await d.trunks.trunk(id);
      if (!t || t.authId !== authId) throw new NumbersError('invalid', 'no trunk with this id on this account', field);
    }
  };

  const numbers: Numbers = {
    store,
    inventory,
    rental,

    async route(e164: string): Promise<NumberRoute | null> {
      const n = normalizeE164(e164);
      if (n === null) return null;
      const r = await store.get(n);
      const o = r?.owner;
      if (!r || r.state !== 'owned' || !o) return null;
      return { e164: r.e164, authId: o.authId, subAccount: o.subAccount, status: o.status, endpointId: o.endpointId, applicationId: o.applicationId, trunkGroupId: o.trunkGroupId };
    },

    async callerIdOf(authId: string, endpointId: string): Promise<string | null> {
      const recs = await store.byEndpoint(authId, endpointId);
      return recs.find((r) => r.owner?.status === 'active')?.e164 ?? null;
    },

    listInventory(q, page) {
      return store.listInventory(q, page, now());
    },

    async purchase(c, text, currency) {
      const e164 = e164Of(text, 'e164');
      const offered = await store.get(e164);
      if (!offered) throw new NumbersError('not_found', `${e164} is not in the inventory.`);
      if (!forSale(offered, now())) throw new NumbersError('conflict', `${e164} is no longer for sale.`, null, 'number_taken');
      if (currency !== null && currency !== offered.currency) throw new NumbersError('invalid', `the number is priced in ${offered.currency}`, 'currency');
      const acct = await d.ledger.customerAccount(c);
      if (acct.currency !== offered.currency) {
        throw new NumbersError('invalid', `the number is priced in ${offered.currency}; this account keeps its balance in ${acct.currency}`, 'currency', 'currency_mismatch');
      }
      // 1. Claim: one purchase holds the number; a racing one is refused here (409).
      const token = randomUUID();
      const at = iso();
      const claimed = await store.claim(e164, { token, authId: c.authId, deadline: now() + claimMs, at }, now());
      if (!claimed.ok) {
        if (claimed.reason === 'not_found') throw new NumbersError('not_found', `${e164} is not in the inventory.`);
        throw new NumbersError('conflict', `${e164} is no longer for sale.`, null, 'number_taken');
      }
      const rec = claimed.record;
      // 2. Debit setup + first month at the price the claim holds (the inventory may have been repriced).
      const amount = rec.setupFee + rec.monthlyFee;
      if (rec.currency !== acct.currency) {
        await store.releaseClaim(e164, token, iso());
        throw new NumbersError('invalid', `the number is priced in ${rec.currency}; this account keeps its balance in ${acct.currency}`, 'currency', 'currency_mismatch');
      }
      if (amount > 0) {
        // A ledger that does not answer throws here with the claim still held: the debit may
        // or may not have happened, and the recovery sweep settles it after the deadline.
        const r = await d.ledger.change(
          { customer: c },
          { type: 'debit', amount, currency: rec.currency, referenceType: 'did_setup', referenceId: e164, description: setupDescription(e164, token), key: setupKey(c.authId, token) },
        );
        if (!r.ok) {
          // 3a. Refused: give the number back; no row was written (a refused post writes nothing).
          await store.releaseClaim(e164, token, iso());
          if (r.reason === 'insufficient_funds') throw new NumbersError('payment_required', `The balance does not cover the setup fee and the first month of ${e164}.`, null, 'insufficient_balance');
          throw new NumbersError('invalid', `the ledger refused the debit (${r.reason})`, 'currency', r.reason);
        }
      }
      // 3b. Paid: the number is the account's.
      const done = await store.commitClaim(e164, token, newOwnership(rec, c.authId, at), iso());
      if (done) return done;
      // The claim was lost (its deadline passed under a stalled request). The recovery sweep
      // may have completed it from the ledger row: then it is ours. Otherwise refund.
      const now2 = await store.get(e164);
      if (now2?.state === 'owned' && now2.owner?.authId === c.authId && now2.owner.purchasedAt === at) return now2;
      if (amount > 0) {
        await d.ledger.change(
          { customer: c },
          { type: 'credit', amount, currency: rec.currency, referenceType: 'refund', referenceId: e164, description: `Number ${e164}: purchase ${token} timed out; refunded`, key: `refund:${setupKey(c.authId, token)}` },
        );
      }
      log.warn({ e164, authId: c.authId }, 'number purchase lost its claim; refunded');
      throw new NumbersError('conflict', `${e164} is no longer for sale.`, null, 'number_taken');
    },

    async list(v, q, page) {
      return store.listOwned(v.authId, { ...q, ...(v.subAccount !== null ? { subAccount: v.subAccount } : {}) }, page);
    },

    async get(v, text) {
      const e164 = e164Of(text, 'e164');
      const r = await store.ownedBy(v.authId, e164);
      if (!r || (v.subAccount !== null && r.owner?.subAccount !== v.subAccount)) throw new NumbersError('not_found', `This account owns no number ${e164}.`);
      return r;
    },

    async release(authId, text) {
      const e164 = e164Of(text, 'e164');
      const r = await store.releaseOwned(authId, e164, iso());
      if (!r) throw new NumbersError('not_found', `This account owns no number ${e164}.`);
      return r;
    },

    async setRoute(authId, text, kind, id) {
      const e164 = e164Of(text, 'e164');
      await owned(authId, e164);
      if (id !== null) await checkRouteTarget(authId, kind, id);
      const at = now();
      return change(authId, e164, (o) => {
        if (id === null) {
          const cur = kind === 'trunk' ? o.trunkGroupId : kind === 'application' ? o.applicationId : o.endpointId;
          if (cur === null) return undefined; // routed elsewhere, or not at all: nothing changes
          return { ...o, trunkGroupId: null, applicationId: null, endpointId: null, routedAt: null };
        }
        return {
          ...o,
          trunkGroupId: kind === 'trunk' ? id : null,
          applicationId: kind === 'application' ? id : null,
          endpointId: kind === 'endpoint' ? id : null,
          routedAt: at,
        };
      });
    },

    async setSubAccount(authId, text, sub) {
      const e164 = e164Of(text, 'e164');
      await owned(authId, e164);
      if (sub !== null && !(await d.directory.getSubAccount(authId, sub))) throw new NumbersError('invalid', 'no sub-account with this id on this account', 'sub_account_id');
      return change(authId, e164, (o) => ({ ...o, subAccount: sub }));
    },

    async numbersUsingTrunk(authId, trunkId) {
      return (await store.owned(authId)).filter((r) => r.owner?.trunkGroupId === trunkId).map((r) => r.e164);
    },

    async unrouteTrunk(authId, trunkId) {
      const changed: string[] = [];
      for (const e164 of await numbers.numbersUsingTrunk(authId, trunkId)) {
        const r = await store.changeOwned(authId, e164, iso(), (o) => (o.trunkGroupId === trunkId ? { ...o, trunkGroupId: null, routedAt: null } : undefined));
        if (r) changed.push(e164);
      }
      return changed;
    },

    async start() {
      rental.start(d.config.numberRentalSweepInterval * 1000);
      const r = await inventory.upsert(firstRead);
      log.info({ source: r.source, size: r.size, added: r.added, updated: r.updated, skippedSold: r.skippedSold }, 'number inventory loaded');
    },

    async reload() {
      const r = await inventory.load();
      return { source: r.source, size: r.size, added: r.added, updated: r.updated, skippedSold: r.skippedSold };
    },

    stop() {
      rental.stop();
    },
  };
  return numbers;
}
