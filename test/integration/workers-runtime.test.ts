/**
 * SIP_WORKERS=2 as a real process tree, once under the `node` running the tests
 * (Node 20: one shared UDP socket) and once under the LTS runtime test/setup.sh
 * installs (dgram `reusePort`: one socket per worker). README "Operating it",
 * docs/workers.md.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { createServer, type Server } from 'node:net';
import { runServerUntilStopped, startServer, type ServerProcess } from '../support/server-process.js';
import { endpoints, provision, redisStores } from '../support/provision.js';
import { parseResponse, registerMessage, registerWithAuth, streamConn, udpConn, type SipConn } from '../support/sip-client.js';
import { currentRuntime, ltsRuntime, type Runtime } from '../support/runtimes.js';
import { until } from '../support/wait.js';

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));


/** Sum of a metric's samples whose labels include `labels` (Prometheus text format). */
function metricSum(text: string, name: string, labels: Record<string, string> = {}): number {
  let sum = 0;
  let seen = false;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(\{[^}]*\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const l = m[2] ?? '';
    if (!Object.entries(labels).every(([k, v]) => l.includes(`${k}="${v}"`))) continue;
    sum += Number(m[3]);
    seen = true;
  }
  if (!seen) throw new Error(`no sample of ${name} ${JSON.stringify(labels)}`);
  return sum;
}

function optionsMessage(domain: string, port: number, callId: string, cseq: number): string {
  return [
    `OPTIONS sip:${domain} SIP/2.0`,
    `Via: SIP/2.0/UDP 127.0.0.1:${port};branch=z9hG4bK${randomBytes(6).toString('hex')};rport`,
    'Max-Forwards: 70',
    `From: <sip:probe@${domain}>;tag=${callId.slice(0, 8)}`,
    `To: <sip:${domain}>`,
    `Call-ID: ${callId}`,
    `CSeq: ${cseq} OPTIONS`,
    'Content-Length: 0',
    '',
    '',
  ].join('\r\n');
}

function toTag(raw: string): string {
  const to = parseResponse(raw).header('to') ?? '';
  const m = /;tag=([^;>\s]+)/.exec(to);
  if (!m) throw new Error(`no To tag in ${to}`);
  return m[1];
}

