/**
 * Charging calls (docs/billing.md "Calls"): what a call costs, whether it may start,
 * when the money of an account runs out while its calls run, and the one debit of
 * each call when it ends.
 *
 * - **Before the call** ({@link CallCharging.quote}): the rate of the destination in the
 *   account's currency (a number: the deck's longest prefix; an endpoint: a `sip:` line,
 *   else free). A number without a rate is refused (403: no unrated destination leaves
 *   the platform); a rated call whose first increment the available balance does not
 *   cover is refused (402).
 * - **While calls run** (Kamailio cnxcc's model): every answered rated call of an account
 *   is in the account's live set (the store: shared by the fleet). All of them drain one
 *   balance; {@link cutMoment} finds when the next increment of any of them could no
 *   longer be paid, and the node that holds a call ends it then (both parties get a BYE).
 * - **After the call** ({@link CallCharging.settle}): the CDR's bill (rating.ts) is debited
 *   once, keyed by the call (two nodes seeing its BYE still debit once).
 */
import type { Logger } from '../logger.js';
import type { LiveCall, LiveCallStore } from '../store/billing/live.js';
import type { CustomerRef, Ledger } from './ledger.js';
import type { Rates } from './index.js';
import { formatAmount } from './amount.js';
import { priceOfSeconds, rateDuration, type RateTerms } from './rating.js';

/** What a rated call carries from its INVITE to its bill (kept with the call's state). */
export interface CallCharge {
  /** The paying account (a sub-account's calls are paid by its parent). */
  payer: CustomerRef;
  currency: string;
  /** The deck line that priced it. */
  prefix: string;
  terms: RateTerms;
}

/** Where a call goes, as far as its price depends on it. */
export type ChargeTarget = { kind: 'endpoint'; uri: string } | { kind: 'phone'; number: string } | { kind: 'app' };

export type Quote =
  /** `charge` null: the call is free (no rate applies). */
  | { ok: true; charge: CallCharge | null }
  | { ok: false; status: 402; reason: string }
  | { ok: false; status: 403; reason: string };

/** The bill of a call as the CDR and the Hangup callback show it. */
export interface CallBill {
  billDuration: number;
  /** Minor units. */
  amount: number;
  billedAmount: string;
  /** Per minute, as decimal text ("1.00000"). */
  rate: string;
  prefix: string;
  currency: string;
}

/** The cost of the first increment of a rated call (what must be available before it starts), minor units. */
export function firstIncrementCost(t: RateTerms): number {
  return t.connectFee + priceOfSeconds(Math.max(1, t.initialIncrement), t.ratePerMinute);
}

/** What a live call costs if it ends at `t` (ms), as the CDR would bill it (whole seconds, rounded). */
export function costAt(c: LiveCall, t: number): number {
  const seconds = Math.max(0, Math.round((t - c.answerAt) / 1000));
  return rateDuration(seconds, c).amount;
}

/** How long before the moment the next unpaid increment would be billed a call is ended, ms. */
export const CUT_MARGIN_MS = 250;

/**
 * When the calls of one account must end (ms since the epoch), or null when their money
 * lasts beyond `horizon`: the first moment, after `now`, at which ending them would bill
 * more than `available` (minor units) together — less {@link CUT_MARGIN_MS}, so that the
 * durations the CDRs round to stay within what was paid. `now` itself when they already
 * cost more. A call's bill steps up when its whole-second duration enters a new increment,
 * i.e. half a second (rounding) after each increment boundary; only those moments are tried.
 */
