/**
 * Account limits at the edge (the interface specification's Account: cps_limit,
 * concurrent_calls_limit) for calls placed by the account's endpoints, on two
 * nodes sharing one real redis-server: a call through either node counts
 * against the same counters. The HTTP API cannot set the limits, so the account
 * and its endpoints are written to the stores in-process (the composition root
 * on each node). Also: a number with no outbound gateway configured gets 503.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App, type Listening } from '../../src/app.js';
import { deriveCredential } from '../../src/provisioning/endpoints.js';
import { loadConfig } from '../../src/config.js';
import { FREE_DECK } from '../support/edge-process.mjs';
import { createLogger } from '../../src/logger.js';
import { getHeader } from '../../src/sip/headers.js';
import { accountSipDomain, hashToken, newAuthId, newNumericId, type AccountRecord } from '../../src/store/directory/directory.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { TestUa, sleep, type Endpoint } from '../support/proxy-harness.js';

const NONCE_SECRET = 'limits-test-nonce-secret-0123456789';

describe('account call limits on two nodes sharing Redis', () => {
  let redis: RedisServerHandle;
  const nodes: Array<{ app: App; ports: Listening }> = [];
  const uas: TestUa[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    for (const nodeId of ['node-a', 'node-b']) {
      const config = loadConfig(
        {
          SIP_HOST: '127.0.0.1', SIP_UDP_PORT: '0', SIP_TCP_PORT: 'off', SIP_TLS_PORT: 'off', SIP_WS_PORT: 'off', SIP_WSS_PORT: 'off',
          HTTP_PORT: 'off', REDIS_URL: redis.url, NODE_ID: nodeId, NONCE_SECRET, PARTNER_AUTH_ID: 'LIMITS', PARTNER_AUTH_TOKEN: 'limits-partner-token-01234', RATE_DECK_FILE: FREE_DECK,
        },
        { configFile: null },
      );
      const app = createApp(config, createLogger('silent'));
      nodes.push({ app, ports: await app.start() });
    }
  });
  afterAll(async () => {
    for (const u of uas) u.close();
    for (const n of nodes) await n.app.stop();
    await redis?.stop();
  });

  const port = (node: number): number => nodes[node].ports.udp!.port;

  /** An account with these limits and `count` endpoints, written to the stores of node 0. */
  const account = async (limits: { cps: number; concurrent: number }, count: number): Promise<Endpoint[]> => {
    const { directory, credentials } = nodes[0].app;
    const authId = newAuthId('MA');
    const now = new Date().toISOString();
    const sipDomain = accountSipDomain(authId, 'sip.localhost');
    const rec: AccountRecord = {
      authId, tokenHash: hashToken(randomBytes(8).toString('hex')), passwordHash: null, name: 'Limits', email: 'l@example.test', country: 'IN',
      accountType: 'POSTPAID', enabled: true, cpsLimit: limits.cps, concurrentCallsLimit: limits.concurrent, sipDomain, partnerId: null,
      createdAt: now, updatedAt: now,
    };
    expect(await directory.createAccount(rec)).toBe(true);
    const a = { authId, authToken: '', sipDomain };
    const out: Endpoint[] = [];
    for (let i = 0; i < count; i++) {
      const username = `lim${i}${randomBytes(3).toString('hex')}`;
      const password = `${username}-pw-1234`;
      const endpointId = newNumericId();
      expect(
        await directory.createEndpoint({
          endpointId, accountAuthId: authId, username, alias: username, appId: null, subAccount: null, allowVoice: true, allowMessage: true,
          allowVideo: false, allowSameDomain: true, allowOtherDomains: false, allowPhones: true, allowApps: true, createdAt: now, updatedAt: now,
        }),
      ).toBe('ok');
      await credentials.put(sipDomain, username, deriveCredential(endpointId, username, sipDomain, password));
      out.push({ account: a, endpointId, username, password });
    }
    return out;
  };

  const ua = async (node: number, e: Endpoint, register = false): Promise<TestUa> => {
    const u = await TestUa.start(port(node), e);
    uas.push(u);
    if (register) expect(await u.register()).toBe(200);
    return u;
  };
  const uri = (e: Endpoint): string => `sip:${e.username}@${e.account.sipDomain}`;

  it('refuses a call past concurrent_calls_limit with 503 + Retry-After on either node, and admits one again after BYE', async () => {
    const [a1, a2, b] = await account({ cps: 100, concurrent: 1 }, 3);
    const callee = await ua(0, b, true);
    const first = await ua(0, a1);
    const viaA = await ua(0, a2);
    const viaB = await ua(1, a2);
    expect((await first.call('INVITE', uri(b), { keep: true })).status).toBe(200);

    for (const u of [viaA, viaB]) {
      const r = await u.call('INVITE', uri(b));
      expect(r.status).toBe(503);
      expect(getHeader(r, 'retry-after')).toBe('5');
      expect(getHeader(r, 'warning')).toMatch(/concurrent_calls_limit/);
    }
    expect(callee.requests.filter((r) => r.method === 'INVITE')).toHaveLength(1);

    // The BYE passes through the edge and frees the slot.
    expect(await first.lastDialog!.bye()).toBe(200);
    expect((await viaB.call('INVITE', uri(b))).status).toBe(200);
    // A refused call (486) frees its slot too.
    callee.answerStatus = 486;
    expect((await viaA.call('INVITE', uri(b))).status).toBe(486);
    callee.answerStatus = 200;
    expect((await viaA.call('INVITE', uri(b))).status).toBe(200);
  });

  it('refuses the call past cps_limit within one second with 503 + Retry-After: 1, counted across nodes', async () => {
    const [a, b] = await account({ cps: 2, concurrent: 100 }, 2);
    await ua(0, b, true);
    const onA = await ua(0, a);
    const onB = await ua(1, a);
    // Start at the top of a second so the three calls fall in the same one.
    await sleep(1000 - (Date.now() % 1000));
    const statuses = [(await onA.call('INVITE', uri(b))).status, (await onB.call('INVITE', uri(b))).status];
    const third = await onB.call('INVITE', uri(b));
    expect(statuses).toEqual([200, 200]);
    expect(third.status).toBe(503);
    expect(getHeader(third, 'retry-after')).toBe('1');
    expect(getHeader(third, 'warning')).toMatch(/cps_limit/);
    // A second later the rate has room again.
    await sleep(1000);
    expect((await onA.call('INVITE', uri(b))).status).toBe(200);
  });

  it('answers 503 for a call to a number when no outbound gateway is configured', async () => {
    const [a] = await account({ cps: 10, concurrent: 10 }, 1);
    const r = await (await ua(1, a)).call('INVITE', 'tel:+14155550100');
    expect(r.status).toBe(503);
    expect(getHeader(r, 'warning')).toMatch(/no outbound gateway/);
  });
});
