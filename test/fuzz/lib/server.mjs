/**
 * Start the real server (`node dist/main.js`) for fuzzing, on free ports, and
 * collect its JSON log lines — errors, unhandled rejections and uncaught
 * exceptions are what the fuzzer looks for.
 */
import { ROOT, spawnEdge } from '../../support/edge-process.mjs';

export { ROOT };

/** The partner the fuzz server is started with (provisions the authenticated fuzzer endpoint). */
export const FUZZ_PARTNER = Object.freeze({ id: 'PAFUZZPARTNER0000001', token: 'fuzz-partner-token-0123456789' });

/**
 * @param {Record<string,string>} env extra environment
 * @param {string[]} [nodeArgs] flags for node itself (e.g. --trace-gc)
 * @returns {Promise<{ child: import('node:child_process').ChildProcess, ports: Record<string, number|null>, problems: object[], output: () => string, exited: Promise<{code: number|null, signal: string|null}>, stop: () => Promise<{code: number|null, signal: string|null}> }>}
 */
export async function startFuzzServer(env = {}, nodeArgs = []) {
  /** Log lines at level error (50) or above: what the fuzzer looks for. */
  const problems = [];
  const e = await spawnEdge({
    env: { SIP_TLS_PORT: 'off', SIP_WSS_PORT: 'off', PARTNER_AUTH_ID: FUZZ_PARTNER.id, PARTNER_AUTH_TOKEN: FUZZ_PARTNER.token, ...env },
    nodeArgs,
    timeoutMs: 20_000,
    // A million messages make many lines: keep the tail, not every line.
    keepLogs: 0,
    keepText: 20_000,
    onLog: (o) => {
      if (typeof o.level === 'number' && o.level >= 50 && problems.length < 1000) problems.push(o);
    },
  });
  return {
    child: e.child,
    ports: e.ports,
    problems,
    output: e.output,
    exited: e.exited,
    async stop() {
      await e.stop();
      return e.exited;
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
