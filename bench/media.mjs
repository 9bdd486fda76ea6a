#!/usr/bin/env node
// Calls per second through a media relay: short calls (INVITE with an RTP/AVP offer →
// 100/180/200 → ACK → BYE → 200) from a SIPp UAC to a SIPp UAS, over UDP on loopback,
// through three systems measured side by side in one run:
//
//   edge            sip-edge without a relay (no RTPENGINE_NG: the SDP goes through as sent)
//   edge-rtpengine  sip-edge with MEDIA_RELAY=always and its own rtpengine
//   kamailio-rtpengine  Kamailio (bench/kamailio/media.cfg: rtpengine_manage() on the
//                   INVITE, replies, ACK and BYE) with its own rtpengine. Kamailio does
//                   NOT authenticate; sip-edge challenges each INVITE (407, ACK, INVITE
//                   with credentials), one more transaction per call.
//
// The UAS registers at each system from the port it then answers on (the edge: as an
// endpoint of an account created over the partner API with a high cps_limit; Kamailio:
// usrloc), so each system forwards the INVITE by a location lookup.
//
// Ladder: every rate (calls/s) for --step seconds on every system in turn, so the systems
// share the machine's conditions at each rate; a system leaves the ladder after its first
// step with a failed call or an achieved rate below 95 % of the target. Per step: achieved
// calls/s, failures, retransmissions, p50/p99 setup time (SIPp timer: first INVITE sent →
// 200 received), CPU per call of the proxy (process tree, /proc/<pid>/stat) and of its
// rtpengine, and after each step the sessions rtpengine still holds (NG `list`; must be 0).
//
//   node bench/media.mjs [--rates=50,100,200,400,600,800,1200] [--step=5] [--hold=0]
//                        [--systems=edge,edge-rtpengine,kamailio-rtpengine]
//                        [--rtp-threads=2] [--warmup=3] [--no-install] [--no-build] [--nice=-10]
//
// --hold: ms between the ACK and the BYE. --warmup: seconds at 50 calls/s on every system
// before the ladder (not reported; JIT and caches warm, the first calls' costs not counted).
// Each system's CPU at rest (2 s, before the ladder) is reported: it is in every step's
// CPU per call, so it weighs most at low rates.
//
// Writes bench/results/<date>-media.md (+ .json) and prints the table.
import { execSync, spawnSync } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import os from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { decode } from '../dist/media/bencode.js';
import { startRtpengine } from '../test/support/rtpengine.mjs';
import { injection } from '../test/support/sipp-injection.mjs';
import { createAccount, createEndpoints, startEdge } from './lib/edge.mjs';
import { optionsPing } from './lib/kamailio.mjs';
import { buildFineClock, percentile } from './lib/sipp.mjs';
import { childrenCpuMeter, cpuMeter, freePort, have, machineCpuMeter, setNiceness, sleep, start, stop, waitFor } from './lib/proc.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const TMP = join(ROOT, 'bench/.tmp/media');

function opt(name, dflt) {
  const a = process.argv.find((x) => x === `--${name}` || x.startsWith(`--${name}=`));
  if (a) return a.includes('=') ? a.slice(a.indexOf('=') + 1) : 'true';
  const env = process.env[`BENCH_${name.toUpperCase().replace(/-/g, '_')}`];
  return env ?? dflt;
}
const opts = {
  rates: opt('rates', '50,100,200,400,600,800,1200').split(',').map(Number),
  step: Number(opt('step', '5')),
  hold: Number(opt('hold', '0')),
  warmup: Number(opt('warmup', '3')),
  systems: opt('systems', 'edge,edge-rtpengine,kamailio-rtpengine').split(','),
  rtpThreads: Number(opt('rtp-threads', '2')),
  install: opt('no-install', 'false') !== 'true',
  build: opt('no-build', 'false') !== 'true',
  nice: Number(opt('nice', '-10')),
};

