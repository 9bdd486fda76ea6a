#!/usr/bin/env node
// The UDP engines side by side with Kamailio, in one run (issue 27, docs/udp-engine.md):
// Kamailio in memory, the edge embedded (one process) and the edge on Redis (SIP_WORKERS=2),
// the edge each with SIP_UDP_ENGINE=dgram and =native. Per system, fixed steps (1,000 and
// 6,000 registrations/s by default): CPU µs per registration (server process tree; on Redis
// plus redis-server), p99 of the whole registration, success. `--ladder` adds a ladder per
// system for its top sustained rate and the p99 at half of it. `--repeat=N` runs the whole
// round N times (systems interleaved, so a neighbour's load hits every system alike) and
// reports each ratio to Kamailio with its spread (min–max over the rounds).
//
//   node bench/udp-engine.mjs [--systems=kamailio-memory,edge-memory-dgram,edge-memory-native,
//        edge-redis-dgram,edge-redis-native] [--rates=1000,6000] [--step=10] [--warm=4]
//        [--repeat=2] [--ladder] [--ladder-rates=4000,6000,8000,10000,12000,14000,16000]
//        [--users=10000] [--sources=call|process] [--node=…] [--nice=-10] [--no-build]
//        [--shed-ms=300] (systems edge-memory-native-shed, edge-redis-native-shed: SIP_UDP_SHED_AGE_MS)
//        [--sipp-procs=N] (default 2; 16 with --sources=process) [--no-overload] [--no-tcp]
// With --ladder, after each system's ladder: a step at 1.5× its top sustained rate (issue 27's
// overload target: it still completes at least its top rate) and a TCP step at half the top
// (-t t1, one connection per SIPp process: the TCP p99 target).
//
// Writes bench/results/<date>-<time>-udp-engine.{md,json}. Never part of `npm test`.
import { execFileSync, execSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { cpus, loadavg, release } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedis, redisPipeline } from './lib/redis.mjs';
import { startEdge, createAccount, createEndpoints, benchUsers } from './lib/edge.mjs';
import { startKamailio } from './lib/kamailio.mjs';
import { buildFineClock, writeInjection, runStep } from './lib/sipp.mjs';
import { setNiceness, settle } from './lib/proc.mjs';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const T0 = Date.now();
const log = (...a) => process.stderr.write(`[udp-engine ${((Date.now() - T0) / 1000).toFixed(0).padStart(4)}s] ${a.join(' ')}\n`);
const option = (name, def) => {
  for (const a of process.argv.slice(2)) {
    if (a === `--${name}`) return '1';
    if (a === `--no-${name}`) return '0';
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  }
  return process.env[`BENCH_${name.toUpperCase().replace(/-/g, '_')}`] ?? def;
};
const lts = join(ROOT, 'test/.tmp/node-lts/bin/node');
const opts = {
  systems: option('systems', 'kamailio-memory,edge-memory-dgram,edge-memory-native,edge-redis-dgram,edge-redis-native').split(','),
  rates: option('rates', '1000,6000').split(',').map(Number),
  stepS: Number(option('step', '10')),
  warmS: Number(option('warm', '4')),
  repeat: Number(option('repeat', '2')),
  ladder: option('ladder', '0') === '1',
  ladderRates: option('ladder-rates', '2000,3000,4000,5000,6000,8000,10000,12000,14000,16000').split(',').map(Number),
  users: Number(option('users', '10000')),
  sources: option('sources', 'call'),
  node: option('node', process.env.SIP_EDGE_LTS_NODE ?? (existsSync(lts) ? lts : process.execPath)),
  nice: Number(option('nice', '-10')),
  build: option('build', '1') === '1',
  edgeWorkers: option('edge-workers', '2'),
  shedMs: option('shed-ms', '300'),
  // SIPp processes per step: with one socket each (--sources=process) their number is the
  // number of source ports, which SO_REUSEPORT hashes over the workers.
  sippProcs: Number(option('sipp-procs', option('sources', 'call') === 'process' ? '16' : '2')),
  // After the ladder: a step at 1.5× the top (overload) and a TCP step at half the top.
  overload: option('overload', '1') === '1',
  tcp: option('tcp', '1') === '1',
};
const sippTransport = opts.sources === 'process' ? 'u1' : 'un';

