/**
 * The node's own store process (docs/workers.md "One store process"): with
 * SIP_WORKERS > 1 and no Redis configured, the primary runs a private
 * `redis-server` on a Unix socket in a fresh 0700 directory, and its workers use it
 * as their store (REDIS_SOCKET). Like the embedded store it keeps nothing on disk
 * and lives as long as the node: a small shell wrapper holds the primary's end of a
 * pipe and stops redis-server when that pipe closes, so a SIGKILLed primary leaves
 * no store behind. If redis-server dies, the primary starts another on the same
 * socket (the bindings are lost, as with a restart of the embedded store; phones
 * re-register) and the workers' clients reconnect to it.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createConnection } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ConfigError } from '../../errors.js';
import type { Logger } from '../../logger.js';

/**
 * Runs "$@" (redis-server …) and stops it when fd 3 — the primary's pipe — reaches
 * end of file. A background list's stdin is /dev/null in sh, hence the explicit fd.
 */
const WRAPPER = `exec 3<&0 0</dev/null
"$@" & r=$!
{ read _ <&3; kill $r 2>/dev/null; } & w=$!
wait $r; s=$?
kill $w 2>/dev/null
exit $s`;

const READY_TIMEOUT_MS = 10_000;
const RESTART_DELAY_MS = 1000;

export interface StoreProcess {
  /** The Unix socket the workers connect to (REDIS_SOCKET). */
  readonly socket: string;
  /** PID of the current redis-server's wrapper. */
  pid(): number | undefined;
  /** Stop redis-server and remove its directory. */
  stop(): Promise<void>;
}

export async function startStoreProcess(o: { bin: string; log: Logger }): Promise<StoreProcess> {
  const dir = mkdtempSync(join(tmpdir(), 'sip-edge-store-'));
  const socket = join(dir, 'redis.sock');
  const args = [
    o.bin,
    '--port', '0',
    '--unixsocket', socket,
    '--unixsocketperm', '700',
    '--dir', dir,
    '--save', '',
    '--appendonly', 'no',
    '--loglevel', 'warning',
    '--logfile', '',
  ];
  let child: ChildProcess | null = null;
  let stopping = false;
  let output = '';

  const launch = (): ChildProcess => {
    output = '';
    const c = spawn('/bin/sh', ['-c', WRAPPER, 'sip-edge-store', ...args], { stdio: ['pipe', 'pipe', 'pipe'] });
    const keep = (d: Buffer): void => {
      output = (output + d.toString()).slice(-2000);
    };
    c.stdout?.on('data', keep);
    c.stderr?.on('data', keep);
    // The pipe's write end stays open for the life of the primary; nothing is ever written.
    c.stdin?.on('error', () => {});
    c.on('exit', (code, signal) => {
      if (child !== c || stopping) return;
      child = null;
      o.log.error({ code, signal, output: output.trim().slice(-500) }, 'store process (redis-server) exited; starting another (bindings are lost)');
      setTimeout(() => {
        if (stopping) return;
        child = launch();
        ready(socket, READY_TIMEOUT_MS).then(
          () => o.log.warn({ socket }, 'store process back'),
          (err: unknown) => o.log.error({ err: err instanceof Error ? err.message : String(err) }, 'store process did not come back'),
        );
      }, RESTART_DELAY_MS).unref();
    });
    return c;
  };

  child = launch();
  const first = child;
  const exited = new Promise<never>((_, reject) => {
    first.once('exit', (code) => {
      const why = code === 127 ? `${o.bin} not found (install redis-server, set REDIS_SERVER_BIN, or set REDIS_URL)` : `${o.bin} exited with ${code}: ${output.trim().slice(-300)}`;
      reject(new ConfigError(`SIP_WORKERS > 1 without a Redis runs a store process: ${why}`));
    });
  });
  try {
    await Promise.race([ready(socket, READY_TIMEOUT_MS), exited]);
  } catch (err) {
    stopping = true;
    first.kill('SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw err;
  }
  o.log.info({ socket, pid: first.pid }, 'store process (node-private redis-server) ready');
  // However the primary ends (process.exit after its workers stopped), the directory goes;
  // redis-server itself stops when the wrapper's pipe closes with the primary.
  process.once('exit', () => rmSync(dir, { recursive: true, force: true }));

  return {
    socket,
    pid: () => child?.pid,
    async stop(): Promise<void> {
      stopping = true;
      const c = child;
      child = null;
      if (c && c.exitCode === null && c.signalCode === null) {
        const gone = new Promise<void>((r) => c.once('exit', () => r()));
        c.stdin?.end(); // the wrapper stops redis-server
        const t = setTimeout(() => c.kill('SIGKILL'), 3000);
        await gone;
        clearTimeout(t);
      }
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

/** Resolves once a Redis at `socket` answers PING. */
function ready(socket: string, timeoutMs: number): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  return new Promise((resolve, reject) => {
    const attempt = (): void => {
      const c = createConnection(socket);
      let buf = '';
      const retry = (): void => {
        c.destroy();
        if (Date.now() > deadline) reject(new Error(`store process not answering on ${socket} within ${timeoutMs} ms`));
        else setTimeout(attempt, 50);
      };
      c.on('error', retry);
      c.on('connect', () => c.write('PING\r\n'));
      c.on('data', (d) => {
        buf += d.toString();
        if (buf.includes('+PONG')) {
          c.destroy();
          resolve();
        } else if (buf.includes('\r\n')) retry(); // -LOADING and the like
      });
    };
    attempt();
  });
}
