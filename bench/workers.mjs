#!/usr/bin/env node
// UDP registrations/s of the edge on Redis with SIP_WORKERS=1 and SIP_WORKERS=2, in one run,
// on the LTS runtime (dgram `reusePort`: one UDP socket per worker; README "Operating it",
// docs/workers.md). Then, on the 2-worker edge, one step at the 1-worker top rate, counting
// what SIPp saw fail and why (a retransmission answered by another worker than the first copy
// reaches SIPp as an unexpected message). `--contrast` repeats that step on the 2-worker edge
// under the runtime running this script (Node 20: one shared socket) for comparison.
//
//   node bench/workers.mjs [--node=test/.tmp/node-lts/bin/node] [--rates=1000,2000,…] [--step=8]
//                          [--warm=5] [--users=10000] [--sources=call|process] [--contrast]
//                          [--nice=-10] [--no-build]
//
// Writes bench/results/<date>-<time>-workers.{md,json}. Never part of `npm test`.
import { execFileSync, execSync } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { cpus, loadavg, release, totalmem } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedis, redisPipeline } from './lib/redis.mjs';
import { startEdge, createAccount, createEndpoints, benchUsers } from './lib/edge.mjs';
import { buildFineClock, writeInjection, runStep } from './lib/sipp.mjs';
import { cpuMeter, setNiceness, sleep } from './lib/proc.mjs';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const T0 = Date.now();
const log = (...a) => process.stderr.write(`[workers ${((Date.now() - T0) / 1000).toFixed(0).padStart(4)}s] ${a.join(' ')}\n`);
const option = (name, def) => {
  for (const a of process.argv.slice(2)) {
    if (a === `--${name}`) return '1';
    if (a === `--no-${name}`) return '0';
    if (a.startsWith(`--${name}=`)) return a.slice(name.length + 3);
  }
  return def;
};
const opts = {
  node: option('node', process.env.SIP_EDGE_LTS_NODE ?? join(ROOT, 'test/.tmp/node-lts/bin/node')),
  rates: option('rates', '1000,2000,3000,4000,5000,6000,7000,8000,9000,10000,11000,12000,14000,16000').split(',').map(Number),
  stepS: Number(option('step', '8')),
  warmS: Number(option('warm', '5')),
  users: Number(option('users', '10000')),
  contrast: option('contrast', '0') === '1',
  nice: Number(option('nice', '-10')),
  build: option('build', '1') === '1',
  retry: Number(option('retry', '1')),
  // call: SIPp opens one UDP socket per call (`-t un`), so the load comes from many source
  // ports as from many phones; process: one socket per SIPp process (`-t u1`, 2 sources in all,
  // which SO_REUSEPORT may both hash onto the same worker).
  sources: option('sources', 'call'),
};
const sippTransport = opts.sources === 'process' ? 'u1' : 'un';

const nodeVersion = (bin) => execFileSync(bin, ['-p', 'process.versions.node'], { encoding: 'utf8' }).trim();
if (!existsSync(opts.node) && !option('report', '')) {
  process.stderr.write(`no LTS node at ${opts.node}: run test/setup.sh (or pass --node=/path/to/node)\n`);
  process.exit(2);
}

/** SIPp's cumulative failure counters by cause, summed over the step's SIPp processes. */
function failureCauses(dir, n = 2) {
  const out = {};
  for (let i = 0; i < n; i++) {
    const f = join(dir, `sipp${i}`, 'stat.csv');
    if (!existsSync(f)) continue;
    const lines = readFileSync(f, 'utf8').trim().split('\n');
    const head = lines[0].split(';');
    const last = lines[lines.length - 1].split(';');
    head.forEach((h, k) => {
      if (/^Failed.*\(C\)$/.test(h) && h !== 'FailedCall(C)') out[h.slice(0, -3)] = (out[h.slice(0, -3)] ?? 0) + Number(last[k]);
    });
  }
  return Object.fromEntries(Object.entries(out).filter(([, v]) => v > 0));
}

async function settle(pid, maxS = 30) {
  const t0 = Date.now();
  while (Date.now() - t0 < maxS * 1000) {
    const m = cpuMeter([pid], { tree: true });
    m.begin();
    await sleep(1000);
    if (m.end() < 5) return;
  }
}

