/**
 * The one launcher of the real server process (`node dist/main.js`) for the
 * tests, the fuzzer and the benchmarks: loopback, every listener on a free port
 * (port 0) unless told otherwise, its JSON log lines read as they come, ready
 * when it logs `listening` (README "Operating it": one line with every bound
 * port). Stopped by its own PID (its workers stop with it).
 */
import { spawn } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
export const MAIN = `${ROOT}dist/main.js`;
/** The rate deck of every test server: calls cost nothing (test/fixtures/rates/free.csv). */
export const FREE_DECK = `${ROOT}test/fixtures/rates/free.csv`;

/** The environment every launch starts from: loopback, every port 0, info logs, a deck of free calls. */
export function baseEnv() {
  return {
    PATH: process.env.PATH ?? '/usr/bin:/bin',
    HOME: process.env.HOME ?? '/root',
    SIP_HOST: '127.0.0.1',
    HTTP_HOST: '127.0.0.1',
    SIP_UDP_PORT: '0',
    SIP_TCP_PORT: '0',
    SIP_TLS_PORT: '0',
    SIP_WS_PORT: '0',
    SIP_WSS_PORT: '0',
    HTTP_PORT: '0',
    LOG_LEVEL: 'info',
    // Calls cost nothing unless a suite loads its own deck (development would load the sample deck).
    RATE_DECK_FILE: FREE_DECK,
  };
}

/**
 * @typedef {{ udp: number|null, tcp: number|null, tls: number|null, ws: number|null, wss: number|null, http: number|null }} Ports
 * @typedef {object} EdgeProcess
 * @property {import('node:child_process').ChildProcess} child
 * @property {number} pid
 * @property {Ports} ports
 * @property {Array<Record<string, unknown>>} logs every JSON log line so far (up to `keepLogs`)
 * @property {() => string} output the text so far (stdout and stderr; the last `keepText` characters)
 * @property {Promise<{ code: number|null, signal: string|null }>} exited
 * @property {(signal?: NodeJS.Signals, graceMs?: number) => Promise<number|null>} stop signal (SIGTERM), SIGKILL after graceMs; the exit code
 */

/**
 * Start the server and wait for its `listening` line.
 * @param {object} o
 * @param {Record<string, string>} [o.env] settings over {@link baseEnv}
 * @param {string} [o.node] the runtime binary (default: the one running this)
 * @param {string[]} [o.nodeArgs] flags for node itself (--cpu-prof, --trace-gc …)
 * @param {string} [o.logFile] also write everything it prints to this file
 * @param {number} [o.timeoutMs] how long to wait for `listening` (default 15 s)
 * @param {(line: Record<string, unknown>) => void} [o.onLog] every JSON log line, as it comes
 * @param {number} [o.keepLogs] how many log lines to keep in `logs` (default all)
 * @param {number} [o.keepText] how much text to keep for `output()` (default all)
 * @returns {Promise<EdgeProcess>}
 */
export async function spawnEdge(o = {}) {
  const child = spawn(o.node ?? process.execPath, [...(o.nodeArgs ?? []), MAIN], {
    cwd: ROOT,
    env: { ...baseEnv(), ...o.env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const file = o.logFile ? createWriteStream(o.logFile) : null;
  const keepLogs = o.keepLogs ?? Infinity;
  const keepText = o.keepText ?? Infinity;
  /** @type {Array<Record<string, unknown>>} */
  const logs = [];
  let text = '';
  const keep = (/** @type {string} */ s) => {
    text += s;
    if (text.length > keepText) text = text.slice(-keepText);
    file?.write(s);
  };
  child.stderr.on('data', (d) => keep(d.toString()));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  void exited.then(() => file?.end());
  const rl = createInterface({ input: child.stdout });
  const timeoutMs = o.timeoutMs ?? 15_000;
  /** @type {Ports} */
  const ports = await new Promise((resolve, reject) => {
    const fail = (/** @type {Error} */ err) => {
      child.kill('SIGKILL'); // never leave a half-started server behind
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error(`server did not log "listening" within ${timeoutMs} ms:\n${text}`)), timeoutMs);
    rl.on('line', (line) => {
      keep(`${line}\n`);
      let l;
      try {
        l = JSON.parse(line);
      } catch {
        return;
      }
      if (logs.length < keepLogs) logs.push(l);
      o.onLog?.(l);
      if (l.msg === 'listening') {
        clearTimeout(timer);
        resolve({ udp: l.udp, tcp: l.tcp, tls: l.tls, ws: l.ws, wss: l.wss, http: l.http });
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before listening:\n${text}`));
    });
  });
  return {
    child,
    pid: /** @type {number} */ (child.pid),
    ports,
    logs,
    output: () => text,
    exited,
    async stop(signal = 'SIGTERM', graceMs = 8000) {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill(signal);
        const t = setTimeout(() => child.kill('SIGKILL'), graceMs);
        await exited;
        clearTimeout(t);
      }
      return child.exitCode;
    },
  };
}
