// SIPp driving: one ladder step = two SIPp processes at half the rate each.
import { mkdirSync, readdirSync, readFileSync, writeFileSync, existsSync, rmSync } from 'node:fs';
import { join } from 'node:path';
import { injection } from '../../test/support/sipp-injection.mjs';
import { execFileSync } from 'node:child_process';
import { childrenCpuMeter, cpuMeter, freePort, have, machineCpuMeter, start, stop, sleep } from './proc.mjs';

/** LD_PRELOAD shim giving SIPp a precise clock (else its times come in 4 ms steps); null without a C compiler. */
export function buildFineClock(root, tmp) {
  const out = join(tmp, 'fineclock.so');
  for (const cc of ['cc', 'gcc']) {
    if (!have(cc)) continue;
    try {
      execFileSync(cc, ['-O2', '-shared', '-fPIC', '-o', out, join(root, 'bench/sipp/fineclock.c'), '-ldl'], { stdio: 'ignore' });
      return out;
    } catch {
      /* try next */
    }
  }
  return null;
}

/** Write the injection file(s): `parts` files, users dealt round-robin-free in contiguous halves. */
export function writeInjection(dir, name, users, domain, parts = 2) {
  mkdirSync(dir, { recursive: true });
  const per = Math.ceil(users.length / parts);
  const files = [];
  for (let p = 0; p < parts; p++) {
    const slice = users.slice(p * per, (p + 1) * per);
    const f = join(dir, `${name}-${p}.csv`);
    writeFileSync(f, injection(slice.map((u) => ({ ...u, domain }))));
    files.push(f);
  }
  return files;
}

function parseStat(file) {
  if (!existsSync(file)) return null;
  const lines = readFileSync(file, 'utf8').trim().split('\n');
  const head = lines[0].split(';');
  const rows = lines.slice(1).map((l) => {
    const f = l.split(';');
    return (name) => Number(f[head.indexOf(name)]);
  });
  return rows;
}

function readRtts(dir) {
  const out = [];
  for (const f of readdirSync(dir)) {
    if (!f.endsWith('_rtt.csv')) continue;
    const lines = readFileSync(join(dir, f), 'utf8').split('\n');
    for (let i = 1; i < lines.length; i++) {
      const l = lines[i];
      if (!l) continue;
      const a = l.indexOf(';');
      const b = l.indexOf(';', a + 1);
      const v = Number(l.slice(a + 1, b));
      if (Number.isFinite(v)) out.push(v);
    }
  }
  return out;
}

export function percentile(sorted, p) {
  if (sorted.length === 0) return NaN;
  const i = Math.min(sorted.length - 1, Math.max(0, Math.ceil((p / 100) * sorted.length) - 1));
  return sorted[i];
}

/**
 * Run one step: `rate` registrations/s in total for `seconds`, over `transport`,
 * against `target` ({ports:{udp,tcp}, pid, cpuTree}) using the injection `files`
 * (one per SIPp process). Returns the step's measurements.
 */
