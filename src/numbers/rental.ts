/**
 * The monthly rental (docs/numbers.md "Rental"): on each number's anniversary its
 * `monthly_fee` is debited (reference_type `did_rental`), once per number and period
 * across the fleet:
 *
 * - a lease per number and period (`rental:<e164>:<purchase>:<k>`, SET NX PX) keeps two
 *   nodes from both trying at once;
 * - the ledger's post key `did_rental:<auth_id>:<e164>:<purchase>:<k>` makes the debit
 *   happen once even when a lease ran out under a slow node;
 * - the record advances only from period k to k+1 (compare-and-set), so it cannot skip.
 *
 * A rental the balance cannot pay turns the number `inactive` (it stops routing); a later
 * sweep that can pay it (after a top-up) debits it and makes the number `active` again.
 * The same sweep returns purchases that crashed with their claim held (docs/numbers.md
 * "Purchase").
 */
import type { Ledger, CustomerRef } from '../billing/ledger.js';
import type { Logger } from '../logger.js';
import type { NumbersStore, NumberRecord, Ownership } from '../store/numbers/numbers.js';

/** `iso` plus `months` calendar months (UTC), the day clamped to the month's last: Jan 31 + 1 = Feb 28/29. */
export function addMonths(iso: string, months: number): string {
  const d = new Date(iso);
  const y = d.getUTCFullYear();
  const m = d.getUTCMonth() + months;
  const last = new Date(Date.UTC(y, m + 1, 0)).getUTCDate();
  const day = Math.min(d.getUTCDate(), last);
  return new Date(Date.UTC(y, m, day, d.getUTCHours(), d.getUTCMinutes(), d.getUTCSeconds(), d.getUTCMilliseconds())).toISOString();
}

/** The ledger post key of period `k` of an ownership (k ≥ 1; period 0 is paid at purchase). */
export function rentalKey(e164: string, o: Ownership, k: number): string {
  return `did_rental:${o.authId}:${e164}:${Date.parse(o.purchasedAt)}:${k}`;
}

/** The setup debit's post key of a purchase (its claim token). */
export function setupKey(authId: string, token: string): string {
  return `did_setup:${authId}:${token}`;
}

/** The description of a setup debit; the recovery finds a crashed purchase's debit by it. */
export function setupDescription(e164: string, token: string): string {
  return `Number ${e164}: setup and first month (purchase ${token})`;
}

/** The ownership a purchase of `r` by `authId` at `at` starts with (the first month paid). */
export function newOwnership(r: NumberRecord, authId: string, at: string): Ownership {
  return {
    authId,
    subAccount: null,
    status: 'active',
    inactiveReason: null,
    endpointId: null,
    applicationId: null,
    trunkGroupId: null,
    routedAt: null,
    purchasedAt: at,
    setupFee: r.setupFee,
    monthlyFee: r.monthlyFee,
    currency: r.currency,
    paidPeriods: 1,
    lastBillingDate: at,
    nextBillingDate: addMonths(at, 1),
  };
}

export interface SweepResult {
  charged: number;
  inactive: number;
  reactivated: number;
  /** Crashed purchases settled: owned (their debit was found) or back for sale. */
  recovered: number;
}

export interface RentalDeps {
  store: NumbersStore;
  ledger: Ledger;
  /** The ledger's view of an account (its AccountRecord), or null when it is gone. */
  account(authId: string): Promise<CustomerRef | null>;
  log: Logger;
  now?: () => number;
  /** How long one node holds a number's period before another may try. @default 30000 */
  leaseMs?: number;
}

/** Periods one sweep catches up for one number (a node down for months). */
const MAX_CATCH_UP = 24;

export class RentalSweep {
  readonly #d: RentalDeps;
  readonly #now: () => number;
  #timer: NodeJS.Timeout | null = null;
  #running: Promise<SweepResult> | null = null;

  constructor(d: RentalDeps) {
    this.#d = d;
    this.#now = d.now ?? Date.now;
  }

  /** Sweep every `intervalMs` (0: never). */
  start(intervalMs: number): void {
    if (intervalMs <= 0 || this.#timer) return;
    this.#timer = setInterval(() => {
      void this.sweep().catch((err: unknown) => this.#d.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'number rental sweep failed'));
    }, intervalMs);
    this.#timer.unref();
  }

  stop(): void {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
  }