const log = (...a) => console.error(`[media ${new Date().toISOString().slice(11, 19)}]`, ...a);
const CALLER = { user: 'mcaller', password: 'bench-caller-password-1' };
const CALLEE = { user: 'mcallee', password: 'bench-callee-password-2' };
const KAMAILIO_DOMAIN = 'kamailio.localhost';
// RTP ports per rtpengine: 4 a call (two legs, RTP + RTCP), so 2,000 concurrent calls; a
// proxy falling behind holds calls open longer, and a smaller range then fails calls with
// "Ran out of ports" before the proxy itself does.
const RTP_PORTS = 8000;

// ---------------------------------------------------------------- rtpengine over NG

/** One NG request to 127.0.0.1:port; resolves the reply's text (bencode, latin1). */
function ng(port, dict, timeoutMs = 1000) {
  return new Promise((resolve, reject) => {
    const s = createSocket('udp4');
    const cookie = `mb${Math.random().toString(36).slice(2, 10)}`;
    const t = setTimeout(() => {
      s.close();
      reject(new Error(`NG ${dict} to ${port}: no answer`));
    }, timeoutMs);
    s.on('message', (m) => {
      const text = m.toString('latin1');
      if (!text.startsWith(`${cookie} `)) return;
      clearTimeout(t);
      s.close();
      resolve(text.slice(cookie.length + 1));
    });
    s.send(Buffer.from(`${cookie} ${dict}`, 'latin1'), port, '127.0.0.1');
  });
}

/** Sessions rtpengine holds: NG `list` (call-ids, up to `limit`) → their count. */
async function rtpSessions(port) {
  const text = await ng(port, 'd7:command4:list5:limiti100000ee');
  const i = text.indexOf('5:callsl');
  if (!text.includes('6:result2:ok') || i < 0) throw new Error(`NG list: unexpected reply ${text.slice(0, 200)}`);
  // The list holds byte strings `<len>:<call-id>` up to its closing `e`.
  let n = 0;
  let p = i + '5:callsl'.length;
  while (text[p] !== 'e') {
    const c = text.indexOf(':', p);
    p = c + 1 + Number(text.slice(p, c));
    n++;
  }
  return n;
}

/** rtpengine's own counters (NG `statistics`): sessions now, and managed / ended by delete / timed out / rejected since start. */
async function rtpStats(port) {
  const text = await ng(port, 'd7:command10:statisticse');
  const st = decode(Buffer.from(text, 'latin1'), { strings: 'utf8' }).statistics;
  const cur = st.currentstatistics;
  const tot = st.totalstatistics;
  return {
    sessionsNow: cur.sessionsown + (cur.sessionsforeign ?? 0),
    managed: tot.managedsessions,
    deleted: tot.regularterminatedsessions,
    timedOut: tot.timeoutsessions,
    rejected: tot.rejectedsessions,
  };
}

// ---------------------------------------------------------------- Kamailio


async function startKamailioMedia(rtpNgPort) {
  const dir = join(TMP, 'kamailio');
  mkdirSync(dir, { recursive: true });
  const port = await freePort();
  const logFile = join(TMP, 'kamailio.log');
  const args = [
    '-f', join(ROOT, 'bench/kamailio/media.cfg'), '-DD', '-E', '-m', '256', '-M', '16', '-w', dir, '-P', join(dir, 'kamailio.pid'),
    '-l', `udp:127.0.0.1:${port}`,
    '-A', 'CHILDREN=2',
    '-A', `RTPENGINE_SOCK="udp:127.0.0.1:${rtpNgPort}"`,
  ];
  const child = start('kamailio', args, { logFile, cwd: dir });
  await waitFor(
    async () => {
      if (child.exitCode !== null) throw new Error(`kamailio exited (${child.exitCode}); see ${logFile}:\n${readFileSync(logFile, 'utf8').slice(-3000)}`);
      return optionsPing(port, `sip:127.0.0.1:${port}`);
    },
    30000,
    'kamailio to answer OPTIONS',
    300,
  );
  return { pid: child.pid, port, logFile, stop: () => stop(child, 10000) };
}

// ---------------------------------------------------------------- SIPp

function parseStat(file) {
  if (!existsSync(file)) return null;
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  const head = lines[0].split(';');
  const last = lines[lines.length - 1].split(';');
  return (name) => Number(last[head.indexOf(name)]);
}

