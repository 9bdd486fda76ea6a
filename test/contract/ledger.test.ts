/**
 * One ledger contract, three backends: MemoryBillingStore, RedisBillingStore on
 * a real redis-server and on a 3-master Redis Cluster. Balances change only with
 * their rows, all or nothing; a debit below the floor refuses the whole post; a
 * post key makes a post happen once; 50 concurrent transfers of one partner never
 * overdraw it, and afterwards the rows of every account sum to its balance.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { BillingStore, LedgerRow, Post, Posting } from '../../src/store/billing/billing.js';
import { MemoryBillingStore } from '../../src/store/billing/memory.js';
import { RedisBillingStore } from '../../src/store/billing/redis.js';
import { redisBackends } from '../support/redis-backends.js';

const rb = redisBackends();

const kinds: Array<{ name: string; create(): BillingStore; shared: boolean; reset(): Promise<void> }> = [
  { name: 'MemoryBillingStore', create: () => new MemoryBillingStore(), shared: false, reset: async () => {} },
  { name: 'RedisBillingStore', create: () => new RedisBillingStore(rb.connect(rb.server.url), { closeConnection: true }), shared: true, reset: async () => void (await rb.admin.flushdb()) },
  { name: 'RedisBillingStore on a 3-master Redis Cluster', create: () => new RedisBillingStore(rb.connectCluster(), { closeConnection: true }), shared: true, reset: () => rb.flushCluster() },
];

const U = 100_000; // minor units per unit
const AT = '2026-11-20T10:00:00.000Z';
const PREPAID = { currency: 'USD', accountType: 'PREPAID' as const, creditLimit: 0 };

let seq = 0;
function leg(account: string, type: 'credit' | 'debit', amount: number, over: Partial<Posting> = {}): Posting {
  seq++;
  return { id: `TX${seq}`, account, type, amount, referenceType: 'recharge', referenceId: `ref-${seq}`, description: `leg ${seq}`, ...over };
}
function post(key: string, postings: Posting[], over: Partial<Post> = {}): Post {
  return { key, currency: 'USD', at: AT, postings, ...over };
}

async function allRows(s: BillingStore, book: string, account: string): Promise<LedgerRow[]> {
  return (await s.transactions(book, account, {}, { limit: 100_000, offset: 0 })).items;
}

/** Signed sum of an account's rows. */
function rowSum(rows: LedgerRow[]): number {
  return rows.reduce((t, r) => t + (r.type === 'credit' ? r.amount : -r.amount), 0);
}