  /** One sweep (one at a time per process). */
  sweep(): Promise<SweepResult> {
    this.#running ??= this.#sweep().finally(() => {
      this.#running = null;
    });
    return this.#running;
  }

  async #sweep(): Promise<SweepResult> {
    const res: SweepResult = { charged: 0, inactive: 0, reactivated: 0, recovered: 0 };
    const now = this.#now();
    for (const e164 of await this.#d.store.expiredClaims(now)) {
      if (await this.recoverClaim(e164)) res.recovered++;
    }
    for (const e164 of await this.#d.store.due(now)) {
      try {
        await this.#charge(e164, res);
      } catch (err) {
        this.#d.log.warn({ e164, err: err instanceof Error ? err.message : String(err) }, 'number rental not charged');
      }
    }
    return res;
  }

  async #charge(e164: string, res: SweepResult): Promise<void> {
    for (let i = 0; i < MAX_CATCH_UP; i++) {
      const now = this.#now();
      const rec = await this.#d.store.get(e164);
      const o = rec?.owner;
      if (!rec || rec.state !== 'owned' || !o || Date.parse(o.nextBillingDate) > now) return;
      const k = o.paidPeriods;
      if (!(await this.#d.store.lease(`rental:${e164}:${Date.parse(o.purchasedAt)}:${k}`, this.#d.leaseMs ?? 30_000))) return;
      const customer = await this.#d.account(o.authId);
      if (!customer) return;
      let paid = o.monthlyFee === 0;
      if (!paid) {
        const r = await this.#d.ledger.change(
          { customer },
          { type: 'debit', amount: o.monthlyFee, currency: o.currency, referenceType: 'did_rental', referenceId: e164, description: `Number ${e164}: rental ${o.nextBillingDate.slice(0, 10)} to ${addMonths(o.purchasedAt, k + 1).slice(0, 10)}`, key: rentalKey(e164, o, k) },
        );
        paid = r.ok;
        if (!r.ok) this.#d.log.info({ e164, authId: o.authId, reason: r.reason }, 'number rental unpaid; number inactive');
      }
      const at = new Date(now).toISOString();
      if (paid) {
        const wasInactive = o.status === 'inactive' && o.inactiveReason === 'rental_unpaid';
        const moved = await this.#d.store.changeOwned(o.authId, e164, at, (cur) =>
          cur.purchasedAt !== o.purchasedAt || cur.paidPeriods !== k
            ? undefined
            : {
                ...cur,
                paidPeriods: k + 1,
                lastBillingDate: at,
                nextBillingDate: addMonths(cur.purchasedAt, k + 1),
                ...(cur.status === 'inactive' && cur.inactiveReason === 'rental_unpaid' ? { status: 'active' as const, inactiveReason: null } : {}),
              },
        );
        if (moved?.owner?.paidPeriods === k + 1) {
          res.charged++;
          if (wasInactive) res.reactivated++;
        }
        continue;
      }
      await this.#d.store.changeOwned(o.authId, e164, at, (cur) =>
        cur.purchasedAt !== o.purchasedAt || cur.paidPeriods !== k || cur.status === 'inactive' ? undefined : { ...cur, status: 'inactive', inactiveReason: 'rental_unpaid' },
      );
      if (o.status === 'active') res.inactive++;
      return;
    }
  }

  /**
   * Settle a purchase whose claim passed its deadline (its node crashed between the claim
   * and the end): when the buyer's ledger has the purchase's setup debit, the number is
   * theirs; otherwise it is for sale again. True when settled.
   */
  async recoverClaim(e164: string): Promise<boolean> {
    const rec = await this.#d.store.get(e164);
    const c = rec?.claim;
    if (!rec || rec.state !== 'claimed' || !c || c.deadline > this.#now()) return false;
    const customer = await this.#d.account(c.authId);
    const at = new Date(this.#now()).toISOString();
    if (customer) {
      const where = this.#d.ledger.address({ customer });
      const rows = await this.#d.ledger.transactions(where, { referenceType: 'did_setup', from: Date.parse(c.at) }, { limit: 10_000, offset: 0 });
      const debit = rows.items.find((r) => r.reference_id === e164 && r.description === setupDescription(e164, c.token));
      if (debit) {
        const owned = await this.#d.store.commitClaim(e164, c.token, newOwnership(rec, c.authId, c.at), at);
        if (owned) this.#d.log.warn({ e164, authId: c.authId }, 'crashed number purchase completed from its ledger row');
        return owned !== null;
      }
    }
    const released = await this.#d.store.releaseClaim(e164, c.token, at);
    if (released) this.#d.log.warn({ e164 }, 'crashed number purchase returned the number to sale');
    return released;
  }
}
