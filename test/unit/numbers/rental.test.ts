/**
 * The purchase and the monthly rental with an injected clock, on the embedded stores:
 * setup + first month debited at purchase; each anniversary debits `monthly_fee` once
 * (did_rental); unpaid → inactive (no route, no caller ID), paid after a top-up → active;
 * two sweepers racing debit once; a purchase that crashed with its claim held is settled
 * from the ledger after its deadline.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { DEFAULTS, type Config } from '../../../src/config.js';
import { Ledger } from '../../../src/billing/ledger.js';
import { MemoryBillingStore } from '../../../src/store/billing/memory.js';
import { MemoryDirectory } from '../../../src/store/directory/memory.js';
import { hashToken, newAuthId, type AccountRecord } from '../../../src/store/directory/directory.js';
import { createNumbers, NumbersError, type Numbers } from '../../../src/numbers/index.js';
import { memoryNumbersStore } from '../../../src/store/numbers/memory.js';
import { rentalKey, RentalSweep, setupDescription, setupKey } from '../../../src/numbers/rental.js';
import type { NumbersStore } from '../../../src/store/numbers/numbers.js';
import { createLogger } from '../../../src/logger.js';

const U = 100_000;
const config = { ...DEFAULTS, partners: [], production: false, nodeId: 'n', dataEncryptionKeys: [], dataKeySource: 'random' } as unknown as Readonly<Config>;
const NUM = '+918040001001'; // sample inventory: setup 1.00, monthly 2.50 USD

let clock = Date.parse('2026-01-31T09:00:00.000Z');
const now = (): number => clock;

function account(): AccountRecord {
  const authId = newAuthId('MA');
  const t = new Date(clock).toISOString();
  return { authId, tokenHash: hashToken('t'), passwordHash: null, name: 'n', email: 'e@x.test', country: 'IN', accountType: 'PREPAID', enabled: true, cpsLimit: 1, concurrentCallsLimit: 1, sipDomain: `${authId}.sip.test`, partnerId: null, createdAt: t, updatedAt: t };
}

describe('purchase and rental (injected clock)', () => {
  let ledger: Ledger;
  let directory: MemoryDirectory;
  let store: NumbersStore;
  let numbers: Numbers;
  let acct: AccountRecord;

  const rows = async (a: AccountRecord, type?: 'did_setup' | 'did_rental') =>
    (await ledger.transactions(ledger.address({ customer: a }), type ? { referenceType: type } : {}, { limit: 100, offset: 0 })).items;
  const balance = async (a: AccountRecord) => (await ledger.customerAccount(a)).balance;
  const fund = async (a: AccountRecord, units: number) => {
    const r = await ledger.change({ customer: a }, { type: 'credit', amount: units * U, currency: 'USD', referenceType: 'recharge', referenceId: 'top-up', description: 'top up' });
    expect(r.ok).toBe(true);
  };

  beforeEach(async () => {
    clock = Date.parse('2026-01-31T09:00:00.000Z');
    ledger = new Ledger({ store: new MemoryBillingStore(), partners: [], defaultCurrency: 'USD', now });
    directory = new MemoryDirectory();
    store = memoryNumbersStore(now);
    numbers = createNumbers({ config, redis: null, ledger, directory, store, now, log: createLogger('silent'), claimMs: 30_000 });
    await numbers.reload();
    acct = account();
    await directory.createAccount(acct);
  });

  it('purchase debits setup + first month, next billing one month on; a refused purchase writes nothing', async () => {
    await expect(numbers.purchase(acct, NUM, null)).rejects.toMatchObject({ kind: 'payment_required' });
    expect(await rows(acct)).toEqual([]);
    expect((await store.get(NUM))?.state).toBe('available');
    await fund(acct, 10);
    const r = await numbers.purchase(acct, NUM, 'USD');
    expect(r.owner).toMatchObject({ authId: acct.authId, status: 'active', paidPeriods: 1, purchasedAt: '2026-01-31T09:00:00.000Z', nextBillingDate: '2026-02-28T09:00:00.000Z' });
    expect(await balance(acct)).toBe(10 * U - 350_000);
    const setup = await rows(acct, 'did_setup');
    expect(setup.map((x) => [x.amount, x.reference_id])).toEqual([[350_000, NUM]]);
    await expect(numbers.purchase(acct, NUM, null)).rejects.toMatchObject({ kind: 'conflict' });
    await expect(numbers.purchase(acct, NUM, 'EUR')).rejects.toBeInstanceOf(NumbersError);
  });

  it('charges on each anniversary once; unpaid → inactive and unrouted; after a top-up → active again', async () => {
    await fund(acct, 6); // 6.00 - 3.50 = 2.50: exactly one more month
    await numbers.purchase(acct, NUM, null);
    await directory.createEndpoint({ endpointId: '11', accountAuthId: acct.authId, username: 'alice', alias: 'alice', appId: null, subAccount: null, allowVoice: true, allowMessage: true, allowVideo: false, allowSameDomain: true, allowOtherDomains: false, allowPhones: true, allowApps: true, createdAt: 'x', updatedAt: 'x' });
    await numbers.setRoute(acct.authId, NUM, 'endpoint', '11');
    expect(await numbers.callerIdOf(acct.authId, '11')).toBe(NUM);

    clock = Date.parse('2026-02-28T08:59:59.000Z'); // one second early: nothing
    expect((await numbers.rental.sweep()).charged).toBe(0);
    clock = Date.parse('2026-02-28T09:00:00.000Z');
    expect(await numbers.rental.sweep()).toMatchObject({ charged: 1, inactive: 0 });
    expect(await numbers.rental.sweep()).toMatchObject({ charged: 0 });
    expect(await balance(acct)).toBe(0);
    expect((await store.get(NUM))?.owner?.nextBillingDate).toBe('2026-03-31T09:00:00.000Z');

    clock = Date.parse('2026-03-31T09:00:01.000Z'); // nothing left to pay with
    expect(await numbers.rental.sweep()).toMatchObject({ charged: 0, inactive: 1 });
    expect((await numbers.route(NUM))?.status).toBe('inactive');
    expect(await numbers.callerIdOf(acct.authId, '11')).toBe(null);
    expect((await rows(acct, 'did_rental')).length).toBe(1);

    await fund(acct, 5);
    clock += 60_000; // the next sweep, after the lease of the refused try ran out
    expect(await numbers.rental.sweep()).toMatchObject({ charged: 1, reactivated: 1 });
    expect((await numbers.route(NUM))?.status).toBe('active');
    expect(await numbers.callerIdOf(acct.authId, '11')).toBe(NUM);
    expect(await balance(acct)).toBe(5 * U - 250_000);
    const rental = await rows(acct, 'did_rental');
    expect(rental.map((x) => x.amount)).toEqual([250_000, 250_000]);
  });

  it('two sweepers racing over the same store and ledger debit each period once', async () => {
    await fund(acct, 100);
    await numbers.purchase(acct, NUM, null);
    await numbers.purchase(acct, '+918040001002', null);
    clock = Date.parse('2026-02-28T09:00:00.000Z');
    const log = createLogger('silent');
    const account = (id: string) => directory.getAccount(id);
    const sweepers = Array.from({ length: 4 }, () => new RentalSweep({ store, ledger, account, log, now }));
    const results = await Promise.all(sweepers.map((s) => s.sweep()));
    expect(results.reduce((t, r) => t + r.charged, 0)).toBe(2);
    expect((await rows(acct, 'did_rental')).length).toBe(2);
  });

  it('a node that debited and died before advancing the number is not charged twice: the ledger key holds', async () => {
    await fund(acct, 100);
    const bought = await numbers.purchase(acct, NUM, null);
    clock = Date.parse('2026-02-28T09:00:00.000Z');
    const o = bought.owner;
    if (!o) throw new Error('not owned');
    // The dead node's debit of period 1 (same key as the sweep's), the record not advanced.
    const first = await ledger.change({ customer: acct }, { type: 'debit', amount: o.monthlyFee, currency: 'USD', referenceType: 'did_rental', referenceId: NUM, description: 'x', key: rentalKey(NUM, o, 1) });
    expect(first.ok && !first.replayed).toBe(true);
    expect((await numbers.rental.sweep()).charged).toBe(1);
    expect((await rows(acct, 'did_rental')).length).toBe(1);
    expect((await store.get(NUM))?.owner?.paidPeriods).toBe(2);
    expect(await balance(acct)).toBe(100 * U - 350_000 - 250_000);
  });

  it('catches up several missed months in one sweep, one row per month', async () => {
    await fund(acct, 100);
    await numbers.purchase(acct, NUM, null);
    clock = Date.parse('2026-05-01T00:00:00.000Z'); // Feb 28, Mar 31 and Apr 30 are due
    expect((await numbers.rental.sweep()).charged).toBe(3);
    expect((await store.get(NUM))?.owner).toMatchObject({ paidPeriods: 4, nextBillingDate: '2026-05-31T09:00:00.000Z' });
  });

  it('a crashed purchase is settled after its deadline: owned when its debit exists, else for sale', async () => {
    await fund(acct, 100);
    const at = new Date(clock).toISOString();
    // Crash after the debit: claim held, row written, no commit.
    expect((await store.claim(NUM, { token: 'tokA', authId: acct.authId, deadline: clock + 30_000, at }, clock)).ok).toBe(true);
    await ledger.change({ customer: acct }, { type: 'debit', amount: 350_000, currency: 'USD', referenceType: 'did_setup', referenceId: NUM, description: setupDescription(NUM, 'tokA'), key: setupKey(acct.authId, 'tokA') });
    // Crash before the debit.
    expect((await store.claim('+918040001002', { token: 'tokB', authId: acct.authId, deadline: clock + 30_000, at }, clock)).ok).toBe(true);
    expect((await numbers.rental.sweep()).recovered).toBe(0); // deadlines not passed
    clock += 31_000;
    expect((await numbers.rental.sweep()).recovered).toBe(2);
    expect((await store.get(NUM))?.owner?.authId).toBe(acct.authId);
    expect((await store.get('+918040001002'))?.state).toBe('available');
    expect((await rows(acct, 'did_setup')).length).toBe(1);
  });

  it('a purchase that stalls past its deadline and loses the number refunds its debit and answers conflict', async () => {
    await fund(acct, 10);
    let hook: (() => Promise<void>) | null = null;
    class StallingLedger extends Ledger {
      override async change(...args: Parameters<Ledger['change']>): ReturnType<Ledger['change']> {
        const r = await super.change(...args);
        if (args[1].referenceType === 'did_setup' && hook) await hook();
        return r;
      }
    }
    const stalling = new StallingLedger({ store: ledger.store, partners: [], defaultCurrency: 'USD', now });
    const slow = createNumbers({ config, redis: null, ledger: stalling, directory, store, now, log: createLogger('silent'), claimMs: 30_000 });
    // While the debit is in flight the claim's deadline passes and another buyer claims the number.
    hook = async () => {
      clock += 31_000;
      expect((await store.claim(NUM, { token: 'other', authId: 'MAOTHER', deadline: clock + 30_000, at: new Date(clock).toISOString() }, clock)).ok).toBe(true);
    };
    await expect(slow.purchase(acct, NUM, null)).rejects.toMatchObject({ kind: 'conflict' });
    expect(await balance(acct)).toBe(10 * U);
    const all = await rows(acct);
    expect(all.map((x) => [x.type, x.reference_type, x.amount])).toEqual([
      ['credit', 'refund', 350_000],
      ['debit', 'did_setup', 350_000],
      ['credit', 'recharge', 10 * U],
    ]);
    expect((await store.get(NUM))?.claim?.token).toBe('other');
  });
});
