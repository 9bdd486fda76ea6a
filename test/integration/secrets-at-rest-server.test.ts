/**
 * The real server with DATA_ENCRYPTION_KEY and a real redis-server (README "Secrets at
 * rest"): the signing secret it keeps is sealed under the first kid of the setting;
 * after a restart with a new key put first, the value sealed under the old kid is left
 * as it is and a replaced secret is sealed under the new kid; neither secret nor key
 * appears in the server's output. (That old-kid values still sign after the rotation is
 * checked in test/api/signing-secret-at-rest.test.ts.)
 */
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { until } from '../support/wait.js';

const K1 = `k1:${randomBytes(32).toString('base64')}`;
const K2 = `k2:${randomBytes(32).toString('base64')}`;
const PARTNER = { id: 'PAATREST01', token: 'at-rest-partner-token-0123456789' };

describe('secrets at rest in the real server (Redis)', () => {
  let redis: RedisServerHandle;
  let client: Redis;
  let server: ServerProcess | null = null;
  beforeAll(async () => {
    redis = await startRedis();
    client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
  });
  afterAll(async () => {
    await server?.stop();
    client?.disconnect();
    await redis?.stop();
  });

  const start = async (key: string): Promise<ServerProcess> =>
    startServer({ REDIS_URL: redis.url, DATA_ENCRYPTION_KEY: key, PARTNER_AUTH_ID: PARTNER.id, PARTNER_AUTH_TOKEN: PARTNER.token, NONCE_SECRET: 'at-rest-nonce-secret-0123456789' });
  const post = async (path: string, auth: { id: string; token: string }, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const r = await fetch(`http://127.0.0.1:${server?.ports.http}${path}`, {
      method: 'POST',
      headers: { 'x-auth-id': auth.id, 'x-auth-token': auth.token, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    });
    return { status: r.status, json: (await r.json()) as Record<string, unknown> };
  };
  const stored = async (domain: string): Promise<string> => {
    const keys = await client.keys(`*cbsecret:{${domain}}`);
    expect(keys).toHaveLength(1);
    return String(await client.get(keys[0] as string));
  };

  it('seals with the first kid; after a rotation the old value opens and new ones get the new kid', async () => {
    server = await start(K1);
    const created = await post('/api/v1/partner/accounts', PARTNER, { name: 'Rest', email: 'rest@example.test', password: 'console-password', country: 'in' });
    expect(created.status).toBe(201);
    const acct = { id: String(created.json.auth_id), token: String(created.json.auth_token) };
    const domain = String(created.json.sip_domain);
    const first = String(created.json.callback_signing_secret);
    const sealed = await stored(domain);
    expect(sealed).toMatch(/^enc:v1:k1:/);
    expect(sealed).not.toContain(first);
    await server.stop();

    server = await start(`${K2},${K1}`);
    // Still the k1 value until it is written again.
    expect(await stored(domain)).toBe(sealed);
    const replaced = await post(`/api/v1/Account/${acct.id}/SigningSecret/`, acct);
    expect(replaced.status).toBe(201);
    const second = String(replaced.json.callback_signing_secret);
    const resealed = await stored(domain);
    expect(resealed).toMatch(/^enc:v1:k2:/);
    expect(resealed).not.toContain(second);
    // The log line is written asynchronously: it may follow the HTTP answer by a moment.
    const srv = server;
    await until('the replacement logged', () => (srv.output().includes('callback signing secret replaced') ? true : undefined), 5000);
    const out = server.output();
    for (const s of [first, second, K1.slice(3), K2.slice(3)]) expect(out).not.toContain(s);
  }, 60_000);
});
