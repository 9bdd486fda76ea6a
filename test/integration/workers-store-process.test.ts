/**
 * SIP_WORKERS > 1 without a Redis (docs/workers.md "One store process"): the primary
 * runs a node-private redis-server on a Unix socket and its workers share it.
 * Checked with the real processes: registrations through both workers land in one
 * store (the API, served by either worker, sees them all); a SIGKILLed worker loses
 * nothing; a SIGKILLed store process is replaced and REGISTER works again; a
 * SIGKILLed primary leaves neither workers nor redis-server behind; no redis-server
 * binary → one clear configuration error.
 */
import { randomBytes } from 'node:crypto';
import { existsSync, readFileSync, statSync } from 'node:fs';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLocationStore } from '../../src/store/location/redis.js';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { runServerUntilStopped } from '../support/server-process.js';
import { registerWithAuth, streamConn, udpConn } from '../support/sip-client.js';
import { ltsRuntime } from '../support/runtimes.js';
import { until } from '../support/wait.js';

const alive = (pid: number): boolean => existsSync(`/proc/${pid}`) && !/^State:\s+Z/m.test(readFileSync(`/proc/${pid}/status`, 'utf8'));
const children = (pid: number): number[] => {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return [];
  }
};
const comm = (pid: number): string => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').replace(/\0/g, ' ');
  } catch {
    return '';
  }
};