export async function runStep({ root, dir, target, transport, rate, seconds, files, scenario = 'register.xml', preload, extraPids = [], cooldownMs = 5000, sippTransport }) {
  rmSync(dir, { recursive: true, force: true });
  mkdirSync(dir, { recursive: true });
  const n = files.length;
  // Distinct local ports chosen here: two SIPps started together both try 5060 otherwise.
  const localPorts = [];
  for (let i = 0; i < n; i++) localPorts.push(await freePort());
  const perRate = rate / n;
  const calls = Math.max(1, Math.round(perRate * seconds));
  const limit = Math.max(500, Math.round(perRate));
  const procs = [];
  const env = { ...process.env, ...(preload ? { LD_PRELOAD: preload } : {}) };
  const serverCpu = cpuMeter([target.pid], { tree: !!target.cpuTree });
  const otherCpu = extraPids.map((p) => cpuMeter([p]));
  serverCpu.begin();
  otherCpu.forEach((m) => m.begin());
  const harnessCpu0 = process.cpuUsage();
  const machine = machineCpuMeter();
  const t0 = Date.now();
  for (let i = 0; i < n; i++) {
    const d = join(dir, `sipp${i}`);
    mkdirSync(d, { recursive: true });
    const args = [
      `127.0.0.1:${target.ports[transport]}`,
      '-sf', join(root, 'bench/sipp', scenario),
      '-inf', files[i],
      // u1/t1: one socket per SIPp process; `sippTransport: 'un'`: one UDP socket (source port) per call.
      '-t', sippTransport ?? (transport === 'udp' ? 'u1' : 't1'),
      '-i', '127.0.0.1',
      '-p', String(localPorts[i]),
      // SIPp's default socket buffers are 64 KiB: bursts at high rates would be dropped there.
      '-buff_size', '4194304',
      '-m', String(calls),
      '-r', perRate.toFixed(3).replace(/\.?0+$/, ''),
      '-l', String(limit),
      '-key', 'expires', '3600',
      '-nostdin',
      '-trace_stat', '-stf', join(d, 'stat.csv'), '-fd', '1',
      '-trace_rtt', '-rtt_freq', '100',
      '-recv_timeout', '8000',
      '-timeout', String(seconds + 40),
      '-max_recv_loops', '10000',
      '-max_sched_loops', '10000',
      // One socket per call needs a cap under the open-files limit (SIPp refuses to start otherwise).
      ...(sippTransport === 'un' ? ['-max_socket', '8000'] : []),
    ];
    procs.push(start('sipp', args, { cwd: d, env, logFile: join(d, 'sipp.out') }));
  }
  // SIPp processes are our direct children: their CPU shows up in our cutime/cstime once reaped.
  const sippCpu = childrenCpuMeter(t0);
  const guard = setTimeout(() => procs.forEach((p) => void stop(p, 1000)), (seconds + 60) * 1000);
  await Promise.all(procs.map((p) => p.exited));
  clearTimeout(guard);
  const wall = (Date.now() - t0) / 1000;
  const machineCpu = machine.end();
  const hc = process.cpuUsage(harnessCpu0);
  const harnessCpu = ((hc.user + hc.system) / 1e6 / wall) * 100;
  const res = {
    rate,
    transport,
    seconds,
    wall,
    serverCpu: serverCpu.end(),
    sippCpu: sippCpu.end(),
    otherCpu: otherCpu.map((m) => m.end()),
    machineCpu,
    harnessCpu,
    planned: calls * n,
    created: 0,
    ok: 0,
    failed: 0,
    retrans: 0,
    retransFirstHalf: 0,
    retransSecondHalf: 0,
    exitCodes: [],
  };
  for (let i = 0; i < n; i++) {
    const rows = parseStat(join(dir, `sipp${i}`, 'stat.csv'));
    res.exitCodes.push(procs[i].exitCode);
    if (!rows || rows.length === 0) continue;
    const last = rows[rows.length - 1];
    res.created += last('OutgoingCall(C)');
    res.ok += last('SuccessfulCall(C)');
    res.failed += last('FailedCall(C)');
    res.retrans += last('Retransmissions(C)');
    // Retransmissions per periodic row (1 s each), split into the two halves of the step.
    const half = Math.ceil(seconds / 2);
    rows.forEach((r, k) => {
      const v = r('Retransmissions(P)') || 0;
      if (k <= half) res.retransFirstHalf += v;
      else res.retransSecondHalf += v;
    });
  }
  const rtts = readRtts(join(dir, 'sipp0')).concat(...Array.from({ length: n - 1 }, (_, i) => readRtts(join(dir, `sipp${i + 1}`))));
  rtts.sort((a, b) => a - b);
  res.samples = rtts.length;
  // CPU used on this machine by anything but the server, SIPp, Redis and this harness
  // (other people's jobs, kernel softirq work not charged to a process).
  res.foreignCpu = Math.max(0, res.machineCpu - res.serverCpu - res.sippCpu - res.otherCpu.reduce((a, b) => a + b, 0) - harnessCpu);
  res.p50 = percentile(rtts, 50);
  res.p99 = percentile(rtts, 99);
  res.max = rtts.length ? rtts[rtts.length - 1] : NaN;
  // Achieved: successful registrations over the time SIPp needed to place and finish them.
  res.achieved = res.ok / Math.max(wall, seconds);
  const attempted = res.ok + res.failed;
  res.successRatio = res.planned ? res.ok / res.planned : 0;
  // Retransmissions "grow" when the second half has clearly more than the first.
  res.retransGrowing = res.retransSecondHalf > 2 * res.retransFirstHalf + 0.001 * (res.planned / 2);
  res.sustained =
    res.successRatio >= 0.999 && attempted >= 0.999 * res.planned && res.achieved >= 0.95 * rate && !res.retransGrowing;
  // An overloaded server may still be draining queues (Redis commands, retransmissions):
  // let it settle before the next step so that step is not charged for this one.
  await sleep(res.sustained ? 300 : cooldownMs);
  return res;
}