export function cutMoment(available: number, calls: readonly LiveCall[], now: number, horizon: number): number | null {
  if (calls.length === 0) return null;
  const total = (t: number): number => calls.reduce((s, c) => s + costAt(c, t), 0);
  if (total(now) > available) return now;
  const steps: number[] = [];
  for (const c of calls) {
    // The bill of d whole seconds steps up when d leaves a boundary b: 0 (the first second
    // bills the initial increment), then initial + k × subsequent. d is the duration
    // rounded, so the step comes half a second after the boundary.
    const stepAt = (b: number): number => c.answerAt + (b + 0.5) * 1000;
    const init = Math.max(0, c.initialIncrement);
    const sub = Math.max(1, c.subsequentIncrement);
    if (init > 0 && stepAt(0) > now && stepAt(0) <= horizon) steps.push(stepAt(0));
    const elapsed = (now - c.answerAt) / 1000;
    for (let k = Math.max(0, Math.floor((elapsed - 0.5 - init) / sub)); ; k++) {
      const at = stepAt(init + k * sub);
      if (at > horizon) break;
      if (at > now) steps.push(at);
    }
  }
  steps.sort((a, b) => a - b);
  for (const s of steps) if (total(s) > available) return Math.max(now, s - CUT_MARGIN_MS);
  return null;
}

export interface CallChargingOptions {
  ledger: Ledger;
  rates: Rates;
  live: LiveCallStore;
  log: Logger;
  /** How often the cut moments of accounts with calls on this node are computed again, ms. @default 1000 */
  recheckMs?: number;
  /** Counted once per call ended for credit (`sip_calls_cut_for_credit_total`). */
  onCut?: () => void;
  now?: () => number;
}

/** One answered rated call held by this node: how to end it. */
interface LocalCall {
  payer: string;
  end: () => void;
  timer: NodeJS.Timeout | null;
}

/** The charging service of one process (its timers are for the calls it holds). */
export class CallCharging {
  readonly #o: CallChargingOptions;
  readonly #now: () => number;
  /** Call key → the local call. */
  readonly #local = new Map<string, LocalCall>();
  /** Payer id → its ref and the keys of its local calls (the ticker computes each again). */
  readonly #byPayer = new Map<string, { ref: CustomerRef; keys: Set<string> }>();
  #ticker: NodeJS.Timeout | null = null;

  constructor(o: CallChargingOptions) {
    this.#o = o;
    this.#now = o.now ?? Date.now;
  }