async function withEdge({ name, node, workers, redis, users, tmp }, fn) {
  await redisPipeline(redis.port, 0, [['FLUSHDB']]);
  const edge = await startEdge({ root: ROOT, tmp, name, store: 'redis', redisUrl: redis.url(0), listeners: ['udp'], node, env: { SIP_WORKERS: String(workers) } });
  try {
    const udpMode = readFileSync(edge.logFile, 'utf8').match(/"udpMode":"(\w+)"/)?.[1] ?? 'single process';
    const account = await createAccount(edge, name);
    const t = Date.now();
    await createEndpoints(edge, account, users, 16);
    log(`${name}: ${users.length} endpoints over the HTTP API in ${((Date.now() - t) / 1000).toFixed(1)} s; UDP: ${udpMode}`);
    const files = writeInjection(join(tmp, 'inj'), name, users, account.domain);
    return await fn({ edge, files, target: { pid: edge.pid, ports: edge.ports, cpuTree: true }, udpMode });
  } finally {
    await edge.stop(15000);
  }
}

const summary = (r) => ({
  rate: r.rate, achieved: Math.round(r.achieved), ok: r.ok, planned: r.planned, failed: r.failed, retrans: r.retrans,
  p50: r.p50, p99: r.p99, serverCpu: Math.round(r.serverCpu), sippCpu: Math.round(r.sippCpu), redisCpu: Math.round(r.otherCpu[0] ?? 0),
  otherJobsCpu: Math.round(r.foreignCpu), sustained: r.sustained,
});

async function ladder({ name, target, files, preload, redisPid, tmp }) {
  const steps = [];
  let retries = opts.retry;
  if (opts.warmS > 0) await runStep({ sippTransport, root: ROOT, dir: join(tmp, 'steps', `${name}-warm`), target, transport: 'udp', rate: 2000, seconds: opts.warmS, files, preload, extraPids: [redisPid] });
  for (let i = 0; i < opts.rates.length; i++) {
    const rate = opts.rates[i];
    const r = await runStep({ sippTransport, root: ROOT, dir: join(tmp, 'steps', `${name}-${rate}`), target, transport: 'udp', rate, seconds: opts.stepS, files, preload, extraPids: [redisPid] });
    steps.push(summary(r));
    log(`${name} ${rate}/s: achieved ${r.achieved.toFixed(0)}/s ok ${r.ok}/${r.planned} failed ${r.failed} retrans ${r.retrans} p50 ${r.p50?.toFixed(2)} p99 ${r.p99?.toFixed(2)} ms server ${r.serverCpu.toFixed(0)}% sipp ${r.sippCpu.toFixed(0)}% redis ${(r.otherCpu[0] ?? 0).toFixed(0)}% other jobs ${r.foreignCpu.toFixed(0)}% → ${r.sustained ? 'sustained' : 'NOT sustained'}`);
    if (!r.sustained) {
      if (retries-- > 0) {
        steps[steps.length - 1].retried = true;
        log(`${name} ${rate}/s: retrying once`);
        i--;
        continue;
      }
      break;
    }
  }
  const ok = steps.filter((s) => s.sustained);
  const lastFailed = steps.length > 0 && !steps[steps.length - 1].sustained;
  return { steps, top: ok.length ? Math.max(...ok.map((s) => s.rate)) : 0, topFound: lastFailed };
}

async function checkStep({ name, target, files, preload, redisPid, tmp, rate }) {
  const dir = join(tmp, 'steps', `${name}-check-${rate}`);
  const r = await runStep({ sippTransport, root: ROOT, dir, target, transport: 'udp', rate, seconds: opts.stepS, files, preload, extraPids: [redisPid] });
  const causes = failureCauses(dir);
  log(`${name} check at ${rate}/s: ok ${r.ok}/${r.planned} failed ${r.failed} ${JSON.stringify(causes)} retrans ${r.retrans} → ${r.sustained ? 'sustained' : 'NOT sustained'}`);
  return { ...summary(r), causes };
}

