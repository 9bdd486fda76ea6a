import { spawn, type ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { createInterface } from 'node:readline';

export const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const MAIN = `${ROOT}dist/main.js`;

export interface Ports {
  udp: number | null;
  tcp: number | null;
  tls: number | null;
  ws: number | null;
  wss: number | null;
  http: number | null;
}

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
  const child = spawn(node, [MAIN], {
    cwd: ROOT,
    env: {
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
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  const logs: Array<Record<string, unknown>> = [];
  let text = '';
  child.stderr?.on('data', (d: Buffer) => (text += d.toString()));
  const rl = createInterface({ input: child.stdout! });
  const exited = new Promise<number | null>((resolve) => child.on('exit', (code) => resolve(code)));

  const ports = await new Promise<Ports>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`server did not log "listening" within ${timeoutMs} ms:\n${text}`)), timeoutMs);
    rl.on('line', (line) => {
      text += line + '\n';
      let o: Record<string, unknown>;
      try {
        o = JSON.parse(line) as Record<string, unknown>;
      } catch {
        return;
      }
      logs.push(o);
      if (o.msg === 'listening') {
        clearTimeout(timer);
        resolve({
          udp: o.udp as number | null,
          tcp: o.tcp as number | null,
          tls: o.tls as number | null,
          ws: o.ws as number | null,
          wss: o.wss as number | null,
          http: o.http as number | null,
        });
      }
    });
    void exited.then((code) => {
      clearTimeout(timer);
      reject(new Error(`server exited with ${code} before listening:\n${text}`));
    });
  });

  return {
    pid: child.pid as number,
    ports,
    logs,
    output: () => text,
    child,
    async stop(signal: NodeJS.Signals = 'SIGTERM') {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill(signal);
      const t = setTimeout(() => child.kill('SIGKILL'), 8000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
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