function readRtts(dir) {
  const out = [];
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('_rtt.csv')) continue;
    for (const l of readFileSync(join(dir, f), 'utf8').split('\n').slice(1)) {
      const v = Number(l.split(';')[1]);
      if (l && Number.isFinite(v)) out.push(v);
    }
  }
  return out.sort((a, b) => a - b);
}

const sippEnv = (preload) => ({ ...process.env, ...(preload ? { LD_PRELOAD: preload } : {}) });

/** Register the callee from `uasPort` (media-register.xml); throws unless it got its 200. */
async function registerUas(sys, preload) {
  const d = join(TMP, `${sys.name}-register`);
  rmSync(d, { recursive: true, force: true });
  mkdirSync(d, { recursive: true });
  const inf = join(d, 'callee.csv');
  writeFileSync(inf, injection([{ ...CALLEE, domain: sys.domain }]));
  const p = start('sipp', [
    `127.0.0.1:${sys.port}`, '-sf', join(ROOT, 'bench/sipp/media-register.xml'), '-inf', inf,
    '-t', 'u1', '-i', '127.0.0.1', '-p', String(sys.uasPort), '-m', '1', '-nostdin', '-timeout', '15', '-trace_err',
  ], { cwd: d, env: sippEnv(preload), logFile: join(d, 'sipp.out') });
  const code = await p.exited;
  if (code !== 0) throw new Error(`${sys.name}: registering the UAS failed (SIPp exit ${code}); see ${d}`);
}

/** One step: `rate` calls/s for `seconds` on `sys`. */
async function callStep(sys, rate, seconds, preload) {
  const dir = join(TMP, `${sys.name}-${rate}`);
  rmSync(dir, { recursive: true, force: true });
  const uacDir = join(dir, 'uac');
  const uasDir = join(dir, 'uas');
  mkdirSync(uacDir, { recursive: true });
  mkdirSync(uasDir, { recursive: true });
  const calls = Math.max(1, Math.round(rate * seconds));
  const inf = join(uacDir, 'caller.csv');
  writeFileSync(inf, injection([{ ...CALLER, domain: sys.domain }]));
  const env = sippEnv(preload);
  const common = ['-t', 'u1', '-i', '127.0.0.1', '-buff_size', '4194304', '-nostdin', '-max_recv_loops', '10000', '-max_sched_loops', '10000'];

  const cpu = cpuMeter([sys.pid], { tree: true });
  const rtpCpu = sys.rtp ? cpuMeter([sys.rtp.pid]) : null;
  const machine = machineCpuMeter();
  const t0 = Date.now();
  const sippCpu = childrenCpuMeter(t0);
  const harness0 = process.cpuUsage();
  cpu.begin();
  rtpCpu?.begin();
  const uas = start('sipp', [
    '-sf', join(ROOT, 'bench/sipp/media-uas.xml'), '-p', String(sys.uasPort), '-s', CALLEE.user,
    '-m', String(calls), '-timeout', String(seconds + 30), '-trace_stat', '-stf', join(uasDir, 'stat.csv'), '-fd', '1', ...common,
  ], { cwd: uasDir, env, logFile: join(uasDir, 'sipp.out') });
  await sleep(300); // SIPp binds its port before it reads the scenario's first message
  const uac = start('sipp', [
    `127.0.0.1:${sys.port}`, '-sf', join(ROOT, 'bench/sipp', sys.auth ? 'media-uac.xml' : 'media-uac-noauth.xml'), '-inf', inf,
    '-p', String(await freePort()), '-key', 'callee', CALLEE.user, '-d', String(opts.hold),
    '-m', String(calls), '-r', String(rate), '-l', String(Math.max(1000, rate * 4)),
    '-recv_timeout', '8000', '-timeout', String(seconds + 30),
    '-trace_stat', '-stf', join(uacDir, 'stat.csv'), '-fd', '1', '-trace_rtt', '-rtt_freq', '1', '-trace_err', ...common,
  ], { cwd: uacDir, env, logFile: join(uacDir, 'sipp.out') });
  const uacCode = await uac.exited;
  const uacWall = (Date.now() - t0) / 1000 - 0.3;
  // The UAS ends by itself after its last BYE; one that waits for calls the UAC gave up on is stopped.
  const uasCode = await Promise.race([uas.exited, sleep(3000).then(() => 'waiting')]);
  if (uasCode === 'waiting') await stop(uas, 1000);
  const wall = (Date.now() - t0) / 1000;
  const proxyCpu = cpu.end();
  const rtpengineCpu = rtpCpu?.end() ?? 0;
  const machineCpu = machine.end();
  const hc = process.cpuUsage(harness0);
  const s = parseStat(join(uacDir, 'stat.csv'));
  const su = parseStat(join(uasDir, 'stat.csv'));
  const rtts = readRtts(uacDir);
  const ok = s ? s('SuccessfulCall(C)') : 0;
  const failed = s ? s('FailedCall(C)') : calls;
  const res = {
    system: sys.name,
    rate,
    seconds,
    planned: calls,
    ok,
    failed: failed + Math.max(0, calls - ok - failed),
    uasFailed: su ? su('FailedCall(C)') : null,
    retrans: s ? s('Retransmissions(C)') : null,
    uacExit: uacCode,
    achieved: ok / Math.max(uacWall, seconds),
    p50: percentile(rtts, 50),
    p99: percentile(rtts, 99),
    samples: rtts.length,
    wall,
    // CPU in percent of one core over the step, and CPU-ms per successful call.
    proxyCpu,
    rtpengineCpu,
    sippCpu: sippCpu.end(),
    harnessCpu: ((hc.user + hc.system) / 1e6 / wall) * 100,
    machineCpu,
  };
  res.proxyMsPerCall = ok ? (proxyCpu / 100) * wall * 1000 / ok : NaN;
  res.rtpengineMsPerCall = ok && sys.rtp ? (rtpengineCpu / 100) * wall * 1000 / ok : null;
  res.foreignCpu = Math.max(0, machineCpu - proxyCpu - rtpengineCpu - res.sippCpu - res.harnessCpu);
  res.sustained = res.failed === 0 && res.achieved >= 0.95 * rate;
  // Leftover sessions on this system's rtpengine once the calls are over.
  if (sys.rtp) {
    await sleep(500);
    res.rtpSessionsAfter = await rtpSessions(sys.rtp.ngPort);
    res.rtpStats = await rtpStats(sys.rtp.ngPort);
  }
  return res;
}

