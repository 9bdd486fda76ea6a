#!/usr/bin/env node
// Does the edge come back to its former cost after an overload? One fixed-rate step,
// an overload step, a rest, the fixed-rate step again; CPU µs per registration and
// the edge's event-loop/heap metrics each time.
//   node bench/overload.mjs [--store=memory|redis] [--rate=4000] [--over=10000] [--workers=1] [--transport=udp]
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEdge, createAccount, createEndpoints, benchUsers } from './lib/edge.mjs';
import { startRedis } from './lib/redis.mjs';
import { buildFineClock, runStep, writeInjection } from './lib/sipp.mjs';
import { sleep } from './lib/proc.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (n, d) => process.argv.find((x) => x.startsWith(`--${n}=`))?.slice(n.length + 3) ?? d;
const store = arg('store', 'memory');
const rate = Number(arg('rate', '4000'));
const over = Number(arg('over', '10000'));
const transport = arg('transport', 'udp');
const workers = arg('workers', '');
const tmp = join(ROOT, 'bench/.tmp/overload');
mkdirSync(tmp, { recursive: true });
const preload = buildFineClock(ROOT, tmp) ?? undefined;
const users = benchUsers(10000);
const redis = store === 'redis' ? await startRedis(tmp) : null;
const edge = await startEdge({ root: ROOT, tmp, name: `edge-${store}`, store, redisUrl: redis?.url(0), env: workers ? { SIP_WORKERS: workers } : {} });
try {
  const account = await createAccount(edge, 'overload');
  await createEndpoints(edge, account, users, 16);
  const files = writeInjection(join(tmp, 'inj'), 'o', users, account.domain);
  const target = { pid: edge.pid, ports: edge.ports, cpuTree: true };
  const metrics = async () => {
    const m = await fetch(`${edge.http}/metrics`).then((x) => x.text());
    const pick = (re) => m.split('\n').filter((l) => re.test(l)).map((l) => l.replace(/^(\S+)\s+(\S+)$/, (_, k, v) => `${k.replace(/^(nodejs_|sip_)/, '')}=${Number(v).toPrecision(3)}`)).join(' ');
    return pick(/^(nodejs_heap_size_used_bytes|sip_server_transactions|sip_pending_requests|nodejs_gc_duration_seconds_sum\{kind="(minor|major)"\}) /);
  };
  const step = async (name, r, s) => {
    const x = await runStep({ root: ROOT, dir: join(tmp, 'steps', name), target, transport, rate: r, seconds: s, files, preload });
    console.log(`${name} @${r}/s: achieved ${x.achieved.toFixed(0)}/s ok ${x.ok} failed ${x.failed} retrans ${x.retrans} p50 ${x.p50.toFixed(2)} p99 ${x.p99.toFixed(2)} ms, server ${x.serverCpu.toFixed(0)}% = ${((x.serverCpu / 100) * 1e6 / Math.max(1, x.achieved)).toFixed(0)} µs/registration | ${await metrics()}`);
  };
  await step('warm', 2000, 6);
  await step('before', rate, 10);
  await step('overload', over, 10);
  await sleep(5000);
  await step('after', rate, 10);
  await sleep(15000);
  await step('after+15s', rate, 10);
} finally {
  await edge.stop(15000);
  await redis?.stop();
}
