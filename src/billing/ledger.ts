/**
 * The ledger (docs/billing.md "Ledger"): balances of partners and accounts, and
 * the only way they change — credits, debits and transfers, each written as
 * transaction rows together with the balance by the store (store/billing/).
 *
 * What the rest of the edge uses:
 * - `credit` (the operator's recharge), `transfer` (partner → customer),
 * - `debit` with reference_type `cdr` and the call's id (billing of a call; the
 *   key `cdr:<auth_id>:<call id>` makes it happen once even when two nodes see the BYE),
 * - `available` (the credit check before a call: balance minus reservations plus
 *   the POSTPAID credit limit).
 */
import { createHash, randomUUID } from 'node:crypto';
import type { PartnerConfig } from '../config.js';
import {
  floorOf,
  type BillingStore,
  type LedgerAccount,
  type LedgerAccountType,
  type LedgerRow,
  type LedgerSummary,
  type PostResult,
  type ReferenceType,
  type RowFilter,
  type TxType,
} from '../store/billing/billing.js';

/** The ledger account id of the partner itself inside its book. */
export const PARTNER_ACCOUNT = 'partner';

/** A customer account as the ledger needs to know it (an AccountRecord fits). */
export interface CustomerRef {
  authId: string;
  partnerId: string | null;
  accountType: LedgerAccountType;
  /** POSTPAID: how far below zero it may go, minor units. @default 0 */
  creditLimit?: number;
}

/** Where an account's rows live: the book (a partner and its customers share one) and the account in it. */
export interface LedgerAddress {
  book: string;
  account: string;
}

/** The book of a customer: its partner's, or one of its own when it has no partner. */
export function bookOf(c: { authId: string; partnerId: string | null }): string {
  return c.partnerId ?? `acct:${c.authId}`;
}

/** A balance as the routes show it. Minor units. */
export interface BalanceView {
  currency: string;
  balance: number;
  /** What the account's calls in progress have cost so far (prepaid enforcement's live set). */
  reserved: number;
  /** What may still be spent: balance − reserved − floor (the floor is −credit_limit for POSTPAID). */
  available: number;
  accountType: LedgerAccountType;
  creditLimit: number;
  createdAt: string;
}

export type TransferResult =
  | { ok: true; replayed: boolean; transferId: string; debit: LedgerRow; credit: LedgerRow }
  | Exclude<PostResult, { ok: true }>;

export interface LedgerOptions {
  store: BillingStore;
  partners: readonly PartnerConfig[];
  defaultCurrency: string;
  /** Called once per new row (not for replays): `sip_ledger_transactions_total{type}`. */
  onRow?: (type: TxType) => void;
  now?: () => number;
}

/** The ledger service of one process (stateless over its store). */
export class Ledger {
  readonly store: BillingStore;
  readonly #partners: ReadonlyMap<string, PartnerConfig>;
  readonly #defaultCurrency: string;
  readonly #onRow: (type: TxType) => void;
  readonly #now: () => number;

  constructor(o: LedgerOptions) {
    this.store = o.store;
    this.#partners = new Map(o.partners.map((p) => [p.id, p]));
    this.#defaultCurrency = o.defaultCurrency;
    this.#onRow = o.onRow ?? (() => undefined);
    this.#now = o.now ?? Date.now;
  }