async function main() {
  // --report=<results json>: render that run's Markdown again (after a change to the report).
  const again = option('report', '');
  if (again) {
    const md = report(JSON.parse(readFileSync(again, 'utf8')));
    writeFileSync(again.replace(/\.json$/, '.md'), md);
    process.stdout.write(md);
    return;
  }
  const stamp = new Date().toISOString().replace(/:\d\d\.\d+Z$/, '').replace(':', '');
  const tmp = join(ROOT, 'bench/.tmp', `workers-${stamp}`);
  rmSync(tmp, { recursive: true, force: true });
  mkdirSync(tmp, { recursive: true });
  if (opts.build) execSync('npm run build --silent', { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  const preload = buildFineClock(ROOT, tmp);
  if (opts.nice) setNiceness(opts.nice);
  const lts = nodeVersion(opts.node);
  const load0 = loadavg();
  const machine = {
    cores: cpus().length, cpu: cpus()[0]?.model ?? '?', memGiB: (totalmem() / 2 ** 30).toFixed(1), kernel: release(),
    lts, harnessNode: process.versions.node,
    sipp: (() => { try { return /SIPp\s+(v?[\d.]+)/.exec(execFileSync('sipp', ['-v'], { encoding: 'utf8' }))?.[1]; } catch (e) { return /SIPp\s+(v?[\d.]+)/.exec(`${e.stdout ?? ''}`)?.[1] ?? '?'; } })(),
    redis: /v=(\S+)/.exec(execFileSync('redis-server', ['--version'], { encoding: 'utf8' }))?.[1] ?? '?',
    commit: (() => { try { return execFileSync('git', ['rev-parse', '--short', 'HEAD'], { cwd: ROOT, encoding: 'utf8' }).trim(); } catch { return '?'; } })(),
    loadavgAtStart: load0.map((x) => x.toFixed(2)),
  };
  log(`LTS node ${lts} (${opts.node}); ${machine.cores} × ${machine.cpu}; load average ${machine.loadavgAtStart.join(' ')}`);
  const redis = await startRedis(tmp);
  const users = benchUsers(opts.users);
  const res = { stamp, date: new Date().toISOString(), opts, machine, fineClock: !!preload, ladders: {}, check: null, contrast: null };
  try {
    for (const workers of [1, 2]) {
      const name = `edge-redis-${workers}w`;
      await withEdge({ name, node: opts.node, workers, redis, users, tmp }, async ({ target, files, udpMode }) => {
        res.ladders[workers] = { udpMode, ...(await ladder({ name, target, files, preload, redisPid: redis.pid, tmp })) };
        if (workers === 2 && res.ladders[1].top > 0) {
          await settle(target.pid);
          res.check = await checkStep({ name, target, files, preload, redisPid: redis.pid, tmp, rate: res.ladders[1].top });
        }
      });
    }
    if (opts.contrast && res.ladders[1].top > 0) {
      const name = `edge-redis-2w-node${process.versions.node.split('.')[0]}`;
      await withEdge({ name, node: process.execPath, workers: 2, redis, users, tmp }, async ({ target, files, udpMode }) => {
        await runStep({ sippTransport, root: ROOT, dir: join(tmp, 'steps', `${name}-warm`), target, transport: 'udp', rate: 2000, seconds: opts.warmS, files, preload, extraPids: [redis.pid] });
        res.contrast = { node: process.versions.node, udpMode, ...(await checkStep({ name, target, files, preload, redisPid: redis.pid, tmp, rate: res.ladders[1].top })) };
      });
    }
  } finally {
    await redis.stop();
  }
  machine.loadavgAtEnd = loadavg().map((x) => x.toFixed(2));
  machine.seconds = Math.round((Date.now() - T0) / 1000);

  const md = report(res);
  process.stdout.write(md);
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  const base = join(ROOT, 'bench/results', `${stamp.replace('T', '-')}-workers`);
  writeFileSync(`${base}.md`, md);
  writeFileSync(`${base}.json`, JSON.stringify(res, null, 1));
  log(`wrote ${base}.md and .json`);
}

function report(r) {
  const m = r.machine;
  const n = (x) => x.toLocaleString('en-US');
  const med = (xs) => {
    const s = [...xs].sort((a, b) => a - b);
    return s.length ? s[Math.floor(s.length / 2)] : 0;
  };
  const l1 = r.ladders[1];
  const l2 = r.ladders[2];
  const ratio = l1?.top && l2?.top && l1.topFound && l2.topFound ? (l2.top / l1.top).toFixed(2) : null;
  const out = [];
  out.push(`# sip-edge: UDP with 1 and 2 workers — ${r.date.replace('T', ' ').slice(0, 19)} UTC`, '');
  out.push(
    `Machine: ${m.cores} × ${m.cpu}, ${m.memGiB} GiB, Linux ${m.kernel}. sip-edge at ${m.commit}, edge on Node ${m.lts} ` +
      `(harness Node ${m.harnessNode}), SIPp ${m.sipp}, Redis ${m.redis}; SIPp, the edge and Redis share the cores. ` +
      `Load average at start ${m.loadavgAtStart.join(' / ')}, at end ${m.loadavgAtEnd.join(' / ')} (other jobs on the machine). ` +
      `Run took ${n(m.seconds)} s; ${r.opts.stepS} s steps, ${n(r.opts.users)} endpoints, two SIPp processes at half the rate each ` +
      `(REGISTER → 401 → REGISTER with digest → 200 = one registration), ` +
      (r.opts.sources === 'process' ? 'each SIPp from one UDP socket (`-t u1`).' : 'each call from its own UDP socket (`-t un`: many source ports, as from many phones).'),
    '',
  );
  out.push('| edge on Redis, UDP | UDP sockets | highest sustained registrations/s | CPU of other jobs during its steps, median |', '|---|---|---:|---:|');
  for (const w of [1, 2]) {
    const l = r.ladders[w];
    if (!l) continue;
    out.push(`| SIP_WORKERS=${w} | ${w === 1 ? 'one process' : l.udpMode} | ${n(l.top)}${l.topFound ? '' : ' (ladder ended before a failed step)'} | ${med(l.steps.map((s) => s.otherJobsCpu))} % |`);
  }
  out.push('', ratio ? `**2 workers / 1 worker: ${ratio}×** (aim ≥ 1.5×).` : '2 workers / 1 worker: no ratio (a ladder did not reach a step it could not sustain).', '');
  if (r.check) {
    const c = r.check;
    const causes = Object.entries(c.causes).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
    out.push(
      `At the 1-worker top (${n(c.rate)}/s) on the 2-worker edge: ${n(c.ok)} of ${n(c.planned)} registrations succeeded, ` +
        `${n(c.failed)} failed (by cause: ${causes}), ${n(c.retrans)} retransmissions; p50 ${c.p50?.toFixed(2)} ms, p99 ${c.p99?.toFixed(2)} ms; edge CPU ${c.serverCpu} %, other jobs ${c.otherJobsCpu} %.`,
      '',
    );
  }
  if (r.contrast) {
    const c = r.contrast;
    const causes = Object.entries(c.causes).map(([k, v]) => `${k} ${v}`).join(', ') || 'none';
    out.push(
      `Contrast, the same step with 2 workers on Node ${c.node} (${c.udpMode} UDP socket): ${n(c.ok)} of ${n(c.planned)} succeeded, ` +
        `${n(c.failed)} failed (by cause: ${causes}), ${n(c.retrans)} retransmissions; edge CPU ${c.serverCpu} %, other jobs ${c.otherJobsCpu} %.`,
      '',
    );
  }
  out.push('Sustained = at least 99.9 % of the planned registrations succeeded, the achieved rate was at least 95 % of the target, and retransmissions did not grow (as in bench/README.md).', '');
  for (const w of [1, 2]) {
    const l = r.ladders[w];
    if (!l) continue;
    out.push(`### SIP_WORKERS=${w}`, '', '| target/s | achieved/s | ok | failed | retrans | p50 ms | p99 ms | edge CPU % | edge µs/registration | SIPp CPU % | Redis CPU % | other jobs CPU % | |', '|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|');
    for (const s of l.steps) {
      const us = s.achieved ? Math.round((s.serverCpu / 100) * 1e6 / s.achieved) : 0;
      out.push(`| ${n(s.rate)} | ${n(s.achieved)} | ${n(s.ok)} | ${n(s.failed)} | ${n(s.retrans)} | ${s.p50?.toFixed(2)} | ${s.p99?.toFixed(2)} | ${s.serverCpu} | ${us} | ${s.sippCpu} | ${s.redisCpu} | ${s.otherJobsCpu} | ${s.sustained ? 'sustained' : 'not sustained'}${s.retried ? ', retried' : ''} |`);
    }
    out.push('');
  }
  out.push(`Reproduce: \`node bench/workers.mjs${r.opts.contrast ? ' --contrast' : ''}${r.opts.sources === 'process' ? ' --sources=process' : ''}\` (after \`test/setup.sh\`, which installs the LTS node).`, '');
  return out.join('\n');
}

main().catch((e) => {
  process.stderr.write(`${e.stack ?? e}\n`);
  process.exit(1);
});
