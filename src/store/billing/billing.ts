/**
 * The ledger store (docs/billing.md "Ledger"): balances and the transaction rows
 * that explain them. Two implementations with one contract
 * (test/contract/ledger.test.ts): RedisBillingStore and MemoryBillingStore.
 *
 * Accounts are grouped in **books**: a partner and all of its customers share one
 * book (its id is the partner id), so that a transfer from the partner to a
 * customer touches one Redis Cluster slot and is one Lua script. An account
 * without a partner is a book of its own (see billing/ledger.ts `bookOf`).
 *
 * Every change of a balance is one {@link post} of one or two postings: the
 * rows and the new balances are written together or not at all, and a post
 * carries a key that makes it happen once (a CDR's debit seen by two nodes, a
 * retried transfer). A debit that would take a balance below its floor (0 for
 * PREPAID, -credit_limit for POSTPAID) refuses the whole post — except a `cdr`
 * debit: the call has happened, so its bill is always recorded (prepaid
 * enforcement ends calls before the money runs out, so at most a rounding below).
 *
 * Amounts are integers of minor units (1/100000, billing/amount.ts).
 */

/** No balance may leave ± this: integers stay exact in Lua's doubles and JavaScript numbers. */
export const MAX_BALANCE_MINOR = Number.MAX_SAFE_INTEGER;

export type TxType = 'credit' | 'debit';
export type ReferenceType = 'recharge' | 'transfer' | 'cdr' | 'did_setup' | 'did_rental' | 'refund';
export const REFERENCE_TYPES: readonly ReferenceType[] = ['recharge', 'transfer', 'cdr', 'did_setup', 'did_rental', 'refund'];
export type LedgerAccountType = 'PREPAID' | 'POSTPAID';

/** How an account may spend (set when it is opened). */
export interface LedgerTerms {
  currency: string;
  accountType: LedgerAccountType;
  /** POSTPAID: how far below zero debits may go, minor units (0 for PREPAID). */
  creditLimit: number;
}

/** One account of a book as stored. */
export interface LedgerAccount extends LedgerTerms {
  account: string;
  /** Minor units; below 0 only for POSTPAID. */
  balance: number;
  createdAt: string;
}

/** One transaction row (issue 22 item 1). Amounts in minor units. */
export interface LedgerRow {
  id: string;
  account: string;
  type: TxType;
  amount: number;
  currency: string;
  reference_type: ReferenceType;
  reference_id: string;
  balance_after: number;
  description: string;
  created_at: string;
}

/** One leg of a post. */
export interface Posting {
  /** Row id (unique; made by the caller). */
  id: string;
  account: string;
  type: TxType;
  /** Minor units, > 0. */
  amount: number;
  referenceType: ReferenceType;
  referenceId: string;
  description: string;
}

/** A balance change of one or two accounts of one book, all or nothing. */
export interface Post {
  /**
   * What makes the post happen once: a second post with the same key changes
   * nothing and answers the rows of the first (`replayed`). E.g. `cdr:<auth_id>:<call_uuid>`,
   * `transfer:<transfer id>`.
   */
  key: string;
  currency: string;
  /** ISO 8601, the rows' created_at. */
  at: string;
  postings: Posting[];
}

export type PostResult =
  | { ok: true; replayed: boolean; rows: LedgerRow[] }
  /** A debit would go below the floor: `balance` and `floor` of that account now. */
  | { ok: false; reason: 'insufficient_funds'; account: string; balance: number; floor: number }
  | { ok: false; reason: 'currency_mismatch'; account: string; currency: string }
  | { ok: false; reason: 'no_account'; account: string }
  /** A credit would take the balance beyond what is kept exactly. */
  | { ok: false; reason: 'balance_limit'; account: string };

/** Totals of an account's rows, kept with every post. */
export interface LedgerSummary {
  total_transactions: number;
  total_debit: number;
  total_credit: number;
  by_reference_type: Array<{ reference_type: ReferenceType; total_debit: number; total_credit: number; count: number }>;
}

/** Which rows a list shows (all when empty). */
export interface RowFilter {
  type?: TxType;
  referenceType?: ReferenceType;
  /** Inclusive, ms since the epoch. */
  from?: number;
  to?: number;
}

export interface BillingStore {
  /**
   * The account of a book, opened with `terms` and a zero balance when it has none
   * yet (an existing account keeps its terms: a currency never changes under a balance).
   */
  open(book: string, account: string, terms: LedgerTerms, at: string): Promise<LedgerAccount>;
  /** The account, or null before it was opened. */
  account(book: string, account: string): Promise<LedgerAccount | null>;
  /** Every account of the book (a partner's dashboard). */
  accounts(book: string): Promise<LedgerAccount[]>;
  /** Apply a post atomically (see {@link Post}). */
  post(book: string, post: Post): Promise<PostResult>;
  /** Rows of the account, newest first, one page. */
  transactions(book: string, account: string, filter: RowFilter, page: { limit: number; offset: number }): Promise<{ total: number; items: LedgerRow[] }>;
  /** Totals of every row of the account. */
  summary(book: string, account: string): Promise<LedgerSummary>;
  close(): Promise<void>;
}

/** Whether a row passes a filter (both stores use this one function). */
export function rowMatches(r: LedgerRow, f: RowFilter): boolean {
  if (f.type !== undefined && r.type !== f.type) return false;
  if (f.referenceType !== undefined && r.reference_type !== f.referenceType) return false;
  if (f.from !== undefined || f.to !== undefined) {
    const at = Date.parse(r.created_at);
    if (f.from !== undefined && at < f.from) return false;
    if (f.to !== undefined && at > f.to) return false;
  }
  return true;
}

/** The lowest balance debits may reach. */
export function floorOf(t: LedgerTerms): number {
  return t.accountType === 'POSTPAID' ? -t.creditLimit : 0;
}

/** A summary from the per-(reference type, type) sums both stores keep. */
export function summaryFrom(sums: ReadonlyMap<string, number>): LedgerSummary {
  const by: LedgerSummary['by_reference_type'] = [];
  let debit = 0;
  let credit = 0;
  let n = 0;
  for (const rt of REFERENCE_TYPES) {
    const d = sums.get(`${rt}|debit`) ?? 0;
    const c = sums.get(`${rt}|credit`) ?? 0;
    const count = sums.get(`${rt}|n`) ?? 0;
    if (count === 0) continue;
    by.push({ reference_type: rt, total_debit: d, total_credit: c, count });
    debit += d;
    credit += c;
    n += count;
  }
  return { total_transactions: n, total_debit: debit, total_credit: credit, by_reference_type: by };
}
