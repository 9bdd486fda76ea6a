/**
 * Dead peers on held flows are found (issue 13; README "Flows", docs/flows.md).
 * A flow that carries a live binding is never cut for being quiet, so a peer that
 * dies silently must be found by probing, within a documented bound:
 *
 * - WS/WSS: the edge pings a flow quiet for SIP_PING_INTERVAL; a peer that has not
 *   answered when the flow has been quiet for 2 × SIP_PING_INTERVAL is cut. Shown
 *   with a SIP.js phone (test/support/sipjs-phone.mjs) frozen by SIGSTOP: its
 *   kernel still acknowledges every TCP segment, only the pongs stop.
 * - TCP/TLS: the edge sends an OPTIONS over a flow quiet for SIP_PING_INTERVAL and
 *   cuts it when nothing comes back within 2 × SIP_PING_INTERVAL (the kernel's
 *   keep-alive stays on below it). Shown with SIPp in a network namespace of this
 *   test's own, joined by a veth pair, whose packets are then dropped both ways (a
 *   `blackhole` qdisc on both ends); frozen processes: frozen-flows.test.ts.
 *
 * Either way the binding goes, the connection count returns to 0 and the server
 * keeps serving. Also: the Flow-Timer header of REGISTER 200 OKs (RFC 5626 §5.4).
 * The namespace part needs root and `ip`/`tc` (iproute2), as test/setup.sh installs.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/server-process.js';
import { registerWithAuth, streamConn, udpConn, wsConn } from '../support/sip-client.js';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { startPhoneProcess } from '../support/phone-process.js';

const IDLE_S = 5;
/** SIP_PING_INTERVAL of the TCP servers (kernel probes: no pong to wait for). */
const PING_S = 1;
/**
 * SIP_PING_INTERVAL of the WebSocket server: a pong has at least half of it to come
 * back, so 2 s leaves a second of slack on a busy machine.
 */
const WS_PING_S = 2;
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Value of one sample of a Prometheus text exposition. */
async function metric(edge: Edge, name: string, labels: Record<string, string>): Promise<number> {
  const text = await (await fetch(`${edge.base}/metrics`)).text();
  const want = Object.entries(labels).map(([k, v]) => `${k}="${v}"`);
  for (const line of text.split('\n')) {
    if (!line.startsWith(name + '{')) continue;
    const inner = line.slice(name.length + 1, line.indexOf('}'));
    if (want.every((w) => inner.split(',').includes(w))) return Number(line.slice(line.indexOf('}') + 1));
  }
  throw new Error(`no sample ${name}${JSON.stringify(labels)}`);
}

/** Milliseconds until the endpoint reads sip_registered "false" (polled every 50 ms). */
async function msUntilUnregistered(edge: Edge, e: Endpoint, since: number, timeoutMs: number): Promise<number> {
  await edge.waitForEndpoint(e, (v) => v.sip_registered === 'false', timeoutMs);
  return Date.now() - since;
}

const alive = (c: ChildProcess): boolean => c.exitCode === null && c.signalCode === null;

/**
 * A network namespace of this test's own with a veth pair to the host: host side
 * `<addr>.1`, namespace side `<addr>.2` (a /30 of 10.213.0.0/16 no interface uses).
 */
class Netns {
  readonly name: string;
  readonly hostIf: string;
  readonly nsIf = 's13n0';
  readonly hostAddr: string;
  readonly nsAddr: string;

  constructor() {
    const tag = (process.pid % 100_000).toString(36);
    this.name = `s13lv-${tag}`;
    this.hostIf = `s13h${tag}`;
    const used = execFileSync('ip', ['-4', '-o', 'addr', 'show']).toString();
    let third = process.pid % 250;
    while (used.includes(`10.213.${third}.`)) third = (third + 1) % 250;
    this.hostAddr = `10.213.${third}.1`;
    this.nsAddr = `10.213.${third}.2`;
  }

  create(): void {
    const ip = (...a: string[]): void => void execFileSync('ip', a);
    ip('netns', 'add', this.name);
    ip('link', 'add', this.hostIf, 'type', 'veth', 'peer', 'name', this.nsIf, 'netns', this.name);
    ip('addr', 'add', `${this.hostAddr}/30`, 'dev', this.hostIf);
    ip('link', 'set', this.hostIf, 'up');
    ip('-n', this.name, 'addr', 'add', `${this.nsAddr}/30`, 'dev', this.nsIf);
    ip('-n', this.name, 'link', 'set', this.nsIf, 'up');
    ip('-n', this.name, 'link', 'set', 'lo', 'up');
  }

