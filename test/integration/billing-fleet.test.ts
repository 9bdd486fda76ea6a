/**
 * A rated call outlives the node it went through (issue 22 "Bad input and faults"): two
 * nodes share Redis; a call to a number goes through node A, A is SIGKILLed during the
 * call, and the caller's BYE reaches node B (as behind a shared address). B ends the call
 * from the state in the store: one CDR with the call's bill, one ledger debit — and a BYE
 * seen again changes nothing (nothing lost, nothing charged twice).
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getHeader } from '../../src/sip/headers.js';
import type { SipResponse } from '../../src/sip/message.js';
import { startEdge, type Account, type Edge } from '../support/edge.js';
import { TestUa } from '../support/proxy-harness.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { until } from '../support/wait.js';

const ADMIN = 'billing-fleet-admin-token-0123456789';
const DECK = `prefix,rate_per_minute,initial_increment,subsequent_increment,connect_fee,currency,description
1555,6.00000,1,1,0,USD,per second (0.10000 a second)
`;

describe('a rated call whose node dies: billed once by the node that sees its end', () => {
  let redis: RedisServerHandle;
  let a: Edge;
  let b: Edge;
  let gateway: TestUa;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sip-edge-deck-'));
    writeFileSync(join(dir, 'deck.csv'), DECK);
    redis = await startRedis();
    gateway = await TestUa.start(0);
    const env = {
      REDIS_URL: redis.url,
      NONCE_SECRET: 'billing-fleet-nonce-secret-0123456789',
      RATE_DECK_FILE: join(dir, 'deck.csv'),
      ADMIN_AUTH_TOKEN: ADMIN,
      OUTBOUND_GATEWAY_URI: `sip:127.0.0.1:${gateway.port}`,
      SIP_TLS_PORT: 'off',
      SIP_WSS_PORT: 'off',
    };
    [a, b] = await Promise.all([startEdge({ ...env, NODE_ID: 'node-a' }), startEdge({ ...env, NODE_ID: 'node-b' })]);
  }, 60_000);
  afterAll(async () => {
    gateway?.close();
    await a?.stop().catch(() => undefined);
    await b?.stop();
    await redis?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const api = async (edge: Edge, account: Account, path: string): Promise<Record<string, unknown>> => {
    const r = await edge.api(account, 'GET', path);
    expect(r.status).toBe(200);
    return r.json;
  };

  it('SIGKILL of the node during the call; the BYE through the other node bills it once, and a repeated BYE changes nothing', async () => {
    const account = await a.newAccount();
    const credit = await fetch(`${a.base}/api/v1/admin/accounts/${account.authId}/credit`, {
      method: 'POST',
      headers: { 'x-admin-token': ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: '10', currency: 'USD' }),
    });
    expect(credit.status).toBeLessThan(300);
    const e = await a.newEndpoint(account, 'fleetcaller', { allow_phones: true });
    const ua = await TestUa.start(a.server.ports.udp as number, e);
    try {
      expect(await ua.register()).toBe(200);
      expect((await ua.call('INVITE', `sip:+15550007777@${account.sipDomain}`, { keep: true })).status).toBe(200);
      await new Promise((r) => setTimeout(r, 3000));
      await a.server.stop('SIGKILL');
      // The caller's BYE now reaches node B: its flow tokens open there (shared NONCE_SECRET).
      ua.edgePort = b.server.ports.udp as number;
      expect(await ua.lastDialog?.bye()).toBe(200);
      const gatewayByes = gateway.requests.filter((q) => q.method === 'BYE');
      expect(gatewayByes).toHaveLength(1);

      const cdrs = async (): Promise<Array<Record<string, unknown>>> => (await api(b, account, `/api/v1/Account/${account.authId}/CDR/`)).objects as Array<Record<string, unknown>>;
      const debits = async (): Promise<Array<Record<string, unknown>>> =>
        ((await api(b, account, `/api/v1/Account/${account.authId}/transactions?limit=100`)).transactions as Array<Record<string, unknown>>).filter((r) => r.reference_type === 'cdr');
      await until('the debit', async () => ((await debits()).length === 1 ? true : undefined), 10_000);
      const [cdr] = await cdrs();
      expect(cdr).toMatchObject({ call_status: 'answered', hangup_cause: 'NORMAL_CLEARING', rate_prefix: '1555', total_rate: '6.00000' });
      const seconds = cdr?.duration as number;
      expect(seconds).toBeGreaterThanOrEqual(3);
      expect(cdr?.billed_amount).toBe((seconds / 10).toFixed(5));

      // The same BYE again (a retransmission that outlived its transaction, or a second node).
      const again = ua.next((m) => m.kind === 'response' && getHeader(m, 'cseq') === '3 BYE');
      ua.lastDialog?.send('BYE', 3);
      expect(((await again) as SipResponse).status).toBeGreaterThanOrEqual(200);
      await new Promise((r) => setTimeout(r, 500));
      expect(await cdrs()).toHaveLength(1);
      const rows = await debits();
      expect(rows).toHaveLength(1);
      expect(rows[0]).toMatchObject({ reference_id: cdr?.call_uuid, amount: cdr?.billed_amount });
      const balance = (await api(b, account, `/api/v1/Account/${account.authId}/balance/USD`)).balance;
      expect(balance).toBe((10 - seconds / 10).toFixed(5));
    } finally {
      ua.close();
    }
  }, 40_000);
});
