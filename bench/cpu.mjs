#!/usr/bin/env node
// CPU cost of one registration (401 challenge + 200 OK), edge vs Kamailio, at a fixed
// rate well below saturation: server CPU-µs per registration. Unlike the sustained-rate
// ladder this figure barely moves when other jobs share the machine, so it is the one to
// watch while working on the hot path.
//
//   node bench/cpu.mjs [--systems=edge-memory,edge-redis,kamailio-memory] [--transports=udp,tcp]
//                      [--rate=2000] [--seconds=10] [--users=10000] [--prof] [--workers=N] [--node=path]
//
// A system name may end in `:events-off` (e.g. edge-redis:events-off): the same edge with
// EVENT_LOG=off, so `--systems=edge-redis,edge-redis:events-off --rate=1000` shows what the
// registration event log costs (the table then prints the ratio, edge + Redis CPU).
//
// --prof: run the edge under `node --cpu-prof` and print its top self-time functions.
import { mkdirSync, existsSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEdge, createAccount, createEndpoints, benchUsers } from './lib/edge.mjs';
import { startKamailio } from './lib/kamailio.mjs';
import { startRedis } from './lib/redis.mjs';
import { buildFineClock, runStep, writeInjection } from './lib/sipp.mjs';
import { summariseProfile } from './lib/profile.mjs';
import { CLK_TCK, processTree } from './lib/proc.mjs';
import { readFileSync } from 'node:fs';

/**
 * CPU ticks of every process of the tree: pid → {cpu: user+system, sys: system}.
 * System time is where sending and receiving packets is charged.
 */
function treeTicks(pid) {
  const out = new Map();
  for (const p of processTree(pid)) {
    try {
      const f = readFileSync(`/proc/${p}/stat`, 'utf8');
      const v = f.slice(f.lastIndexOf(')') + 2).split(' ');
      out.set(p, { cpu: Number(v[11]) + Number(v[12]), sys: Number(v[12]) });
    } catch {
      /* gone */
    }
  }
  return out;
}

const sumSys = (ticks) => [...ticks.values()].reduce((a, t) => a + t.sys, 0);

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, dflt) => {
  const a = process.argv.find((x) => x.startsWith(`--${name}=`));
  if (a) return a.slice(name.length + 3);
  if (process.argv.includes(`--${name}`)) return 'true';
  return dflt;
};
const systems = arg('systems', 'edge-memory,kamailio-memory').split(',');
const transports = arg('transports', 'udp').split(',');
const rate = Number(arg('rate', '2000'));
const seconds = Number(arg('seconds', '10'));
const users = benchUsers(Number(arg('users', '10000')));
const prof = arg('prof', 'false') === 'true';
const workers = arg('workers', '');
// --node=path: the Node binary of the edge (e.g. test/.tmp/node-lts/bin/node, where each worker has its own UDP socket).
const nodeBin = arg('node', process.execPath);
// --perf: sample the edge's on-CPU time with `perf record -e cpu-clock` (kernel + JIT frames) during the step.
const perf = arg('perf', 'false') === 'true';

const tmp = join(ROOT, 'bench/.tmp/cpu');
mkdirSync(tmp, { recursive: true });
const preload = buildFineClock(ROOT, tmp) ?? undefined;

