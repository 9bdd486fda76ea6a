/**
 * Money over HTTP on both stores (docs/api.md "Balance and transactions",
 * "Operator routes", "Partner money"): the operator credits, the partner
 * transfers, customers and partners read balances and rows; bad amounts and
 * currencies are 400 naming the field; a retried transfer happens once; the
 * admin token never shows in logs or bodies; and Redis dying mid-transfer answers
 * 503 with both sides of every transfer changed together or not at all.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { PartnerConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import type { CdrRecord } from '../../src/store/calls/calls.js';
import { MemoryCallStore } from '../../src/store/calls/memory.js';
import { RedisBillingStore } from '../../src/store/billing/redis.js';
import { PARTNER, STORE_KINDS, startHarness, stopRedisServer, type Creds, type Harness } from '../support/api-harness.js';
import { freePort } from '../support/ports.mjs';
import { expectBadRequest, expectError } from './shapes.js';

afterAll(stopRedisServer);

const ADMIN = 'admin-token-0123456789abcdef-secret';
const MONEY: PartnerConfig = Object.freeze({
  ...PARTNER,
  id: 'PT-money',
  authId: 'PAMONEYPARTNER000001',
  authToken: 'money-token-0123456789abcdef',
  email: 'money@example.test',
  canTransferBalance: true,
  currency: 'USD',
});
const EURO: PartnerConfig = Object.freeze({
  ...MONEY,
  id: 'PT-euro',
  authId: 'PAEUROPARTNER0000001',
  authToken: 'euro-token-0123456789abcdef00',
  email: 'euro@example.test',
  currency: 'EUR',
});
const RACE: PartnerConfig = Object.freeze({
  ...MONEY,
  id: 'PT-race',
  authId: 'PARACEPARTNER0000001',
  authToken: 'race-token-0123456789abcdef00',
  email: 'race@example.test',
});
const money = { id: MONEY.authId, token: MONEY.authToken };
const race = { id: RACE.authId, token: RACE.authToken };
const euro = { id: EURO.authId, token: EURO.authToken };
const plain = { id: PARTNER.authId, token: PARTNER.authToken };
const admin = { 'x-admin-token': ADMIN };

async function customerOf(h: Harness, partner: Creds, n: string): Promise<Creds & { sipDomain: string }> {
  const r = await h.request('POST', '/api/v1/partner/accounts', {
    auth: partner,
    body: { name: `Money ${n}`, email: `money-${n}@example.test`, password: 'console-password', country: 'us' },
  });
  if (r.status !== 201) throw new Error(`account create: ${r.status} ${r.text}`);
  return { id: String(r.json.auth_id), token: String(r.json.auth_token), sipDomain: String(r.json.sip_domain) };
}

describe.each(STORE_KINDS)('money API (%s store)', (kind) => {
  let h: Harness;
  const logLines: string[] = [];
  const calls = new MemoryCallStore();
  beforeAll(async () => {
    const sink = new Writable({
      write(chunk, _enc, cb) {
        logLines.push(String(chunk));
        cb();
      },
    });
    h = await startHarness(kind, { adminAuthToken: ADMIN, partners: [PARTNER, MONEY, EURO, RACE] }, { logger: createLogger('info', sink), calls });
  });
  afterAll(async () => {
    await h.close();
  });

  const credit = (path: string, body: unknown, headers: Record<string, string> = admin): ReturnType<Harness['request']> => h.request('POST', path, { body, headers });

  it('the operator credits a partner; the partner profile shows the balance (a number, as the spec types it) and its currency', async () => {
    const before = await h.request('GET', '/api/v1/partner/me', { auth: euro });
    expect(before.json).toMatchObject({ balance: 0, currency: 'EUR' });
    const r = await credit(`/api/v1/admin/partners/${EURO.id}/credit`, { amount: '23906.83', currency: 'eur', description: 'wire 42' });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ message: 'credited', balance: '23906.83000', currency: 'EUR' });
    expect(r.json.transaction).toMatchObject({ type: 'credit', amount: '23906.83000', balance_after: '23906.83000', reference_type: 'recharge', description: 'wire 42', account_id: EURO.authId });
    const me = await h.request('GET', '/api/v1/partner/me', { auth: euro });
    expect(me.json).toMatchObject({ balance: 23906.83, currency: 'EUR' });
    // Another currency than the partner's is refused, and so is an unknown partner.
    const usd = await credit(`/api/v1/admin/partners/${EURO.id}/credit`, { amount: '1', currency: 'USD' });
    expect(usd.status).toBe(400);
    expectError(usd.body, 'currency_mismatch', ['details']);
    expect((await credit('/api/v1/admin/partners/PT-nobody/credit', { amount: '1', currency: 'USD' })).status).toBe(404);
  });

  it('the admin routes need X-Admin-Token (401 without or wrong); the token never appears in a body or a log line', async () => {
    for (const headers of [{}, { 'x-admin-token': 'wrong-token-wrong-token' }] as Array<Record<string, string>>) {
      const r = await credit(`/api/v1/admin/partners/${MONEY.id}/credit`, { amount: '1', currency: 'USD' }, headers);
      expect(r.status).toBe(401);
      expectError(r.body, 'unauthorized');
    }
    // Partner credentials are not the operator's.
    const p = await h.request('POST', `/api/v1/admin/partners/${MONEY.id}/credit`, { auth: money, body: { amount: '1', currency: 'USD' } });
    expect(p.status).toBe(401);
    const ok = await credit(`/api/v1/admin/partners/${MONEY.id}/credit`, { amount: '1', currency: 'USD' });
    expect(ok.status).toBe(200);
    expect(ok.text).not.toContain(ADMIN);
    expect(logLines.length).toBeGreaterThan(0);
    expect(logLines.join('')).toContain('partner credited');
    expect(logLines.join('')).not.toContain(ADMIN);
  });

  it('bad amounts and currencies are 400 naming the field', async () => {
    const cases: Array<[unknown, unknown, string[]]> = [
      ['-1', 'USD', ['amount']],
      ['0', 'USD', ['amount']],
      ['0.000001', 'USD', ['amount']],
      ['1.123456', 'USD', ['amount']],
      ['ten', 'USD', ['amount']],
      ['1e5', 'USD', ['amount']],
      [-5, 'USD', ['amount']],
      [0, 'USD', ['amount']],
      [true, 'USD', ['amount']],
      ['10', 'XYZ', ['currency']],
      ['10', 'US', ['currency']],
      ['abc', 'XYZ', ['amount', 'currency']],
    ];
    for (const [amount, currency, fields] of cases) {
      const r = await credit(`/api/v1/admin/partners/${MONEY.id}/credit`, { amount, currency });
      expect(r.status, JSON.stringify({ amount, currency })).toBe(400);
      expectBadRequest(r.body, fields);
    }
    const missing = await credit(`/api/v1/admin/partners/${MONEY.id}/credit`, {});
    expect(missing.status).toBe(400);
    expectBadRequest(missing.body, ['amount', 'currency']);
    // A JSON number is taken as its decimal text: 10.1 is 10.10000 exactly, never 10.0999….
    const n = await credit(`/api/v1/admin/partners/${MONEY.id}/credit`, { amount: 10.1, currency: 'USD' });
    expect(n.status).toBe(200);
    expect((n.json.transaction as Record<string, unknown>).amount).toBe('10.10000');
  });

  it('transfer-balance: partner debited and customer credited with one reference_id; balances read back exactly', async () => {
    const c = await customerOf(h, money, 't1');
    await credit(`/api/v1/admin/partners/${MONEY.id}/credit`, { amount: '50', currency: 'USD' });
    const before = Number((await h.request('GET', '/api/v1/partner/me', { auth: money })).json.balance);
    const r = await h.request('POST', `/api/v1/partner/accounts/${c.id}/transfer-balance`, { auth: money, body: { amount: '12.34567', currency: 'USD', description: 'first top-up' } });
    expect(r.status).toBe(200);
    expect(r.json).toMatchObject({ message: 'Transfer completed', customer_auth_id: c.id, amount: '12.34567', currency: 'USD', customer_balance: '12.34567' });
    const [debit, creditRow] = r.json.transactions as Array<Record<string, unknown>>;
    expect(debit).toMatchObject({ type: 'debit', reference_type: 'transfer', account_id: MONEY.authId, amount: '12.34567' });
    expect(creditRow).toMatchObject({ type: 'credit', reference_type: 'transfer', account_id: c.id, amount: '12.34567', balance_after: '12.34567' });
    expect(debit?.reference_id).toBe(r.json.transfer_id);
    expect(creditRow?.reference_id).toBe(r.json.transfer_id);
    const me = await h.request('GET', '/api/v1/partner/me', { auth: money });
    expect(Math.round((before - Number(me.json.balance)) * 100_000)).toBe(1_234_567);

    // The customer's own view: the Balance resource and its rows.
    const bal = await h.request('GET', `/api/v1/Account/${c.id}/balance/USD`, { auth: c });
    expect(bal.status).toBe(200);
    expect(bal.json).toMatchObject({ auth_id: c.id, balance: '12.34567', currency: 'USD', auto_recharge: false, reserved_funds: '0.00000', available_balance: '12.34567', is_postpaid: false });
    const tx = await h.request('GET', `/api/v1/Account/${c.id}/transactions`, { auth: c });
    expect(tx.json).toMatchObject({ total: 1, limit: 20, offset: 0, summary: { total_transactions: 1, total_credit: '12.34567', total_debit: '0.00000', net_amount: '12.34567' } });
    expect((tx.json.transactions as unknown[])[0]).toMatchObject({ reference_id: r.json.transfer_id, amount: '12.34567' });
    // The partner's view of the same customer.
    const pb = await h.request('GET', `/api/v1/partner/accounts/${c.id}/balance`, { auth: money });
    expect(pb.json).toMatchObject({ auth_id: c.id, balance: '12.34567', currency: 'USD' });
    const pt = await h.request('GET', `/api/v1/partner/accounts/${c.id}/transactions?transaction_type=transfer`, { auth: money });
    expect(pt.json).toMatchObject({ account_auth_id: c.id, total: 1, page: 1, per_page: 20, total_pages: 1 });
    const none = await h.request('GET', `/api/v1/partner/accounts/${c.id}/transactions?transaction_type=debit`, { auth: money });
    expect(none.json).toMatchObject({ total: 0, transactions: [] });
  });

  it('transfer refusals: 400 insufficient (current_balance, requested_amount), 400 currency, 403 without can_transfer_balance, 404 for another partner’s customer', async () => {
    const c = await customerOf(h, money, 't2');
    const me = await h.request('GET', '/api/v1/partner/me', { auth: money });
    const short = await h.request('POST', `/api/v1/partner/accounts/${c.id}/transfer-balance`, { auth: money, body: { amount: '99999999', currency: 'USD' } });
    expect(short.status).toBe(400);
    expectError(short.body, 'insufficient_balance', ['current_balance', 'requested_amount', 'currency']);
    expect(short.json.requested_amount).toBe('99999999.00000');
    expect(Number(short.json.current_balance)).toBe(me.json.balance);
    const eur = await h.request('POST', `/api/v1/partner/accounts/${c.id}/transfer-balance`, { auth: money, body: { amount: '1', currency: 'EUR' } });
    expect(eur.status).toBe(400);
    expectError(eur.body, 'currency_mismatch', ['details']);
    const other = await customerOf(h, euro, 't2e');
    expect((await h.request('POST', `/api/v1/partner/accounts/${other.id}/transfer-balance`, { auth: money, body: { amount: '1', currency: 'USD' } })).status).toBe(404);
    expect((await h.request('GET', `/api/v1/partner/accounts/${other.id}/balance`, { auth: money })).status).toBe(404);
    expect((await h.request('GET', `/api/v1/partner/accounts/${other.id}/transactions`, { auth: money })).status).toBe(404);
    const mine = await h.newAccount(); // a customer of PARTNER, which may not transfer
    const denied = await h.request('POST', `/api/v1/partner/accounts/${mine.id}/transfer-balance`, { auth: plain, body: { amount: '1', currency: 'USD' } });
    expect(denied.status).toBe(403);
    // Nothing moved.
    expect((await h.request('GET', `/api/v1/Account/${c.id}/balance/USD`, { auth: c })).json.balance).toBe('0.00000');
    expect((await h.request('GET', '/api/v1/partner/me', { auth: money })).json.balance).toBe(me.json.balance);
  });

  it('50 concurrent transfer requests against 30.00000 of partner balance: 30 succeed, 20 are 400 insufficient_balance, the partner ends at 0', async () => {
    const customers = [await customerOf(h, race, 'r1'), await customerOf(h, race, 'r2'), await customerOf(h, race, 'r3')];
    expect((await credit(`/api/v1/admin/partners/${RACE.id}/credit`, { amount: '30', currency: 'USD' })).status).toBe(200);
    const all = await Promise.all(
      Array.from({ length: 50 }, (_, i) => h.request('POST', `/api/v1/partner/accounts/${customers[i % 3]?.id}/transfer-balance`, { auth: race, body: { amount: '1', currency: 'USD' } })),
    );
    expect(all.filter((r) => r.status === 200)).toHaveLength(30);
    const refused = all.filter((r) => r.status === 400);
    expect(refused).toHaveLength(20);
    for (const r of refused) expect(r.json).toMatchObject({ error: 'insufficient_balance', current_balance: '0.00000', requested_amount: '1.00000' });
    expect((await h.request('GET', '/api/v1/partner/me', { auth: race })).json.balance).toBe(0);
    let sum = 0;
    for (const c of customers) {
      const b = await h.request('GET', `/api/v1/partner/accounts/${c.id}/balance`, { auth: race });
      const rows = await h.request('GET', `/api/v1/partner/accounts/${c.id}/transactions?per_page=100`, { auth: race });
      expect((rows.json.transactions as unknown[]).length).toBe(Number(b.json.balance));
      sum += Number(b.json.balance);
    }
    expect(sum).toBe(30);
    const dash = await h.request('GET', '/api/v1/partner/dashboard', { auth: race });
    expect(dash.json).toMatchObject({ total_balance: '30.00000', accounts: { total: 3 } });
  });

  it('an Idempotency-Key makes a retried transfer happen once (also 8 at once); the same key with another body is 422', async () => {
    const c = await customerOf(h, money, 't3');
    await credit(`/api/v1/admin/partners/${MONEY.id}/credit`, { amount: '10', currency: 'USD' });
    const send = (amount: string): ReturnType<Harness['request']> =>
      h.request('POST', `/api/v1/partner/accounts/${c.id}/transfer-balance`, { auth: money, body: { amount, currency: 'USD' }, headers: { 'idempotency-key': 'key-t3' } });
    const all = await Promise.all(Array.from({ length: 8 }, () => send('2')));
    expect(all.map((r) => r.status)).toEqual(Array(8).fill(200));
    expect(new Set(all.map((r) => r.json.transfer_id)).size).toBe(1);
    expect(all.filter((r) => r.headers.get('idempotent-replayed') === 'true')).toHaveLength(7);
    expect((await send('2')).headers.get('idempotent-replayed')).toBe('true');
    expect((await send('3')).status).toBe(422);
    const bal = await h.request('GET', `/api/v1/Account/${c.id}/balance/USD`, { auth: c });
    expect(bal.json.balance).toBe('2.00000');
    expect((await h.request('GET', `/api/v1/Account/${c.id}/transactions`, { auth: c })).json.total).toBe(1);
  });

  it('the Balance route: 400 for a non-ISO currency, 404 for another currency or another account, sub-accounts 403; transactions page newest first', async () => {
    const c = await customerOf(h, money, 't4');
    const bad = await h.request('GET', `/api/v1/Account/${c.id}/balance/DOLLARS`, { auth: c });
    expect(bad.status).toBe(400);
    expectBadRequest(bad.body, ['currency']);
    expect((await h.request('GET', `/api/v1/Account/${c.id}/balance/EUR`, { auth: c })).status).toBe(404);
    const d = await customerOf(h, money, 't4b');
    expect((await h.request('GET', `/api/v1/Account/${d.id}/balance/USD`, { auth: c })).status).toBe(404);
    const sub = await h.newSubAccount(c);
    // A sub-account spends its parent's balance but does not read it.
    expect((await h.request('GET', `/api/v1/Account/${sub.id}/balance/USD`, { auth: sub })).status).toBe(403);
    for (let i = 1; i <= 3; i++) await credit(`/api/v1/admin/accounts/${c.id}/credit`, { amount: `${i}`, currency: 'USD', description: `r${i}` });
    const page = await h.request('GET', `/api/v1/Account/${c.id}/transactions?limit=2&offset=1`, { auth: c });
    expect(page.json.total).toBe(3);
    expect((page.json.transactions as Array<Record<string, unknown>>).map((t) => t.description)).toEqual(['r2', 'r1']);
    expect((await h.request('GET', `/api/v1/Account/${c.id}/transactions?limit=0`, { auth: c })).status).toBe(400);
    expect((await h.request('GET', `/api/v1/Account/${c.id}/balance/usd`, { auth: c })).json.balance).toBe('6.00000');
    expect((await credit('/api/v1/admin/accounts/MA-nobody/credit', { amount: '1', currency: 'USD' })).status).toBe(404);
  });

  it('dashboard and PartnerAnalytics total the customers’ CDRs of the period (cost from billed_amount), top customers by cost', async () => {
    // A partner of its own for this test, so earlier tests' customers do not count.
    const a = await customerOf(h, euro, 'an-a');
    const b = await customerOf(h, euro, 'an-b');
    const cdr = async (who: { sipDomain: string; id: string }, id: string, over: Partial<CdrRecord>): Promise<void> => {
      const at = Date.parse('2026-10-15T12:00:00Z');
      await calls.start({ callUuid: id, authId: who.id, domain: who.sipDomain, sipCallId: id, fromTag: 't', fromNumber: 'x', toNumber: 'y', direction: 'outbound', context: 'endpoint', subAccount: null, startedAt: at, callbacks: { answer: null, hangup: null }, ttlMs: 60_000 });
      await calls.end(who.sipDomain, id, (s) => ({
        cdr: { call_uuid: s.callUuid, from_number: 'x', to_number: 'y', call_status: 'answered', duration: 61, bill_duration: 120, billed_amount: '2.00000', created_at: new Date(at).toISOString(), answered_at: null, ended_at: new Date(at + 61_000).toISOString(), sip_call_id: id, hangup_cause: 'NORMAL_CLEARING', hangup_disposition: 'recv_bye', call_direction: 'outbound', context: 'endpoint', bridge_uuid: null, campaign_id: null, sip_status: 200, ...over },
        callback: null,
      }));
    };
    await cdr(a, `${kind}-a1`, {});
    await cdr(a, `${kind}-a2`, { call_direction: 'inbound', billed_amount: '0.50000', duration: 30 });
    await cdr(b, `${kind}-b1`, { billed_amount: '5.12345' });
    await cdr(b, `${kind}-b2`, { call_status: 'busy', duration: 0, billed_amount: '0.00000' });
    const an = await h.request('GET', '/api/v1/partner/analytics?from_date=2026-10-01&to_date=2026-10-31', { auth: euro });
    expect(an.status).toBe(200);
    expect(an.json).toMatchObject({
      period: { from: '2026-10-01', to: '2026-10-31' },
      totals: { total_calls: 4, answered_calls: 3, failed_calls: 1, total_duration_seconds: 152, total_cost: 7.62345, currency: 'EUR' },
      by_direction: { inbound: { calls: 1, cost: 0.5 }, outbound: { calls: 3, cost: 7.12345 } },
    });
    expect((an.json.top_customers as Array<Record<string, unknown>>).map((t) => t.auth_id)).toEqual([b.id, a.id]);
    const outside = await h.request('GET', '/api/v1/partner/analytics?from_date=2026-11-01&to_date=2026-11-30', { auth: euro });
    expect(outside.json.totals).toMatchObject({ total_calls: 0, total_cost: 0 });
    const dash = await h.request('GET', '/api/v1/partner/dashboard?from_date=2026-10-01&to_date=2026-10-31', { auth: euro });
    expect(dash.status).toBe(200);
    expect(dash.json).toMatchObject({ currency: 'EUR', calls: { total_calls: 4, answered_calls: 3, total_cost: '7.62345' }, traffic: { inbound: { total_calls: 1 } } });
    expect((dash.json.accounts as Record<string, unknown>).customers).toEqual(expect.arrayContaining([expect.objectContaining({ auth_id: a.id }), expect.objectContaining({ auth_id: b.id })]));
    expect(dash.json.time_series).toMatchObject([{ date: '2026-10-15', total_calls: 4 }]);
    const reversed = await h.request('GET', '/api/v1/partner/analytics?from_date=2026-10-31&to_date=2026-10-01', { auth: euro });
    expect(reversed.status).toBe(400);
    expectBadRequest(reversed.body, ['to_date']);
    // Customers cannot read partner reports.
    expect((await h.request('GET', '/api/v1/partner/analytics', { auth: a })).status).toBe(403);
  });
});

describe('money API without ADMIN_AUTH_TOKEN', () => {
  it('the admin routes answer 404 exactly like a route that does not exist', async () => {
    const h = await startHarness('memory', { adminAuthToken: null });
    try {
      for (const path of [`/api/v1/admin/partners/${PARTNER.id}/credit`, '/api/v1/admin/accounts/MA1/credit']) {
        const r = await h.request('POST', path, { body: { amount: '1', currency: 'USD' }, headers: { 'x-admin-token': 'anything-anything' } });
        expect(r.status).toBe(404);
        expectError(r.body, 'not_found');
        expect(r.json.message).toBe(`No route POST ${path}.`);
      }
    } finally {
      await h.close();
    }
  });
});

/** A redis-server of this test that keeps its data over a SIGKILL (AOF, fsync always). */
async function durableRedis(): Promise<{ url: string; pid: () => number; start(): Promise<void>; kill9(): Promise<void>; stop(): Promise<void> }> {
  const port = await freePort();
  const dir = mkdtempSync(join(tmpdir(), 'sipedge-ledger-aof-'));
  let child: ChildProcess | null = null;
  const ping = async (): Promise<boolean> => {
    const r = new Redis({ port, host: '127.0.0.1', lazyConnect: true, maxRetriesPerRequest: 0, retryStrategy: () => null });
    r.on('error', () => undefined);
    try {
      await r.connect();
      return (await r.ping()) === 'PONG';
    } catch {
      return false;
    } finally {
      r.disconnect();
    }
  };
  const start = async (): Promise<void> => {
    child = spawn(process.env.REDIS_SERVER_BIN ?? '/usr/bin/redis-server', ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'yes', '--appendfsync', 'always', '--dir', dir], { stdio: 'ignore' });
    for (let i = 0; i < 200 && !(await ping()); i++) await new Promise((r) => setTimeout(r, 25));
  };
  const kill = async (sig: NodeJS.Signals): Promise<void> => {
    const c = child;
    if (!c || c.exitCode !== null || c.signalCode !== null) return;
    const gone = new Promise((r) => c.once('exit', r));
    // By PID: the server of this test only.
    process.kill(c.pid as number, sig);
    await gone;
  };
  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    pid: () => child?.pid ?? -1,
    start,
    kill9: () => kill('SIGKILL'),
    async stop() {
      await kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

describe('Redis dies mid-transfer (redis store, AOF fsync always)', () => {
  it('answers 503 while it is down; every transfer changed both sides or neither; retries with the same keys complete each once', async () => {
    const redis = await durableRedis();
    const h = await startHarness('redis', { adminAuthToken: ADMIN, partners: [PARTNER, MONEY] }, { redisUrl: redis.url });
    const reader = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    reader.on('error', () => undefined);
    try {
      const c = await customerOf(h, money, 'crash');
      expect((await credit100()).status).toBe(200);
      const transfer = (i: number): ReturnType<Harness['request']> =>
        h.request('POST', `/api/v1/partner/accounts/${c.id}/transfer-balance`, { auth: money, body: { amount: '1', currency: 'USD' }, headers: { 'idempotency-key': `crash-${i}` } });
      // SIGKILL as soon as the first transfer of the burst is answered: the others are in flight.
      let killed: Promise<void> | null = null;
      const burst = Array.from({ length: 40 }, (_, i) =>
        transfer(i).then((r) => {
          if (r.status === 200) killed ??= redis.kill9();
          return r;
        }),
      );
      const first = await Promise.all(burst);
      await killed;
      expect(first.filter((r) => r.status === 200).length).toBeGreaterThan(0);
      const after = await Promise.all(Array.from({ length: 5 }, (_, i) => transfer(40 + i)));
      const all = [...first, ...after];
      if (process.env.LEDGER_CRASH_FIGURES) console.log('crash burst', first.filter((r) => r.status === 200).length, 'ok of', first.length);
      for (const r of all) expect([200, 503]).toContain(r.status);
      expect(after.map((r) => r.status)).toEqual([503, 503, 503, 503, 503]);
      for (const r of all.filter((x) => x.status === 503)) expectError(r.body, 'service_unavailable');

      await redis.start();
      const store = new RedisBillingStore(reader);
      const rowsOf = async (account: string): Promise<Array<{ reference_id: string; type: string; amount: number }>> => (await store.transactions(MONEY.id, account, { referenceType: 'transfer' }, { limit: 1000, offset: 0 })).items;
      const partnerRows = await rowsOf('partner');
      const customerRows = await rowsOf(c.id);
      // Both sides of every transfer, or neither: the same set of reference ids.
      expect(partnerRows.map((r) => r.reference_id).sort()).toEqual(customerRows.map((r) => r.reference_id).sort());
      // Every transfer answered 200 is in the ledger (AOF fsync always loses no acknowledged write).
      const kept = new Set(customerRows.map((r) => r.reference_id));
      for (const r of all.filter((x) => x.status === 200)) expect(kept.has(String(r.json.transfer_id))).toBe(true);
      const p = await store.account(MONEY.id, 'partner');
      const cu = await store.account(MONEY.id, c.id);
      expect((p?.balance ?? 0) + (cu?.balance ?? 0)).toBe(100 * 100_000);
      expect(cu?.balance).toBe(customerRows.length * 100_000);

      // Retry everything with the same keys: each transfer happens exactly once overall.
      let retried: Awaited<ReturnType<typeof transfer>>[] = [];
      for (let attempt = 0; attempt < 50; attempt++) {
        retried = await Promise.all(Array.from({ length: 45 }, (_, i) => transfer(i)));
        if (retried.every((r) => r.status === 200)) break;
        await new Promise((r) => setTimeout(r, 100)); // the API's client reconnecting
      }
      expect(retried.map((r) => r.status)).toEqual(Array(45).fill(200));
      expect((await store.account(MONEY.id, 'partner'))?.balance).toBe(55 * 100_000);
      expect((await store.account(MONEY.id, c.id))?.balance).toBe(45 * 100_000);
      expect((await rowsOf(c.id)).length).toBe(45);
    } finally {
      reader.disconnect();
      await h.close();
      await redis.stop();
    }

    function credit100(): ReturnType<Harness['request']> {
      return h.request('POST', `/api/v1/admin/partners/${MONEY.id}/credit`, { body: { amount: '100', currency: 'USD' }, headers: admin });
    }
  }, 60_000);
});
