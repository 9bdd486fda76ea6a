/**
 * The ledger service over the embedded store: what call billing (issue 22 items 5
 * and 6) will stand on — a `cdr` debit once per call, the available balance for the
 * credit check — and the metrics of rows written.
 */
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createBilling } from '../../../src/billing/index.js';
import { bookOf, PARTNER_ACCOUNT, type CustomerRef } from '../../../src/billing/ledger.js';
import { DEFAULTS, type Config, type PartnerConfig } from '../../../src/config.js';

const PARTNER: PartnerConfig = { id: 'PT1', authId: 'PA1', authToken: 'x'.repeat(20), name: 'P', email: '', password: null, company: '', canCreateAccounts: true, canTransferBalance: true, currency: 'INR' };
const config = { ...DEFAULTS, nodeId: 'n', partners: [PARTNER], production: false } as Config;
const U = 100_000;

function setup(): { billing: ReturnType<typeof createBilling>; registry: Registry } {
  const registry = new Registry();
  return { billing: createBilling({ config, redis: null, registry }), registry };
}

describe('Ledger', () => {
  it('a call is debited once (reference_type cdr, reference_id the call id) however often its end is seen', async () => {
    const { billing, registry } = setup();
    const c: CustomerRef = { authId: 'MA1', partnerId: 'PT1', accountType: 'PREPAID' };
    await billing.ledger.change({ customer: c }, { type: 'credit', amount: 5 * U, currency: 'INR', referenceType: 'recharge', referenceId: 'r', description: '' });
    const [a, b] = await Promise.all([billing.ledger.debitCall(c, 'call-1', 2 * U, 'INR', '61 s'), billing.ledger.debitCall(c, 'call-1', 2 * U, 'INR', '61 s')]);
    expect([a.ok && a.replayed, b.ok && b.replayed].sort()).toEqual([false, true]);
    expect(a.ok && a.rows[0]).toMatchObject({ type: 'debit', reference_type: 'cdr', reference_id: 'call-1', balance_after: 3 * U });
    expect(await billing.ledger.available(c)).toEqual({ currency: 'INR', available: 3 * U });
    // A call has happened: its bill is recorded even past the balance (enforcement keeps
    // that within a rounding); any other debit past it is refused whole.
    const over = await billing.ledger.debitCall(c, 'call-2', 4 * U, 'INR', '');
    expect(over.ok && over.rows[0]?.balance_after).toBe(-1 * U);
    expect(await billing.ledger.change({ customer: c }, { type: 'debit', amount: 1, currency: 'INR', referenceType: 'refund', referenceId: 'x', description: '' })).toMatchObject({
      ok: false,
      reason: 'insufficient_funds',
      balance: -1 * U,
    });
    const text = await registry.metrics();
    expect(text).toContain('sip_ledger_transactions_total{type="credit"} 1');
    expect(text).toContain('sip_ledger_transactions_total{type="debit"} 2');
    expect(text).toContain('sip_calls_cut_for_credit_total 0');
    billing.callCutForCredit();
    expect(await registry.metrics()).toContain('sip_calls_cut_for_credit_total 1');
  });

  it('POSTPAID: available = balance + credit limit; customers take their partner’s currency; books group a partner with its customers', async () => {
    const { billing } = setup();
    const post: CustomerRef = { authId: 'MA2', partnerId: 'PT1', accountType: 'POSTPAID', creditLimit: 7 * U };
    expect(await billing.ledger.available(post)).toEqual({ currency: 'INR', available: 7 * U });
    expect((await billing.ledger.debitCall(post, 'c', 7 * U, 'INR', '')).ok).toBe(true);
    expect(await billing.ledger.available(post)).toEqual({ currency: 'INR', available: 0 });
    const orphan: CustomerRef = { authId: 'MA3', partnerId: null, accountType: 'PREPAID' };
    expect((await billing.ledger.customerAccount(orphan)).currency).toBe('USD');
    expect(bookOf(orphan)).toBe('acct:MA3');
    expect(bookOf(post)).toBe('PT1');
    expect(billing.ledger.address({ partner: PARTNER })).toEqual({ book: 'PT1', account: PARTNER_ACCOUNT });
  });

  it('a transfer: the same Idempotency-Key gives the same transfer id and moves once; another partner’s customer is refused', async () => {
    const { billing } = setup();
    const c: CustomerRef = { authId: 'MA4', partnerId: 'PT1', accountType: 'PREPAID' };
    await billing.ledger.change({ partner: PARTNER }, { type: 'credit', amount: 10 * U, currency: 'INR', referenceType: 'recharge', referenceId: 'r', description: '' });
    const t1 = await billing.ledger.transfer(PARTNER, c, 3 * U, 'INR', 'd', 'key-1');
    const t2 = await billing.ledger.transfer(PARTNER, c, 3 * U, 'INR', 'd', 'key-1');
    expect(t1.ok && t2.ok && t1.transferId === t2.transferId && t2.replayed).toBe(true);
    expect((await billing.ledger.partnerAccount(PARTNER)).balance).toBe(7 * U);
    await expect(billing.ledger.transfer(PARTNER, { ...c, partnerId: 'PT2' }, U, 'INR', '', null)).rejects.toThrow(/another partner/);
  });
});
