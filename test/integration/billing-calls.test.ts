/**
 * Calls cost money (issue 22 items 5 and 6; docs/billing.md "Calls"), on the real server
 * with a rate deck of the test's own, real SIPp phones and a small UA as the carrier:
 *
 * - a 61 s SIPp call between endpoints at 60/60 and 1.00000/min bills 120 s, "2.00000"
 *   (CDR, Hangup callback, one ledger row); a 61 s call to a number at 1/1 bills 61 s,
 *   "1.01667";
 * - an account with 30 s of money places two concurrent calls to numbers: the edge
 *   ends both at ~15 s with a BYE to each party, the CDRs say CREDIT_EXHAUSTED, and the
 *   balance ends at 0 (within one increment);
 * - a call from an account with no money gets 402 and writes no ledger row; a number the
 *   deck does not rate gets 403 naming the missing rate.
 */
import type { ServerResponse } from 'node:http';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getHeader } from '../../src/sip/headers.js';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { cidStr, sipp, TestUa, type SippResult } from '../support/proxy-harness.js';
import { startHttpsReceiver, type HttpsReceiver, type ReceivedRequest } from '../support/https-receiver.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { until } from '../support/wait.js';

const ADMIN = 'billing-test-admin-token-0123456789';
const DECK = `prefix,rate_per_minute,initial_increment,subsequent_increment,connect_fee,currency,description
sip:,1.00000,60,60,0,USD,endpoints per minute
1555,1.00000,1,1,0,USD,per second
`;

const completed = (run: SippResult, who: string): void => {
  expect(run.errors, `${who}: ${run.errors}`).toBe('');
  expect(run.successful, `${who} successful calls`).toBe(1);
};
const paramsOf = (r: ReceivedRequest): Record<string, string> => Object.fromEntries(new URLSearchParams(r.body));