const SYSTEMS = {
  'kamailio-memory': { kind: 'kamailio', label: 'Kamailio, usrloc in memory' },
  'edge-memory-dgram': { kind: 'edge', store: 'memory', engine: 'dgram', label: 'edge embedded, node:dgram' },
  'edge-memory-native': { kind: 'edge', store: 'memory', engine: 'native', label: 'edge embedded, native engine' },
  // The native engine shedding datagrams that waited longer than --shed-ms unread (docs/udp-engine.md "Overload").
  'edge-memory-native-shed': { kind: 'edge', store: 'memory', engine: 'native', shed: true, label: 'edge embedded, native, SIP_UDP_SHED_AGE_MS' },
  'edge-redis-dgram': { kind: 'edge', store: 'redis', engine: 'dgram', workers: true, label: 'edge on Redis (2 workers), node:dgram' },
  'edge-redis-native': { kind: 'edge', store: 'redis', engine: 'native', workers: true, label: 'edge on Redis (2 workers), native engine' },
  'edge-redis-native-shed': { kind: 'edge', store: 'redis', engine: 'native', workers: true, shed: true, label: 'edge on Redis (2 workers), native, SIP_UDP_SHED_AGE_MS' },
};

/** CPU µs per registration: (server + Redis) % of one core × 10,000 / registrations per second. */
const usPerReg = (s) => (s && s.achieved > 0 ? ((s.serverCpu + (s.redisCpu ?? 0)) * 1e4) / s.achieved : NaN);

async function withSystem(sys, { redis, users, tmp, preload }, fn) {
  const def = SYSTEMS[sys];
  let server;
  let domain;
  if (def.kind === 'kamailio') {
    domain = 'kamailio.sip.localhost';
    server = await startKamailio({ root: ROOT, tmp, variant: 'memory', users, domain, redis, redisDb: 1, children: 2 });
  } else {
    if (def.store === 'redis') await redisPipeline(redis.port, 0, [['FLUSHDB']]);
    const env = { SIP_UDP_ENGINE: def.engine, ...(def.workers ? { SIP_WORKERS: opts.edgeWorkers } : {}), ...(def.shed ? { SIP_UDP_SHED_AGE_MS: opts.shedMs } : {}) };
    server = await startEdge({ root: ROOT, tmp, name: sys, store: def.store, redisUrl: redis.url(0), listeners: ['udp', 'tcp'], env, node: opts.node });
    const logText = readFileSync(server.logFile, 'utf8');
    const engines = [...logText.matchAll(/"udpEngine":"(\w+)"/g)].map((m) => m[1]);
    if (def.engine === 'native' && !engines.includes('native')) throw new Error(`${sys}: the native engine did not start (log: ${server.logFile})`);
    if (def.engine === 'dgram' && engines.includes('native')) throw new Error(`${sys}: native engine with SIP_UDP_ENGINE=dgram?`);
    const account = await createAccount(server, sys);
    await createEndpoints(server, account, users, 16);
    domain = account.domain;
  }
  const target = { pid: server.pid, ports: server.ports, cpuTree: true };
  const files = writeInjection(join(tmp, 'inj'), sys, users, domain, opts.sippProcs);
  const redisPid = def.store === 'redis' ? redis.pid : null;
  const step = async (name, rate, seconds, transport = 'udp') => {
    const r = await runStep({ sippTransport: transport === 'udp' ? sippTransport : 't1', root: ROOT, dir: join(tmp, 'steps', `${sys}-${name}`), target, transport, rate, seconds, files, preload, extraPids: redisPid ? [redisPid] : [] });
    const s = {
      rate, achieved: r.achieved, ok: r.ok, planned: r.planned, failed: r.failed, retrans: r.retrans, p50: r.p50, p99: r.p99,
      serverCpu: r.serverCpu, redisCpu: redisPid ? r.otherCpu[0] : 0, sippCpu: r.sippCpu, otherJobsCpu: r.foreignCpu, sustained: r.sustained,
    };
    s.usPerReg = usPerReg(s);
    return s;
  };
  try {
    return await fn({ step, settle: () => settle(target) });
  } finally {
    await server.stop(15000);
  }
}