const redis = systems.some((s) => s.includes('redis')) ? await startRedis(tmp) : null;
const rows = [];
let profWindow;
try {
  for (const sys of systems) {
    let server;
    let domain;
    let profFile = null;
    let stepStarted = 0;
    let stepEnded = 0;
    if (sys.startsWith('edge')) {
      const [base, variant] = sys.split(':');
      const store = base === 'edge-redis' ? 'redis' : 'memory';
      const nodeArgs = prof ? ['--cpu-prof', '--cpu-prof-dir', tmp, '--cpu-prof-name', (profFile = `${sys}-${Date.now()}.cpuprofile`)] : [];
      if (perf) nodeArgs.push('--perf-basic-prof-only-functions');
      // --node-args="--trace-gc …": extra Node flags for the edge (its log file is under bench/.tmp/cpu).
      nodeArgs.push(...arg('node-args', '').split(' ').filter(Boolean));
      const env = { ...(workers ? { SIP_WORKERS: workers } : {}), ...(variant === 'events-off' ? { EVENT_LOG: 'off' } : {}) };
      server = await startEdge({ root: ROOT, tmp, name: sys.replace(':', '-'), store, redisUrl: redis?.url(0), nodeArgs, env, node: nodeBin });
      const account = await createAccount(server, sys.replace(':', '-'));
      await createEndpoints(server, account, users, 16);
      domain = account.domain;
    } else {
      domain = 'kamailio.sip.localhost';
      const variant = sys === 'kamailio-redis' ? 'redis' : 'memory';
      // --kamailio-children=N: UDP/TCP children (default 2 in memory, 8 with db_redis; bench/README.md).
      const children = Number(arg('kamailio-children', variant === 'redis' ? '8' : '2'));
      server = await startKamailio({ root: ROOT, tmp, variant, users, domain, redis, redisDb: 1, children });
    }
    const target = { pid: server.pid, ports: server.ports, cpuTree: true };
    const files = writeInjection(join(tmp, 'inj'), sys.replace(':', '-'), users, domain);
    try {
      for (const transport of transports) {
        // Warm-up: JIT, every binding created once.
        await runStep({ root: ROOT, dir: join(tmp, 'steps', `${sys.replace(':', '-')}-${transport}-warm`), target, transport, rate, seconds: Math.ceil(users.length / rate) + 2, files, preload });
        const t0 = Date.now();
        const per0 = treeTicks(server.pid);
        const perfRec = perf && sys.startsWith('edge')
          ? (await import('node:child_process')).spawn('perf', ['record', '-e', 'cpu-clock', '-F', '1999', '-g', '-o', join(tmp, `${sys}-${transport}.perf.data`), '-p', processTree(server.pid).join(','), '--', 'sleep', String(seconds)], { stdio: 'ignore' })
          : null;
        const r = await runStep({ root: ROOT, dir: join(tmp, 'steps', `${sys.replace(':', '-')}-${transport}`), target, transport, rate, seconds, files, preload, extraPids: redis ? [redis.pid] : [] });
        stepStarted = t0;
        if (perfRec) {
          await new Promise((resolve) => (perfRec.exitCode !== null ? resolve() : perfRec.once('exit', resolve)));
          console.log(`perf data: ${join(tmp, `${sys}-${transport}.perf.data`)} (perf report -i … --no-children --sort sym)`);
        }
        const per1 = treeTicks(server.pid);
        const kernelUs = ((sumSys(per1) - sumSys(per0)) / CLK_TCK) * 1e6 / Math.max(1, r.ok);
        if (per1.size > 1) {
          const parts = [...per1].map(([p, t]) => `${p === server.pid ? 'main' : p}: ${((((t.cpu - (per0.get(p)?.cpu ?? t.cpu)) / CLK_TCK) * 1e6) / Math.max(1, r.ok)).toFixed(0)} µs`);
          console.log(`  per process (µs per registration): ${parts.join(', ')}`);
        }
        stepEnded = Date.now();
        if (server.http) {
          // The edge's own view of its event loop (worst stall, delay percentiles) over its life.
          const m = await fetch(`${server.http}/metrics`).then((x) => x.text()).catch(() => '');
          const lines = m.split('\n').filter((l) => /^(sip_event_loop|nodejs_eventloop_lag_p99|nodejs_gc_duration_seconds_sum)/.test(l));
          if (lines.length) console.log(`  ${lines.join('\n  ')}`);
        }
        const usPerReg = (r.serverCpu / 100) * 1e6 / Math.max(1, r.achieved);
        const redisUs = redis ? ((r.otherCpu[0] ?? 0) / 100) * 1e6 / Math.max(1, r.achieved) : 0;
        rows.push({ sys, transport, achieved: r.achieved, ok: r.ok, failed: r.failed, retrans: r.retrans, p50: r.p50, p99: r.p99, cpu: r.serverCpu, usPerReg, redisUs });
        console.log(`${sys}/${transport} @${rate}/s: achieved ${r.achieved.toFixed(0)}/s ok ${r.ok} failed ${r.failed} retrans ${r.retrans} p50 ${r.p50?.toFixed(2)} p99 ${r.p99?.toFixed(2)} ms; server CPU ${r.serverCpu.toFixed(0)}% = ${usPerReg.toFixed(0)} µs/registration (${kernelUs.toFixed(0)} µs of it in the kernel)${redis ? ` (+ Redis ${redisUs.toFixed(0)} µs)` : ''}`);
      }
    } finally {
      await server.stop(15000);
      // The profile ends when the process exits: keep the samples of the measured step.
      const exited = Date.now();
      profWindow = [exited - stepStarted, exited - stepEnded];
    }
    if (profFile && existsSync(join(tmp, profFile))) {
      const s = summariseProfile(join(tmp, profFile), { root: ROOT, top: 30, window: transports.length === 1 ? profWindow : undefined });
      console.log(`\nprofile ${join(tmp, profFile)}: ${s.totalMs.toFixed(0)} ms on CPU${transports.length === 1 ? ' during the measured step' : ''}`);
      for (const m of s.modules.slice(0, 14)) console.log(`  ${m.pct.toFixed(1).padStart(5)} %  ${m.module}`);
      console.log('');
      for (const f of s.functions) console.log(`  ${f.pct.toFixed(1).padStart(5)} %  ${f.name}  ${f.where}`);
    }
  }
} finally {
  await redis?.stop();
}

console.log('\n| system | transport | rate/s | µs CPU per registration | p50 ms | p99 ms |');
console.log('|---|---|---:|---:|---:|---:|');
for (const r of rows) console.log(`| ${r.sys} | ${r.transport} | ${r.achieved.toFixed(0)} | ${r.usPerReg.toFixed(0)}${r.redisUs ? ` (+${r.redisUs.toFixed(0)} Redis)` : ''} | ${r.p50?.toFixed(2)} | ${r.p99?.toFixed(2)} |`);
const base = rows.find((r) => r.sys.startsWith('kamailio'));
if (base) for (const r of rows.filter((x) => x.sys.startsWith('edge'))) console.log(`${r.sys}/${r.transport}: ${(r.usPerReg / base.usPerReg).toFixed(2)} × ${base.sys}'s CPU per registration`);
// The event log's cost: each edge against its `:events-off` twin in this run (edge + Redis CPU, p99).
for (const off of rows.filter((x) => x.sys.endsWith(':events-off'))) {
  const on = rows.find((x) => x.sys === off.sys.split(':')[0] && x.transport === off.transport);
  if (!on) continue;
  const total = (r) => r.usPerReg + r.redisUs;
  console.log(`${on.sys}/${on.transport} event log on vs off: ${total(on).toFixed(0)} vs ${total(off).toFixed(0)} µs CPU per registration (edge${on.redisUs ? ' + Redis' : ''}) = ${(total(on) / total(off)).toFixed(2)} ×; p99 ${on.p99?.toFixed(2)} vs ${off.p99?.toFixed(2)} ms`);
}
