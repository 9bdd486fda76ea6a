/**
 * A real, throwaway `redis-server` for tests: its own free port, no persistence,
 * killed by PID when the test is done (and on process exit, as a last resort).
 */
import { spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { freePort } from './ports.mjs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * @typedef {object} RedisServerHandle
 * @property {string} url `redis://127.0.0.1:<port>`
 * @property {number} port
 * @property {number|null} pid PID of the running server, or null while stopped
 * @property {() => Promise<void>} stop SIGTERM, wait for exit; idempotent
 * @property {() => Promise<void>} kill9 SIGKILL (a crash: no goodbye to clients), wait for exit; idempotent
 * @property {() => Promise<void>} restart stop if running, then start again on the same port (empty: nothing is persisted)
 * @property {() => Promise<void>} start start again on the same port after stop()/kill9()
 */

const REDIS_SERVER = process.env.REDIS_SERVER_BIN ?? '/usr/bin/redis-server';
const START_TIMEOUT_MS = 10_000;

/** Every server this process started and has not yet seen exit: killed on exit. */
const running = new Set();
let exitHookInstalled = false;
function installExitHook() {
  if (exitHookInstalled) return;
  exitHookInstalled = true;
  // 'exit' handlers must be synchronous; kill() is. This catches a test run that
  // dies before its afterAll, so no redis-server outlives it.
  process.on('exit', () => {
    for (const c of running) c.kill('SIGKILL');
  });
}

/** One PING over a raw socket; true on +PONG. */
function pingOnce(port) {
  return new Promise((resolve) => {
    const s = createConnection({ host: '127.0.0.1', port });
    let buf = '';
    const done = (ok) => {
      s.destroy();
      resolve(ok);
    };
    s.setTimeout(500, () => done(false));
    s.on('error', () => done(false));
    s.on('connect', () => s.write('PING\r\n'));
    s.on('data', (d) => {
      buf += d.toString('latin1');
      if (buf.includes('\r\n')) done(buf.startsWith('+PONG'));
    });
  });
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

function waitForClose(c) {
  if (c.exitCode !== null || c.signalCode !== null) return Promise.resolve();
  return new Promise((resolve) => c.once('exit', () => resolve()));
}

/** Start a fresh redis-server on a free port; resolves once it answers PING. */
export async function startRedis() {
  installExitHook();
  const port = await freePort();
  // Its own working dir, so nothing (not even a failed dump) lands in the repo.
  const dir = mkdtempSync(join(tmpdir(), 'sipedge-redis-'));
  let child = null;
  let log = '';

  const start = async () => {
    if (child !== null) throw new Error('redis-server already running');
    log = '';
    mkdirSync(dir, { recursive: true }); // stop() removed it
    const c = spawn(
      REDIS_SERVER,
      ['--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--dir', dir],
      { stdio: ['ignore', 'pipe', 'pipe'] },
    );
    child = c;
    running.add(c);
    // Keep the tail of its output for the error message, and keep the pipes drained.
    const keep = (d) => {
      log = (log + d.toString()).slice(-4000);
    };
    c.stdout?.on('data', keep);
    c.stderr?.on('data', keep);
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
      if (spawnError !== null) throw spawnError;
      if (c.exitCode !== null || c.signalCode !== null) {
        throw new Error(`redis-server exited during start on port ${port}:\n${log}`);
      }
      if (await pingOnce(port)) return;
      if (Date.now() > deadline) {
        c.kill('SIGKILL');
        await waitForClose(c);
        throw new Error(`redis-server did not answer PING on port ${port} within ${START_TIMEOUT_MS} ms:\n${log}`);
      }
      await sleep(25);
    }
  };

  const kill = async (signal) => {
    const c = child;
    if (c === null) return;
    c.kill(signal);
    await waitForClose(c);
  };

  await start();
  return {
    url: `redis://127.0.0.1:${port}`,
    port,
    get pid() {
      return child?.pid ?? null;
    },
    start,
    async stop() {
      await kill('SIGTERM');
      rmSync(dir, { recursive: true, force: true });
    },
    kill9: () => kill('SIGKILL'),
    async restart() {
      await kill('SIGTERM');
      await start();
    },
  };
}
