#!/usr/bin/env node
// sip-edge benchmark harness: `npm run bench` (never part of `npm test`).
//
// Side by side with Kamailio (Debian package) on this machine:
//   ladder   REGISTER rate ladder (digest: 401 then 200 = one registration), 10,000
//            endpoints, two SIPp processes at half the rate each, UDP and TCP, against
//            edge-redis, edge-memory, kamailio-memory (usrloc db_mode 0) and
//            kamailio-redis (usrloc db_mode 1 write-through via db_redis);
//   api      HTTP API under autocannon: retrieve one endpoint, list 100 with live state;
//   profile  node --cpu-prof of the edge (Redis store) at its top UDP rate;
//   wss      N concurrent registered WSS flows held by the edge: RSS per flow, rate.
// Writes bench/results/<date>.md (+ .json) and prints the Markdown.
//
// Options (argv --name=value or env BENCH_NAME):
//   --parts=ladder,api,profile,wss      parts to run (default: all)
//   --systems=edge-redis,edge-memory,kamailio-memory,kamailio-redis
//   --transports=udp,tcp
//   --rates=1000,2000,...               ladder steps, registrations/s (total of both SIPps)
//   --step=8                            seconds per ladder step (issue suggests 20; 8 fits 20 min)
//   --warm=5                            warm-up seconds per system/transport at 2,000/s (not reported)
//   --wss-n=24000                       WSS flows
//   --wss-workers=2                     SIP_WORKERS of the WSS edge: each process has an open-files
//                                       limit (20,000 here), the primary hands connections to the workers
//   --wss-idle=10                       seconds of idling (keep-alives) before RSS is read
//   --api-seconds=8                     seconds per autocannon run
//   --profile-seconds=10
//   --budget=1140                       seconds the whole run may take; steps shrink to fit
//   --edge-workers=2                    SIP_WORKERS for the edge on Redis (both cores; 1 = one process)
//   --kamailio-redis-auth=0             1: kamailio-redis also reads credentials per request from Redis (auth_db)
//   --no-install / --no-build           skip apt and npm run build
//   --retry=1                           a failed ladder step is retried this often once per ladder
//   --nice=-10                          niceness of the harness and everything it starts (root only below 0):
//                                       other jobs on a shared machine then disturb the numbers less
// Examples: npm run bench -- --parts=ladder --systems=edge-memory --transports=udp --step=5
import { execFileSync, execSync } from 'node:child_process';
import { existsSync, mkdirSync, writeFileSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { cpus, totalmem, release } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedis, redisPipeline } from './lib/redis.mjs';
import { startEdge, createAccount, createEndpoints, benchUsers } from './lib/edge.mjs';
import { startKamailio } from './lib/kamailio.mjs';
import { buildFineClock, writeInjection, runStep } from './lib/sipp.mjs';
import { apiBench } from './lib/api.mjs';
import { wssScale } from './lib/wss.mjs';
import { summariseProfile } from './lib/profile.mjs';
import { have, setNiceness, settle, sleep } from './lib/proc.mjs';

import { renderReport } from './lib/report.mjs';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const T0 = Date.now();
const elapsed = () => (Date.now() - T0) / 1000;
const log = (...a) => process.stderr.write(`[bench ${elapsed().toFixed(0).padStart(4)}s] ${a.join(' ')}\n`);

