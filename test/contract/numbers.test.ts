/**
 * One numbers-store contract, three backends: memory, a redis-server and a 3-master
 * Redis Cluster. A number is for sale, claimed or owned; a claim is exclusive until its
 * deadline; the indexes (inventory, an account's numbers, an endpoint's numbers, rentals
 * due) follow the record in the same atomic step; an upsert never touches a sold number.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { NumbersStore, type Claim, type NumberInfo, type Ownership } from '../../src/store/numbers/numbers.js';
import { memoryNumbersStore } from '../../src/store/numbers/memory.js';
import { redisNumbersStore } from '../../src/store/numbers/redis.js';
import { redisBackends } from '../support/redis-backends.js';
import { DEFAULTS, type Config } from '../../src/config.js';
import { Ledger } from '../../src/billing/ledger.js';
import { MemoryBillingStore } from '../../src/store/billing/memory.js';
import { MemoryDirectory } from '../../src/store/directory/memory.js';
import { hashToken, type AccountRecord } from '../../src/store/directory/directory.js';
import { createNumbers } from '../../src/numbers/index.js';

const rb = redisBackends();

const kinds: Array<{ name: string; create(): NumbersStore; reset(): Promise<void> }> = [
  { name: 'memory', create: () => memoryNumbersStore(), reset: async () => {} },
  { name: 'redis-server', create: () => redisNumbersStore(rb.connect(rb.server.url), { closeConnection: true }), reset: async () => void (await rb.admin.flushdb()) },
  { name: '3-master Redis Cluster', create: () => redisNumbersStore(rb.connectCluster(), { closeConnection: true }), reset: () => rb.flushCluster() },
];

const AT = '2026-11-20T10:00:00.000Z';
const T0 = Date.parse(AT);
const U = 100_000;

function info(e164: string, over: Partial<NumberInfo> = {}): NumberInfo {
  return { e164, country: e164.startsWith('+91') ? 'IN' : 'US', region: 'R', numberType: 'landline', setupFee: 1 * U, monthlyFee: 2 * U, currency: 'USD', provider: 'p', ...over };
}
function claim(token: string, authId = 'MA1', deadline = T0 + 30_000): Claim {
  return { token, authId, deadline, at: AT };
}
function owner(authId: string, over: Partial<Ownership> = {}): Ownership {
  return {
    authId, subAccount: null, status: 'active', inactiveReason: null, endpointId: null, applicationId: null, trunkGroupId: null, routedAt: null,
    purchasedAt: AT, setupFee: U, monthlyFee: 2 * U, currency: 'USD', paidPeriods: 1, lastBillingDate: AT, nextBillingDate: '2026-12-20T10:00:00.000Z', ...over,
  };
}

describe.each(kinds)('numbers store contract on $name', (kind) => {
  let store: NumbersStore;
  beforeEach(async () => {
    await kind.reset();
    store = kind.create();
  });
  afterEach(async () => {
    await store.close();
  });

  it('upserts the inventory: adds, updates unsold, leaves unchanged and never touches a sold number', async () => {
    const r1 = await store.upsertInventory([info('+918040001001'), info('+918040001002'), info('+14155550101')], AT);
    expect(r1).toEqual({ added: 3, updated: 0, unchanged: 0, skippedSold: 0 });
    expect((await store.claim('+918040001002', claim('t1'), T0)).ok).toBe(true);
    expect(await store.commitClaim('+918040001002', 't1', owner('MA1'), AT)).not.toBe(null);
    const r2 = await store.upsertInventory([info('+918040001001', { monthlyFee: 3 * U }), info('+918040001002', { monthlyFee: 9 * U }), info('+14155550101')], AT);
    expect(r2).toEqual({ added: 0, updated: 1, unchanged: 1, skippedSold: 1 });
    expect((await store.get('+918040001001'))?.monthlyFee).toBe(3 * U);
    const sold = await store.get('+918040001002');
    expect(sold?.state).toBe('owned');
    expect(sold?.monthlyFee).toBe(2 * U);
  });

  it('lists the inventory by country and E.164 substring, ordered, paged', async () => {
    await store.upsertInventory([info('+918040001003'), info('+918040001001'), info('+14155550101'), info('+918040001002')], AT);
    const all = await store.listInventory({}, { limit: 10, offset: 0 }, T0);
    expect(all.total).toBe(4);
    expect(all.items.map((r) => r.e164)).toEqual(['+14155550101', '+918040001001', '+918040001002', '+918040001003']);
    const india = await store.listInventory({ country: 'in' }, { limit: 2, offset: 1 }, T0);
    expect(india.total).toBe(3);
    expect(india.items.map((r) => r.e164)).toEqual(['+918040001002', '+918040001003']);
    const hit = await store.listInventory({ search: '+9180400010' }, { limit: 10, offset: 0 }, T0);
    expect(hit.items.map((r) => r.e164)).toEqual(['+918040001001', '+918040001002', '+918040001003']);
    expect((await store.listInventory({ search: '5550101' }, { limit: 10, offset: 0 }, T0)).total).toBe(1);
    const rest = await store.listInventory({ exclude: ['+1415', '918040001002'] }, { limit: 10, offset: 0 }, T0);
    expect(rest.items.map((r) => r.e164)).toEqual(['+918040001001', '+918040001003']);
    expect(rest.total).toBe(2);
  });

  it('a claim is exclusive: of 20 racing claims exactly one wins; the claimed number leaves the inventory', async () => {
    await store.upsertInventory([info('+918040001001')], AT);
    const results = await Promise.all(Array.from({ length: 20 }, (_, i) => store.claim('+918040001001', claim(`t${i}`, `MA${i % 3}`), T0)));
    expect(results.filter((r) => r.ok)).toHaveLength(1);
    expect(results.filter((r) => !r.ok && r.reason === 'taken')).toHaveLength(19);
    expect((await store.listInventory({}, { limit: 10, offset: 0 }, T0)).total).toBe(0);
    expect(await store.claim('+918040009999', claim('x'), T0)).toEqual({ ok: false, reason: 'not_found' });
  });

  it('a released claim is for sale again; a claim past its deadline is for sale and can be taken over', async () => {
    await store.upsertInventory([info('+918040001001')], AT);
    expect((await store.claim('+918040001001', claim('a'), T0)).ok).toBe(true);
    expect(await store.releaseClaim('+918040001001', 'wrong', AT)).toBe(false);
    expect(await store.releaseClaim('+918040001001', 'a', AT)).toBe(true);
    expect((await store.get('+918040001001'))?.state).toBe('available');
    expect((await store.claim('+918040001001', claim('b', 'MA1', T0 + 1000), T0)).ok).toBe(true);
    expect((await store.claim('+918040001001', claim('c'), T0 + 500)).ok).toBe(false);
    // Past b's deadline: listed for sale again and claimable; b can no longer commit.
    expect((await store.listInventory({}, { limit: 10, offset: 0 }, T0 + 2000)).total).toBe(1);
    expect(await store.expiredClaims(T0 + 2000)).toEqual(['+918040001001']);
    expect((await store.claim('+918040001001', claim('c', 'MA2', T0 + 60_000), T0 + 2000)).ok).toBe(true);
    expect(await store.commitClaim('+918040001001', 'b', owner('MA1'), AT)).toBe(null);
    expect((await store.commitClaim('+918040001001', 'c', owner('MA2'), AT))?.owner?.authId).toBe('MA2');
  });

  it('owned numbers: per-account list, sub-account filter, routes by endpoint in routing order, release back to sale', async () => {
    await store.upsertInventory([info('+918040001001'), info('+918040001002'), info('+14155550101')], AT);
    for (const [e, t, a] of [['+918040001001', 't1', 'MA1'], ['+918040001002', 't2', 'MA1'], ['+14155550101', 't3', 'MA2']] as const) {
      expect((await store.claim(e, claim(t, a), T0)).ok).toBe(true);
      expect(await store.commitClaim(e, t, owner(a), AT)).not.toBe(null);
    }
    expect((await store.listOwned('MA1', {}, { limit: 10, offset: 0 })).items.map((r) => r.e164).sort()).toEqual(['+918040001001', '+918040001002']);
    expect((await store.listOwned('MA2', {}, { limit: 10, offset: 0 })).total).toBe(1);
    expect(await store.ownedBy('MA2', '+918040001001')).toBe(null);
    await store.changeOwned('MA1', '+918040001002', AT, (o) => ({ ...o, endpointId: 'ep1', routedAt: 100 }));
    await store.changeOwned('MA1', '+918040001001', AT, (o) => ({ ...o, endpointId: 'ep1', routedAt: 200, subAccount: 'SA1' }));
    expect((await store.byEndpoint('MA1', 'ep1')).map((r) => r.e164)).toEqual(['+918040001002', '+918040001001']);
    expect((await store.listOwned('MA1', { subAccount: 'SA1' }, { limit: 10, offset: 0 })).items.map((r) => r.e164)).toEqual(['+918040001001']);
    // Another account cannot change it.
    expect(await store.changeOwned('MA2', '+918040001001', AT, (o) => ({ ...o, endpointId: null }))).toBe(null);
    // Moving the route away takes it out of the endpoint's index.
    await store.changeOwned('MA1', '+918040001002', AT, (o) => ({ ...o, endpointId: null, applicationId: 'app1', routedAt: 300 }));
    expect((await store.byEndpoint('MA1', 'ep1')).map((r) => r.e164)).toEqual(['+918040001001']);
    const released = await store.releaseOwned('MA1', '+918040001001', AT);
    expect(released?.state).toBe('available');
    expect(released?.owner).toBe(null);
    expect(await store.byEndpoint('MA1', 'ep1')).toEqual([]);
    expect((await store.listOwned('MA1', {}, { limit: 10, offset: 0 })).total).toBe(1);
    expect((await store.listInventory({}, { limit: 10, offset: 0 }, T0)).items.map((r) => r.e164)).toEqual(['+918040001001']);
    expect(await store.releaseOwned('MA1', '+918040001001', AT)).toBe(null);
  });

  it('rentals due: owned numbers by next billing date; a lease is taken once until it expires', async () => {
    await store.upsertInventory([info('+918040001001'), info('+918040001002')], AT);
    await store.claim('+918040001001', claim('t1'), T0);
    await store.commitClaim('+918040001001', 't1', owner('MA1', { nextBillingDate: '2026-12-20T10:00:00.000Z' }), AT);
    await store.claim('+918040001002', claim('t2'), T0);
    await store.commitClaim('+918040001002', 't2', owner('MA1', { nextBillingDate: '2026-12-25T10:00:00.000Z' }), AT);
    expect(await store.due(Date.parse('2026-12-19T00:00:00.000Z'))).toEqual([]);
    expect(await store.due(Date.parse('2026-12-21T00:00:00.000Z'))).toEqual(['+918040001001']);
    expect(await store.due(Date.parse('2027-01-01T00:00:00.000Z'))).toEqual(['+918040001001', '+918040001002']);
    const leases = await Promise.all([store.lease('rental:x:1', 200), store.lease('rental:x:1', 200), store.lease('rental:x:1', 200)]);
    expect(leases.filter(Boolean)).toHaveLength(1);
    expect(await store.lease('rental:x:2', 200)).toBe(true);
    await new Promise((r) => setTimeout(r, 250));
    expect(await store.lease('rental:x:1', 200)).toBe(true);
  });

  it('the purchase on this store: 20 racing buyers → one owner and one debit; an unfunded buyer leaves the number for sale', async () => {
    const config = { ...DEFAULTS, partners: [], production: true, nodeId: 'n', dataEncryptionKeys: [], dataKeySource: 'random' } as unknown as Readonly<Config>;
    const ledger = new Ledger({ store: new MemoryBillingStore(), partners: [], defaultCurrency: 'USD' });
    const directory = new MemoryDirectory();
    const numbers = createNumbers({ config, redis: null, ledger, directory, store });
    await store.upsertInventory([info('+918040001001'), info('+918040001002')], AT);
    const accts: AccountRecord[] = ['MA1', 'MA2', 'MA3', 'MAPOOR'].map((authId) => ({
      authId, tokenHash: hashToken('t'), passwordHash: null, name: 'n', email: 'e@x.test', country: 'IN', accountType: 'PREPAID', enabled: true, cpsLimit: 1, concurrentCallsLimit: 1, sipDomain: `${authId}.sip.test`, partnerId: null, createdAt: AT, updatedAt: AT,
    }));
    for (const a of accts) {
      await directory.createAccount(a);
      await ledger.change({ customer: a }, { type: 'credit', amount: a.authId === 'MAPOOR' ? 3 * U - 1 : 100 * U, currency: 'USD', referenceType: 'recharge', referenceId: 'r', description: 'd' });
    }
    const outcomes = await Promise.allSettled(Array.from({ length: 20 }, (_, i) => numbers.purchase(accts[i % 3] as AccountRecord, '+918040001001', null)));
    expect(outcomes.filter((o) => o.status === 'fulfilled')).toHaveLength(1);
    expect(outcomes.filter((o) => o.status === 'rejected' && (o.reason as { kind?: string }).kind === 'conflict')).toHaveLength(19);
    let debits = 0;
    for (const a of accts.slice(0, 3)) debits += (await ledger.transactions(ledger.address({ customer: a }), { referenceType: 'did_setup' }, { limit: 100, offset: 0 })).total;
    expect(debits).toBe(1);
    await expect(numbers.purchase(accts[3] as AccountRecord, '+918040001002', null)).rejects.toMatchObject({ kind: 'payment_required' });
    expect((await store.get('+918040001002'))?.state).toBe('available');
    expect((await store.listInventory({}, { limit: 10, offset: 0 }, Date.now())).items.map((r) => r.e164)).toEqual(['+918040001002']);
  });
});
