/**
 * A real, throwaway `rtpengine` (Debian's rtpengine-daemon, installed by test/setup.sh)
 * for tests: userspace forwarding only (`--table=-1`, no kernel module), media on
 * 127.0.0.1, its NG control port on a free loopback port, a small RTP port range of
 * its own, no config file (the packaged /etc/rtpengine/rtpengine.conf would bind
 * fixed CLI/HTTP ports), its log in a temp dir. Ready once it answers an NG `ping`;
 * stopped by PID (SIGTERM, then SIGKILL) when the test is done, and on process exit
 * as a last resort.
 */
import { spawn } from 'node:child_process';
import { createSocket } from 'node:dgram';
import { closeSync, mkdtempSync, openSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { freePort, udpFree } from './ports.mjs';

/**
 * @typedef {object} RtpengineHandle
 * @property {string} id the client's engine id, `127.0.0.1:<ngPort>` (`[::1]:<ngPort>`)
 * @property {string} host the NG address, `127.0.0.1` unless `ngHost` said `::1`
 * @property {number} ngPort the NG control port (UDP)
 * @property {number} portMin first RTP port of its range
 * @property {number} portMax last RTP port of its range
 * @property {string} logFile its stderr log
 * @property {number|null} pid PID of the running daemon, or null while stopped
 * @property {() => string} log its whole log so far
 * @property {() => Promise<void>} start start again on the same ports after stop()
 * @property {() => Promise<void>} stop SIGTERM (SIGKILL after 5 s), wait for exit; idempotent
 * @property {() => Promise<void>} dispose stop and remove the temp dir
 */

/**
 * @typedef {object} RtpengineOptions
 * @property {number} [ngPort] NG port to listen on (default: a free one)
 * @property {'127.0.0.1' | '::1'} [ngHost] NG address (default 127.0.0.1; media stays on 127.0.0.1)
 * @property {number} [rtpPorts] how many RTP ports its range holds (default 40: 10 two-leg calls with RTCP)
 * @property {string[]} [extraArgs] more command-line options
 */

/** Where Debian's rtpengine-daemon puts the daemon; RTPENGINE_BIN overrides. */
const RTPENGINE = process.env.RTPENGINE_BIN ?? '/usr/bin/rtpengine';
const START_TIMEOUT_MS = 10_000;
const STOP_GRACE_MS = 5_000;

/** Every daemon this process started and has not yet seen exit: killed on exit. */
const running = new Set();
let exitHookInstalled = false;
function installExitHook() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  process.on('exit', () => {
    for (const c of running) c.kill('SIGKILL');
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/**
 * One NG `ping` (`<cookie> d7:command4:pinge`) to host:port; true on `pong`.
 * @param {number} port @param {number} [timeoutMs] @param {string} [host] @returns {Promise<boolean>}
 */
export function ngPing(port, timeoutMs = 300, host = '127.0.0.1') {
  return new Promise((resolve) => {
    const s = createSocket(host.includes(':') ? 'udp6' : 'udp4');
    const cookie = `probe${Math.random().toString(36).slice(2, 10)}`;
    const done = (ok) => {
      clearTimeout(t);
      s.close();
      resolve(ok);
    };
    const t = setTimeout(() => done(false), timeoutMs);
    s.on('error', () => done(false));
    s.on('message', (m) => {
      const text = m.toString('latin1');
      if (text.startsWith(`${cookie} `)) done(text.includes('6:result4:pong'));
    });
    s.send(Buffer.from(`${cookie} d7:command4:pinge`, 'latin1'), port, host);
  });
}

/**
 * `n` consecutive loopback UDP ports free a moment ago, below the kernel's ephemeral
 * range (so the clients' own sockets do not land in it); rtpengine skips a port of
 * its range that someone took meanwhile.
 * @param {number} n @returns {Promise<number>}
 */
async function freeRange(n) {
  for (let i = 0; i < 50; i++) {
    const base = 20_000 + 2 * Math.floor(Math.random() * ((10_000 - n) / 2));
    let ok = true;
    for (let p = base; p < base + n && ok; p++) ok = await udpFree(p);
    if (ok) return base;
  }
  throw new Error(`no ${n} consecutive free UDP ports in 20000-29999 after 50 tries`);
}

function waitForExit(c) {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => c.once('exit', () => resolve()));
}

/**
 * Start rtpengine; resolves once it answers an NG ping.
 * @param {RtpengineOptions} [opts]
 * @returns {Promise<RtpengineHandle>}
 */
export async function startRtpengine(opts = {}) {
  installExitHook();
  const bin = RTPENGINE;
  const ngPort = opts.ngPort ?? (await freePort());
  const ngHost = opts.ngHost ?? '127.0.0.1';
  const ngAddr = ngHost.includes(':') ? `[${ngHost}]` : ngHost;
  const n = opts.rtpPorts ?? 40;
  const portMin = await freeRange(n);
  const portMax = portMin + n - 1;
  const dir = mkdtempSync(join(tmpdir(), 'sipedge-rtpengine-'));
  const logFile = join(dir, 'rtpengine.log');
  /** @type {import('node:child_process').ChildProcess | null} */
  let child = null;

  const log = () => {
    try {
      return readFileSync(logFile, 'utf8');
    } catch {
      return '';
    }
  };
  const tail = () => log().slice(-4000);

  const start = async () => {
    if (child !== null) throw new Error('rtpengine already running');
    const fd = openSync(logFile, 'a');
    const args = [
      '--config-file=none',
      '--table=-1',
      '--interface=127.0.0.1',
      `--listen-ng=${ngAddr}:${ngPort}`,
      `--port-min=${portMin}`,
      `--port-max=${portMax}`,
      '--foreground',
      '--log-stderr',
      '--log-level=6',
      '--num-threads=1',
      // A deleted call is gone at once (default: kept 30 s), so `query` after `delete` fails.
      '--delete-delay=0',
      ...(opts.extraArgs ?? []),
    ];
    const c = spawn(bin, args, { stdio: ['ignore', fd, fd] });
    closeSync(fd);
    child = c;
    running.add(c);
    c.once('exit', () => {
      running.delete(c);
      if (child === c) child = null;
    });
    let spawnError = null;
    c.once('error', (e) => {
      spawnError = e;
    });
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      if (spawnError !== null) throw new Error(`cannot start ${bin} (test/setup.sh installs rtpengine-daemon): ${spawnError.message}`);
      if (c.exitCode !== null || c.signalCode !== null) throw new Error(`rtpengine exited during start (NG port ${ngPort}):\n${tail()}`);
      if (await ngPing(ngPort, 300, ngHost)) return;
      if (Date.now() > deadline) {
        c.kill('SIGKILL');
        await waitForExit(c);
        throw new Error(`rtpengine did not answer an NG ping on port ${ngPort} within ${START_TIMEOUT_MS} ms:\n${tail()}`);
      }
      await sleep(50);
    }
  };

  const stop = async () => {
    const c = child;
    if (c === null) return;
    c.kill('SIGTERM');
    const killer = setTimeout(() => c.kill('SIGKILL'), STOP_GRACE_MS);
    await waitForExit(c);
    clearTimeout(killer);
  };

  try {
    await start();
  } catch (e) {
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  return {
    id: `${ngAddr}:${ngPort}`,
    host: ngHost,
    ngPort,
    portMin,
    portMax,
    logFile,
    get pid() {
      return child?.pid ?? null;
    },
    log,
    start,
    stop,
    async dispose() {
      await stop();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