// ---------- options ----------
function option(name, def) {
  const flag = `--${name}`;
  for (const a of process.argv.slice(2)) {
    if (a === flag) return '1';
    if (a === `--no-${name}`) return '0';
    if (a.startsWith(`${flag}=`)) return a.slice(flag.length + 1);
  }
  const env = process.env[`BENCH_${name.toUpperCase().replace(/-/g, '_')}`];
  return env !== undefined && env !== '' ? env : def;
}
const list = (v) => String(v).split(',').map((s) => s.trim()).filter(Boolean);
const opts = {
  parts: list(option('parts', 'ladder,api,profile,wss')),
  // Kamailio with db_redis first: its ladder is short (≈2,000/s) and must never be the one the budget cuts.
  systems: list(option('systems', 'kamailio-redis,edge-redis,edge-redis-dgram,edge-memory,edge-memory-dgram,edge-memory-2w,kamailio-memory')),
  transports: list(option('transports', 'udp,tcp')),
  rates: list(option('rates', '1000,2000,3000,4000,5000,6000,8000,10000,12000,14000,16000,20000,24000')).map(Number),
  stepS: Number(option('step', '15')),
  warmS: Number(option('warm', '5')),
  wssN: Number(option('wss-n', '24000')),
  wssWorkers: option('wss-workers', '2'),
  wssIdleS: Number(option('wss-idle', '10')),
  apiS: Number(option('api-seconds', '8')),
  profileS: Number(option('profile-seconds', '10')),
  budgetS: Number(option('budget', '1800')),
  kamailioRedisAuth: option('kamailio-redis-auth', '0') === '1',
  install: option('install', '1') === '1',
  build: option('build', '1') === '1',
  retry: Number(option('retry', '1')),
  users: Number(option('users', '10000')),
  nice: Number(option('nice', '-10')),
  edgeWorkers: option('edge-workers', '2'),
  // call: each SIPp call from its own UDP source port, as from many phones (SO_REUSEPORT spreads
  // sources over the workers; with one socket per SIPp both SIPps may hash to one worker);
  // process: one UDP socket per SIPp process (`-t u1`). The same for every server.
  sources: option('sources', 'call'),
  // The edge runs on the current LTS (the Docker image's Node 26: a SO_REUSEPORT UDP socket per
  // worker) when test/setup.sh installed it; else on the Node running the bench.
  node: option('node', process.env.SIP_EDGE_LTS_NODE ?? (existsSync(join(ROOT, 'test/.tmp/node-lts/bin/node')) ? join(ROOT, 'test/.tmp/node-lts/bin/node') : process.execPath)),
  // Kamailio's UDP/TCP children: in memory as many as cores (the stronger configuration on
  // 2 cores, issue 16); with db_redis more, since each child waits for Redis synchronously.
  kamailioChildren: Number(option('kamailio-children', '2')),
  kamailioRedisChildren: Number(option('kamailio-redis-children', '8')),
};

// ---------- packages ----------
function ensurePackages() {
  const need = [];
  const dpkgOk = (p) => {
    try {
      return execFileSync('dpkg-query', ['-W', '-f=${Status}', p], { stdio: ['ignore', 'pipe', 'ignore'] }).toString().includes('install ok installed');
    } catch {
      return false;
    }
  };
  for (const [pkg, ok] of [
    ['sip-tester', () => have('sipp')],
    ['redis-server', () => have('redis-server')],
    ['kamailio', () => have('kamailio') || existsSync('/usr/sbin/kamailio')],
    ['kamailio-redis-modules', () => dpkgOk('kamailio-redis-modules')],
  ]) {
    if (!ok()) need.push(pkg);
  }
  if (need.length === 0) return;
  log(`installing Debian packages: ${need.join(' ')}`);
  const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
  execSync('apt-get update -qq', { stdio: 'inherit', env });
  execSync(`apt-get install -y -qq --no-install-recommends ${need.join(' ')}`, { stdio: 'inherit', env });
}

function versions() {
  const v = (cmd, args, re) => {
    try {
      const out = execFileSync(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] }).toString();
      return (re.exec(out)?.[1] ?? out.split('\n')[0]).trim();
    } catch (e) {
      const out = `${e.stdout ?? ''}${e.stderr ?? ''}`;
      return (re.exec(out)?.[1] ?? '?').trim();
    }
  };
  return {
    node: (() => {
      try {
        return `${execFileSync(opts.node, ['--version']).toString().trim()} (edge), ${process.version} (harness)`;
      } catch {
        return process.version;
      }
    })(),
    kamailio: v('kamailio', ['-v'], /version:\s*kamailio\s+(\S+)/),
    sipp: v('sipp', ['-v'], /SIPp\s+(v?[\d.]+)/),
    redis: v('redis-server', ['--version'], /v=(\S+)/),
    cpu: cpus()[0]?.model ?? '?',
    cores: cpus().length,
    memGiB: (totalmem() / 2 ** 30).toFixed(1),
    kernel: release(),
    // The sip-edge code measured: HEAD, plus whether src/ had uncommitted changes when built.
    commit: (() => {
      try {
        const head = execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT }).toString().trim();
        const dirty = execFileSync('git', ['status', '--porcelain', '--', 'src'], { cwd: ROOT }).toString().trim() !== '';
        return dirty ? `${head} + uncommitted src changes` : head;
      } catch {
        return '?';
      }
    })(),
    nofile: (() => {
      try {
        return execSync('ulimit -Hn', { shell: '/bin/bash' }).toString().trim();
      } catch {
        return '?';
      }
    })(),
  };
}