// ---------------------------------------------------------------- report

const f1 = (v) => (Number.isFinite(v) ? v.toFixed(1) : '–');
const f2 = (v) => (Number.isFinite(v) ? v.toFixed(2) : '–');
const f3 = (v) => (Number.isFinite(v) ? v.toFixed(3) : '–');

function report(results) {
  const L = [];
  L.push(`# Media bench ${results.date.slice(0, 16).replace('T', ' ')} UTC`);
  L.push('');
  L.push(`\`node bench/media.mjs ${process.argv.slice(2).join(' ')}\`${process.argv.length > 2 ? '' : ' (defaults)'} — ${results.machine}.`);
  L.push('');
  L.push('Short calls (INVITE with an RTP/AVP offer → 100/180/200 → ACK → BYE → 200, hold ' + `${opts.hold} ms), SIPp UAC → proxy → SIPp UAS, UDP on 127.0.0.1. ` +
    `Every rate runs ${opts.step} s on every system in turn; a system stops at its first step with a failed call or below 95 % of the rate. ` +
    'CPU per call = CPU time of the process (tree) during the step / successful calls. ' +
    `rtpengine ${results.rtpengineVersion}, userspace (\`--table=-1\`, \`--num-threads=${opts.rtpThreads}\`, \`--delete-delay=0\`), one per relayed system; no RTP flows (SIPp sends no media): the relay cost is the NG offer/answer/delete.`);
  L.push('');
  L.push('- `edge`: sip-edge without a relay (no `RTPENGINE_NG`), SDP passed through.');
  L.push('- `edge-rtpengine`: sip-edge with `MEDIA_RELAY=always`.');
  L.push('- `kamailio-rtpengine`: Kamailio ' + results.kamailioVersion + ' (`bench/kamailio/media.cfg`, 2 UDP workers, `rtpengine_manage()`), **no authentication**: sip-edge challenges every INVITE (407 → ACK → INVITE with credentials: one more transaction per call, included in its setup time and CPU).');
  L.push('');
  L.push('| system | target/s | achieved/s | ok | failed | retrans | setup p50 ms | setup p99 ms | proxy CPU % | proxy CPU ms/call | rtpengine CPU % | rtpengine ms/call | proxy+rtpengine ms/call | rtpengine sessions after | other jobs CPU % |');
  L.push('|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|');
  for (const r of results.steps) {
    const both = r.rtpengineMsPerCall === null ? r.proxyMsPerCall : r.proxyMsPerCall + r.rtpengineMsPerCall;
    L.push(`| ${r.system} | ${r.rate} | ${f1(r.achieved)} | ${r.ok} | ${r.failed}${r.sustained ? '' : ' ✗'} | ${r.retrans ?? '–'} | ${f2(r.p50)} | ${f2(r.p99)} | ${f1(r.proxyCpu)} | ${f3(r.proxyMsPerCall)} | ${r.rtpengineMsPerCall === null ? '–' : f1(r.rtpengineCpu)} | ${r.rtpengineMsPerCall === null ? '–' : f3(r.rtpengineMsPerCall)} | ${f3(both)} | ${r.rtpSessionsAfter ?? '–'} | ${f1(r.foreignCpu)} |`);
  }
  L.push('');
  L.push('Ratios at the same rate, same run, from sustained steps only (CPU per call; < 1: the edge uses less):');
  L.push('');
  L.push('| target/s | edge-rtpengine / kamailio-rtpengine (proxy) | (proxy + rtpengine) | edge-rtpengine / edge (relay cost, proxy) | setup p50 edge-rtpengine / kamailio-rtpengine |');
  L.push('|---|---|---|---|---|');
  for (const rate of opts.rates) {
    // Only steps every compared system sustained: an overloaded step's CPU and latency say little.
    const get = (n) => results.steps.find((r) => r.system === n && r.rate === rate && r.sustained);
    const e = get('edge-rtpengine');
    const k = get('kamailio-rtpengine');
    const p = get('edge');
    if (!(e && k) && !(e && p)) continue;
    const both = (r) => r.proxyMsPerCall + (r.rtpengineMsPerCall ?? 0);
    L.push(`| ${rate} | ${e && k ? f2(e.proxyMsPerCall / k.proxyMsPerCall) : '–'} | ${e && k ? f2(both(e) / both(k)) : '–'} | ${e && p ? f2(e.proxyMsPerCall / p.proxyMsPerCall) : '–'} | ${e && k ? f2(e.p50 / k.p50) : '–'} |`);
  }
  L.push('');
  L.push('Top sustained rate (of the ladder) per system:');
  L.push('');
  for (const name of opts.systems) {
    const ok = results.steps.filter((r) => r.system === name && r.sustained);
    const top = ok.length ? ok[ok.length - 1] : null;
    const stopped = results.steps.find((r) => r.system === name && !r.sustained);
    L.push(`- \`${name}\`: ${top ? `${top.rate}/s (achieved ${f1(top.achieved)}/s)` : 'none'}${stopped ? `; stopped at ${stopped.rate}/s (${stopped.failed} failed, ${f1(stopped.achieved)}/s achieved)` : '; never failed (the ladder ended)'}.`);
  }
  L.push('');
  const calls = (n) => results.steps.filter((r) => r.system === n).reduce((a, r) => a + r.ok, 0);
  L.push('rtpengine sessions 0.5 s after each step (NG `list`): ' +
    (results.steps.every((r) => r.rtpSessionsAfter === undefined || r.rtpSessionsAfter === 0) ? '0 after every step.' : 'not always 0: see the table (a failed step leaves the sessions of calls the UAC gave up on; rtpengine times them out).'));
  L.push('');
  L.push('| rtpengine of | sessions at the end | managed since start | ended by delete | timed out | rejected | successful calls (incl. warm-up) |');
  L.push('|---|---|---|---|---|---|---|');
  for (const [n, st] of Object.entries(results.rtpStatsAtEnd)) {
    L.push(`| ${n} | ${results.rtpLeftAtEnd[n]} (list) / ${st.sessionsNow} (statistics) | ${st.managed} | ${st.deleted} | ${st.timedOut} | ${st.rejected} | ${calls(n) + (results.warmupOk?.[n] ?? 0)} |`);
  }
  for (const [n, lines] of Object.entries(results.ngDeletes)) L.push('', `${n}'s NG requests (its \`sip_media_engine_requests_total\`): ${lines.join(', ')}.`);
  L.push('');
  if (results.notes.length) {
    L.push('');
    for (const n of results.notes) L.push(`- ${n}`);
  }
  return L.join('\n') + '\n';
}

