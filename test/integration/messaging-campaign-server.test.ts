/**
 * A campaign through the real server across a restart (issue 26 "Done when"; docs/
 * messaging-catalog.md "The runner"): the server on a real redis-server, a local WhatsApp
 * Cloud API stub that checks the Bearer token and counts every message by recipient.
 * 2,000 contacts imported by CSV, a template campaign at 50 messages/s started, paused at
 * about half, the server stopped (SIGTERM) and a new server process started on the same
 * Redis, the campaign resumed: the stub saw every contact exactly once.
 */
import { randomBytes } from 'node:crypto';
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEdge, type Account, type Edge } from '../support/edge.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { until } from '../support/wait.js';

const TOKEN = 'EAAG-campaign-test-access-token-value';

describe('a 2,000-contact campaign paused, the server restarted, resumed', () => {
  let redis: RedisServerHandle;
  let stub: Server;
  let stubPort = 0;
  /** Recipients of every message the stub accepted, in order. */
  const seen: string[] = [];
  let badAuth = 0;
  let edge: Edge | null = null;

  beforeAll(async () => {
    redis = await startRedis();
    let n = 0;
    stub = createServer((req, res) => {
      let body = '';
      req.on('data', (c: Buffer) => (body += c.toString()));
      req.on('end', () => {
        if (req.headers.authorization !== `Bearer ${TOKEN}`) {
          badAuth++;
          res.writeHead(401, { 'content-type': 'application/json' }).end('{"error":{"code":190,"message":"Invalid OAuth access token"}}');
          return;
        }
        const j = JSON.parse(body) as { messaging_product?: string; to?: string; type?: string; template?: { name?: string } };
        if (j.messaging_product !== 'whatsapp' || j.type !== 'template' || !j.to || j.template?.name !== 'spring_sale') {
          res.writeHead(400, { 'content-type': 'application/json' }).end('{"error":{"code":100,"message":"bad body"}}');
          return;
        }
        seen.push(j.to);
        res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify({ messaging_product: 'whatsapp', contacts: [{ input: j.to, wa_id: j.to.slice(1) }], messages: [{ id: `wamid.${++n}` }] }));
      });
    });
    await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r));
    stubPort = (stub.address() as AddressInfo).port;
  }, 30_000);
  afterAll(async () => {
    await edge?.stop();
    await new Promise<void>((r) => stub.close(() => r()));
    await redis?.stop();
  });

  const env = (): Record<string, string> => ({
    REDIS_URL: redis.url,
    NONCE_SECRET: 'campaign-server-nonce-secret-0123456789',
    DATA_ENCRYPTION_KEY: KEY,
    WHATSAPP_API_BASE_URL: `http://127.0.0.1:${stubPort}`,
    SIP_TLS_PORT: 'off',
    SIP_WSS_PORT: 'off',
  });
  const campaign = async (e: Edge, a: Account, id: string): Promise<Record<string, unknown>> => (await e.api(a, 'GET', `/v1/messaging/campaigns/${id}`)).json;
  const progress = async (e: Edge, a: Account, id: string): Promise<Record<string, unknown>> => {
    const c = await campaign(e, a, id);
    return { status: c.status, ...(c.progress as Record<string, unknown>) };
  };

  it('every contact is messaged exactly once', async () => {
    edge = await startEdge(env());
    const account = await edge.newAccount();
    const ch = await edge.api(account, 'POST', '/v1/messaging/channels', { type: 'whatsapp', name: 'shop', waba_id: '1029384756', phone_number_id: '5647382910', access_token: TOKEN });
    expect(ch.status, JSON.stringify(ch.json)).toBe(201);
    const rows = ['phone,name,tags'];
    for (let i = 0; i < 2000; i++) rows.push(`+1212555${String(i).padStart(4, '0')},Customer ${i},spring`);
    const fd = new FormData();
    fd.append('file', new Blob([rows.join('\n')], { type: 'text/csv' }), 'contacts.csv');
    const imp = await fetch(`${edge.base}/v1/messaging/contacts/import`, { method: 'POST', headers: { accept: 'application/json', 'x-auth-id': account.authId, 'x-auth-token': account.authToken }, body: fd });
    const report = (await imp.json()) as { imported: number; failed: unknown[] };
    expect(imp.status).toBe(200);
    expect(report.imported).toBe(2000);
    const c = await edge.api(account, 'POST', '/v1/messaging/campaigns', {
      name: 'Spring sale',
      channel_id: String(ch.json.id),
      template: { name: 'spring_sale', language: 'en_US', components: [{ type: 'body', parameters: [{ type: 'text', text: '{{name}}' }] }] },
      audience: { tag: 'spring' },
      rate: 50,
    });
    expect(c.status, JSON.stringify(c.json)).toBe(201);
    const id = String(c.json.id);
    const startedAt = Date.now();
    expect((await edge.api(account, 'POST', `/v1/messaging/campaigns/${id}/start`)).status).toBeLessThan(300);
    const first = edge;
    await until('about half sent', async () => (Number((await progress(first, account, id)).sent) >= 1000 ? true : undefined), 40_000, 100).catch(async (err: unknown) => {
      console.log(JSON.stringify(await progress(first, account, id)), seen.length, badAuth);
      console.log(first.server.output().split('\n').filter((l) => /messaging|campaign|warn|error/i.test(l)).slice(-15).join('\n'));
      throw err;
    });
    expect((await edge.api(account, 'POST', `/v1/messaging/campaigns/${id}/pause`)).status).toBeLessThan(300);
    const atPause = await progress(edge, account, id);
    const rate = Number(atPause.sent) / ((Date.now() - startedAt) / 1000);
    console.info(`campaign: paused at ${String(atPause.sent)} sent (${rate.toFixed(1)}/s)`);
    expect(Number(atPause.sent)).toBeLessThan(1300);
    expect(rate).toBeLessThan(60);

    // The server stops (SIGTERM: in-flight sends finish) and a new process starts on the same Redis.
    await edge.stop();
    edge = await startEdge(env());
    const second = edge;
    expect((await second.api(account, 'GET', `/v1/messaging/campaigns/${id}`)).json.status).toBe('paused');
    expect((await second.api(account, 'POST', `/v1/messaging/campaigns/${id}/start`)).status).toBeLessThan(300);
    const done = await until('the campaign completed', async () => {
      const p = await progress(second, account, id);
      return p.status === 'completed' ? p : undefined;
    }, 60_000, 200);
    expect(done).toMatchObject({ total: 2000, sent: 2000, failed: 0, unconfirmed: 0, pending: 0 });
    // The provider's own count: 2,000 messages, 2,000 recipients, none twice.
    await until('every send reached the stub', async () => (seen.length >= 2000 ? true : undefined), 10_000);
    await new Promise((r) => setTimeout(r, 500));
    expect(seen).toHaveLength(2000);
    expect(new Set(seen).size).toBe(2000);
    expect(badAuth).toBe(0);
  }, 150_000);
});

const KEY = `k1:${randomBytes(32).toString('base64')}`;
