import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { runSipp, type SippRun } from '../support/sipp.js';
import { endpoints, provision, redisStores, type TestEndpoint } from '../support/provision.js';
import type { Binding } from '../../src/store/location/location.js';

/**
 * The real server process on a real redis-server, driven by SIPp (Debian
 * sip-tester). SIPp speaks only MD5 and reads only the first challenge; it is on
 * the default DIGEST_MD5_ONLY_USER_AGENTS list (its scenarios send User-Agent SIPp-…).
 */
describe('SIPp REGISTER against the server on Redis', () => {
  let redis: RedisServerHandle;
  let server: ServerProcess;
  let stores: ReturnType<typeof redisStores>;

  beforeAll(async () => {
    redis = await startRedis();
    stores = redisStores(redis.url);
    server = await startServer({ REDIS_URL: redis.url });
  });
  afterAll(async () => {
    await server?.stop();
    await stores?.close();
    await redis?.stop();
  });

  /**
   * SIPp's exit status and counts decide. Under load its error log may also hold
   * notes that are not failures (a late retransmitted 200 arriving after the call
   * ended is "discarded"; its own scheduler's watchdog), so the log is checked
   * only where the scenario is not a load run.
   */
  const ok = (run: SippRun, calls: number, load = false): void => {
    if (!load) expect(run.errors, run.stderr).toBe('');
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.successful).toBe(calls);
    expect(run.failed).toBe(0);
  };
  const lookup = (e: TestEndpoint): Promise<Binding[]> => stores.location.lookup({ domain: e.domain, user: e.user });

  it('registers 1,000 distinct endpoints over UDP with 0 failures, and the store holds exactly those bindings', async () => {
    const users = endpoints(1000, 'udp1k.sip.localhost');
    await provision(stores.credentials, users);
    const before = Date.now();
    const run = await runSipp({ scenario: 'register.xml', port: server.ports.udp!, transport: 'udp', users, rate: 500, limit: 200 });
    ok(run, 1000, true);

    const all = await stores.location.lookupMany(users.map((u) => ({ domain: u.domain, user: u.user })));
    let count = 0;
    for (const u of users) {
      const b = all.get(`${u.user}@${u.domain}`) ?? [];
      expect(b, u.user).toHaveLength(1);
      count += b.length;
      expect(b[0].uri).toMatch(new RegExp(`^sip:${u.user}@127\\.0\\.0\\.1:\\d+;transport=UDP$`, 'i'));
      expect(b[0].userAgent).toBe(`SIPp-${u.user}`);
      expect(b[0].transport).toBe('udp');
      expect(b[0].received).toMatch(/^sip:127\.0\.0\.1:\d+;transport=udp$/);
      expect(b[0].expiresAt).toBeGreaterThanOrEqual(before + 3600_000);
      expect(b[0].expiresAt).toBeLessThanOrEqual(Date.now() + 3600_000);
    }
    expect(count).toBe(1000);
    expect((await stores.location.countLive()).udp).toBe(1000);
  }, 120_000);

  it('registers 1,000 distinct endpoints over TCP with 0 failures; the bindings live while their flow is open and go when it closes', async () => {
    const users = endpoints(1000, 'tcp1k.sip.localhost');
    await provision(stores.credentials, users);
    // Every call holds its registration for 12 s after the 200 OK, on SIPp's one TCP connection.
    const running = runSipp({ scenario: 'register.xml', port: server.ports.tcp!, transport: 'tcp', users, rate: 1000, limit: 1000, pauseMs: 12_000 });
    let live = 0;
    const deadline = Date.now() + 11_000;
    while (Date.now() < deadline) {
      live = (await stores.location.countLive()).tcp;
      if (live === 1000) break;
      await new Promise((r) => setTimeout(r, 200));
    }
    expect(live).toBe(1000);
    const sample = await lookup(users[499]);
    expect(sample).toHaveLength(1);
    expect(sample[0].userAgent).toBe('SIPp-user0500');
    expect(sample[0].transport).toBe('tcp');
    expect(sample[0].connId).toMatch(/^tcp-/);
    expect(sample[0].expiresAt).toBeGreaterThan(Date.now() + 3500_000);
    ok(await running, 1000, true);
    // docs/design.md: a binding whose TCP flow closed can never be reached, so it is removed at once.
    let after = -1;
    for (let i = 0; i < 20 && after !== 0; i++) {
      await new Promise((r) => setTimeout(r, 100));
      after = (await stores.location.countLive()).tcp;
    }
    expect(after).toBe(0);
  }, 120_000);

  describe.each(['udp', 'tcp'] as const)('REGISTER cases over %s', (transport) => {
    const port = (): number => (transport === 'udp' ? server.ports.udp! : server.ports.tcp!);
    const domain = `${transport}cases.sip.localhost`;

    it('refreshes a registration on the same Call-ID: still one binding, expiry renewed', async () => {
      const users = endpoints(3, domain, 'refresh');
      await provision(stores.credentials, users);
      const run = await runSipp({ scenario: 'register-refresh.xml', port: port(), transport, users });
      ok(run, 3);
      if (transport === 'udp') for (const u of users) expect(await lookup(u)).toHaveLength(1);
    });

    it('unregisters one contact with Expires: 0', async () => {
      const users = endpoints(3, domain, 'unreg');
      await provision(stores.credentials, users);
      ok(await runSipp({ scenario: 'unregister.xml', port: port(), transport, users }), 3);
      for (const u of users) expect(await lookup(u)).toHaveLength(0);
    });

    it('removes every binding with Contact: * and Expires: 0', async () => {
      const users = endpoints(3, domain, 'star');
      await provision(stores.credentials, users);
      ok(await runSipp({ scenario: 'unregister-all.xml', port: port(), transport, users }), 3);
      for (const u of users) expect(await lookup(u)).toHaveLength(0);
    });

    it('registers two contacts for one endpoint in one REGISTER, each with its own expiry', async () => {
      const users = endpoints(2, domain, 'multi');
      await provision(stores.credentials, users);
      const running = runSipp({ scenario: 'register-multi.xml', port: port(), transport, users, pauseMs: 3000 });
      await new Promise((r) => setTimeout(r, 1500));
      const b = await lookup(users[0]);
      expect(b).toHaveLength(2);
      const remaining = b.map((x) => Math.round((x.expiresAt - Date.now()) / 1000)).sort((a, c) => a - c);
      expect(remaining[0]).toBeGreaterThan(1790);
      expect(remaining[0]).toBeLessThanOrEqual(1800);
      expect(remaining[1]).toBeGreaterThan(3590);
      ok(await running, 2);
    });

    it('refuses a wrong password with a fresh 401 and stores nothing', async () => {
      const users = endpoints(2, domain, 'wrongpw');
      await provision(stores.credentials, users);
      const bad = users.map((u) => ({ ...u, password: 'not-the-password' }));
      ok(await runSipp({ scenario: 'wrong-password.xml', port: port(), transport, users: bad }), 2);
      for (const u of users) expect(await lookup(u)).toHaveLength(0);
    });

    it('answers a too-brief Expires with 423 and Min-Expires, and the retry registers', async () => {
      const users = endpoints(2, domain, 'brief');
      await provision(stores.credentials, users);
      ok(await runSipp({ scenario: 'interval-too-brief.xml', port: port(), transport, users }), 2);
      if (transport === 'udp') {
        const b = await lookup(users[0]);
        expect(b).toHaveLength(1);
        expect(Math.round((b[0].expiresAt - Date.now()) / 1000)).toBeLessThanOrEqual(60);
      }
    });
  });
});

describe('SIPp and expired nonces', () => {
  let redis: RedisServerHandle;
  let server: ServerProcess;
  let stores: ReturnType<typeof redisStores>;

  beforeAll(async () => {
    redis = await startRedis();
    stores = redisStores(redis.url);
    server = await startServer({ REDIS_URL: redis.url, NONCE_TTL: '5' });
  });
  afterAll(async () => {
    await server?.stop();
    await stores?.close();
    await redis?.stop();
  });

  it('re-challenges a refresh that reuses an expired nonce with stale=true, and the client succeeds without new credentials', async () => {
    const users = endpoints(2, 'stale.sip.localhost', 'stale');
    await provision(stores.credentials, users);
    const run = await runSipp({ scenario: 'stale-nonce.xml', port: server.ports.udp!, transport: 'udp', users, pauseMs: 6000, timeoutMs: 30_000 });
    expect(run.errors).toBe('');
    expect(run.code).toBe(0);
    expect(run.successful).toBe(2);
    expect(await stores.location.lookup({ domain: users[0].domain, user: users[0].user })).toHaveLength(1);
  }, 40_000);
});