describe('rated and billed calls, prepaid enforcement', () => {
  let edge: Edge;
  let gateway: TestUa;
  let rx: HttpsReceiver;
  let ca: TestCa;
  let dir: string;
  let n = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sip-edge-deck-'));
    writeFileSync(join(dir, 'deck.csv'), DECK);
    ca = makeTestCa();
    rx = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (_req, res: ServerResponse) => void res.writeHead(200).end('ok'));
    gateway = await TestUa.start(0);
    edge = await startEdge({
      RATE_DECK_FILE: join(dir, 'deck.csv'),
      ADMIN_AUTH_TOKEN: ADMIN,
      OUTBOUND_GATEWAY_URI: `sip:127.0.0.1:${gateway.port}`,
      NODE_EXTRA_CA_CERTS: ca.caCertFile,
      CALLBACK_ALLOWED_NETWORKS: '127.0.0.0/8',
      SIP_TLS_PORT: 'off',
      SIP_WSS_PORT: 'off',
    });
  }, 60_000);
  afterAll(async () => {
    gateway?.close();
    await edge?.stop();
    await rx?.close();
    ca?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const api = (account: Account, method: string, path: string, body?: unknown) => edge.api(account, method, path, body);
  const credit = async (account: Account, amount: string): Promise<void> => {
    const r = await fetch(`${edge.base}/api/v1/admin/accounts/${account.authId}/credit`, {
      method: 'POST',
      headers: { 'x-admin-token': ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ amount, currency: 'USD', description: 'test funds' }),
    });
    expect(r.status, await r.clone().text()).toBeLessThan(300);
  };
  const balance = async (account: Account): Promise<string> => String((await api(account, 'GET', `/api/v1/Account/${account.authId}/balance/USD`)).json.balance);
  const rows = async (account: Account): Promise<Array<Record<string, unknown>>> =>
    (await api(account, 'GET', `/api/v1/Account/${account.authId}/transactions?limit=100`)).json.transactions as Array<Record<string, unknown>>;
  const cdrs = async (account: Account): Promise<Array<Record<string, unknown>>> => (await api(account, 'GET', `/api/v1/Account/${account.authId}/CDR/`)).json.objects as Array<Record<string, unknown>>;
  /** An endpoint whose calls send Hangup callbacks to the receiver under `/<tag>/`. */
  const caller = async (account: Account, tag: string): Promise<Endpoint> => {
    const app = await api(account, 'POST', `/api/v1/Account/${account.authId}/Application/`, { app_name: `app-${tag}`, answer_url: `https://127.0.0.1:${rx.port}/${tag}/answer`, hangup_url: `https://127.0.0.1:${rx.port}/${tag}/hangup` });
    expect(app.status).toBe(201);
    const e = await edge.newEndpoint(account, `caller${++n}`, { allow_phones: true });
    await edge.updateEndpoint(e, { application: Number(app.json.app_id) });
    return e;
  };

  it('refuses a call from an account with no money (402, no ledger row) and one to a number without a rate (403 naming it)', async () => {
    const account = await edge.newAccount();
    const a = await caller(account, 'broke');
    const port = edge.server.ports.udp as number;
    const ua = await TestUa.start(port, a);
    try {
      expect(await ua.register()).toBe(200);
      const before = gateway.requests.length;
      const broke = await ua.call('INVITE', `sip:+15550009999@${account.sipDomain}`);
      expect(broke.status).toBe(402);
      expect(getHeader(broke, 'warning')).toMatch(/^399 sip-edge "insufficient balance/);
      await credit(account, '1');
      const unrated = await ua.call('INVITE', `sip:+447700900123@${account.sipDomain}`);
      expect(unrated.status).toBe(403);
      expect(getHeader(unrated, 'warning')).toBe('399 sip-edge "no rate for +447700900123 in USD"');
      expect(gateway.requests.slice(before).filter((q) => q.method === 'INVITE')).toHaveLength(0);
      expect((await rows(account)).map((r) => r.reference_type)).toEqual(['recharge']);
    } finally {
      ua.close();
    }
  });
  // The two long calls run side by side (each filters what it reads by its own accounts and Call-IDs).
  it.concurrent('bills a 61 s call at 60/60 as 120 s "2.00000" and one at 1/1 as 61 s "1.01667": CDR, Hangup callback, one ledger row each', async () => {
    const account = await edge.newAccount();
    await credit(account, '10');
    const a = await caller(account, 'per-minute');
    const b = await edge.newEndpoint(account, `callee${++n}`);
    const port = edge.server.ports.udp as number;
    // Endpoint to endpoint (sip: line, 60/60), SIPp on both sides, 61 s.
    const cid = cidStr();
    const callee = sipp({ scenario: 'call-uas-long.xml', port, transport: 'udp', endpoint: b, cidStr: cid, timeoutS: 90 });
    await edge.waitBindings(b, 1);
    const toEndpoint = sipp({ scenario: 'call-uac.xml', port, transport: 'udp', endpoint: a, cidStr: cid, keys: { callee: b.username }, pauseMs: 61_000, timeoutS: 90 });
    // Meanwhile, to a number (1555…, 1/1) from a small UA, hung up after 61 s.
    const c = await caller(account, 'per-second');
    const ua = await TestUa.start(port, c);
    expect(await ua.register()).toBe(200);
    const res = await ua.call('INVITE', `sip:+15550001111@${account.sipDomain}`, { keep: true });
    expect(res.status).toBe(200);
    await new Promise((r) => setTimeout(r, 61_000));
    expect(await ua.lastDialog?.bye()).toBe(200);
    ua.close();
    completed(await toEndpoint, 'caller');
    completed(await callee, 'callee');

    await until('both CDRs', async () => ((await cdrs(account)).length >= 2 ? true : undefined), 10_000);
    const list = await cdrs(account);
    const perMinute = list.find((x) => x.to_number === b.username) as Record<string, unknown>;
    const perSecond = list.find((x) => String(x.to_number).includes('15550001111')) as Record<string, unknown>;
    expect(perMinute).toMatchObject({ duration: 61, bill_duration: 120, billed_amount: '2.00000', total_rate: '1.00000', rate_prefix: 'sip:' });
    expect(perSecond).toMatchObject({ duration: 61, bill_duration: 61, billed_amount: '1.01667', total_rate: '1.00000', rate_prefix: '1555' });
    await until('both Hangup callbacks', () => (['per-minute', 'per-second'].every((t) => rx.requests.some((r) => r.url === `/${t}/hangup`)) ? true : undefined), 10_000);
    const hangup = (tag: string): Record<string, string> => paramsOf(rx.requests.find((r) => r.url === `/${tag}/hangup`) as ReceivedRequest);
    expect(hangup('per-minute')).toMatchObject({ BillDuration: '120', BillRate: '1.00000', TotalCost: '2.00000', Duration: '61' });
    expect(hangup('per-second')).toMatchObject({ BillDuration: '61', BillRate: '1.00000', TotalCost: '1.01667', Duration: '61' });
    // One debit per call (reference_type cdr, reference_id the call), and the sums agree.
    await until('two debits', async () => ((await rows(account)).filter((r) => r.reference_type === 'cdr').length >= 2 ? true : undefined), 10_000);
    const debits = (await rows(account)).filter((r) => r.reference_type === 'cdr');
    expect(debits.map((r) => [r.reference_id, r.amount]).sort()).toEqual([[perMinute.call_uuid, '2.00000'], [perSecond.call_uuid, '1.01667']].sort());
    expect(await balance(account)).toBe('6.98333');
  }, 100_000);

  it.concurrent('two concurrent calls with 30 s of money: both get a BYE at ~15 s, the CDRs say CREDIT_EXHAUSTED, the balance ends at 0', async () => {
    const account = await edge.newAccount();
    await credit(account, '0.5'); // 30 s at 1.00000/min
    const a = await caller(account, 'cut');
    const port = edge.server.ports.udp as number;
    const cids = [cidStr(), cidStr()];
    const runs = cids.map((cid, i) => sipp({ scenario: 'call-uac-cut.xml', port, transport: 'udp', endpoint: a, cidStr: cid, keys: { callee: `+1555000${i}222` }, timeoutS: 60 }));
    const ours = (callId: string | undefined): boolean => cids.some((c) => callId === c.replace('%u', '1'));
    // Mid-call (~5 s in), what the two calls cost so far is reserved, not yet debited.
    await until('both calls answered', async () => ((await api(account, 'GET', `/api/v1/Account/${account.authId}/balance/USD`)).json.reserved_funds !== '0.00000' ? true : undefined), 20_000);
    await new Promise((r) => setTimeout(r, 4000));
    const mid = (await api(account, 'GET', `/api/v1/Account/${account.authId}/balance/USD`)).json;
    expect(mid.balance).toBe('0.50000');
    expect(Number(mid.reserved_funds)).toBeGreaterThanOrEqual(0.1);
    expect(Number(mid.reserved_funds)).toBeLessThan(0.5);
    expect(Number(mid.available_balance)).toBeCloseTo(0.5 - Number(mid.reserved_funds), 5);
    const [r1, r2] = await Promise.all(runs);
    completed(r1 as SippResult, 'caller 1 (BYE received)');
    completed(r2 as SippResult, 'caller 2 (BYE received)');
    // On the wire at the carrier: each call's INVITE, then the edge's BYE ~15 s later (the
    // carrier's BYE left with the caller's; its arrival here may trail the callers' exits).
    await until('both BYEs at the carrier', () => (gateway.requests.filter((q) => q.method === 'BYE' && ours(getHeader(q, 'call-id'))).length >= 2 ? true : undefined), 5000);
    const got = gateway.requests.map((q, i) => ({ q, at: gateway.requestTimes[i] as number })).filter((g) => ours(getHeader(g.q, 'call-id')));
    const invites = got.filter((g) => g.q.method === 'INVITE');
    const byes = got.filter((g) => g.q.method === 'BYE');
    expect(invites).toHaveLength(2);
    expect(byes).toHaveLength(2);
    for (const inv of invites) {
      const bye = byes.find((b) => getHeader(b.q, 'call-id') === getHeader(inv.q, 'call-id'));
      expect(bye, 'a BYE for each call').toBeDefined();
      const s = ((bye?.at as number) - inv.at) / 1000;
      console.log(`credit cut: BYE reached the carrier ${s.toFixed(2)} s after the INVITE (expected ~15 s)`);
      expect(s).toBeGreaterThanOrEqual(14);
      expect(s).toBeLessThanOrEqual(16);
      expect(getHeader(bye?.q as never, 'reason')).toMatch(/cause=402/);
    }
    await until('two CDRs', async () => ((await cdrs(account)).length >= 2 ? true : undefined), 10_000);
    for (const c of await cdrs(account)) expect(c).toMatchObject({ call_status: 'answered', hangup_cause: 'CREDIT_EXHAUSTED', hangup_disposition: 'send_bye' });
    await until('two debits', async () => ((await rows(account)).filter((r) => r.reference_type === 'cdr').length >= 2 ? true : undefined), 10_000);
    const left = Number(await balance(account));
    console.log(`credit cut: balance after the two calls ${left.toFixed(5)} (one increment = 0.01667)`);
    expect(left).toBeGreaterThanOrEqual(-0.01667);
    expect(left).toBeLessThanOrEqual(0.01667);
    const metrics = await (await fetch(`${edge.base}/metrics`)).text();
    expect(metrics).toMatch(/^sip_calls_cut_for_credit_total 2$/m);
  }, 60_000);
});