/** The PIDs of the workers that logged `worker listening`, newest `count`, checked to be the server's children. */
function workerPids(server: ServerProcess, count: number): number[] {
  const pids = server.logs.filter((l) => l.msg === 'worker listening').map((l) => l.pid as number).slice(-count);
  for (const pid of pids) {
    const ppid = Number(readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ')[1]);
    expect(ppid).toBe(server.pid);
  }
  return pids;
}

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

const runtimes: Array<[string, () => Runtime]> = [
  ['the test runtime', currentRuntime],
  ['the LTS runtime', ltsRuntime],
];

describe.each(runtimes)('SIP_WORKERS=2 under %s', (_label, runtime) => {
  let rt: Runtime;
  let redis: RedisServerHandle;
  let server: ServerProcess;
  let stores: ReturnType<typeof redisStores>;
  const users = endpoints(10, 'wrt.sip.localhost', 'wrt');
  const http = (path: string): Promise<Response> => fetch(`http://127.0.0.1:${server.ports.http}${path}`);

  beforeAll(async () => {
    rt = runtime();
    redis = await startRedis();
    stores = redisStores(redis.url);
    await provision(stores.credentials, users);
    server = await startServer({ REDIS_URL: redis.url, SIP_WORKERS: '2', SIP_TLS_PORT: 'off', SIP_WSS_PORT: 'off' }, 20_000, rt.bin);
    await until('both workers listening', () => (server.logs.filter((l) => l.msg === 'worker listening').length >= 2 ? true : undefined));
  });
  afterAll(async () => {
    await server?.stop();
    await stores?.close();
    await redis?.stop();
  });

  it('uses one SO_REUSEPORT UDP socket per worker where dgram has reusePort, else the shared socket, and says which', () => {
    const mode = rt.reusePort ? 'reuseport' : 'shared';
    const primary = server.logs.find((l) => l.pid === undefined && l.udpMode !== undefined);
    expect(primary?.udpMode).toBe(mode);
    expect(primary?.node).toBe(rt.version);
    const perWorker = server.logs.filter((l) => l.msg === `udp socket of this worker: ${mode}`);
    expect(perWorker).toHaveLength(2);
    expect(new Set(perWorker.map((l) => l.pid)).size).toBe(2);
    for (const l of perWorker) expect(l.port).toBe(server.ports.udp);
  });

  it('/metrics sums the counters of both workers and /readyz counts both', async () => {
    const conns: SipConn[] = [];
    for (const u of users) {
      const c = await streamConn('127.0.0.1', server.ports.tcp!, false);
      const r = await registerWithAuth(c, {
        transport: 'TCP', user: u.user, domain: u.domain, password: u.password,
        viaHost: '127.0.0.1', viaPort: c.localPort, callId: randomBytes(6).toString('hex'),
      });
      expect(r.final.status).toBe(200);
      conns.push(c);
    }
    // node:cluster spread the connections: both workers registered some of them.
    const all = await Promise.all(users.map((u) => stores.location.lookup({ domain: u.domain, user: u.user })));
    expect(new Set(all.map((b) => b[0].nodeId)).size).toBe(2);
    // Each scrape is taken by one worker or the other; every one reports the node's sum.
    for (let i = 0; i < 4; i++) {
      const res = await http('/metrics');
      expect(res.status).toBe(200);
      const text = await res.text();
      expect(metricSum(text, 'sip_register_outcomes_total', { outcome: 'registered', transport: 'tcp' })).toBe(users.length);
      expect(metricSum(text, 'sip_responses_total', { method: 'REGISTER', status: '401', transport: 'tcp' })).toBe(users.length);
      expect(metricSum(text, 'sip_connections_open', { transport: 'tcp' })).toBe(users.length);
      expect(metricSum(text, 'sip_workers_configured')).toBe(2);
      expect(metricSum(text, 'sip_workers_listening')).toBe(2);
      // A store-wide gauge is the same in every worker: reported once, not doubled.
      expect(metricSum(text, 'sip_bindings_active', { transport: 'tcp' })).toBe(users.length);
      expect(metricSum(text, 'sip_store_up')).toBe(1);
    }
    const ready = await http('/readyz');
    expect(ready.status).toBe(200);
    expect(await ready.json()).toMatchObject({ status: 'ready', workers: { ready: 2, configured: 2 } });
    for (const c of conns) c.close();
  });

  it('/readyz fails while a worker is missing and recovers when the primary has restarted it', async () => {
    const [victim] = workerPids(server, 2);
    const before = server.logs.filter((l) => l.msg === 'worker listening').length;
    process.kill(victim, 'SIGKILL');
    const down = await until('a 503 from /readyz', async () => {
      const r = await http('/readyz');
      return r.status === 503 ? ((await r.json()) as { message: string; workers: { ready: number } }) : undefined;
    });
    expect(down.message).toMatch(/^1 of 2 workers ready/);
    expect(down.workers.ready).toBe(1);
    await until('a new worker', () => (server.logs.filter((l) => l.msg === 'worker listening').length > before ? true : undefined));
    await until('/readyz 200', async () => ((await http('/readyz')).status === 200 ? true : undefined));
  });

  it('keeps the node up when both workers are SIGKILLed at once: the primary restarts them on the same ports', async () => {
    const pids = workerPids(server, 2);
    const listened = server.logs.filter((l) => l.msg === 'worker listening').length;
    const died = server.logs.filter((l) => l.msg === 'worker died; starting another').length;
    for (const pid of pids) process.kill(pid, 'SIGKILL');
    await until('both deaths logged', () => (server.logs.filter((l) => l.msg === 'worker died; starting another').length >= died + 2 ? true : undefined));
    // Past the first restart delay (500 ms) with no worker alive, the primary is still there.
    await sleep(300);
    expect(server.child.exitCode).toBeNull();
    expect(alive(server.pid)).toBe(true);
    await until('two new workers', () => (server.logs.filter((l) => l.msg === 'worker listening').length >= listened + 2 ? true : undefined), 20_000);
    const fresh = workerPids(server, 2);
    expect(fresh.some((p) => pids.includes(p))).toBe(false);
    for (const l of server.logs.filter((x) => x.msg === 'worker listening').slice(-2)) {
      expect(l.udp).toBe(server.ports.udp);
      expect(l.tcp).toBe(server.ports.tcp);
      expect(l.http).toBe(server.ports.http);
    }

    // HTTP API and SIP over UDP answer again, on the ports the node announced at start.
    const ready = await until('/readyz 200', async () => {
      const r = await http('/readyz');
      return r.status === 200 ? ((await r.json()) as { workers: unknown }) : undefined;
    });
    expect(ready.workers).toEqual({ ready: 2, configured: 2 });
    const udp = await udpConn('127.0.0.1', server.ports.udp!);
    const r = await registerWithAuth(udp, {
      transport: 'UDP', user: users[0].user, domain: users[0].domain, password: users[0].password,
      viaHost: '127.0.0.1', viaPort: udp.localPort, callId: randomBytes(6).toString('hex'),
    });
    expect(r.final.status).toBe(200);
    udp.send(optionsMessage(users[0].domain, udp.localPort, randomBytes(6).toString('hex'), 1));
    expect(parseResponse(await udp.next()).status).toBe(200);
    udp.close();
    const metrics = await (await http('/metrics')).text();
    expect(metricSum(metrics, 'sip_worker_restarts_total')).toBe(3);
    expect(metricSum(metrics, 'sip_workers_listening')).toBe(2);
  });

  it('still stops every process on SIGTERM within 5 s, exit code 0', async () => {
    const pids = workerPids(server, 2);
    const t0 = Date.now();
    expect(await server.stop('SIGTERM')).toBe(0);
    expect(Date.now() - t0).toBeLessThan(5000);
    await until('workers gone', () => (pids.every((p) => !alive(p)) ? true : undefined), 3000);
  });
});

/**
 * dgram `reusePort` (the LTS runtime): the kernel hashes each source address and
 * port to one worker's socket, so a retransmission reaches the worker holding the
 * transaction and gets the identical answer (RFC 3261 §17.2.2), never a fresh one
 * from the other worker. The To tag a worker puts on its own responses starts
 * with a prefix of that process (src/core/transaction-layer.ts), which shows
 * which worker answered.
 */
describe('UDP with SIP_WORKERS=2 under the LTS runtime: one worker per source', () => {
  let redis: RedisServerHandle;
  let server: ServerProcess;
  const domain = 'affinity.sip.localhost';

  beforeAll(async () => {
    const rt = ltsRuntime();
    expect(rt.reusePort).toBe(true);
    redis = await startRedis();
    server = await startServer({ REDIS_URL: redis.url, SIP_WORKERS: '2', SIP_TLS_PORT: 'off', SIP_WSS_PORT: 'off' }, 20_000, rt.bin);
  });
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  it('answers every retransmission from the worker that took the first copy, for every source port', async () => {
    const sources = 16;
    const workersSeen = new Set<string>();
    for (let i = 0; i < sources; i++) {
      const c = await udpConn('127.0.0.1', server.ports.udp!);
      const callId = randomBytes(8).toString('hex');
      const first = registerMessage({ transport: 'UDP', user: `src${i}`, domain, viaHost: '127.0.0.1', viaPort: c.localPort, callId, cseq: 1 });
      c.send(first);
      const answer = await c.next();
      expect(parseResponse(answer).status).toBe(401);
      const worker = toTag(answer).slice(0, 8);
      workersSeen.add(worker);
      for (let k = 0; k < 3; k++) {
        await sleep(20);
        c.send(first); // the same bytes: a retransmission
        expect(await c.next()).toBe(answer); // byte-identical: same transaction, same nonce and To tag
      }
      // New transactions from the same source port reach the same worker too.
      for (let k = 0; k < 3; k++) {
        c.send(optionsMessage(domain, c.localPort, callId, 10 + k));
        expect(toTag(await c.next()).slice(0, 8)).toBe(worker);
      }
      c.close();
    }
    // The kernel spread the sources over both workers.
    expect(workersSeen.size).toBe(2);
  });
});

describe('SIP_WORKERS=2 whose workers cannot start', () => {
  let redis: RedisServerHandle;
  let taken: Server;
  beforeAll(async () => {
    redis = await startRedis();
    taken = createServer();
    await new Promise<void>((r) => taken.listen(0, '127.0.0.1', () => r()));
  });
  afterAll(async () => {
    await new Promise((r) => taken?.close(r));
    await redis?.stop();
  });

  it('exits with code 1 after three failed starts instead of retrying for ever (HTTP port taken)', async () => {
    const port = (taken.address() as { port: number }).port;
    const r = await runServerUntilStopped(
      { REDIS_URL: redis.url, SIP_WORKERS: '2', SIP_UDP_PORT: '0', SIP_TCP_PORT: '0', SIP_TLS_PORT: 'off', SIP_WS_PORT: 'off', SIP_WSS_PORT: 'off', HTTP_PORT: String(port) },
      20_000,
    );
    expect(r.code).toBe(1);
    expect(r.output).toMatch(/"msg":"workers fail to start; exiting"/);
    expect(r.output).not.toMatch(/"msg":"listening"/);
  });
});