  /** The currency of a partner's book: `partners[].currency`, else DEFAULT_CURRENCY. */
  currencyOf(partnerId: string | null): string {
    return (partnerId !== null ? this.#partners.get(partnerId)?.currency : undefined) ?? this.#defaultCurrency;
  }

  #at(): string {
    return new Date(this.#now()).toISOString();
  }

  /** The partner's own ledger account (opened on first use). */
  async partnerAccount(p: PartnerConfig): Promise<LedgerAccount> {
    return this.store.open(p.id, PARTNER_ACCOUNT, { currency: this.currencyOf(p.id), accountType: 'PREPAID', creditLimit: 0 }, this.#at());
  }

  /** A customer's ledger account (opened on first use, in its partner's currency). */
  async customerAccount(c: CustomerRef): Promise<LedgerAccount> {
    return this.store.open(
      bookOf(c),
      c.authId,
      { currency: this.currencyOf(c.partnerId), accountType: c.accountType, creditLimit: c.accountType === 'POSTPAID' ? c.creditLimit ?? 0 : 0 },
      this.#at(),
    );
  }

  /** Where the rows of a customer or a partner live. */
  address(who: { customer: CustomerRef } | { partner: PartnerConfig }): LedgerAddress {
    return 'customer' in who ? { book: bookOf(who.customer), account: who.customer.authId } : { book: who.partner.id, account: PARTNER_ACCOUNT };
  }

  /**
   * The balance of an account already opened (see {@link customerAccount}); `reserved`:
   * what its calls in progress have cost so far (billing/calls.ts), minor units.
   */
  view(a: LedgerAccount, reserved = 0): BalanceView {
    return {
      currency: a.currency,
      balance: a.balance,
      reserved,
      available: a.balance - reserved - floorOf(a),
      accountType: a.accountType,
      creditLimit: a.creditLimit,
      createdAt: a.createdAt,
    };
  }

  /** What a customer may still spend now (the credit check before a call), minor units. */
  async available(c: CustomerRef): Promise<{ currency: string; available: number }> {
    const v = this.view(await this.customerAccount(c));
    return { currency: v.currency, available: v.available };
  }

  #count(r: PostResult): PostResult {
    if (r.ok && !r.replayed) for (const row of r.rows) this.#onRow(row.type);
    return r;
  }

  /**
   * Credit (or debit) one account. `key` makes it happen once (a retried request,
   * a call's BYE seen twice); absent, every call is a new row.
   */
  async change(
    who: { customer: CustomerRef } | { partner: PartnerConfig },
    e: { type: TxType; amount: number; currency: string; referenceType: ReferenceType; referenceId: string; description: string; key?: string },
  ): Promise<PostResult> {
    const { book, account } = this.address(who);
    const post = {
      key: e.key ?? `${e.referenceType}:${account}:${randomUUID()}`,
      currency: e.currency,
      at: this.#at(),
      postings: [{ id: newTxId(), account, type: e.type, amount: e.amount, referenceType: e.referenceType, referenceId: e.referenceId, description: e.description }],
    };
    // One round trip when the account exists (a call's debit); open it and try again when not.
    let r = await this.store.post(book, post);
    if (!r.ok && r.reason === 'no_account') {
      if ('customer' in who) await this.customerAccount(who.customer);
      else await this.partnerAccount(who.partner);
      r = await this.store.post(book, post);
    }
    return this.#count(r);
  }

  /**
   * The debit of a call (issue 22 items 5/6): reference_type `cdr`, reference_id the
   * call's id, at most once per call and account.
   */
  debitCall(c: CustomerRef, callId: string, amount: number, currency: string, description: string): Promise<PostResult> {
    return this.change({ customer: c }, { type: 'debit', amount, currency, referenceType: 'cdr', referenceId: callId, description, key: `cdr:${c.authId}:${callId}` });
  }

  /**
   * Move money from a partner to one of its customers: one post of two rows (debit
   * of the partner, credit of the customer) with one reference_id, in the partner's
   * book (one Cluster slot). `idempotencyKey` (the request's Idempotency-Key) makes
   * a retried transfer happen once, even after the HTTP layer forgot it.
   */
  async transfer(p: PartnerConfig, c: CustomerRef, amount: number, currency: string, description: string, idempotencyKey: string | null): Promise<TransferResult> {
    if (c.partnerId !== p.id) throw new Error('transfer to another partner’s customer');
    const transferId = idempotencyKey !== null ? `TR${createHash('sha256').update(`${p.id}\u0000${c.authId}\u0000${idempotencyKey}`).digest('hex').slice(0, 24)}` : `TR${randomUUID().replace(/-/g, '').slice(0, 24)}`;
    const post = {
      key: `transfer:${transferId}`,
      currency,
      at: this.#at(),
      postings: [
        { id: newTxId(), account: PARTNER_ACCOUNT, type: 'debit' as const, amount, referenceType: 'transfer' as const, referenceId: transferId, description },
        { id: newTxId(), account: c.authId, type: 'credit' as const, amount, referenceType: 'transfer' as const, referenceId: transferId, description },
      ],
    };
    let r = await this.store.post(p.id, post);
    if (!r.ok && r.reason === 'no_account') {
      await this.partnerAccount(p);
      await this.customerAccount(c);
      r = await this.store.post(p.id, post);
    }
    this.#count(r);
    if (!r.ok) return r;
    const [debit, credit] = r.rows as [LedgerRow, LedgerRow];
    return { ok: true, replayed: r.replayed, transferId, debit, credit };
  }

  transactions(a: LedgerAddress, filter: RowFilter, page: { limit: number; offset: number }): Promise<{ total: number; items: LedgerRow[] }> {
    return this.store.transactions(a.book, a.account, filter, page);
  }

  summary(a: LedgerAddress): Promise<LedgerSummary> {
    return this.store.summary(a.book, a.account);
  }
}

/** A transaction row id: `TX` and 24 hex digits. */
export function newTxId(): string {
  return `TX${randomUUID().replace(/-/g, '').slice(0, 24)}`;
}
