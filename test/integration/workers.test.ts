import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { endpoints, provision, redisStores } from '../support/provision.js';
import { registerWithAuth, streamConn, udpConn } from '../support/sip-client.js';

/** SIP_WORKERS: several processes share the listeners; state lives in Redis. */
describe('multi-process edge (SIP_WORKERS=2)', () => {
  let redis: RedisServerHandle;
  let server: ServerProcess;
  let stores: ReturnType<typeof redisStores>;
  const users = endpoints(12, 'workers.sip.localhost', 'wk');

  beforeAll(async () => {
    redis = await startRedis();
    stores = redisStores(redis.url);
    await provision(stores.credentials, users);
    server = await startServer({ REDIS_URL: redis.url, SIP_WORKERS: '2' });
  });
  afterAll(async () => {
    await server?.stop();
    await stores?.close();
    await redis?.stop();
  });

  it('logs one listening line for the whole edge, after both workers bound the same ports', async () => {
    const lines = server.logs.filter((l) => l.msg === 'listening');
    expect(lines).toHaveLength(1);
    expect(lines[0].workers).toBe(2);
    // Workers report to the primary over IPC; their own log lines reach the shared pipe a little later.
    for (let i = 0; i < 40 && server.logs.filter((l) => l.msg === 'worker listening').length < 2; i++) {
      await new Promise((r) => setTimeout(r, 50));
    }
    const workers = server.logs.filter((l) => l.msg === 'worker listening');
    expect(workers).toHaveLength(2);
    expect(new Set(workers.map((w) => w.pid)).size).toBe(2);
    for (const w of workers) expect(w.udp).toBe(server.ports.udp);
  });

  it('registers over UDP and over many TCP connections, spread across both workers, into one store', async () => {
    const udp = await udpConn('127.0.0.1', server.ports.udp!);
    const r = await registerWithAuth(udp, {
      transport: 'UDP', user: users[0].user, domain: users[0].domain, password: users[0].password,
      viaHost: '127.0.0.1', viaPort: udp.localPort, callId: randomBytes(6).toString('hex'),
    });
    expect(r.final.status).toBe(200);
    udp.close();
    const conns = [];
    for (let i = 1; i < users.length; i++) {
      const c = await streamConn('127.0.0.1', server.ports.tcp!, false);
      const t = await registerWithAuth(c, {
        transport: 'TCP', user: users[i].user, domain: users[i].domain, password: users[i].password,
        viaHost: '127.0.0.1', viaPort: c.localPort, callId: randomBytes(6).toString('hex'),
      });
      expect(t.final.status).toBe(200);
      conns.push(c);
    }
    const all = await Promise.all(users.map((u) => stores.location.lookup({ domain: u.domain, user: u.user })));
    expect(all.every((b) => b.length === 1)).toBe(true);
    // Flows are owned by the worker that accepted them: node ids name both workers.
    const owners = new Set(all.slice(1).map((b) => b[0].nodeId));
    expect(owners.size).toBe(2);
    for (const c of conns) c.close();
  });

  it('stops every worker on SIGTERM within 5 s', async () => {
    const t0 = Date.now();
    const code = await server.stop('SIGTERM');
    expect(code).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5000);
    expect(server.logs.filter((l) => l.msg === 'stopped').length).toBeGreaterThanOrEqual(3);
  });
});