// ---------------------------------------------------------------- main

async function main() {
  const need = [['sipp', 'sip-tester'], ['rtpengine', 'rtpengine-daemon'], ['kamailio', 'kamailio']].filter(([c]) => !have(c) && !existsSync(`/usr/sbin/${c}`) && !existsSync(`/usr/bin/${c}`));
  if (need.length) {
    if (!opts.install) throw new Error(`missing: ${need.map((n) => n[1]).join(' ')}`);
    const env = { ...process.env, DEBIAN_FRONTEND: 'noninteractive' };
    execSync('apt-get update -qq', { stdio: 'inherit', env });
    execSync(`apt-get install -y -qq --no-install-recommends ${need.map((n) => n[1]).join(' ')}`, { stdio: 'inherit', env });
  }
  if (opts.build) {
    log('npm run build');
    execSync('npm run build --silent', { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
  }
  rmSync(TMP, { recursive: true, force: true });
  mkdirSync(TMP, { recursive: true });
  if (opts.nice) setNiceness(opts.nice);
  const preload = buildFineClock(ROOT, TMP);
  const stamp = new Date().toISOString().slice(0, 10);
  const version = (cmd, args, re) => {
    const r = spawnSync(cmd, args, { encoding: 'utf8' });
    const m = re.exec(`${r.stdout ?? ''}${r.stderr ?? ''}`);
    return m ? m[1] : '?';
  };
  const results = {
    date: new Date().toISOString(),
    opts,
    machine: `${os.cpus().length} × ${os.cpus()[0]?.model ?? '?'}, Node ${process.version}`,
    rtpengineVersion: version('rtpengine', ['--version'], /Version: (\S+)/),
    kamailioVersion: version('kamailio', ['-v'], /version: kamailio (\S+)/),
    fineClock: !!preload,
    steps: [],
    rtpLeftAtEnd: {},
    rtpStatsAtEnd: {},
    ngDeletes: {},
    notes: [],
  };

  const systems = [];
  const cleanup = [];
  try {
    const rtpArgs = ['--num-threads=' + opts.rtpThreads, '--log-level=4'];
    for (const name of opts.systems) {
      const uasPort = await freePort();
      if (name === 'edge' || name === 'edge-rtpengine') {
        const rtp = name === 'edge-rtpengine' ? await startRtpengine({ rtpPorts: RTP_PORTS, extraArgs: rtpArgs }) : null;
        if (rtp) cleanup.push(() => rtp.dispose());
        const edge = await startEdge({
          root: ROOT, tmp: TMP, name, store: 'memory', listeners: ['udp'],
          env: rtp ? { RTPENGINE_NG: rtp.id, MEDIA_RELAY: 'always' } : { MEDIA_RELAY: 'never' },
        });
        cleanup.push(() => edge.stop());
        // A high call rate needs a high cps_limit (default 10): the partner sets it.
        const account = await createAccount(edge, `Media ${name}`, { cpsLimit: 100000, concurrentCallsLimit: 100000 });
        await createEndpoints(edge, account, [CALLER, CALLEE].map((u) => ({ user: u.user, password: u.password })));
        systems.push({ name, pid: edge.pid, port: edge.ports.udp, domain: account.domain, auth: true, rtp, uasPort, edge });
      } else if (name === 'kamailio-rtpengine') {
        const rtp = await startRtpengine({ rtpPorts: RTP_PORTS, extraArgs: rtpArgs });
        cleanup.push(() => rtp.dispose());
        const k = await startKamailioMedia(rtp.ngPort);
        cleanup.push(() => k.stop());
        systems.push({ name, pid: k.pid, port: k.port, domain: KAMAILIO_DOMAIN, auth: false, rtp, uasPort });
      } else throw new Error(`unknown system ${name}`);
      log(`${name} up`);
    }
    for (const sys of systems) await registerUas(sys, preload);
    if (opts.warmup > 0) {
      for (const sys of systems) {
        const w = await callStep(sys, 50, opts.warmup, preload);
        log(`${sys.name} warm-up: ${w.ok} ok, ${w.failed} failed`);
        (results.warmupOk ??= {})[sys.name] = w.ok;
        if (w.failed) results.notes.push(`${sys.name}: ${w.failed} of ${w.planned} warm-up calls failed (50/s for ${opts.warmup} s).`);
      }
    }
    await sleep(1000);
    const idle = systems.map((sys) => ({ sys, m: cpuMeter([sys.pid], { tree: true }), r: sys.rtp ? cpuMeter([sys.rtp.pid]) : null }));
    idle.forEach((x) => (x.m.begin(), x.r?.begin()));
    await sleep(2000);
    results.idleCpu = {};
    for (const x of idle) {
      results.idleCpu[x.sys.name] = { proxy: x.m.end(), rtpengine: x.r ? x.r.end() : null };
      results.notes.push(`${x.sys.name} at rest (2 s, after the warm-up): proxy ${f1(results.idleCpu[x.sys.name].proxy)} % of a core` + (x.r ? `, rtpengine ${f1(results.idleCpu[x.sys.name].rtpengine)} %.` : '.'));
    }
    log('UAS registered everywhere; ladder', opts.rates.join(','), `× ${opts.step} s`);
    const alive = new Set(systems.map((s) => s.name));
    for (const rate of opts.rates) {
      for (const sys of systems) {
        if (!alive.has(sys.name)) continue;
        const r = await callStep(sys, rate, opts.step, preload);
        results.steps.push(r);
        log(`${sys.name} ${rate}/s: ${r.ok} ok, ${r.failed} failed, ${f1(r.achieved)}/s, p50 ${f2(r.p50)} p99 ${f2(r.p99)} ms, proxy ${f1(r.proxyCpu)} % (${f3(r.proxyMsPerCall)} ms/call)` +
          (sys.rtp ? `, rtpengine ${f1(r.rtpengineCpu)} % (${f3(r.rtpengineMsPerCall)} ms/call), sessions left ${r.rtpSessionsAfter}` : '') + `, other jobs ${f1(r.foreignCpu)} %`);
        if (!r.sustained) {
          alive.delete(sys.name);
          await sleep(3000); // let its queues drain before the next system's step
        }
      }
      if (alive.size === 0) break;
    }
    // After everything: the calls that failed may have left sessions (rtpengine drops them after its --timeout without media).
    await sleep(2000);
    for (const sys of systems) {
      if (!sys.rtp) continue;
      results.rtpLeftAtEnd[sys.name] = await rtpSessions(sys.rtp.ngPort);
      results.rtpStatsAtEnd[sys.name] = await rtpStats(sys.rtp.ngPort);
      if (sys.edge) {
        const m = await (await fetch(`${sys.edge.http}/metrics`)).text();
        results.ngDeletes[sys.name] = [...m.matchAll(/sip_media_engine_requests_total\{engine="[^"]+",command="(offer|answer|delete)",outcome="([a-z_]+)"\} (\d+)/g)].map((x) => `${x[1]} ${x[2]} ${x[3]}`);
      }
    }
  } finally {
    for (const c of cleanup.reverse()) await c().catch(() => {});
  }
  const md = report(results);
  mkdirSync(join(ROOT, 'bench/results'), { recursive: true });
  let base = join(ROOT, 'bench/results', `${stamp}-media`);
  if (existsSync(`${base}.md`)) base = join(ROOT, 'bench/results', `${new Date().toISOString().replace(/:\d\d\.\d+Z$/, '').replace(':', '').replace('T', '-')}-media`);
  writeFileSync(`${base}.md`, md);
  writeFileSync(`${base}.json`, JSON.stringify(results, null, 1));
  process.stdout.write(md);
  log(`wrote ${base}.md`);
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