  /** Every packet either way is dropped from now on: a blackhole qdisc on both ends. */
  dropAll(): void {
    execFileSync('tc', ['qdisc', 'add', 'dev', this.hostIf, 'root', 'blackhole']);
    execFileSync('ip', ['netns', 'exec', this.name, 'tc', 'qdisc', 'add', 'dev', this.nsIf, 'root', 'blackhole']);
  }

  /** Removes the namespace (and with it both ends of the veth pair). */
  destroy(): void {
    try {
      execFileSync('ip', ['netns', 'del', this.name], { stdio: 'ignore' });
    } catch {
      /* not created */
    }
    try {
      execFileSync('ip', ['link', 'del', this.hostIf], { stdio: 'ignore' });
    } catch {
      /* gone with the namespace */
    }
  }
}

describe('dead peers on flows that carry a binding', () => {
  let edge: Edge;
  let account: Account;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    edge = await startEdge({ SIP_IDLE_TIMEOUT: String(IDLE_S), SIP_PING_INTERVAL: String(WS_PING_S), SIP_HEADER_TIMEOUT: '2' });
    account = await edge.newAccount();
  });
  afterAll(async () => {
    for (const c of children) if (alive(c)) c.kill('SIGKILL');
    await edge?.stop();
  });

  it.concurrent('a SIP.js phone frozen by SIGSTOP over WS: its flow is cut and its binding removed within 2 × SIP_PING_INTERVAL', async () => {
    const e = await edge.newEndpoint(account, 'frozen');
    const phone = startPhoneProcess(`ws://127.0.0.1:${edge.server.ports.ws}`, e);
    const { child } = phone;
    children.push(child);
    await edge.waitForEndpoint(e, (v) => v.sip_registered === 'true', 10_000);
    // While it answers, it stays: quiet for well over 2 × the ping interval.
    await sleep(3 * WS_PING_S * 1000);
    expect((await edge.endpoint(e)).sip_registered).toBe('true');
    expect(phone.count('ping')).toBeGreaterThanOrEqual(2);
    expect(await metric(edge, 'sip_connections_open', { transport: 'ws' })).toBe(1);

    child.kill('SIGSTOP');
    const stopped = Date.now();
    try {
      const ms = await msUntilUnregistered(edge, e, stopped, 4 * WS_PING_S * 1000 + 2000);
      console.log(`frozen WS phone (SIP_PING_INTERVAL ${WS_PING_S} s): binding gone ${ms} ms after SIGSTOP (bound ${2 * WS_PING_S * 1000} ms after its last pong)`);
      expect(ms).toBeGreaterThanOrEqual(WS_PING_S * 1000 / 2 - 100); // it answered pings until it was stopped
      expect(ms).toBeLessThanOrEqual(2 * WS_PING_S * 1000 + 300); // + API polling and the removal itself
      expect(await metric(edge, 'sip_connections_open', { transport: 'ws' })).toBe(0);
      expect(edge.server.logs.some((l) => l.msg === 'closing websocket: no answer to ping')).toBe(true);
      expect((await fetch(`${edge.base}/healthz`)).status).toBe(200);
      expect(alive(edge.server.child)).toBe(true);
    } finally {
      child.kill('SIGKILL');
    }
  }, 30_000);

  it.concurrent('a flow whose bindings end (expired, or removed by Expires 0) is cut once quiet for SIP_IDLE_TIMEOUT after that (TCP, TLS, WS)', async () => {
    // A server of its own, so that the other tests' connection counts stay exact. Its ping
    // interval outlasts the 2 s bindings: these bare clients answer no OPTIONS probe, and
    // what is shown here is the idle cut once the bindings end, not the probe's.
    const edge = await startEdge({ SIP_IDLE_TIMEOUT: String(IDLE_S), SIP_PING_INTERVAL: '5', SIP_MIN_EXPIRES: '1', SIP_WSS_PORT: 'off' });
    try {
      const account = await edge.newAccount();
      const e = await edge.newEndpoint(account, 'lapsing');
      const reg = { user: e.username, domain: account.sipDomain, password: e.password, viaPort: 9 };
      /** Milliseconds from `t0` until `close` fires, or null after `within` ms. */
      const closedAt = (on: (cb: () => void) => void, t0: number, within: number): Promise<number | null> =>
        new Promise((resolve) => {
          const t = setTimeout(() => resolve(null), within);
          on(() => {
            clearTimeout(t);
            resolve(Date.now() - t0);
          });
        });
      const contact = (host: string, port: number, t: string, n: number): string[] => [`<sip:${e.username}-${n}@${host}:${port};transport=${t}>`];

      // TCP, Expires 2: held until the binding lapses, then SIP_IDLE_TIMEOUT from the lapse.
      const a = await streamConn('127.0.0.1', edge.server.ports.tcp as number, false);
      const aDone = closedAt((cb) => a.raw.once('close', cb), Date.now(), 12_000);
      expect((await registerWithAuth(a, { ...reg, transport: 'TCP', viaHost: a.localHost, callId: randomBytes(8).toString('hex'), expires: 2, contacts: contact(a.localHost, a.localPort, 'tcp', 1) })).final.status).toBe(200);
      // WS, Expires 2: the same.
      const b = await wsConn(`ws://127.0.0.1:${edge.server.ports.ws}`);
      const bDone = closedAt((cb) => b.ws.once('close', cb), Date.now(), 12_000);
      expect((await registerWithAuth(b, { ...reg, transport: 'WS', viaHost: b.localHost, callId: randomBytes(8).toString('hex'), expires: 2, contacts: contact(b.localHost, 9, 'ws', 2) })).final.status).toBe(200);
      // TLS, Expires 2: the same.
      const d = await streamConn('127.0.0.1', edge.server.ports.tls as number, true);
      const dDone = closedAt((cb) => d.raw.once('close', cb), Date.now(), 12_000);
      expect((await registerWithAuth(d, { ...reg, transport: 'TLS', viaHost: d.localHost, callId: randomBytes(8).toString('hex'), expires: 2, contacts: contact(d.localHost, d.localPort, 'tls', 4) })).final.status).toBe(200);
      // TCP, Expires 3600 then Expires 0 on the same flow: SIP_IDLE_TIMEOUT from the unregister.
      const c = await streamConn('127.0.0.1', edge.server.ports.tcp as number, false);
      const callId = randomBytes(8).toString('hex');
      const cSpec = { ...reg, transport: 'TCP' as const, viaHost: c.localHost, callId, contacts: contact(c.localHost, c.localPort, 'tcp', 3) };
      expect((await registerWithAuth(c, { ...cSpec, expires: 3600 })).final.status).toBe(200);
      expect((await registerWithAuth(c, { ...cSpec, expires: 0, cseq: 3 })).final.status).toBe(200);
      const cDone = closedAt((cb) => c.raw.once('close', cb), Date.now(), 12_000);

      const [ta, tb, tc, td] = await Promise.all([aDone, bDone, cDone, dDone]);
      console.log(`flows whose bindings ended, SIP_IDLE_TIMEOUT ${IDLE_S} s: expired after 2 s, cut at ${ta} ms (TCP), ${tb} ms (WS), ${td} ms (TLS); TCP unregistered, cut ${tc} ms after the unregister`);
      for (const t of [ta, tb, td]) {
        expect(t).not.toBeNull();
        expect(t as number).toBeGreaterThan((2 + IDLE_S) * 1000 - 1000);
        expect(t as number).toBeLessThan((2 + IDLE_S) * 1000 + 1500);
      }
      expect(tc).not.toBeNull();
      expect(tc as number).toBeGreaterThan(IDLE_S * 1000 - 1000);
      expect(tc as number).toBeLessThan(IDLE_S * 1000 + 1500);
      expect((await edge.endpoint(e)).sip_registered).toBe('false');
    } finally {
      await edge.stop();
    }
  }, 30_000);

  it.concurrent('REGISTER 200 OK carries Flow-Timer for outbound clients on stream flows only', async () => {
    const e = await edge.newEndpoint(account, 'outbound');
    const reg = { user: e.username, domain: account.sipDomain, password: e.password, viaPort: 9 };
    const instance = `<urn:uuid:${randomBytes(4).toString('hex')}-0000-4000-8000-000000000000>`;

    const tcp = await streamConn('127.0.0.1', edge.server.ports.tcp as number, false);
    const ob = await registerWithAuth(tcp, {
      ...reg,
      transport: 'TCP',
      viaHost: tcp.localHost,
      callId: randomBytes(8).toString('hex'),
      contacts: [`<sip:${e.username}@${tcp.localHost}:${tcp.localPort};transport=tcp;ob>;reg-id=1;+sip.instance="${instance}"`],
      extra: ['Supported: path, outbound'],
    });
    expect(ob.final.status).toBe(200);
    expect(ob.final.header('flow-timer')).toBe(String(WS_PING_S));
    expect(ob.final.header('require')).toBe('outbound');

    const tcp2 = await streamConn('127.0.0.1', edge.server.ports.tcp as number, false);
    const plain = await registerWithAuth(tcp2, { ...reg, transport: 'TCP', viaHost: tcp2.localHost, callId: randomBytes(8).toString('hex') });
    expect(plain.final.status).toBe(200);
    expect(plain.final.header('flow-timer')).toBeUndefined();

    // UDP: no flow to keep (STUN keep-alives, RFC 5626 §4.4.2, are not served here).
    const udp = await udpConn('127.0.0.1', edge.server.ports.udp as number);
    const overUdp = await registerWithAuth(udp, {
      ...reg,
      transport: 'UDP',
      viaHost: '127.0.0.1',
      viaPort: udp.localPort,
      callId: randomBytes(8).toString('hex'),
      contacts: [`<sip:${e.username}@127.0.0.1:${udp.localPort};ob>;reg-id=1;+sip.instance="${instance.replace('0000-4000', '1111-4000')}"`],
      extra: ['Supported: outbound'],
    });
    expect(overUdp.final.status).toBe(200);
    expect(overUdp.final.header('flow-timer')).toBeUndefined();
    tcp.close();
    tcp2.close();
    udp.close();
  });

  it.concurrent('SIPp over TCP whose packets are dropped both ways: binding gone within 3 × SIP_PING_INTERVAL (the OPTIONS probe unanswered), connection count back to 0', async () => {
    if (process.getuid?.() !== 0) throw new Error('this test needs root: it makes a network namespace and a veth pair (ip netns, tc)');
    // A server of its own, listening on the host end of the veth pair.
    const ns = new Netns();
    const dir = mkdtempSync(join(tmpdir(), 'sipp-netns-'));
    let tcpEdge: Edge | null = null;
    let sipp: ChildProcess | null = null;
    try {
      ns.create();
      tcpEdge = await startEdge({ SIP_HOST: ns.hostAddr, SIP_IDLE_TIMEOUT: String(IDLE_S), SIP_PING_INTERVAL: String(PING_S), SIP_WSS_PORT: 'off', SIP_TLS_PORT: 'off' });
      const tcpAccount = await tcpEdge.newAccount();
      const e = await tcpEdge.newEndpoint(tcpAccount, 'dropped');
      const inf = join(dir, 'users.csv');
      writeFileSync(inf, `SEQUENTIAL\n${e.username};${tcpAccount.sipDomain};[authentication username=${e.username} password=${e.password}]\n`);
      // `ip netns exec` execs SIPp itself: this PID is SIPp's. The namespace is new: port 5060 is free in it.
      sipp = spawn(
        'ip',
        ['netns', 'exec', ns.name, 'sipp', `${ns.hostAddr}:${tcpEdge.server.ports.tcp}`, '-sf', join(ROOT, 'sipp-scenarios', 'register-refresh-hold.xml'),
          '-inf', inf, '-t', 't1', '-i', ns.nsAddr, '-p', '5060', '-m', '1', '-d', '120000', '-key', 'expires', '3600',
          '-aa', '-nostdin', '-timeout', '150', '-recv_timeout', '10000'],
        { stdio: 'ignore' },
      );
      await tcpEdge.waitForEndpoint(e, (v) => v.sip_registered === 'true' && v.sip_registrations.length === 1, 10_000);
      // A quiet TCP flow with a binding outlives SIP_IDLE_TIMEOUT (kernel probes answered meanwhile).
      await sleep((IDLE_S + 1) * 1000);
      expect((await tcpEdge.endpoint(e)).sip_registered).toBe('true');
      expect(await metric(tcpEdge, 'sip_connections_open', { transport: 'tcp' })).toBe(1);

      ns.dropAll();
      const dropped = Date.now();
      const ms = await msUntilUnregistered(tcpEdge, e, dropped, (PING_S + 10) * 1000 + 5000);
      // The OPTIONS probe of a quiet held flow (SIPp -aa answers it while packets flow) goes
      // unanswered once they are dropped: cut 2 × SIP_PING_INTERVAL after it, before the
      // kernel's keep-alive (which Linux does not send while the probe is unacknowledged).
      const bound = 3 * PING_S * 1000 + 250;
      console.log(`TCP peer behind dropped packets (SIP_PING_INTERVAL ${PING_S} s): binding gone ${ms} ms after the drop (bound ${bound} ms after its last packet)`);
      expect(ms).toBeGreaterThanOrEqual(2 * PING_S * 1000 - 300); // the probe had its 2 intervals
      expect(ms).toBeLessThanOrEqual(bound + 500);
      expect(await metric(tcpEdge, 'sip_connections_open', { transport: 'tcp' })).toBe(0);
      expect((await fetch(`${tcpEdge.base}/healthz`)).status).toBe(200);
      expect(alive(tcpEdge.server.child)).toBe(true);
    } finally {
      if (sipp && alive(sipp)) sipp.kill('SIGKILL');
      await tcpEdge?.stop();
      ns.destroy();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 60_000);
});
