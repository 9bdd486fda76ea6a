/**
 * Start the real server (`node dist/main.js`) for fuzzing, on free ports, and
 * collect its JSON log lines — errors, unhandled rejections and uncaught
 * exceptions are what the fuzzer looks for.
 */
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export const ROOT = fileURLToPath(new URL('../../../', import.meta.url));

/** The partner the fuzz server is started with (provisions the authenticated fuzzer endpoint). */
export const FUZZ_PARTNER = Object.freeze({ id: 'PAFUZZPARTNER0000001', token: 'fuzz-partner-token-0123456789' });

/**
 * @param {Record<string,string>} env extra environment
 * @param {string[]} [nodeArgs] flags for node itself (e.g. --trace-gc)
 * @returns {Promise<{ child: import('node:child_process').ChildProcess, ports: Record<string, number|null>, problems: object[], output: () => string, exited: Promise<{code: number|null, signal: string|null}>, stop: () => Promise<{code: number|null, signal: string|null}> }>}
 */
export async function startFuzzServer(env = {}, nodeArgs = []) {
  const child = spawn(process.execPath, [...nodeArgs, `${ROOT}dist/main.js`], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH ?? '/usr/bin:/bin',
      HOME: process.env.HOME ?? '/root',
      SIP_HOST: '127.0.0.1',
      HTTP_HOST: '127.0.0.1',
      SIP_UDP_PORT: '0',
      SIP_TCP_PORT: '0',
      SIP_TLS_PORT: 'off',
      SIP_WS_PORT: '0',
      SIP_WSS_PORT: 'off',
      HTTP_PORT: '0',
      LOG_LEVEL: 'info',
      PARTNER_AUTH_ID: FUZZ_PARTNER.id,
      PARTNER_AUTH_TOKEN: FUZZ_PARTNER.token,
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  /** Log lines at level error (50) or above, and anything on stderr after start. */
  const problems = [];
  let tail = '';
  const keep = (s) => {
    tail = (tail + s).slice(-20_000);
  };
  child.stderr.on('data', (d) => keep(d.toString()));
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const rl = createInterface({ input: child.stdout });
  const ports = await new Promise((resolve, reject) => {
    const fail = (err) => {
      child.kill('SIGKILL'); // never leave a half-started server behind
      reject(err);
    };
    const timer = setTimeout(() => fail(new Error(`server did not start:\n${tail}`)), 20_000);
    rl.on('line', (line) => {
      keep(`${line}\n`);
      let o;
      try {
        o = JSON.parse(line);
      } catch {
        return;
      }
      if (o.msg === 'listening') {
        clearTimeout(timer);
        resolve({ udp: o.udp, tcp: o.tcp, tls: o.tls, ws: o.ws, wss: o.wss, http: o.http });
      } else if (typeof o.level === 'number' && o.level >= 50 && problems.length < 1000) {
        problems.push(o);
      }
    });
    void exited.then(({ code, signal }) => {
      clearTimeout(timer);
      reject(new Error(`server exited (${code ?? signal}) before listening:\n${tail}`));
    });
  });
  return {
    child,
    ports,
    problems,
    output: () => tail,
    exited,
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        child.kill('SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 8000);
        const r = await exited;
        clearTimeout(t);
        return r;
      }
      return exited;
    },
  };
}

/** Scrape /metrics into { name{labels}: value }. */
export async function scrape(httpPort) {
  const res = await fetch(`http://127.0.0.1:${httpPort}/metrics`);
  const text = await res.text();
  const out = {};
  for (const line of text.split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    out[line.slice(0, sp)] = Number(line.slice(sp + 1));
  }
  return out;
}
