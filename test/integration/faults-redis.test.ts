/**
 * Redis faults against the real server process and a real redis-server that the
 * test stops, kills and restarts (test/support/redis-server.ts). The test Redis
 * keeps nothing on disk, so after each restart the test provisions the
 * credentials again, as an operator's persistent Redis would still hold them.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { authorize, registerMessage } from '../support/sip-client.js';
import { provision, redisStores } from '../support/provision.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { callId, metric, options, register, scrape, sleep, udpClient, type Endpoint, type UdpClient } from '../support/security.js';

const DOMAIN = 'faults.sip.localhost';
const users: Endpoint[] = Array.from({ length: 40 }, (_, i) => ({ user: `f${i + 1}`, domain: DOMAIN, password: `faults-secret-${i + 1}` }));
const PARTNER = { id: 'PAFAULTSPARTNER00001', token: 'faults-partner-token-0123456789' };
const MAX_PENDING = 5;

describe('Redis faults (real server, real redis-server stopped and restarted)', () => {
  let redis: RedisServerHandle;
  let server: ServerProcess;
  let udp: UdpClient;
  const http = (path: string, init: RequestInit = {}): Promise<Response> => fetch(`http://127.0.0.1:${server.ports.http}${path}`, init);
  const createAccount = (): Promise<Response> =>
    http('/api/v1/partner/accounts', {
      method: 'POST',
      headers: { 'X-Auth-ID': PARTNER.id, 'X-Auth-Token': PARTNER.token, 'Content-Type': 'application/json' },
      body: JSON.stringify({ name: 'Faults', email: 'f@example.test', password: 'a-long-password', country: 'IN' }),
    });
  /** Provision the endpoints over a short-lived connection (Redis may just have come back). */
  const provisionAll = async (): Promise<void> => {
    const s = redisStores(redis.url);
    try {
      await provision(s.credentials, users);
    } finally {
      await s.close();
    }
  };
  const lookup = async (e: Endpoint): Promise<Array<{ uri: string; callId: string; cseq: number }>> => {
    const s = redisStores(redis.url);
    try {
      return await s.location.lookup({ domain: e.domain, user: e.user });
    } finally {
      await s.close();
    }
  };

  beforeAll(async () => {
    redis = await startRedis();
    await redis.stop(); // the server starts while Redis is down
    server = await startServer({
      REDIS_URL: redis.url,
      SIP_MAX_PENDING: String(MAX_PENDING),
      PARTNER_AUTH_ID: PARTNER.id,
      PARTNER_AUTH_TOKEN: PARTNER.token,
    });
    udp = await udpClient('127.0.0.1', server.ports.udp as number);
  }, 60_000);

  afterAll(async () => {
    udp?.close();
    if (redis?.pid) process.kill(redis.pid, 'SIGCONT');
    await server?.stop();
    await redis?.stop();
  });

  it('starts with Redis down: listening, alive, not ready; REGISTER gets 503 + Retry-After; the HTTP API answers 503 with the error object', async () => {
    expect(server.logs.some((l) => String(l.msg).includes('redis is not reachable'))).toBe(true);
    expect((await http('/healthz')).status).toBe(200);
    const ready = await http('/readyz');
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ error: 'not_ready', api_id: expect.any(String), message: expect.stringMatching(/location store/) });

    const id = callId();
    const r = await udp.request(registerMessage({ transport: 'UDP', user: 'f1', domain: DOMAIN, viaHost: '127.0.0.1', viaPort: udp.port, callId: id, cseq: 1 }), id);
    expect(r.status).toBe(503);
    expect(r.header('retry-after')).toMatch(/^\d+$/);

    const api = await createAccount();
    expect(api.status).toBe(503);
    expect(await api.json()).toMatchObject({ api_id: expect.any(String), error: 'service_unavailable', message: expect.any(String) });

    const m = await scrape(server.ports.http as number);
    expect(metric(m, 'sip_store_up')).toBe(0);
    expect(metric(m, 'sip_requests_refused_total', { reason: 'store' })).toBeGreaterThanOrEqual(1);
    // OPTIONS needs no store and is still answered.
    const o = callId();
    expect((await udp.request(options('127.0.0.1', udp.port, o), o)).status).toBe(200);
  });

  it('serves within 2 s of Redis coming up, with no restart of the edge', async () => {
    await redis.start();
    const t0 = performance.now();
    await provisionAll();
    let readyAt = 0;
    let registeredAt = 0;
    while (performance.now() - t0 < 5000 && (readyAt === 0 || registeredAt === 0)) {
      if (readyAt === 0 && (await http('/readyz')).status === 200) readyAt = performance.now() - t0;
      if (registeredAt === 0 && (await register(udp, users[0] as Endpoint)).final.status === 200) registeredAt = performance.now() - t0;
      if (readyAt === 0 || registeredAt === 0) await sleep(50);
    }
    expect(readyAt).toBeGreaterThan(0);
    expect(registeredAt).toBeGreaterThan(0);
    expect(readyAt).toBeLessThan(2000);
    expect(registeredAt).toBeLessThan(2000);
    expect((await createAccount()).status).toBe(201);
  });

  it('sends 200 OK only once the binding is in Redis: each one is readable the moment its 200 arrives', async () => {
    for (const e of users.slice(1, 21)) {
      const contact = `<sip:${e.user}@127.0.0.1:${udp.port}>`;
      const { final } = await register(udp, e, e.password, { contact });
      expect(final.status).toBe(200);
      const b = await lookup(e);
      expect(b.map((x) => x.uri)).toEqual([`sip:${e.user}@127.0.0.1:${udp.port}`]);
    }
  });

  it('holds the 200 OK while Redis cannot write (CLIENT PAUSE WRITE), and sends it after the write', async () => {
    const e = users[21] as Endpoint;
    const id = callId();
    const base = { transport: 'UDP' as const, user: e.user, domain: DOMAIN, viaHost: '127.0.0.1', viaPort: udp.port, callId: id, expires: 300 };
    const first = await udp.request(registerMessage({ ...base, cseq: 1 }), id);
    const challenge = first.all('www-authenticate').find((h) => h.includes('MD5')) as string;
    const authorization = authorize(challenge, { user: e.user, password: e.password, method: 'REGISTER', uri: `sip:${DOMAIN}` });
    const admin = new Redis(redis.url);
    try {
      await admin.call('CLIENT', 'PAUSE', '1200', 'WRITE');
      const t0 = performance.now();
      const pending = udp.request(registerMessage({ ...base, cseq: 2, authorization }), id, 5000);
      await sleep(600);
      // Half-way through the pause: no answer yet, nothing stored, yet the server is responsive.
      let settled = false;
      void pending.then(() => (settled = true));
      expect(settled).toBe(false);
      const o = callId();
      expect((await udp.request(options('127.0.0.1', udp.port, o), o)).status).toBe(200);
      const final = await pending;
      const elapsed = performance.now() - t0;
      expect(final.status).toBe(200);
      expect(elapsed).toBeGreaterThan(1000);
      expect((await lookup(e)).map((b) => b.callId)).toEqual([id]);
    } finally {
      await admin.quit();
    }
  });

  it('bounds pending requests: with Redis frozen, requests past SIP_MAX_PENDING get 503 at once, the rest 503 after the store timeout; never 200', async () => {
    const batch = users.slice(22, 22 + MAX_PENDING * 2);
    const prepared = [];
    for (const e of batch) {
      const id = callId();
      const base = { transport: 'UDP' as const, user: e.user, domain: DOMAIN, viaHost: '127.0.0.1', viaPort: udp.port, callId: id, expires: 300 };
      const first = await udp.request(registerMessage({ ...base, cseq: 1 }), id);
      const challenge = first.all('www-authenticate').find((h) => h.includes('MD5')) as string;
      const authorization = authorize(challenge, { user: e.user, password: e.password, method: 'REGISTER', uri: `sip:${DOMAIN}` });
      prepared.push({ id, msg: registerMessage({ ...base, cseq: 2, authorization }) });
    }
    process.kill(redis.pid as number, 'SIGSTOP');
    try {
      const t0 = performance.now();
      const answers = await Promise.all(
        prepared.map(async (p) => {
          const r = await udp.request(p.msg, p.id, 6000);
          return { status: r.status, retryAfter: r.header('retry-after'), ms: performance.now() - t0 };
        }),
      );
      expect(answers.every((a) => a.status === 503 && /^\d+$/.test(a.retryAfter ?? ''))).toBe(true);
      const fast = answers.filter((a) => a.ms < 1000);
      const slow = answers.filter((a) => a.ms >= 1000);
      expect(fast).toHaveLength(MAX_PENDING);
      expect(slow).toHaveLength(MAX_PENDING);
      const m = await scrape(server.ports.http as number);
      expect(metric(m, 'sip_requests_refused_total', { reason: 'overload' })).toBeGreaterThanOrEqual(MAX_PENDING);
      expect(metric(m, 'sip_store_errors_total', { store: 'credentials' })).toBeGreaterThanOrEqual(MAX_PENDING);
    } finally {
      process.kill(redis.pid as number, 'SIGCONT');
    }
  });

  it('goes down mid-run (SIGKILL) without crashing: REGISTER 503 + Retry-After, HTTP 503, not ready; back within 2 s', async () => {
    await redis.kill9();
    const t0 = performance.now();
    const { final } = await register(udp, users[0] as Endpoint);
    expect(final.status).toBe(503);
    expect(final.header('retry-after')).toMatch(/^\d+$/);
    expect(performance.now() - t0).toBeLessThan(1500);
    expect((await createAccount()).status).toBe(503);
    expect((await http('/readyz')).status).toBe(503);
    expect(server.child.exitCode).toBeNull();

    await redis.start();
    const back = performance.now();
    await provisionAll();
    let ok = 0;
    while (performance.now() - back < 5000) {
      if ((await register(udp, users[0] as Endpoint)).final.status === 200) {
        ok = performance.now() - back;
        break;
      }
      await sleep(50);
    }
    expect(ok).toBeGreaterThan(0);
    expect(ok).toBeLessThan(2000);
    expect(server.logs.filter((l) => l.msg === 'unhandled rejection')).toHaveLength(0);
  });

  it('loses no binding when the edge restarts (SIGTERM, then a new process on the same Redis)', async () => {
    const kept = users.slice(1, 21);
    for (const e of kept) expect((await register(udp, e, e.password, { expires: 600 })).final.status).toBe(200);
    const before = await Promise.all(kept.map((e) => lookup(e)));
    expect(before.every((b) => b.length === 1)).toBe(true);

    expect(await server.stop()).toBe(0);
    udp.close();
    server = await startServer({ REDIS_URL: redis.url, SIP_MAX_PENDING: String(MAX_PENDING), PARTNER_AUTH_ID: PARTNER.id, PARTNER_AUTH_TOKEN: PARTNER.token });
    udp = await udpClient('127.0.0.1', server.ports.udp as number);

    const after = await Promise.all(kept.map((e) => lookup(e)));
    expect(after).toEqual(before);
    // The new process serves them: a REGISTER without Contact (a query) lists the binding.
    const e = kept[0] as Endpoint;
    const id = callId();
    const base = { transport: 'UDP' as const, user: e.user, domain: DOMAIN, viaHost: '127.0.0.1', viaPort: udp.port, callId: id, contacts: [] as string[] };
    const first = await udp.request(registerMessage({ ...base, cseq: 1 }), id);
    const challenge = first.all('www-authenticate').find((h) => h.includes('MD5')) as string;
    const authorization = authorize(challenge, { user: e.user, password: e.password, method: 'REGISTER', uri: `sip:${DOMAIN}` });
    const q = await udp.request(registerMessage({ ...base, cseq: 2, authorization }), id);
    expect(q.status).toBe(200);
    expect(q.header('contact')).toContain(`sip:${e.user}@127.0.0.1`);
  });
});