describe('SIP_WORKERS=2 with no Redis: the node runs its own store process', () => {
  let edge: Edge;
  let account: Account;
  let users: Endpoint[];
  let socket: string;
  let admin: Redis;
  let location: RedisLocationStore;

  beforeAll(async () => {
    // The LTS runtime: each worker has its own SO_REUSEPORT UDP socket.
    edge = await startEdge({ SIP_WORKERS: '2' }, { node: ltsRuntime().bin });
    const line = await until('the store process is ready', () => edge.server.logs.find((l) => l.msg === 'store process (node-private redis-server) ready'), 10_000);
    socket = String(line.socket);
    admin = new Redis({ path: socket });
    admin.on('error', () => {}); // the store process is killed on purpose below
    location = new RedisLocationStore(admin);
    account = await edge.newAccount();
    users = [];
    for (let i = 0; i < 12; i++) users.push(await edge.newEndpoint(account, `sp${i}`));
  }, 60_000);
  afterAll(async () => {
    admin?.disconnect();
    await edge?.stop();
  });

  const register = async (e: Endpoint, transport: 'UDP' | 'TCP'): Promise<number> => {
    const conn = transport === 'UDP' ? await udpConn('127.0.0.1', edge.server.ports.udp!) : await streamConn('127.0.0.1', edge.server.ports.tcp!, false);
    try {
      const r = await registerWithAuth(conn, {
        transport,
        user: e.username,
        domain: e.account.sipDomain,
        password: e.password,
        viaHost: '127.0.0.1',
        viaPort: conn.localPort,
        callId: randomBytes(6).toString('hex'),
      });
      return r.final.status;
    } finally {
      if (transport === 'UDP') conn.close();
    }
  };

  it('the store is a redis-server child of the primary on a private Unix socket (0700 directory)', () => {
    expect(socket).toMatch(/^\/.+\/redis\.sock$/);
    const wrapper = Number(edge.server.logs.find((l) => l.msg === 'store process (node-private redis-server) ready')?.pid);
    expect(children(edge.server.pid)).toContain(wrapper);
    expect(children(wrapper).map(comm).some((c) => c.startsWith('redis-server'))).toBe(true);
    const dir = socket.slice(0, socket.lastIndexOf('/'));
    // Only the owner may reach the directory (and so the socket).
    expect(statSync(dir).mode & 0o777).toBe(0o700);
  });

  it('registrations through both workers land in one store, and every worker sees them all', async () => {
    for (const [i, u] of users.entries()) expect(await register(u, i % 2 === 0 ? 'UDP' : 'TCP')).toBe(200);
    const all = await Promise.all(users.map((u) => location.lookup({ domain: u.account.sipDomain, user: u.username })));
    expect(all.every((b) => b.length === 1)).toBe(true);
    // TCP flows belong to the worker that accepted them: both workers took some.
    const owners = new Set(all.filter((b) => b[0]!.transport === 'tcp').map((b) => b[0]!.nodeId));
    expect(owners.size).toBe(2);
    // The API (any worker, new connections each time) sees every registration.
    for (let round = 0; round < 4; round++) {
      for (const u of users) expect((await edge.endpoint(u)).sip_registered).toBe('true');
    }
  }, 30_000);

  it('a SIGKILLed worker loses no binding: the store is not inside it', async () => {
    const before = children(edge.server.pid).filter((p) => comm(p).includes('main.js'));
    expect(before).toHaveLength(2);
    process.kill(before[0]!, 'SIGKILL');
    await until('a new worker', () => {
      const now = children(edge.server.pid).filter((p) => comm(p).includes('main.js'));
      return now.length === 2 && !now.includes(before[0]!) ? true : undefined;
    }, 15_000);
    // UDP bindings are the worker's in no way; TCP bindings of the dead worker's flows are reaped by the fleet rules.
    const udpUsers = users.filter((_, i) => i % 2 === 0);
    for (const u of udpUsers) expect((await location.lookup({ domain: u.account.sipDomain, user: u.username })).length).toBe(1);
  }, 30_000);

  it('a SIGKILLed store process is replaced (empty, as a restarted embedded store) and the node serves again', async () => {
    const wrapper = Number(edge.server.logs.find((l) => l.msg === 'store process (node-private redis-server) ready')?.pid);
    const redisPid = children(wrapper).find((p) => comm(p).startsWith('redis-server'));
    expect(redisPid).toBeDefined();
    process.kill(redisPid!, 'SIGKILL');
    await until('the primary reports the loss', () => edge.server.logs.find((l) => String(l.msg).startsWith('store process (redis-server) exited')), 10_000);
    await until('the store process is back', () => edge.server.logs.find((l) => l.msg === 'store process back'), 15_000);
    // Like a restart of the embedded store, the new store is empty: the old endpoints are gone.
    expect(await register(users[0]!, 'UDP')).not.toBe(200);
    // The workers' clients reconnected: the API creates an account and an endpoint, which registers.
    const fresh = await until('the API writes to the new store', async () => {
      try {
        const a = await edge.newAccount();
        return await edge.newEndpoint(a, 'afterstore');
      } catch {
        return undefined;
      }
    }, 15_000);
    expect(await register(fresh, 'UDP')).toBe(200);
    expect(await register(fresh, 'TCP')).toBe(200);
    expect((await location.lookup({ domain: fresh.account.sipDomain, user: fresh.username })).length).toBe(2);
  }, 45_000);

  it('a SIGKILLed primary leaves neither workers nor redis-server behind', async () => {
    const tree = [edge.server.pid, ...children(edge.server.pid)];
    const all = [...new Set(tree.flatMap((p) => [p, ...children(p), ...children(p).flatMap(children)]))];
    const redisPids = all.filter((p) => comm(p).startsWith('redis-server'));
    expect(redisPids).toHaveLength(1);
    process.kill(edge.server.pid, 'SIGKILL');
    await until('every process of the node gone', () => (all.every((p) => !alive(p)) ? true : undefined), 10_000);
  }, 20_000);
});

describe('SIP_WORKERS=2, no Redis and no redis-server', () => {
  it('refuses to start: one clear line, exit code 2', async () => {
    const r = await runServerUntilStopped({ SIP_WORKERS: '2', SIP_UDP_PORT: '0', SIP_TCP_PORT: '0', HTTP_PORT: '0', REDIS_SERVER_BIN: '/nonexistent/redis-server' });
    expect(r.code).toBe(2);
    expect(r.output).toMatch(/configuration error: SIP_WORKERS > 1 without a Redis runs a store process: \/nonexistent\/redis-server not found/);
  });
});