describe.each(kinds)('$name (ledger contract)', (kind) => {
  let store: BillingStore;
  const extra: BillingStore[] = [];
  beforeEach(async () => {
    await kind.reset();
    store = kind.create();
  });
  afterEach(async () => {
    await store.close();
    for (const s of extra.splice(0)) await s.close();
  });

  it('opens an account at zero and keeps its first terms (a currency never changes under a balance)', async () => {
    expect(await store.account('P1', 'MA1')).toBe(null);
    const a = await store.open('P1', 'MA1', PREPAID, AT);
    expect(a).toEqual({ account: 'MA1', ...PREPAID, balance: 0, createdAt: AT });
    const again = await store.open('P1', 'MA1', { currency: 'EUR', accountType: 'POSTPAID', creditLimit: 5 }, '2030-01-01T00:00:00.000Z');
    expect(again).toEqual(a);
    expect(await store.account('P1', 'MA1')).toEqual(a);
    expect(await store.account('P2', 'MA1')).toBe(null);
    await store.open('P1', 'partner', PREPAID, AT);
    expect((await store.accounts('P1')).map((x) => x.account)).toEqual(['MA1', 'partner']);
    expect(await store.accounts('P2')).toEqual([]);
  });

  it('credits and debits write one row each with balance_after; rows newest first; summary totals', async () => {
    await store.open('P1', 'MA1', PREPAID, AT);
    const c = await store.post('P1', post('k1', [leg('MA1', 'credit', 10 * U, { id: 'TXa', referenceId: 'r1', description: 'top up' })]));
    expect(c).toEqual({
      ok: true,
      replayed: false,
      rows: [{ id: 'TXa', account: 'MA1', type: 'credit', amount: 10 * U, currency: 'USD', reference_type: 'recharge', reference_id: 'r1', balance_after: 10 * U, description: 'top up', created_at: AT }],
    });
    const d = await store.post('P1', post('k2', [leg('MA1', 'debit', 250_000, { referenceType: 'cdr', referenceId: 'call-1' })]));
    expect(d.ok && d.rows[0]?.balance_after).toBe(10 * U - 250_000);
    expect((await store.account('P1', 'MA1'))?.balance).toBe(750_000);
    const page = await store.transactions('P1', 'MA1', {}, { limit: 1, offset: 0 });
    expect(page.total).toBe(2);
    expect(page.items.map((r) => r.reference_id)).toEqual(['call-1']);
    expect((await store.transactions('P1', 'MA1', {}, { limit: 5, offset: 1 })).items.map((r) => r.reference_id)).toEqual(['r1']);
    expect(await store.summary('P1', 'MA1')).toEqual({
      total_transactions: 2,
      total_debit: 250_000,
      total_credit: 10 * U,
      by_reference_type: [
        { reference_type: 'recharge', total_debit: 0, total_credit: 10 * U, count: 1 },
        { reference_type: 'cdr', total_debit: 250_000, total_credit: 0, count: 1 },
      ],
    });
  });

  it('a prepaid debit below zero is refused whole: no row, balance unchanged; POSTPAID goes down to -credit_limit', async () => {
    await store.open('P1', 'MA1', PREPAID, AT);
    await store.post('P1', post('k1', [leg('MA1', 'credit', 5 * U)]));
    expect(await store.post('P1', post('k2', [leg('MA1', 'debit', 5 * U + 1)]))).toEqual({ ok: false, reason: 'insufficient_funds', account: 'MA1', balance: 5 * U, floor: 0 });
    expect((await store.account('P1', 'MA1'))?.balance).toBe(5 * U);
    expect((await allRows(store, 'P1', 'MA1')).length).toBe(1);
    // Exactly to zero is allowed.
    expect((await store.post('P1', post('k3', [leg('MA1', 'debit', 5 * U)]))).ok).toBe(true);
    expect((await store.account('P1', 'MA1'))?.balance).toBe(0);

    await store.open('P1', 'MA2', { currency: 'USD', accountType: 'POSTPAID', creditLimit: 3 * U }, AT);
    expect((await store.post('P1', post('k4', [leg('MA2', 'debit', 3 * U)]))).ok).toBe(true);
    expect(await store.post('P1', post('k5', [leg('MA2', 'debit', 1)]))).toEqual({ ok: false, reason: 'insufficient_funds', account: 'MA2', balance: -3 * U, floor: -3 * U });
    expect((await store.account('P1', 'MA2'))?.balance).toBe(-3 * U);
  });

  it('a cdr debit (a call that happened) is recorded past the floor; the next non-cdr debit is then refused', async () => {
    await store.open('P1', 'MA1', PREPAID, AT);
    await store.post('P1', post('k1', [leg('MA1', 'credit', 1 * U)]));
    const r = await store.post('P1', post('cdr:MA1:c1', [leg('MA1', 'debit', 1 * U + 1667, { referenceType: 'cdr', referenceId: 'c1' })]));
    expect(r.ok && r.rows[0]?.balance_after).toBe(-1667);
    expect(await store.post('P1', post('k2', [leg('MA1', 'debit', 1)]))).toEqual({ ok: false, reason: 'insufficient_funds', account: 'MA1', balance: -1667, floor: 0 });
    expect(rowSum(await allRows(store, 'P1', 'MA1'))).toBe((await store.account('P1', 'MA1'))?.balance);
  });

  it('a post key makes a post happen once: the second answers the first rows (replayed), nothing changes', async () => {
    await store.open('P1', 'MA1', PREPAID, AT);
    await store.post('P1', post('fund', [leg('MA1', 'credit', 10 * U)]));
    const debit = (): Promise<unknown> => store.post('P1', post('cdr:MA1:call-7', [leg('MA1', 'debit', 2 * U, { referenceType: 'cdr', referenceId: 'call-7' })]));
    const [a, b] = (await Promise.all([debit(), debit()])) as Array<{ ok: true; replayed: boolean; rows: LedgerRow[] }>;
    expect([a?.replayed, b?.replayed].sort()).toEqual([false, true]);
    expect(a?.rows).toEqual(b?.rows);
    expect((await store.account('P1', 'MA1'))?.balance).toBe(8 * U);
    expect((await allRows(store, 'P1', 'MA1')).filter((r) => r.reference_id === 'call-7')).toHaveLength(1);
  });

  it('a two-legged post (a transfer) is all or nothing: short funds, another currency or a missing account change neither side', async () => {
    await store.open('P1', 'partner', PREPAID, AT);
    await store.open('P1', 'MA1', PREPAID, AT);
    await store.post('P1', post('fund', [leg('partner', 'credit', 10 * U)]));
    const transfer = (key: string, amount: number, over: Partial<Post> = {}, to = 'MA1'): ReturnType<BillingStore['post']> =>
      store.post('P1', post(key, [leg('partner', 'debit', amount, { referenceType: 'transfer', referenceId: key }), leg(to, 'credit', amount, { referenceType: 'transfer', referenceId: key })], over));
    expect(await transfer('t1', 11 * U)).toMatchObject({ ok: false, reason: 'insufficient_funds', account: 'partner', balance: 10 * U });
    expect(await transfer('t2', 1 * U, { currency: 'EUR' })).toEqual({ ok: false, reason: 'currency_mismatch', account: 'partner', currency: 'USD' });
    expect(await transfer('t3', 1 * U, {}, 'MA-nobody')).toEqual({ ok: false, reason: 'no_account', account: 'MA-nobody' });
    expect((await store.account('P1', 'partner'))?.balance).toBe(10 * U);
    expect((await store.account('P1', 'MA1'))?.balance).toBe(0);
    expect(await allRows(store, 'P1', 'MA1')).toEqual([]);
    const ok = await transfer('t4', 4 * U);
    expect(ok.ok && ok.rows.map((r) => [r.account, r.type, r.amount, r.reference_id, r.balance_after])).toEqual([
      ['partner', 'debit', 4 * U, 't4', 6 * U],
      ['MA1', 'credit', 4 * U, 't4', 4 * U],
    ]);
    // The same transfer key again (a retry) moves nothing more.
    expect(await transfer('t4', 4 * U)).toMatchObject({ ok: true, replayed: true });
    expect((await store.account('P1', 'partner'))?.balance).toBe(6 * U);
    expect((await store.account('P1', 'MA1'))?.balance).toBe(4 * U);
  });

  it('50 concurrent transfers of one partner (30 units, 1 each, 5 clients) never overdraw it; then sum of rows = balance for every account', async () => {
    const clients = kind.shared ? [store, ...Array.from({ length: 4 }, () => kind.create())] : [store];
    extra.push(...clients.slice(1));
    await store.open('P1', 'partner', PREPAID, AT);
    const customers = ['MA1', 'MA2', 'MA3', 'MA4', 'MA5'];
    for (const c of customers) await store.open('P1', c, PREPAID, AT);
    await store.post('P1', post('fund', [leg('partner', 'credit', 30 * U)]));
    const results = await Promise.all(
      Array.from({ length: 50 }, (_, i) => {
        const to = customers[i % customers.length] as string;
        const s = clients[i % clients.length] as BillingStore;
        const key = `race-${i}`;
        return s.post('P1', post(key, [leg('partner', 'debit', U, { referenceType: 'transfer', referenceId: key }), leg(to, 'credit', U, { referenceType: 'transfer', referenceId: key })]));
      }),
    );
    expect(results.filter((r) => r.ok)).toHaveLength(30);
    expect(results.filter((r) => !r.ok && r.reason === 'insufficient_funds')).toHaveLength(20);
    const partner = await store.account('P1', 'partner');
    expect(partner?.balance).toBe(0);
    let credited = 0;
    for (const a of await store.accounts('P1')) {
      const rows = await allRows(store, 'P1', a.account);
      expect(rowSum(rows), a.account).toBe(a.balance);
      expect(a.balance, a.account).toBeGreaterThanOrEqual(0);
      // balance_after chains: each row's balance_after is the previous one's plus its change.
      const chrono = [...rows].reverse();
      let running = 0;
      for (const r of chrono) {
        running += r.type === 'credit' ? r.amount : -r.amount;
        expect(r.balance_after).toBe(running);
      }
      if (a.account !== 'partner') credited += a.balance;
    }
    expect(credited).toBe(30 * U);
    const partnerRows = await allRows(store, 'P1', 'partner');
    expect(partnerRows.filter((r) => r.type === 'debit')).toHaveLength(30);
    expect(Math.min(...partnerRows.map((r) => r.balance_after))).toBe(0);
  });

  it('keeps amounts exact near 2^53 minor units (no 14-digit rounding) and refuses a credit beyond', async () => {
    await store.open('P1', 'MA1', PREPAID, AT);
    const big = 100_000_000_000_000; // 10^14 minor units = 10^9 units
    for (let i = 0; i < 89; i++) {
      const r = await store.post('P1', post(`b${i}`, [leg('MA1', 'credit', big)]));
      expect(r.ok).toBe(true);
    }
    const odd = 12_345_678_901_234; // 14 digits, not a multiple of anything round
    const r = await store.post('P1', post('odd', [leg('MA1', 'credit', odd)]));
    expect(r.ok && r.rows[0]?.balance_after).toBe(89 * big + odd);
    expect((await store.account('P1', 'MA1'))?.balance).toBe(8_912_345_678_901_234);
    expect(await store.post('P1', post('over', [leg('MA1', 'credit', big)]))).toEqual({ ok: false, reason: 'balance_limit', account: 'MA1' });
    expect((await store.account('P1', 'MA1'))?.balance).toBe(8_912_345_678_901_234);
    expect(rowSum(await allRows(store, 'P1', 'MA1'))).toBe(8_912_345_678_901_234);
  });

  it('filters rows by type, reference type and date, newest first', async () => {
    await store.open('P1', 'MA1', PREPAID, AT);
    const at = (d: string): string => `2026-11-${d}T12:00:00.000Z`;
    await store.post('P1', post('f1', [leg('MA1', 'credit', 10 * U, { referenceId: 'a' })], { at: at('01') }));
    await store.post('P1', post('f2', [leg('MA1', 'debit', U, { referenceType: 'cdr', referenceId: 'b' })], { at: at('02') }));
    await store.post('P1', post('f3', [leg('MA1', 'credit', U, { referenceType: 'refund', referenceId: 'c' })], { at: at('03') }));
    await store.post('P1', post('f4', [leg('MA1', 'debit', U, { referenceType: 'did_rental', referenceId: 'd' })], { at: at('04') }));
    const ids = async (f: Parameters<BillingStore['transactions']>[2]): Promise<string[]> => (await store.transactions('P1', 'MA1', f, { limit: 10, offset: 0 })).items.map((r) => r.reference_id);
    expect(await ids({})).toEqual(['d', 'c', 'b', 'a']);
    expect(await ids({ type: 'debit' })).toEqual(['d', 'b']);
    expect(await ids({ referenceType: 'refund' })).toEqual(['c']);
    expect(await ids({ from: Date.parse('2026-11-02T00:00:00Z'), to: Date.parse('2026-11-03T23:59:59.999Z') })).toEqual(['c', 'b']);
    expect((await store.transactions('P1', 'MA1', { type: 'credit' }, { limit: 1, offset: 1 }))).toMatchObject({ total: 2, items: [{ reference_id: 'a' }] });
    expect(await store.transactions('P1', 'MA9', {}, { limit: 10, offset: 0 })).toEqual({ total: 0, items: [] });
  });
});
