// Process, port and /proc helpers of the benchmark harness (Linux only).
import { spawn, execFileSync } from 'node:child_process';
import { openSync, closeSync, readFileSync, readdirSync, existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import os from 'node:os';

export { sleep };

/** Clock ticks per second of /proc/<pid>/stat utime/stime. */
export const CLK_TCK = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK']).toString().trim()) || 100;
  } catch {
    return 100;
  }
})();

// The one free-port helper of tests and benchmarks.
export { freePort } from '../../test/support/ports.mjs';

/** Tracks every child this harness started, so a crash or Ctrl-C stops them by PID. */
const children = new Set();
let hooked = false;
function hookExit() {
  if (hooked) return;
  hooked = true;
  const killAll = () => {
    for (const c of children) {
      try {
        process.kill(c.pid, 'SIGKILL');
      } catch {
        /* gone */
      }
    }
  };
  process.on('exit', killAll);
  for (const sig of ['SIGINT', 'SIGTERM']) {
    process.on(sig, () => {
      killAll();
      process.exit(130);
    });
  }
}

/** Niceness for every process the harness starts (root may go below 0). */
let niceness = 0;
export function setNiceness(n) {
  niceness = n;
  try {
    os.setPriority(n);
  } catch {
    /* not permitted: stay as we are */
  }
}
/** [cmd, args] wrapped in `nice -n N` when a niceness is set. */
export function niced(cmd, args) {
  return niceness !== 0 && have('nice') ? ['nice', ['-n', String(niceness), cmd, ...args]] : [cmd, args];
}

/**
 * Start a process with stdout+stderr written to `logFile`. Returns the child;
 * `child.exited` resolves with the exit code.
 */
export function start(cmd, args, { env, cwd, logFile, stdio } = {}) {
  hookExit();
  const fd = logFile ? openSync(logFile, 'w') : 'ignore';
  [cmd, args] = niced(cmd, args);
  const child = spawn(cmd, args, {
    env: env ?? process.env,
    cwd,
    stdio: stdio ?? ['ignore', fd, fd],
  });
  if (typeof fd === 'number') closeSync(fd);
  children.add(child);
  child.exited = new Promise((resolve) => {
    child.once('exit', (code, signal) => {
      children.delete(child);
      resolve(code ?? signal);
    });
    child.once('error', (e) => {
      children.delete(child);
      resolve(`spawn error: ${e.message}`);
    });
  });
  return child;
}

/** Stop a child by its PID: SIGTERM, then SIGKILL after `graceMs`. */
export async function stop(child, graceMs = 8000) {
  if (!child || child.exitCode !== null || child.signalCode !== null) return;
  try {
    process.kill(child.pid, 'SIGTERM');
  } catch {
    return;
  }
  const t = await Promise.race([child.exited, sleep(graceMs).then(() => 'timeout')]);
  if (t === 'timeout') {
    try {
      process.kill(child.pid, 'SIGKILL');
    } catch {
      /* gone */
    }
    await child.exited;
  }
}

/** Poll `fn` until it returns a truthy value; throw after `timeoutMs`. */
export async function waitFor(fn, timeoutMs, what = 'condition', everyMs = 100) {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const v = await fn();
    if (v) return v;
    if (Date.now() > until) throw new Error(`timed out waiting for ${what}`);
    await sleep(everyMs);
  }
}

/** utime+stime of one pid, in ticks; 0 when it is gone. */
function ticksOf(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    // fields after "(comm)": state(3) ppid(4) ... utime(14) stime(15) → indexes 11, 12 here
    return Number(f[11]) + Number(f[12]);
  } catch {
    return 0;
  }
}

function ppidOf(pid) {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return Number(s.slice(s.lastIndexOf(')') + 2).split(' ')[1]);
  } catch {
    return -1;
  }
}

