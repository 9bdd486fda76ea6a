/**
 * The phone number routes in process over real HTTP, on the embedded stores and on a
 * redis-server: the inventory, the purchase (a race of 20 → one 201 and 19 × 409; an
 * unfunded buyer → 402 with the number still for sale and no ledger row; the balance
 * falls by exactly setup + first month), an account's numbers, the routes with bad ids,
 * the sub-account hand-over and what a sub-account sees, release back to the inventory,
 * and malformed numbers answered 400 naming the field.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORE_KINDS, startHarness, stopRedisServer, type Creds, type Harness } from '../support/api-harness.js';

const ADMIN = 'admin-token-numbers-0123456789';
const dir = mkdtempSync(join(tmpdir(), 'numbers-api-'));
const INVENTORY = join(dir, 'numbers.csv');
writeFileSync(
  INVENTORY,
  [
    'e164,country,region,number_type,setup_fee,monthly_fee,currency,provider',
    ...Array.from({ length: 9 }, (_, i) => `+91804000100${i + 1},IN,Karnataka,landline,1.00,2.50,USD,carrierA`),
    '+14155550101,US,California,mobile,0.50,1.15,USD,carrierB',
    '+14155550102,US,California,mobile,0.50,1.15,EUR,carrierB',
  ].join('\n'),
);

afterAll(async () => {
  await stopRedisServer();
});

describe.each(STORE_KINDS)('phone numbers API on %s', (kind) => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness(kind, { adminAuthToken: ADMIN, numberInventoryFile: INVENTORY });
  });
  afterAll(async () => {
    await h.close();
  });

  const fund = async (a: Creds, amount: string): Promise<void> => {
    const r = await h.request('POST', `/api/v1/admin/accounts/${a.id}/credit`, { body: { amount, currency: 'USD' }, headers: { 'x-admin-token': ADMIN } });
    expect(r.status).toBe(200);
  };
  const balance = async (a: Creds): Promise<string> => String((await h.request('GET', `/api/v1/Account/${a.id}/balance/USD`, { auth: a })).json.balance);
  const rows = async (a: Creds): Promise<Array<Record<string, unknown>>> =>
    (await h.request('GET', `/api/v1/Account/${a.id}/transactions?limit=100`, { auth: a })).json.transactions as Array<Record<string, unknown>>;
  const inventory = async (a: Creds, q = ''): Promise<Record<string, unknown>> => (await h.request('GET', `/api/v1/Account/${a.id}/inventory/numbers${q}`, { auth: a })).json;
  const buy = (a: Creds, e164: string, extra: Record<string, unknown> = {}) => h.request('POST', `/api/v1/Account/${a.id}/numbers/purchase-from-inventory`, { auth: a, body: { e164, ...extra } });
  const enc = encodeURIComponent;

  it('lists the inventory with filters and paging; per_page over 100 and a bad country are 400', async () => {
    const a = await h.newAccount();
    const all = await inventory(a);
    expect(all.total).toBe(11);
    const items = all.items as Array<Record<string, unknown>>;
    expect(items[0]).toMatchObject({ e164: '+14155550101', country: 'US', region: 'California', status: 'available', setup_fee: 0.5, monthly_fee: 1.15, currency: 'USD' });
    expect(typeof items[0]?.id).toBe('string');
    const india = await inventory(a, '?country=IN&per_page=4&page=2');
    expect(india).toMatchObject({ total: 9, page: 2, per_page: 4 });
    expect((india.items as Array<{ e164: string }>).map((x) => x.e164)).toEqual(['+918040001005', '+918040001006', '+918040001007', '+918040001008']);
    expect((await inventory(a, `?search=${enc('+1415555010')}`)).total).toBe(2);
    // The vendor's exclude: prefixes, comma-separated and repeated.
    expect((await inventory(a, '?exclude=9180')).total).toBe(2);
    expect((await inventory(a, `?exclude=${enc('+14155550101')},918040001001&exclude=918040001002`)).total).toBe(8);
    const badExclude = await h.request('GET', `/api/v1/Account/${a.id}/inventory/numbers?exclude=abc`, { auth: a });
    expect(badExclude.status).toBe(400);
    expect(badExclude.json.details).toHaveProperty('exclude');
    const big = await h.request('GET', `/api/v1/Account/${a.id}/inventory/numbers?per_page=101`, { auth: a });
    expect(big.status).toBe(400);
    expect(big.json.details).toHaveProperty('per_page');
    const country = await h.request('GET', `/api/v1/Account/${a.id}/inventory/numbers?country=India`, { auth: a });
    expect(country.status).toBe(400);
    expect(country.json.details).toHaveProperty('country');
  });

  it('20 parallel purchases of one number by three funded accounts: exactly one 201, nineteen 409, one debit', async () => {
    const buyers = [await h.newAccount(), await h.newAccount(), await h.newAccount()];
    for (const b of buyers) await fund(b, '100');
    const replies = await Promise.all(Array.from({ length: 20 }, (_, i) => buy(buyers[i % 3] as Creds, '+918040001001')));
    const statuses = replies.map((r) => r.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(1);
    expect(statuses.filter((s) => s === 409)).toHaveLength(19);
    expect(replies.find((r) => r.status === 409)?.json.error).toBe('number_taken');
    const winner = replies.find((r) => r.status === 201)?.json;
    const setupRows = (await Promise.all(buyers.map(rows))).flat().filter((r) => r.reference_type === 'did_setup');
    expect(setupRows).toHaveLength(1);
    expect(setupRows[0]).toMatchObject({ amount: '3.50000', reference_id: '+918040001001' });
    expect(winner).toMatchObject({ e164: '+918040001001', status: 'active' });
    const owner = buyers.find((b) => b.id === winner?.auth_id) as Creds;
    expect(await balance(owner)).toBe('96.50000');
    const inv = await inventory(owner, `?search=918040001001`);
    expect(inv.total).toBe(0);
  });

  it('an unfunded purchase is 402: the number stays for sale and no ledger row exists', async () => {
    const poor = await h.newAccount();
    await fund(poor, '3.49999'); // one minor unit short of 1.00 + 2.50
    const r = await buy(poor, '+918040001002');
    expect(r.status).toBe(402);
    expect(r.json.error).toBe('insufficient_balance');
    expect((await inventory(poor, '?search=918040001002')).total).toBe(1);
    expect((await rows(poor)).filter((x) => x.reference_type !== 'recharge')).toEqual([]);
    expect(await balance(poor)).toBe('3.49999');
    expect((await h.request('GET', `/api/v1/Account/${poor.id}/numbers`, { auth: poor })).json.total).toBe(0);
  });

  it('a purchase takes exactly setup + first month; the number lists with its billing dates; release returns it to sale', async () => {
    const a = await h.newAccount();
    await fund(a, '10');
    const before = await balance(a);
    const r = await buy(a, '918040001003', { currency: 'usd' });
    expect(r.status).toBe(201);
    expect(r.json).toMatchObject({ e164: '+918040001003', number: '+918040001003', number_type: 'landline', monthly_rental_rate: '2.50000', setup_fee: 1, monthly_fee: 2.5, charged: '3.50000', application_id: null, trunk_group_id: null, endpoint_id: null });
    expect(Date.parse(String(r.json.next_billing_date)) - Date.parse(String(r.json.purchased_at))).toBeGreaterThanOrEqual(28 * 86400_000);
    expect(Number(before) - Number(await balance(a))).toBeCloseTo(3.5, 5);
    expect(await balance(a)).toBe('6.50000');
    const list = await h.request('GET', `/api/v1/Account/${a.id}/numbers`, { auth: a });
    expect(list.json).toMatchObject({ total: 1, page: 1, per_page: 20 });
    for (const path of [enc('+918040001003'), '918040001003']) {
      const one = await h.request('GET', `/api/v1/Account/${a.id}/numbers/${path}`, { auth: a });
      expect(one.status).toBe(200);
      expect(one.json.e164).toBe('+918040001003');
    }
    const other = await h.newAccount();
    expect((await h.request('GET', `/api/v1/Account/${other.id}/numbers/${enc('+918040001003')}`, { auth: other })).status).toBe(404);
    expect((await h.request('DELETE', `/api/v1/Account/${other.id}/numbers/${enc('+918040001003')}`, { auth: other })).status).toBe(404);
    const del = await h.request('DELETE', `/api/v1/Account/${a.id}/numbers/${enc('+918040001003')}`, { auth: a });
    expect(del.status).toBe(200);
    expect((await inventory(a, '?search=918040001003')).total).toBe(1);
    expect((await h.request('GET', `/api/v1/Account/${a.id}/numbers`, { auth: a })).json.total).toBe(0);
  });

  it('a currency other than the number’s, or an account in another currency, is 400 naming currency', async () => {
    const a = await h.newAccount();
    await fund(a, '10');
    const asked = await buy(a, '+918040001004', { currency: 'EUR' });
    expect(asked.status).toBe(400);
    expect(asked.json.details).toHaveProperty('currency');
    const euro = await buy(a, '+14155550102');
    expect(euro.status).toBe(400);
    expect(euro.json.error).toBe('invalid_request');
    expect(String((euro.json.details as Record<string, string>).currency)).toMatch(/EUR/);
    expect((await inventory(a, '?search=14155550102')).total).toBe(1);
    expect(await balance(a)).toBe('10.00000');
  });

  it('malformed E.164 is 400 naming the field (body and path); an unknown number is 404', async () => {
    const a = await h.newAccount();
    await fund(a, '10');
    for (const bad of ['+9180', 'abc', '', '+1415555']) {
      const r = await buy(a, bad);
      expect(r.status).toBe(400);
      expect(r.json.details).toHaveProperty('e164');
    }
    const missing = await h.request('POST', `/api/v1/Account/${a.id}/numbers/purchase-from-inventory`, { auth: a, body: {} });
    expect(missing.status).toBe(400);
    expect(missing.json.details).toHaveProperty('e164');
    const path = await h.request('GET', `/api/v1/Account/${a.id}/numbers/not-a-number`, { auth: a });
    expect(path.status).toBe(400);
    expect(path.json.details).toHaveProperty('e164');
    expect((await buy(a, '+918040009999')).status).toBe(404);
  });

  it('routes: endpoint, application and trunk are exclusive; bad ids are 400 naming the field; release clears them', async () => {
    const a = await h.newAccount();
    const other = await h.newAccount();
    await fund(a, '10');
    expect((await buy(a, '+918040001005')).status).toBe(201);
    const n = `/api/v1/Account/${a.id}/numbers/${enc('+918040001005')}`;
    const ep = await h.request('POST', `/api/v1/Account/${a.id}/Endpoint/`, { auth: a, body: { username: 'alice', password: 'secret-password-1', alias: 'Alice' } });
    expect(ep.status).toBe(201);
    const endpointId = String(ep.json.endpoint_id);
    const app = await h.request('POST', `/api/v1/Account/${a.id}/Application/`, { auth: a, body: { app_name: 'ivr', answer_url: 'https://example.test/answer' } });
    expect(app.status).toBe(201);
    const appId = String(app.json.app_id);
    const foreignEp = await h.request('POST', `/api/v1/Account/${other.id}/Endpoint/`, { auth: other, body: { username: 'bob', password: 'secret-password-1' } });

    const badEp = await h.request('POST', `${n}/endpoint`, { auth: a, body: { endpoint_id: String(foreignEp.json.endpoint_id) } });
    expect(badEp.status).toBe(400);
    expect(badEp.json.details).toHaveProperty('endpoint_id');
    const badApp = await h.request('POST', `${n}/application`, { auth: a, body: { application_id: '999999999' } });
    expect(badApp.status).toBe(400);
    expect(badApp.json.details).toHaveProperty('application_id');
    const noField = await h.request('POST', `${n}/assign`, { auth: a, body: { trunk: 'x' } });
    expect(noField.status).toBe(400);
    expect(noField.json.details).toHaveProperty('trunk_group_id');

    const toEp = await h.request('POST', `${n}/endpoint`, { auth: a, body: { endpoint_id: endpointId } });
    expect(toEp.status).toBe(200);
    expect(toEp.json).toMatchObject({ endpoint_id: endpointId, application_id: null, trunk_group_id: null });
    const toApp = await h.request('POST', `${n}/application`, { auth: a, body: { application_id: appId } });
    expect(toApp.json).toMatchObject({ endpoint_id: null, application_id: appId, trunk_group_id: null });
    // A trunk must be one of the account's (the trunks capability is wired in).
    const badTrunk = await h.request('POST', `${n}/assign`, { auth: a, body: { trunk_group_id: 'no-such-trunk' } });
    expect(badTrunk.status).toBe(400);
    expect(badTrunk.json.details).toHaveProperty('trunk_group_id');
    const trunk = await h.request('POST', `/api/v1/Account/${a.id}/trunks`, { auth: a, body: { name: 'pbx', trunk_type: 'OUTBOUND' } });
    expect(trunk.status).toBe(201);
    const trunkId = String(trunk.json.trunk_id);
    const toTrunk = await h.request('POST', `${n}/assign`, { auth: a, body: { trunk_group_id: trunkId } });
    expect(toTrunk.json).toMatchObject({ endpoint_id: null, application_id: null, trunk_group_id: trunkId });
    // Clearing a route the number does not have changes nothing.
    const notThere = await h.request('DELETE', `${n}/endpoint`, { auth: a });
    expect(notThere.status).toBe(200);
    expect(notThere.json.trunk_group_id).toBe(trunkId);
    const off = await h.request('DELETE', `${n}/assign`, { auth: a });
    expect(off.status).toBe(200);
    expect(off.json.trunk_group_id).toBe(null);
    // Another account's number: 404, not a route.
    expect((await h.request('POST', `/api/v1/Account/${other.id}/numbers/${enc('+918040001005')}/assign`, { auth: other, body: { trunk_group_id: 'T' } })).status).toBe(404);
    // Release clears the routes.
    await h.request('POST', `${n}/endpoint`, { auth: a, body: { endpoint_id: endpointId } });
    expect((await h.request('DELETE', n, { auth: a })).status).toBe(200);
    await fund(a, '10');
    expect((await buy(a, '+918040001005')).json.endpoint_id).toBe(null);
  });

  it('assign-subaccount: a sub-account sees only the numbers handed to it and changes none; a foreign sub-account is 400', async () => {
    const a = await h.newAccount();
    await fund(a, '20');
    const sub = await h.newSubAccount(a);
    const otherSub = await h.newSubAccount(await h.newAccount());
    expect((await buy(a, '+918040001006')).status).toBe(201);
    expect((await buy(a, '+918040001007')).status).toBe(201);
    const path = `/api/v1/account/${a.id}/numbers/${enc('+918040001006')}/assign-subaccount`;
    const bad = await h.request('POST', path, { auth: a, body: { sub_account_id: otherSub.id } });
    expect(bad.status).toBe(400);
    expect(bad.json.details).toHaveProperty('sub_account_id');
    const ok = await h.request('POST', path, { auth: a, body: { sub_account_id: sub.id } });
    expect(ok.status).toBe(200);
    expect(ok.json.sub_account_id).toBe(sub.id);
    const seen = await h.request('GET', `/api/v1/Account/${sub.id}/numbers`, { auth: sub });
    expect(seen.status).toBe(200);
    expect((seen.json.items as Array<{ e164: string }>).map((x) => x.e164)).toEqual(['+918040001006']);
    expect((await h.request('GET', `/api/v1/Account/${sub.id}/numbers/${enc('+918040001007')}`, { auth: sub })).status).toBe(404);
    expect((await h.request('DELETE', `/api/v1/Account/${sub.id}/numbers/${enc('+918040001006')}`, { auth: sub })).status).toBe(403);
    const back = await h.request('DELETE', path, { auth: a });
    expect(back.json.sub_account_id).toBe(null);
    expect((await h.request('GET', `/api/v1/Account/${sub.id}/numbers`, { auth: sub })).json.total).toBe(0);
  });
});