// ---------- ladder ----------
const SYSTEMS = {
  // SIP_UDP_ENGINE=auto (the default): the native batched engine where it is built (docs/udp-engine.md).
  'edge-redis': { kind: 'edge', store: 'redis', label: 'sip-edge, Redis store' },
  'edge-memory': { kind: 'edge', store: 'memory', label: 'sip-edge, embedded store' },
  // The same with node:dgram (issue 27: both engines in one run); UDP only.
  'edge-redis-dgram': { kind: 'edge', store: 'redis', engine: 'dgram', transports: ['udp'], label: 'sip-edge, Redis store, node:dgram' },
  'edge-memory-dgram': { kind: 'edge', store: 'memory', engine: 'dgram', transports: ['udp'], label: 'sip-edge, embedded store, node:dgram' },
  // SIP_WORKERS=2 with no Redis: the node's own store process (docs/workers.md); UDP only.
  'edge-memory-2w': { kind: 'edge', store: 'memory', workers: '2', transports: ['udp'], label: 'sip-edge, embedded, SIP_WORKERS=2 (store process)' },
  'kamailio-memory': { kind: 'kamailio', variant: 'memory', label: 'Kamailio, usrloc db_mode 0 (memory)' },
  'kamailio-redis': { kind: 'kamailio', variant: 'redis', label: 'Kamailio, usrloc db_mode 1 → db_redis' },
};

/** SIPp's -t for a step: per-call UDP sockets (`un`) unless --sources=process. */
const sippTransportOf = (transport) => (transport === 'udp' && opts.sources === 'call' ? 'un' : undefined);

/** Seconds left for the ladders, leaving room for the parts still to come. */
function ladderSecondsLeft() {
  let reserve = 20;
  if (opts.parts.includes('wss')) reserve += 120; // 24,000 flows: ≈60 s to register, 10 s idle, start and stop
  if (opts.parts.includes('profile')) reserve += 35;
  return opts.budgetS - elapsed() - reserve;
}

async function ladder({ sys, target, files, transport, preload, redisPid, stepBudgetS, tmp, laddersAfter = 0 }) {
  const steps = [];
  let retries = opts.retry;
  const tLadder = Date.now();
  const stepS = () => {
    // Shrink steps when this ladder has used its share of the budget.
    const used = (Date.now() - tLadder) / 1000;
    return used > stepBudgetS ? Math.max(4, Math.round(opts.stepS / 2)) : opts.stepS;
  };
  const extraPids = redisPid ? [redisPid] : [];
  // Warm-up: every user registered once (JIT, caches, first inserts); not reported.
  if (opts.warmS > 0) {
    await runStep({ root: ROOT, dir: join(tmp, 'steps', `${sys}-${transport}-warm`), target, transport, rate: 2000, seconds: opts.warmS, files, preload, extraPids, sippTransport: sippTransportOf(transport) });
  }
  for (let i = 0; i < opts.rates.length; i++) {
    const rate = opts.rates[i];
    // Each ladder still to come keeps at least 45 s (warm-up and a few steps).
    if (ladderSecondsLeft() - 45 * laddersAfter < stepS() + 5) {
      log(`${sys}/${transport}: out of time budget; ladder stops before ${rate}/s`);
      break;
    }
    const r = await runStep({ root: ROOT, dir: join(tmp, 'steps', `${sys}-${transport}-${rate}`), target, transport, rate, seconds: stepS(), files, preload, extraPids, sippTransport: sippTransportOf(transport) });
    steps.push(r);
    log(
      `${sys}/${transport} ${rate}/s: achieved ${r.achieved.toFixed(0)}/s ok ${r.ok}/${r.planned} failed ${r.failed} retrans ${r.retrans}` +
        ` p50 ${r.p50?.toFixed(2)} p99 ${r.p99?.toFixed(2)} ms server ${r.serverCpu.toFixed(0)}% sipp ${r.sippCpu.toFixed(0)}% other ${r.foreignCpu.toFixed(0)}% → ${r.sustained ? 'sustained' : 'NOT sustained'}`,
    );
    if (!r.sustained) {
      if (retries > 0 && ladderSecondsLeft() > 2 * stepS()) {
        retries--;
        r.retried = true;
        log(`${sys}/${transport} ${rate}/s: retrying once (noise from other load is common on a shared machine)`);
        i--;
        continue;
      }
      break;
    }
  }
  const sustained = steps.filter((s) => s.sustained);
  const top = sustained.length ? Math.max(...sustained.map((s) => s.rate)) : 0;
  return { steps, top };
}