/** The pid and all its descendants. */
export function processTree(pid) {
  const all = readdirSync('/proc').filter((d) => /^\d+$/.test(d)).map(Number);
  const kids = new Map();
  for (const p of all) {
    const pp = ppidOf(p);
    if (!kids.has(pp)) kids.set(pp, []);
    kids.get(pp).push(p);
  }
  const out = [];
  const stack = [pid];
  while (stack.length) {
    const p = stack.pop();
    out.push(p);
    for (const k of kids.get(p) ?? []) stack.push(k);
  }
  return out;
}

/**
 * CPU meter over a set of pids (each with its descendants when `tree`): call
 * `begin()`, later `end()` → percent of one core used meanwhile (200 = both cores).
 * Descendants that exited in between are not counted (their parent's cutime would).
 */
export function cpuMeter(pids, { tree = false } = {}) {
  const list = () => (tree ? pids.flatMap((p) => processTree(p)) : pids);
  let t0 = 0;
  let start = new Map();
  return {
    begin() {
      t0 = process.hrtime.bigint();
      start = new Map(list().map((p) => [p, ticksOf(p)]));
    },
    end() {
      const dt = Number(process.hrtime.bigint() - t0) / 1e9;
      let ticks = 0;
      for (const p of list()) ticks += ticksOf(p) - (start.get(p) ?? 0);
      return dt > 0 ? (100 * ticks) / CLK_TCK / dt : 0;
    },
  };
}

/**
 * CPU of this process's reaped children (cutime+cstime of /proc/self/stat) since
 * now, as percent of one core over the wall time since `t0` (ms epoch).
 */
export function childrenCpuMeter(t0 = Date.now()) {
  const read = () => {
    const s = readFileSync('/proc/self/stat', 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return Number(f[13]) + Number(f[14]);
  };
  const start = read();
  return {
    end() {
      const dt = (Date.now() - t0) / 1000;
      return dt > 0 ? (100 * (read() - start)) / CLK_TCK / dt : 0;
    },
  };
}

/** Busy CPU of the whole machine (all processes, kernel included), percent of one core. */
export function machineCpuMeter() {
  const read = () => {
    const f = readFileSync('/proc/stat', 'utf8').split('\n')[0].trim().split(/\s+/).slice(1).map(Number);
    const idle = f[3] + (f[4] ?? 0);
    const total = f.slice(0, 8).reduce((a, b) => a + b, 0);
    return total - idle;
  };
  const t0 = process.hrtime.bigint();
  const b0 = read();
  return {
    end() {
      const dt = Number(process.hrtime.bigint() - t0) / 1e9;
      return dt > 0 ? (100 * (read() - b0)) / CLK_TCK / dt : 0;
    },
  };
}

/** Resident set size of a process, KiB (VmRSS). */
export function rssKiB(pid) {
  try {
    const m = /VmRSS:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) : 0;
  } catch {
    return 0;
  }
}

/** Whether a command is on PATH. */
export function have(cmd) {
  for (const dir of (process.env.PATH ?? '').split(':')) if (dir && existsSync(`${dir}/${cmd}`)) return true;
  return false;
}

/** The first JSON log line of `file` whose msg is `msg`, or null. */
export function jsonLogLine(file, msg) {
  let text = '';
  try {
    text = readFileSync(file, 'utf8');
  } catch {
    return null;
  }
  for (const line of text.split('\n')) {
    if (!line.startsWith('{')) continue;
    try {
      const o = JSON.parse(line);
      if (o.msg === msg) return o;
    } catch {
      /* not JSON */
    }
  }
  return null;
}

/**
 * Wait until a server is back at rest after an overloaded step: its CPU (`target.pid`, its
 * process tree when `target.cpuTree`) under 5 % of a core over one second, at most `maxS`
 * seconds; returns the seconds waited. The next step then measures its own rate, not the
 * tail of a recovery.
 */
export async function settle(target, maxS = 30) {
  const t0 = Date.now();
  while (Date.now() - t0 < maxS * 1000) {
    const m = cpuMeter([target.pid], { tree: !!target.cpuTree });
    m.begin();
    await sleep(1000);
    if (m.end() < 5) return (Date.now() - t0) / 1000;
  }
  return maxS;
}
