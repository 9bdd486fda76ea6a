/**
 * The KYC block at the edge, end to end (issue 25 "Done when"): two real nodes on one
 * redis-server, a carrier UA behind OUTBOUND_GATEWAY_URI, SIPp phones. A customer_use
 * sub-account (business_type private_limited) gets 403 kyc_calls_blocked on an INVITE to
 * a number through either node; after its PAN and GST are verified in test mode over
 * node A's API, the same INVITE goes through on node B within 1 s of the verification's
 * answer, and SIPp completes the call on both nodes; a later failed PAN blocks it again.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getHeader } from '../../src/sip/headers.js';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { cidStr, sipp, TestUa, type SippResult } from '../support/proxy-harness.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';

const ADMIN = 'kyc-calls-admin-token-0123456789';
const NUMBER = '+15550004444';
const DECK = `prefix,rate_per_minute,initial_increment,subsequent_increment,connect_fee,currency,description
1555,0.60000,1,1,0,USD,per second
`;

const ok = (run: SippResult, who: string): void => {
  expect(run.errors, `${who}: ${run.errors}`).toBe('');
  expect(run.successful, `${who} successful calls`).toBe(1);
};

describe('KYC verification unblocks calls to phones across a fleet', () => {
  let redis: RedisServerHandle;
  let a: Edge;
  let b: Edge;
  let gateway: TestUa;
  let dir: string;
  const uas: TestUa[] = [];

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sip-edge-kyc-'));
    writeFileSync(join(dir, 'deck.csv'), DECK);
    redis = await startRedis();
    gateway = await TestUa.start(0);
    const env = {
      REDIS_URL: redis.url,
      NONCE_SECRET: 'kyc-calls-nonce-secret-0123456789',
      RATE_DECK_FILE: join(dir, 'deck.csv'),
      ADMIN_AUTH_TOKEN: ADMIN,
      OUTBOUND_GATEWAY_URI: `sip:127.0.0.1:${gateway.port}`,
      SIP_TLS_PORT: 'off',
      SIP_WSS_PORT: 'off',
    };
    [a, b] = await Promise.all([startEdge({ ...env, NODE_ID: 'node-a' }), startEdge({ ...env, NODE_ID: 'node-b' })]);
  }, 60_000);
  afterAll(async () => {
    for (const u of uas) u.close();
    gateway?.close();
    await a?.stop();
    await b?.stop();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const kyc = async (account: Account, sub: string, path: string, body: unknown): Promise<Record<string, unknown>> => {
    const r = await a.api(account, 'POST', `/api/v1/sub-accounts/test/${sub}/kyc/${path}`, body);
    expect(r.status, JSON.stringify(r.json)).toBe(200);
    return r.json;
  };
  const sippCall = (edge: Edge, e: Endpoint, scenario: string): Promise<SippResult> =>
    sipp({ scenario, port: edge.server.ports.udp as number, transport: 'udp', endpoint: e, cidStr: cidStr(), keys: { callee: NUMBER }, pauseMs: 200, timeoutS: 20 });

  it('403 on either node while blocked; PAN + GST verified → through on node B within 1 s, SIPp completes on both; a failed PAN blocks again', async () => {
    const account = await a.newAccount();
    const credit = await fetch(`${a.base}/api/v1/admin/accounts/${account.authId}/credit`, {
      method: 'POST',
      headers: { 'x-admin-token': ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: '10', currency: 'USD' }),
    });
    expect(credit.status).toBeLessThan(300);
    const sub = await a.newSubAccount(account, 'customer_use');
    const upd = await a.api(account, 'POST', `/api/v1/Account/${account.authId}/Subaccount/${sub}/`, { business_type: 'private_limited' });
    expect(upd.status).toBe(202);
    const phone = await a.newEndpoint(account, 'kycphone', { sub_account: sub, allow_phones: true });
    const probe = await b.newEndpoint(account, 'kycprobe', { sub_account: sub, allow_phones: true });

    // Blocked: SIPp gets 403 through node A and node B.
    const [refusedA, refusedB] = await Promise.all([sippCall(a, phone, 'call-uac-forbidden.xml'), sippCall(b, probe, 'call-uac-forbidden.xml')]);
    ok(refusedA, 'SIPp via node A (403)');
    ok(refusedB, 'SIPp via node B (403)');
    expect(refusedA.messages).toMatch(/SIP\/2\.0 403 [^\r\n]*[\s\S]*kyc_calls_blocked/);
    expect(gateway.requests.filter((q) => q.method === 'INVITE')).toHaveLength(0);

    // A UA of the sub-account on node B, registered, to time the change.
    const ua = await TestUa.start(b.server.ports.udp as number, probe);
    uas.push(ua);
    expect(await ua.register()).toBe(200);
    const blocked = await ua.call('INVITE', `sip:${NUMBER}@${account.sipDomain}`);
    expect(blocked.status).toBe(403);
    expect(getHeader(blocked, 'warning')).toMatch(/kyc_calls_blocked/);

    expect(await kyc(account, sub, 'verify-pan', { pan: 'TESTSUCCESS0001' })).toMatchObject({ status: 'verified', kyc_calls_blocked: true, mock: true });
    const gst = await kyc(account, sub, 'verify-gst', { gstin: 'TESTSUCCESS0001' });
    const t0 = Date.now();
    expect(gst).toEqual({ verification_type: 'gst', status: 'verified', kyc_calls_blocked: false, mock: true });
    const through = await ua.call('INVITE', `sip:${NUMBER}@${account.sipDomain}`, { keep: true });
    const elapsed = Date.now() - t0;
    expect(through.status).toBe(200);
    expect(elapsed).toBeLessThan(1000);
    expect(await ua.lastDialog?.bye()).toBe(200);
    console.log(`KYC verified on node A → INVITE answered 200 through node B after ${elapsed} ms`);

    // The same SIPp phones now complete their calls on both nodes.
    const [callA, callB] = await Promise.all([sippCall(a, phone, 'call-uac.xml'), sippCall(b, probe, 'call-uac.xml')]);
    ok(callA, 'SIPp via node A (200)');
    ok(callB, 'SIPp via node B (200)');
    expect(gateway.requests.filter((q) => q.method === 'INVITE').length).toBeGreaterThanOrEqual(3);

    // Revoked: a failed PAN blocks again at once.
    expect(await kyc(account, sub, 'verify-pan', { pan: 'TESTFAIL0001' })).toMatchObject({ status: 'failed', kyc_calls_blocked: true });
    expect((await ua.call('INVITE', `sip:${NUMBER}@${account.sipDomain}`)).status).toBe(403);
    ok(await sippCall(a, phone, 'call-uac-forbidden.xml'), 'SIPp via node A (403 again)');
  });
});