/** Wrong password must fail and the right one must succeed, on both transports. */
async function sanity({ sys, target, users, domain, tmp, transports }) {
  const bad = writeInjection(join(tmp, 'inj'), `${sys}-bad`, users.slice(0, 100).map((u) => ({ ...u, password: `${u.password}-wrong` })), domain);
  const good = writeInjection(join(tmp, 'inj'), `${sys}-good`, users.slice(0, 100), domain);
  const out = {};
  for (const transport of transports) {
    const w = await runStep({ root: ROOT, dir: join(tmp, 'steps', `${sys}-${transport}-wrongpw`), target, transport, rate: 100, seconds: 1, files: bad, scenario: 'register-wrong.xml' });
    const g = await runStep({ root: ROOT, dir: join(tmp, 'steps', `${sys}-${transport}-rightpw`), target, transport, rate: 100, seconds: 1, files: good });
    out[transport] = { wrongRefused: w.ok, wrongAccepted: w.failed, rightAccepted: g.ok, of: 100 };
  }
  out.ok = transports.every((t) => out[t].wrongRefused === 100 && out[t].rightAccepted === 100);
  return out;
}

// ---------- main ----------
async function main() {
  const stamp = new Date().toISOString().replace(/:\d\d\.\d+Z$/, '').replace(':', '');
  const tmp = join(ROOT, 'bench/.tmp', `run-${stamp}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  if (opts.install) ensurePackages();
  if (opts.build) {
    log('npm run build');
    execSync('npm run build --silent', { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  const preload = buildFineClock(ROOT, tmp);
  if (opts.nice) setNiceness(opts.nice);
  const machine = versions();
  log(`machine: ${machine.cores} × ${machine.cpu}, ${machine.memGiB} GiB, node ${machine.node}, kamailio ${machine.kamailio}, sipp ${machine.sipp}, redis ${machine.redis}`);
  const results = { stamp, date: new Date().toISOString(), opts, machine, fineClock: !!preload, ladders: {}, sanity: {}, api: {}, wss: null, profile: null, notes: [] };
  const redis = await startRedis(tmp);
  const users = benchUsers(opts.users);
  let edgeRedisAccount = null; // reused by the profile part (directory and credentials stay in Redis db 0)

  try {
    const wantLadder = opts.parts.includes('ladder');
    const wantApi = opts.parts.includes('api');
    const systems = opts.systems.filter((s) => SYSTEMS[s] && (wantLadder || (wantApi && SYSTEMS[s].kind === 'edge')));
    for (let si = 0; si < systems.length; si++) {
      const sys = systems[si];
      const def = SYSTEMS[sys];
      let server;
      let domain;
      let account = null;
      let endpointIds = [];
      log(`=== ${sys}: ${def.label}`);
      if (def.kind === 'edge') {
        if (def.store === 'redis') await redisPipeline(redis.port, 0, [['FLUSHDB']]);
        const env = {
          ...(def.workers ? { SIP_WORKERS: def.workers } : def.store === 'redis' && opts.edgeWorkers ? { SIP_WORKERS: opts.edgeWorkers } : {}),
          ...(def.engine ? { SIP_UDP_ENGINE: def.engine } : {}),
        };
        server = await startEdge({ root: ROOT, tmp, name: sys, store: def.store, redisUrl: redis.url(0), env, node: opts.node });
        account = await createAccount(server, sys);
        const t = Date.now();
        endpointIds = await createEndpoints(server, account, users, 16);
        log(`${sys}: ${users.length} endpoints created over the HTTP API in ${((Date.now() - t) / 1000).toFixed(1)} s`);
        domain = account.domain;
        if (def.store === 'redis') edgeRedisAccount = { account, endpointIds };
      } else {
        domain = 'kamailio.sip.localhost';
        server = await startKamailio({
          root: ROOT, tmp, variant: def.variant, users, domain, redis, redisDb: 1, redisAuth: opts.kamailioRedisAuth,
          children: def.variant === 'redis' ? opts.kamailioRedisChildren : opts.kamailioChildren,
        });
      }
      // Process tree: Kamailio's children, the edge's workers when SIP_WORKERS > 1.
      const target = { pid: server.pid, ports: server.ports, cpuTree: true };
      const usesRedis = def.store === 'redis' || def.variant === 'redis';
      try {
        const files = writeInjection(join(tmp, 'inj'), sys, users, domain);
        if (wantLadder) {
          const sysTransports = opts.transports.filter((t) => !def.transports || def.transports.includes(t));
          results.sanity[sys] = await sanity({ sys, target, users, domain, tmp, transports: sysTransports });
          log(`${sys}: auth sanity ${JSON.stringify(results.sanity[sys])}`);
          if (!results.sanity[sys].ok) results.notes.push(`${sys}: authentication sanity check FAILED — its numbers are not trustworthy.`);
          results.ladders[sys] = {};
          const remainingLadders = systems.slice(si).reduce((n, x) => n + opts.transports.filter((t) => !SYSTEMS[x].transports || SYSTEMS[x].transports.includes(t)).length, 0);
          for (const transport of sysTransports) {
            const stepBudgetS = Math.max(30, ladderSecondsLeft() / Math.max(1, remainingLadders));
            const laddersAfter = remainingLadders - 1 - sysTransports.indexOf(transport);
            const l = await ladder({ sys, target, files, transport, preload, redisPid: usesRedis ? redis.pid : null, stepBudgetS, tmp, laddersAfter });
            // p99 at half the top sustained rate, measured by its own step.
            if (def.kind === 'edge' && l.top > 0 && ladderSecondsLeft() > opts.stepS + 5) {
              const half = Math.round(l.top / 2);
              l.halfSettledS = await settle(target);
              l.half = await runStep({ root: ROOT, dir: join(tmp, 'steps', `${sys}-${transport}-half`), target, transport, rate: half, seconds: opts.stepS, files, preload, extraPids: usesRedis ? [redis.pid] : [], sippTransport: sippTransportOf(transport) });
              log(`${sys}/${transport} half rate ${half}/s: p50 ${l.half.p50.toFixed(2)} p99 ${l.half.p99.toFixed(2)} ms, ${l.half.sustained ? 'sustained' : 'NOT sustained'}`);
            }
            results.ladders[sys][transport] = l;
          }
        }
        if (wantApi && def.kind === 'edge') {
          if (!wantLadder) {
            // Register every endpoint once so the list has live state.
            await runStep({ root: ROOT, dir: join(tmp, 'steps', `${sys}-api-register`), target, transport: 'udp', rate: 2000, seconds: Math.ceil(users.length / 2000), files });
          }
          log(`${sys}: HTTP API under autocannon`);
          results.api[sys] = await apiBench({ root: ROOT, edge: server, account, endpointIds, seconds: opts.apiS, redisPid: usesRedis ? redis.pid : null });
          for (const r of results.api[sys].rows) log(`${sys} API ${r.case} @${r.mode}: ${r.rps.toFixed(0)} req/s p99 ${r.p99} ms, edge CPU ${r.edgeCpuMsPerReq?.toFixed(2)} ms/request, errors ${r.errors} non2xx ${r.non2xx}`);
        }
      } finally {
        await server.stop();
      }
    }

    if (opts.parts.includes('profile')) {
      log('=== profile: node --cpu-prof of the edge (Redis store) under the UDP ladder');
      const profDir = join(ROOT, 'bench/.tmp/profile');
      mkdirSync(profDir, { recursive: true });
      const name = `edge-${stamp}.cpuprofile`;
      if (!edgeRedisAccount) await redisPipeline(redis.port, 0, [['FLUSHDB']]);
      // One process (SIP_WORKERS=1): one profile of the whole hot path.
      const edge = await startEdge({ root: ROOT, tmp, name: 'edge-profile', store: 'redis', redisUrl: redis.url(0), env: { SIP_WORKERS: '1' }, node: opts.node, nodeArgs: ['--cpu-prof', '--cpu-prof-dir', profDir, '--cpu-prof-name', name] });
      try {
        let account = edgeRedisAccount?.account;
        if (!account) {
          account = await createAccount(edge, 'profile');
          await createEndpoints(edge, account, users, 16);
        }
        const files = writeInjection(join(tmp, 'inj'), 'profile', users, account.domain);
        const target = { pid: edge.pid, ports: edge.ports };
        const top = results.ladders['edge-redis']?.udp?.top || 4000;
        // At the top sustained rate and one step above: what saturates.
        const rate = opts.rates.find((r) => r > top) ?? top;
        await runStep({ root: ROOT, dir: join(tmp, 'steps', 'profile-warm'), target, transport: 'udp', rate: 2000, seconds: 3, files, preload, sippTransport: sippTransportOf('udp') });
        const r = await runStep({ root: ROOT, dir: join(tmp, 'steps', 'profile'), target, transport: 'udp', rate, seconds: opts.profileS, files, preload, extraPids: [redis.pid], sippTransport: sippTransportOf('udp') });
        log(`profile step ${rate}/s: achieved ${r.achieved.toFixed(0)}/s, server CPU ${r.serverCpu.toFixed(0)}%`);
        results.profileStep = r;
      } finally {
        await edge.stop(15000);
      }
      const file = join(profDir, name);
      if (existsSync(file)) {
        results.profile = { file: `bench/.tmp/profile/${name}`, ...summariseProfile(file, { root: ROOT, top: 20 }) };
      } else {
        results.notes.push('profile: the edge wrote no .cpuprofile (did it exit cleanly?)');
      }
    }

    if (opts.parts.includes('wss')) {
      log(`=== wss: ${opts.wssN} concurrent WSS flows`);
      results.wss = await wssScale({ root: ROOT, tmp, redis, n: opts.wssN, idleS: opts.wssIdleS, log, workers: opts.wssWorkers === '1' ? '' : opts.wssWorkers });
      log(`wss: ${JSON.stringify(results.wss)}`);
    }
  } finally {
    await redis.stop();
  }

  results.seconds = elapsed();
  const md = renderReport(results);
  const outDir = join(ROOT, 'bench/results');
  mkdirSync(outDir, { recursive: true });
  const base = join(outDir, stamp.replace('T', '-'));
  writeFileSync(`${base}.md`, md);
  // Step details without the raw latency arrays.
  writeFileSync(`${base}.json`, JSON.stringify(results, null, 1));
  process.stdout.write(md + '\n');
  log(`wrote ${base}.md and .json in ${elapsed().toFixed(0)} s`);
}

// --report=<results .json>: render that run's Markdown again (after a change to the report), nothing else.
const again = process.argv.find((a) => a.startsWith('--report='))?.slice('--report='.length);
const run = again
  ? async () => {
      const r = JSON.parse(readFileSync(again, 'utf8'));
      const md = renderReport(r);
      writeFileSync(again.replace(/\.json$/, '.md'), md);
      process.stdout.write(md + '\n');
    }
  : main;
run().catch((e) => {
  process.stderr.write(`bench failed: ${e.stack ?? e}\n`);
  process.exit(1);
});
