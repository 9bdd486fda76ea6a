import { spawn, type ChildProcess } from 'node:child_process';
import { MAIN, ROOT, spawnEdge, type Ports } from './edge-process.mjs';

export { ROOT, type Ports };

export interface ServerProcess {
  pid: number;
  ports: Ports;
  /** Every JSON log line so far. */
  logs: Array<Record<string, unknown>>;
  /** Raw stdout+stderr text so far. */
  output: () => string;
  /** SIGTERM, wait for exit; resolves with the exit code. */
  stop(signal?: NodeJS.Signals): Promise<number | null>;
  child: ChildProcess;
}

/**
 * Starts the real server (`node dist/main.js`, built by `npm test`'s pretest)
 * with every port 0 unless given, and waits for its `listening` log line.
 * `node`: the runtime binary (default: the one running the tests; see test/support/runtimes.ts).
 */
export async function startServer(env: Record<string, string> = {}, timeoutMs = 15_000, node = process.execPath): Promise<ServerProcess> {
  const e = await spawnEdge({ env, timeoutMs, node });
  return {
    pid: e.pid,
    ports: e.ports,
    logs: e.logs,
    output: e.output,
    child: e.child,
    stop: (signal?: NodeJS.Signals) => e.stop(signal),
  };
}

/** Runs the server expecting it to exit (bad configuration); returns code and output. */
export function runServerUntilStopped(env: Record<string, string>, timeoutMs = 10_000): Promise<{ code: number | null; output: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [MAIN], {
      cwd: ROOT,
      env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SIP_HOST: '127.0.0.1', HTTP_HOST: '127.0.0.1', ...env },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let output = '';
    child.stdout.on('data', (d: Buffer) => (output += d.toString()));
    child.stderr.on('data', (d: Buffer) => (output += d.toString()));
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`server did not exit within ${timeoutMs} ms:\n${output}`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, output });
    });
  });
}