async function main() {
  const stamp = new Date().toISOString().replace(/:\d\d\.\d+Z$/, '').replace(':', '');
  const tmp = join(ROOT, 'bench/.tmp', `udp-engine-${stamp}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  if (opts.build) execSync('npm run build --silent', { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  const preload = buildFineClock(ROOT, tmp);
  if (opts.nice) setNiceness(opts.nice);
  const machine = {
    cores: cpus().length, cpu: cpus()[0]?.model ?? '?', kernel: release(),
    node: execFileSync(opts.node, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim(),
    commit: (() => { try { return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim(); } catch { return '?'; } })(),
    loadavgAtStart: loadavg().map((x) => x.toFixed(2)),
  };
  log(`node ${machine.node}; ${machine.cores} × ${machine.cpu}; load ${machine.loadavgAtStart.join(' ')}`);
  const redis = await startRedis(tmp);
  const users = benchUsers(opts.users);
  const res = { stamp, date: new Date().toISOString(), opts, machine, rounds: [], ladders: {} };
  try {
    for (let round = 0; round < opts.repeat; round++) {
      const r = {};
      // Alternate the order each round: what runs first does not always meet a cold machine.
      const order = round % 2 === 0 ? opts.systems : [...opts.systems].reverse();
      for (const sys of order) {
        r[sys] = await withSystem(sys, { redis, users, tmp, preload }, async ({ step }) => {
          if (opts.warmS > 0) await step('warm', 2000, opts.warmS);
          const steps = {};
          for (const rate of opts.rates) {
            steps[rate] = await step(`r${round}-${rate}`, rate, opts.stepS);
            const s = steps[rate];
            log(`round ${round + 1} ${sys} ${rate}/s: achieved ${s.achieved.toFixed(0)}/s ok ${s.ok}/${s.planned} p99 ${s.p99?.toFixed(2)} ms server ${s.serverCpu.toFixed(0)}% redis ${s.redisCpu.toFixed(0)}% other jobs ${s.otherJobsCpu.toFixed(0)}% → ${s.usPerReg.toFixed(0)} µs/registration`);
          }
          return steps;
        });
      }
      res.rounds.push(r);
    }
    if (opts.ladder) {
      for (const sys of opts.systems) {
        res.ladders[sys] = await withSystem(sys, { redis, users, tmp, preload }, async ({ step, settle: rest }) => {
          if (opts.warmS > 0) await step('lwarm', 2000, opts.warmS);
          const steps = [];
          let retry = 1;
          for (let i = 0; i < opts.ladderRates.length; i++) {
            const s = await step(`ladder-${opts.ladderRates[i]}`, opts.ladderRates[i], opts.stepS);
            steps.push(s);
            log(`ladder ${sys} ${s.rate}/s: achieved ${s.achieved.toFixed(0)}/s ok ${s.ok}/${s.planned} p99 ${s.p99?.toFixed(2)} ms → ${s.sustained ? 'sustained' : 'NOT sustained'}`);
            if (!s.sustained) {
              if (retry-- > 0) { i--; continue; }
              break;
            }
          }
          const top = Math.max(0, ...steps.filter((s) => s.sustained).map((s) => s.rate));
          // Each of these after the server is back at rest (the ladder's last step overloaded it).
          if (top > 0) await rest();
          const half = top > 0 ? await step('half', Math.round(top / 2), opts.stepS) : null;
          if (half) log(`ladder ${sys} half ${half.rate}/s UDP: p99 ${half.p99?.toFixed(2)} ms`);
          const overload = top > 0 && opts.overload ? await step('overload', Math.round(top * 1.5), opts.stepS) : null;
          if (overload) log(`ladder ${sys} overload ${overload.rate}/s: completed ${overload.achieved.toFixed(0)}/s ok ${overload.ok}/${overload.planned} (top ${top}/s)`);
          if (top > 0 && opts.tcp) await rest();
          const tcpHalf = top > 0 && opts.tcp ? await step('tcp-half', Math.round(top / 2), opts.stepS, 'tcp') : null;
          if (tcpHalf) log(`ladder ${sys} half ${tcpHalf.rate}/s TCP: achieved ${tcpHalf.achieved.toFixed(0)}/s ok ${tcpHalf.ok}/${tcpHalf.planned} p99 ${tcpHalf.p99?.toFixed(2)} ms`);
          return { steps, top, half, overload, tcpHalf };
        });
      }
    }
  } finally {
    await redis.stop();
  }
  machine.loadavgAtEnd = loadavg().map((x) => x.toFixed(2));
  machine.seconds = Math.round((Date.now() - T0) / 1000);
  const md = report(res);
  process.stdout.write(md);
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  const base = join(ROOT, 'bench/results', `${stamp.replace('T', '-')}-udp-engine`);
  writeFileSync(`${base}.md`, md);
  writeFileSync(`${base}.json`, JSON.stringify(res, null, 1));
  log(`wrote ${base}.md and .json`);
}

const int = (x) => (Number.isFinite(x) ? Math.round(x).toLocaleString('en') : '–');
const f2 = (x) => (Number.isFinite(x) ? x.toFixed(2) : '–');
const median = (v) => {
  const s = [...v].sort((a, b) => a - b);
  const h = Math.floor(s.length / 2);
  return s.length % 2 ? s[h] : (s[h - 1] + s[h]) / 2;
};
const spread = (xs) => {
  const v = xs.filter(Number.isFinite);
  if (v.length === 0) return '–';
  return v.length === 1 ? f2(v[0]) : `${f2(median(v))} (${f2(Math.min(...v))}–${f2(Math.max(...v))})`;
};
/** A step whose rate was not sustained measures overload, not CPU at that rate. */
const held = (s) => !!s && s.sustained;

export function report(res) {
  const { opts: o, machine: m, rounds } = res;
  const lines = [];
  lines.push(`# UDP engines against Kamailio, ${res.date.slice(0, 16).replace('T', ' ')} UTC`, '');
  lines.push(`node ${m.node}, ${m.cores} × ${m.cpu}, kernel ${m.kernel}, commit ${m.commit}; ${o.repeat} round(s) of ${o.stepS} s steps, ${o.users} users, ${o.sippProcs ?? 2} SIPp processes, ${o.sources === 'call' ? 'one source port per call (-t un)' : 'one socket each (-t u1)'}; load average ${m.loadavgAtStart.join(' ')} → ${m.loadavgAtEnd?.join(' ')}; ${m.seconds} s.`, '');
  lines.push('CPU µs per registration = CPU of the server\'s process tree (+ redis-server for the Redis systems) / registrations per second. Ratios are to Kamailio in the same round; "median (min–max)" over the rounds.', '');
  for (const rate of o.rates) {
    lines.push(`## ${int(rate)} registrations/s`, '');
    lines.push('| system | µs/registration per round | ratio to Kamailio | achieved /s per round | p99 ms per round | ok / planned | other jobs % |', '|---|---|---|---|---|---|---|');
    for (const sys of o.systems) {
      const ss = rounds.map((r) => r[sys]?.[rate]);
      const ratios = rounds.map((r) => (r[sys]?.[rate]?.usPerReg ?? NaN) / (r['kamailio-memory']?.[rate]?.usPerReg ?? NaN));
      lines.push(
        `| ${SYSTEMS[sys]?.label ?? sys} | ${ss.map((s) => int(s?.usPerReg) + (s && !held(s) ? '*' : '')).join(', ')} | ${sys === 'kamailio-memory' ? '1' : spread(ratios)} | ${ss.map((s) => int(s?.achieved)).join(', ')} | ${ss.map((s) => f2(s?.p99)).join(', ')} | ${ss.map((s) => (s ? `${s.ok}/${s.planned}` : '–')).join(', ')} | ${ss.map((s) => int(s?.otherJobsCpu)).join(', ')} |`,
      );
    }
    lines.push('');
  }
  lines.push('\\* not sustained (under 99.9 % ok or 95 % of the rate): the step measured overload, and its CPU per registration is not a figure at that rate.', '');
  const pairs = [['edge-memory-native', 'edge-memory-dgram'], ['edge-redis-native', 'edge-redis-dgram']].filter(([a, b]) => o.systems.includes(a) && o.systems.includes(b));
  if (pairs.length) {
    lines.push('## native / dgram, same store, same round', '', '| pair | ' + o.rates.map((r) => `${int(r)}/s`).join(' | ') + ' |', '|---|' + o.rates.map(() => '---').join('|') + '|');
    for (const [a, b] of pairs) lines.push(`| ${a} / ${b} | ${o.rates.map((rate) => spread(rounds.map((r) => (r[a]?.[rate]?.usPerReg ?? NaN) / (r[b]?.[rate]?.usPerReg ?? NaN)))).join(' | ')} |`);
    lines.push('');
  }
  // Issue 27's CPU targets, from the 6,000/s step.
  const t = o.rates.includes(6000) ? 6000 : o.rates[o.rates.length - 1];
  const ratio = (sys) => rounds.map((r) => (r[sys]?.[t]?.usPerReg ?? NaN) / (r['kamailio-memory']?.[t]?.usPerReg ?? NaN));
  const allHeld = (sys) => rounds.every((r) => held(r[sys]?.[t]) && held(r['kamailio-memory']?.[t]));
  const verdict = (xs, limit, sys) => {
    const v = xs.filter(Number.isFinite);
    if (!v.length) return 'not measured';
    const word = median(v) <= limit ? 'met' : 'missed';
    return allHeld(sys) ? word : `${word} on paper: not every step held ${int(t)}/s (overload), not valid`;
  };
  lines.push(`## Issue 27 targets (CPU at ${int(t)}/s)`, '', '| target | measured (median, min–max) | |', '|---|---|---|');
  for (const eng of ['native', 'dgram']) {
    if (o.systems.includes(`edge-memory-${eng}`)) lines.push(`| edge embedded / Kamailio ≤ 1.5× (${eng}) | ${spread(ratio(`edge-memory-${eng}`))} | ${verdict(ratio(`edge-memory-${eng}`), 1.5, `edge-memory-${eng}`)} |`);
    if (o.systems.includes(`edge-redis-${eng}`)) lines.push(`| edge on Redis (edge + Redis) / Kamailio ≤ 2.5× (${eng}) | ${spread(ratio(`edge-redis-${eng}`))} | ${verdict(ratio(`edge-redis-${eng}`), 2.5, `edge-redis-${eng}`)} |`);
  }
  lines.push('');
  if (Object.keys(res.ladders ?? {}).length) {
    const km = res.ladders['kamailio-memory']?.top;
    lines.push('## Ladders', '', 'Top sustained: the highest step with ≥ 99.9 % ok, ≥ 95 % of the rate and no growing retransmissions. Overload: a step at 1.5× the top; "completed" is registrations that succeeded per second of the step. TCP: `-t t1`, one connection per SIPp process, at half the UDP top.', '');
    lines.push('| system | top sustained /s | ratio to Kamailio | p99 at half the top, UDP (ms) | overload: offered → completed /s (ok / planned) | p99 at half the top, TCP (ms) (ok / planned) |', '|---|---|---|---|---|---|');
    for (const [sys, l] of Object.entries(res.ladders)) {
      const ov = l.overload ? `${int(l.overload.rate)} → ${int(l.overload.achieved)} (${l.overload.ok}/${l.overload.planned})` : '–';
      const tc = l.tcpHalf ? `${f2(l.tcpHalf.p99)} (${l.tcpHalf.ok}/${l.tcpHalf.planned})` : '–';
      lines.push(`| ${SYSTEMS[sys]?.label ?? sys} | ${int(l.top)} | ${km ? f2(l.top / km) : '–'} | ${f2(l.half?.p99)} | ${ov} | ${tc} |`);
    }
    lines.push('');
    // Issue 27's ladder targets.
    const tl = [];
    const redisLadder = ['edge-redis-native', 'edge-redis-native-shed'].filter((x) => res.ladders[x]);
    for (const sys of redisLadder) if (km) tl.push(`| sustained on Redis (2 workers) ≥ 0.75× Kamailio (${SYSTEMS[sys].label}) | ${f2(res.ladders[sys].top / km)} (${int(res.ladders[sys].top)} vs ${int(km)}/s) | ${res.ladders[sys].top / km >= 0.75 ? 'met' : 'missed'} |`);
    for (const [sys, l] of Object.entries(res.ladders)) {
      if (!sys.startsWith('edge') || !l.overload) continue;
      tl.push(`| overload: at 1.5× its top, completes ≥ its top (${SYSTEMS[sys].label}) | ${int(l.overload.achieved)} of ${int(l.top)}/s | ${l.overload.achieved >= l.top ? 'met' : 'missed'} |`);
    }
    for (const [sys, l] of Object.entries(res.ladders)) {
      if (!sys.startsWith('edge')) continue;
      if (l.half) tl.push(`| p99 at half the top < 10 ms, UDP (${SYSTEMS[sys].label}) | ${f2(l.half.p99)} ms | ${l.half.p99 < 10 ? 'met' : 'missed'} |`);
      if (l.tcpHalf) tl.push(`| p99 at half the top < 10 ms, TCP (${SYSTEMS[sys].label}) | ${f2(l.tcpHalf.p99)} ms${l.tcpHalf.sustained ? '' : ' (rate not held)'} | ${l.tcpHalf.p99 < 10 && l.tcpHalf.sustained ? 'met' : 'missed'} |`);
    }
    if (tl.length) lines.push('## Issue 27 targets (ladders)', '', '| target | measured | |', '|---|---|---|', ...tl, '');
  }
  return lines.join('\n') + '\n';
}

if (option('report', '')) {
  const f = option('report', '');
  const md = report(JSON.parse(readFileSync(f, 'utf8')));
  writeFileSync(f.replace(/\.json$/, '.md'), md);
  process.stdout.write(md);
} else {
  main().catch((err) => {
    log(`failed: ${err.stack ?? err}`);
    process.exit(1);
  });
}