  /** The price and the credit check of a call about to be placed by an endpoint of `payer`. */
  async quote(payer: CustomerRef, target: ChargeTarget): Promise<Quote> {
    if (target.kind === 'app') return { ok: true, charge: null };
    // The deck first: a free call costs no store round trip. The currency is the payer's
    // partner's (an account's currency is fixed when its ledger account opens, from the same).
    const currency = this.#o.ledger.currencyOf(payer.partnerId);
    const line = this.#o.rates.deck.lookup(target.kind === 'phone' ? target.number : target.uri, currency);
    if (!line) {
      if (target.kind === 'phone') return { ok: false, status: 403, reason: `no rate for ${target.number} in ${currency}` };
      return { ok: true, charge: null };
    }
    const terms: RateTerms = { ratePerMinute: line.ratePerMinute, initialIncrement: line.initialIncrement, subsequentIncrement: line.subsequentIncrement, connectFee: line.connectFee };
    // What the payer's other calls have cost so far is spoken for.
    const [{ available }, reserved] = await Promise.all([this.#o.ledger.available(payer), this.reserved(payer.authId)]);
    if (available - reserved < firstIncrementCost(terms)) return { ok: false, status: 402, reason: 'insufficient balance for the first increment' };
    return { ok: true, charge: { payer, currency, prefix: line.prefix, terms } };
  }

  /**
   * A rated call was answered on this node: it joins its payer's live set, and `end` is
   * how this node ends it when the money runs out. Returns once the live set has it.
   */
  async answered(key: string, charge: CallCharge, answerAt: number, maxCallMs: number, end: () => void): Promise<void> {
    const payer = charge.payer.authId;
    await this.#o.live.add(payer, { key, answerAt, ...charge.terms }, maxCallMs);
    this.#local.set(key, { payer, end, timer: null });
    let p = this.#byPayer.get(payer);
    if (!p) this.#byPayer.set(payer, (p = { ref: charge.payer, keys: new Set() }));
    p.keys.add(key);
    this.#startTicker();
    await this.#schedule(charge.payer);
  }

  /**
   * A call ended (any node, any reason): its bill is debited once and it leaves the live
   * set. `bill` null for a free call (nothing to debit; it was never live).
   */
  async settle(key: string, charge: CallCharge, callUuid: string, bill: CallBill | null): Promise<void> {
    this.#forget(key);
    await this.#o.live.remove(charge.payer.authId, key);
    if (bill && bill.amount > 0) {
      const r = await this.#o.ledger.debitCall(charge.payer, callUuid, bill.amount, charge.currency, `call ${callUuid}: ${bill.billDuration} s at ${bill.rate}/min (${bill.prefix})`);
      if (!r.ok) this.#o.log.error({ callUuid, payer: charge.payer.authId, reason: r.reason }, 'call debit refused by the ledger');
    }
    // The others of the payer may now last longer (or not): computed again.
    if (this.#byPayer.has(charge.payer.authId)) await this.#schedule(charge.payer).catch(() => undefined);
  }

  /** What a payer's calls in progress have cost so far (`reserved_funds`), minor units. */
  async reserved(payer: string): Promise<number> {
    const now = this.#now();
    const calls = await this.#o.live.list(payer, now);
    return calls.reduce((sum, c) => sum + costAt(c, now), 0);
  }

  /** The bill of a call that lasted `duration` whole seconds. */
  static bill(charge: CallCharge, duration: number): CallBill {
    const r = rateDuration(duration, charge.terms);
    return { billDuration: r.billDuration, amount: r.amount, billedAmount: r.billedAmount, rate: formatAmount(charge.terms.ratePerMinute), prefix: charge.prefix, currency: charge.currency };
  }

  stop(): void {
    if (this.#ticker) clearInterval(this.#ticker);
    this.#ticker = null;
    for (const c of this.#local.values()) if (c.timer) clearTimeout(c.timer);
  }

  #forget(key: string): void {
    const c = this.#local.get(key);
    if (!c) return;
    if (c.timer) clearTimeout(c.timer);
    this.#local.delete(key);
    const p = this.#byPayer.get(c.payer);
    p?.keys.delete(key);
    if (p && p.keys.size === 0) this.#byPayer.delete(c.payer);
  }

  /** Every recheck: the payers with calls here, computed again (calls of other nodes change their moment). */
  #startTicker(): void {
    if (this.#ticker) return;
    this.#ticker = setInterval(() => {
      if (this.#byPayer.size === 0) return;
      for (const [payer, p] of this.#byPayer) {
        void this.#schedule(p.ref).catch((err: unknown) => this.#o.log.warn({ err: err instanceof Error ? err.message : String(err), payer }, 'credit check failed'));
      }
    }, this.#o.recheckMs ?? 1000);
    this.#ticker.unref();
  }

  /** The cut moment of a payer's calls, and a timer for each of them held here. */
  async #schedule(payer: CustomerRef): Promise<void> {
    const now = this.#now();
    const [{ available }, calls] = await Promise.all([this.#o.ledger.available(payer), this.#o.live.list(payer.authId, now)]);
    const keys = this.#byPayer.get(payer.authId)?.keys;
    if (!keys || keys.size === 0) return;
    // A local call no longer in the live set ended on another node (its BYE went there).
    const live = new Set(calls.map((c) => c.key));
    for (const key of [...keys]) if (!live.has(key)) this.#forget(key);
    // Look ahead past the next recheck (plus slack), so no moment falls between two.
    const at = cutMoment(available, calls, now, now + 3 * (this.#o.recheckMs ?? 1000) + 1000);
    for (const key of keys) {
      const c = this.#local.get(key);
      if (!c) continue;
      if (c.timer) clearTimeout(c.timer);
      c.timer = null;
      if (at === null) continue;
      c.timer = setTimeout(() => this.#cut(key), Math.max(0, at - this.#now()));
      c.timer.unref();
    }
  }

  #cut(key: string): void {
    const c = this.#local.get(key);
    if (!c) return;
    this.#forget(key);
    this.#o.onCut?.();
    this.#o.log.info({ key, payer: c.payer }, 'call ended: the balance is used up');
    c.end();
  }
}

