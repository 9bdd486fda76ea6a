/**
 * UDP phones are reached from the node they registered with (docs/fleet.md "UDP
 * phones"): a phone behind NAT answers only the address it sent its REGISTER to,
 * so a request for it that another node handles is handed to a process of the
 * registering node and leaves from that node's socket. The phones here record
 * the source address of every request, so the test sees on the wire which node
 * sent it — also after the worker that took the REGISTER was SIGKILLed.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEdge, type Edge } from '../support/edge.js';
import { TestUa } from '../support/proxy-harness.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { until } from '../support/wait.js';
import { ltsRuntime } from '../support/runtimes.js';

const HOSTS = ['127.0.0.5', '127.0.0.6'] as const;

describe('requests to a UDP phone leave from the node it registered with (two nodes, SIP_WORKERS=2, LTS runtime)', () => {
  let redis: RedisServerHandle;
  const nodes: Edge[] = [];
  const closers: Array<() => void> = [];

  beforeAll(async () => {
    redis = await startRedis();
    for (const host of HOSTS) {
      nodes.push(
        await startEdge(
          { REDIS_URL: redis.url, SIP_WORKERS: '2', SIP_HOST: host, NONCE_SECRET: 'fleet-udp-owner-nonce-secret-012345', NODE_ID: `u${host.slice(-1)}` },
          { node: ltsRuntime().bin },
        ),
      );
    }
    for (const n of nodes) await until('workers', () => (n.server.logs.filter((l) => l.msg === 'worker listening').length >= 2 ? true : undefined), 30_000);
  }, 90_000);
  afterAll(async () => {
    for (const c of closers) c();
    for (const n of nodes) await n.stop();
    await redis?.stop();
  });

  it('MESSAGEs and calls through node .6 reach a phone registered with node .5 from .5, before and after the registering worker dies', async () => {
    const [n5, n6] = nodes as [Edge, Edge];
    const a = await n5.newAccount();
    const desk = await n5.newEndpoint(a, 'natdesk');
    const caller = await n5.newEndpoint(a, 'caller');
    const callee = await TestUa.start(n5.server.ports.udp as number, desk);
    callee.edgeHost = HOSTS[0];
    const from = await TestUa.start(n6.server.ports.udp as number, caller);
    from.edgeHost = HOSTS[1];
    closers.push(() => callee.close(), () => from.close());
    expect(await callee.register()).toBe(200);
    expect(await from.register()).toBe(200);
    const uri = `sip:${desk.username}@${a.sipDomain}`;

    const round = async (n: number): Promise<string[]> => {
      const out: string[] = [];
      for (let i = 0; i < n; i++) {
        const m = await from.call('MESSAGE', uri);
        // Paced under the account's cps_limit (10 by default).
        await new Promise((r) => setTimeout(r, 110));
        const c = await from.call('INVITE', uri, { keep: true });
        const bye = c.status === 200 && from.lastDialog ? await from.lastDialog.bye() : 'no dialog';
        out.push(`${m.status}/${c.status}/${bye}`);
      }
      return out;
    };
    expect(await round(10)).toEqual(new Array(10).fill('200/200/200'));
    // SIGKILL of every worker of node .5 but one: the one left (or a restarted one) sends.
    const workers = n5.server.logs.filter((l) => l.msg === 'worker listening').map((l) => l.pid as number);
    const listened = workers.length;
    process.kill(workers[0] as number, 'SIGKILL');
    await until('a new worker on node .5', () => (n5.server.logs.filter((l) => l.msg === 'worker listening').length > listened ? true : undefined), 30_000);
    // The killed worker is found dead after FLEET_DEAD_AFTER_MS (5 s); from then on its siblings carry its UDP phones.
    await new Promise((r) => setTimeout(r, 6_500));
    expect(await round(10)).toEqual(new Array(10).fill('200/200/200'));

    await until('every request on the phone', () => (callee.requestSources.filter((q) => q.method === 'BYE').length === 20 ? true : undefined), 5000);
    const byMethod = (m: string): string[] => callee.requestSources.filter((q) => q.method === m).map((q) => q.from.split(':')[0] as string);
    for (const m of ['MESSAGE', 'INVITE', 'ACK', 'BYE']) expect(new Set(byMethod(m)), m).toEqual(new Set([HOSTS[0]]));
    expect(byMethod('INVITE')).toHaveLength(20);
    console.log(`UDP owner: ${callee.requestSources.length} requests (20 MESSAGE, 20 INVITE, 20 ACK, 20 BYE) placed through node .6, all from ${HOSTS[0]}`);
  }, 120_000);
});
