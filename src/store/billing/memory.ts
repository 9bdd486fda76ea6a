import {
  MAX_BALANCE_MINOR,
  floorOf,
  rowMatches,
  summaryFrom,
  type BillingStore,
  type LedgerAccount,
  type LedgerRow,
  type LedgerSummary,
  type LedgerTerms,
  type Post,
  type PostResult,
  type RowFilter,
} from './billing.js';

interface Book {
  accounts: Map<string, LedgerAccount>;
  /** account → rows, oldest first. */
  rows: Map<string, LedgerRow[]>;
  /** post key → rows of that post. */
  posted: Map<string, LedgerRow[]>;
  /** account → `<reference_type>|debit|credit|n` → sum. */
  sums: Map<string, Map<string, number>>;
}

const clone = <T>(v: T): T => structuredClone(v);

/**
 * The embedded ledger (one process, gone at exit). Same contract as
 * RedisBillingStore (test/contract/ledger.test.ts); every post is one synchronous
 * step, so it is atomic by construction.
 */
export class MemoryBillingStore implements BillingStore {
  readonly #books = new Map<string, Book>();

  #book(id: string): Book {
    let b = this.#books.get(id);
    if (!b) this.#books.set(id, (b = { accounts: new Map(), rows: new Map(), posted: new Map(), sums: new Map() }));
    return b;
  }

  async open(book: string, account: string, terms: LedgerTerms, at: string): Promise<LedgerAccount> {
    const b = this.#book(book);
    let a = b.accounts.get(account);
    if (!a) b.accounts.set(account, (a = { account, ...terms, balance: 0, createdAt: at }));
    return clone(a);
  }

  async account(book: string, account: string): Promise<LedgerAccount | null> {
    const a = this.#books.get(book)?.accounts.get(account);
    return a ? clone(a) : null;
  }

  async accounts(book: string): Promise<LedgerAccount[]> {
    return clone([...(this.#books.get(book)?.accounts.values() ?? [])]);
  }

  async post(book: string, post: Post): Promise<PostResult> {
    const b = this.#book(book);
    const prior = b.posted.get(post.key);
    if (prior) return { ok: true, replayed: true, rows: clone(prior) };
    const next = new Map<string, number>();
    for (const p of post.postings) {
      const a = b.accounts.get(p.account);
      if (!a) return { ok: false, reason: 'no_account', account: p.account };
      if (a.currency !== post.currency) return { ok: false, reason: 'currency_mismatch', account: p.account, currency: a.currency };
      const cur = next.get(p.account) ?? a.balance;
      if (p.type === 'debit') {
        if (cur - p.amount < floorOf(a) && p.referenceType !== 'cdr') return { ok: false, reason: 'insufficient_funds', account: p.account, balance: cur, floor: floorOf(a) };
        next.set(p.account, cur - p.amount);
      } else {
        if (cur + p.amount > MAX_BALANCE_MINOR) return { ok: false, reason: 'balance_limit', account: p.account };
        next.set(p.account, cur + p.amount);
      }
    }
    const rows: LedgerRow[] = [];
    for (const p of post.postings) {
      const a = b.accounts.get(p.account) as LedgerAccount;
      a.balance += p.type === 'debit' ? -p.amount : p.amount;
      const row: LedgerRow = {
        id: p.id,
        account: p.account,
        type: p.type,
        amount: p.amount,
        currency: post.currency,
        reference_type: p.referenceType,
        reference_id: p.referenceId,
        balance_after: a.balance,
        description: p.description,
        created_at: post.at,
      };
      rows.push(row);
      let l = b.rows.get(p.account);
      if (!l) b.rows.set(p.account, (l = []));
      l.push(row);
      let s = b.sums.get(p.account);
      if (!s) b.sums.set(p.account, (s = new Map()));
      const add = (k: string, v: number): void => void s.set(k, (s.get(k) ?? 0) + v);
      add(`${p.referenceType}|${p.type}`, p.amount);
      add(`${p.referenceType}|n`, 1);
    }
    b.posted.set(post.key, rows);
    return { ok: true, replayed: false, rows: clone(rows) };
  }

  async transactions(book: string, account: string, filter: RowFilter, page: { limit: number; offset: number }): Promise<{ total: number; items: LedgerRow[] }> {
    const all = (this.#books.get(book)?.rows.get(account) ?? []).filter((r) => rowMatches(r, filter)).reverse();
    return { total: all.length, items: clone(all.slice(page.offset, page.offset + page.limit)) };
  }

  async summary(book: string, account: string): Promise<LedgerSummary> {
    return summaryFrom(this.#books.get(book)?.sums.get(account) ?? new Map());
  }

  async close(): Promise<void> {}
}
