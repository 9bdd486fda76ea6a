/**
 * Frozen peers on TCP and TLS (README "Flows", docs/flows.md "SIP-level probes"): a
 * process that stops reading while its kernel still acknowledges every segment looks
 * alive to TCP keep-alive. The edge probes a quiet flow that holds bindings with a SIP
 * OPTIONS once it has been quiet for SIP_PING_INTERVAL, and cuts a flow on which a
 * request or probe got no byte back within 2 × SIP_PING_INTERVAL; its bindings go with it.
 *
 * Real clients, really frozen with SIGSTOP: SIPp over TCP (this SIPp build has no TLS;
 * `-aa` answers OPTIONS as a phone would) and baresip over TLS. Each first stays quiet and
 * alive for several intervals (probes answered: nothing cut), then is stopped.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { running, startBaresip } from '../support/baresip.js';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { injection } from '../support/sipp-injection.mjs';
import { freePort } from '../support/ports.mjs';
import { ROOT } from '../support/server-process.js';

const PING_S = 1;
/** The bound: quiet for one interval, then the probe (plus one sweep step), then 2 × the interval unanswered. */
const BOUND_MS = 3 * PING_S * 1000 + 250;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Sum of the samples of a metric whose labels include `labels` (unlabelled metrics too). */
async function metric(edge: Edge, name: string, labels: Record<string, string> = {}): Promise<number> {
  const text = await (await fetch(`${edge.base}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  let sum = 0;
  let seen = false;
  for (const line of text.split('\n')) {
    const m = /^(\w+)(?:\{([^}]*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const inner = (m[2] ?? '').split(',');
    if (!want.every((w) => inner.includes(w))) continue;
    seen = true;
    sum += Number(m[3]);
  }
  if (!seen) throw new Error(`no sample ${name}${JSON.stringify(labels)}`);
  return sum;
}

const alive = (c: ChildProcess): boolean => c.exitCode === null && c.signalCode === null;

describe('frozen peers on TCP and TLS are probed with OPTIONS and cut', () => {
  let edge: Edge;
  let account: Account;
  let ca: { file: string; remove(): void };

  beforeAll(async () => {
    edge = await startEdge({ SIP_PING_INTERVAL: String(PING_S), SIP_IDLE_TIMEOUT: '5', SIP_WSS_PORT: 'off' });
    account = await edge.newAccount();
    ca = edge.devCaFile();
  });
  afterAll(async () => {
    for (const c of running) c.kill('SIGKILL');
    await edge?.stop();
    ca?.remove();
  });

  /** Alive and quiet for 4 intervals: still registered, probed, not cut. Then SIGSTOP: ms until the binding is gone. */
  const freeze = async (e: Endpoint, pid: number, transport: 'tcp' | 'tls'): Promise<number> => {
    await edge.waitForEndpoint(e, (v) => v.sip_registered === 'true', 10_000);
    const probes0 = await metric(edge, 'sip_flow_probes_total');
    const cuts0 = await metric(edge, 'sip_flows_cut_unanswered_total');
    await sleep(4 * PING_S * 1000);
    expect((await edge.endpoint(e)).sip_registered, 'a live quiet client stays registered').toBe('true');
    expect(await metric(edge, 'sip_flow_probes_total')).toBeGreaterThanOrEqual(probes0 + 2);
    expect(await metric(edge, 'sip_flows_cut_unanswered_total')).toBe(cuts0);
    expect(await metric(edge, 'sip_connections_open', { transport })).toBe(1);

    process.kill(pid, 'SIGSTOP');
    const stopped = Date.now();
    await edge.waitForEndpoint(e, (v) => v.sip_registered === 'false', BOUND_MS + 3000);
    const ms = Date.now() - stopped;
    expect(await metric(edge, 'sip_flows_cut_unanswered_total')).toBe(cuts0 + 1);
    expect(await metric(edge, 'sip_connections_open', { transport })).toBe(0);
    return ms;
  };

  it('SIPp over TCP, SIGSTOPped: binding gone within 3 × SIP_PING_INTERVAL of its last byte', async () => {
    const e = await edge.newEndpoint(account, 'frozentcp');
    const dir = mkdtempSync(join(tmpdir(), 'sipp-frozen-'));
    const inf = join(dir, 'users.csv');
    writeFileSync(inf, injection([{ user: e.username, domain: account.sipDomain, password: e.password }]));
    const sipp = spawn(
      'sipp',
      [`127.0.0.1:${edge.server.ports.tcp}`, '-sf', join(ROOT, 'sipp-scenarios', 'register-refresh-hold.xml'), '-inf', inf, '-t', 't1', '-i', '127.0.0.1',
        '-p', String(await freePort()), '-m', '1', '-d', '60000', '-key', 'expires', '3600', '-aa', '-nostdin', '-timeout', '90', '-recv_timeout', '10000'],
      { stdio: 'ignore', cwd: dir },
    );
    try {
      const ms = await freeze(e, sipp.pid as number, 'tcp');
      console.log(`frozen SIPp over TCP (SIP_PING_INTERVAL ${PING_S} s): binding gone ${ms} ms after SIGSTOP (bound ${BOUND_MS} ms after its last byte)`);
      expect(ms).toBeLessThanOrEqual(BOUND_MS + 500);
      expect(alive(edge.server.child)).toBe(true);
    } finally {
      if (alive(sipp)) sipp.kill('SIGKILL');
      rmSync(dir, { recursive: true, force: true });
    }
  }, 40_000);

  it('baresip over TLS, SIGSTOPped: binding gone within 3 × SIP_PING_INTERVAL of its last byte', async () => {
    const e = await edge.newEndpoint(account, 'frozentls');
    const phone = startBaresip({ endpoint: e, transport: 'tls', serverPort: edge.server.ports.tls as number, caFile: ca.file });
    try {
      const ms = await freeze(e, phone.pid, 'tls');
      console.log(`frozen baresip over TLS (SIP_PING_INTERVAL ${PING_S} s): binding gone ${ms} ms after SIGSTOP (bound ${BOUND_MS} ms after its last byte)`);
      expect(ms).toBeLessThanOrEqual(BOUND_MS + 500);
    } finally {
      process.kill(phone.pid, 'SIGKILL');
    }
  }, 40_000);
});
