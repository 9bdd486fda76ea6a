/**
 * The fleet relay (docs/fleet.md "Relay"): with SIP_WORKERS=2, WebSocket clients
 * sit on both workers and UDP callers land on either; MESSAGEs and calls
 * (INVITE → 200 → ACK → BYE) reach the right connection whichever worker took the
 * request, and every response finds its way back. Each WebSocket client records
 * every frame, so the test counts on the wire what reached whom. Three nodes: real
 * clients (SIP.js over WS, SIPp over UDP and TCP) call and message each other over
 * every ordered pair of nodes.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RedisLocationStore } from '../../src/store/location/redis.js';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { cidStr, sipp, TestUa, type SippResult } from '../support/proxy-harness.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { wsPhone } from '../support/ws-phone.js';
import { until } from '../support/wait.js';
import { ltsRuntime } from '../support/runtimes.js';
import { startPhoneProcess, type PhoneProcess } from '../support/phone-process.js';
import { runSipp, type SippRun } from '../support/sipp.js';

describe('fleet relay between the workers of a node (SIP_WORKERS=2, Redis)', () => {
  let redis: RedisServerHandle;
  let edge: Edge;
  let admin: Redis;
  const closers: Array<() => void> = [];

  beforeAll(async () => {
    redis = await startRedis();
    admin = new Redis(redis.url);
    edge = await startEdge({ REDIS_URL: redis.url, SIP_WORKERS: '2' });
    await until('both workers listening', () => (edge.server.logs.filter((l) => l.msg === 'worker listening').length >= 2 ? true : undefined), 30_000);
  }, 60_000);
  afterAll(async () => {
    for (const c of closers) c();
    admin?.disconnect();
    await edge?.stop();
    await redis?.stop();
  });

  it('MESSAGEs and calls from UDP callers on either worker reach WebSocket phones on both, and every answer comes back', async () => {
    const a = await edge.newAccount();
    const bob = await edge.newEndpoint(a, 'bob');
    const carol = await edge.newEndpoint(a, 'carol');
    const url = `ws://127.0.0.1:${edge.server.ports.ws}`;
    // Bob's phones until his bindings sit on both workers.
    const phones: Array<Awaited<ReturnType<typeof wsPhone>>> = [];
    const location = new RedisLocationStore(admin);
    for (let i = 0; i < 10; i++) {
      const p = await wsPhone(url, bob, `bob${i}`);
      closers.push(() => p.conn.close());
      expect(p.status).toBe(200);
      phones.push(p);
      const owners = new Set((await location.lookup({ domain: a.sipDomain, user: 'bob' })).map((b) => b.nodeId));
      if (owners.size >= 2 && phones.length >= 2) break;
    }
    const owners = new Set((await location.lookup({ domain: a.sipDomain, user: 'bob' })).map((b) => b.nodeId));
    expect(owners.size, 'bob has bindings on both workers').toBe(2);

    // MESSAGEs from callers on many source ports: every one answered 200, and every
    // phone of bob gets every one (a MESSAGE forks to every binding).
    const callers: TestUa[] = [];
    for (let i = 0; i < 8; i++) {
      const ua = await TestUa.start(edge.server.ports.udp as number, carol);
      closers.push(() => ua.close());
      callers.push(ua);
    }
    expect(await callers[0]!.register()).toBe(200);
    const statuses: number[] = [];
    for (let i = 0; i < 16; i++) statuses.push((await callers[i % callers.length]!.call('MESSAGE', `sip:bob@${a.sipDomain}`)).status);
    expect(statuses).toEqual(new Array(16).fill(200));
    await until('every phone got every MESSAGE', () => (phones.every((p) => p.count('MESSAGE') === 16) ? true : undefined), 5000).catch((e: Error) => {
      throw new Error(`${e.message}: ${phones.map((p) => p.count('MESSAGE')).join(',')}\n${edge.server.output().split('\n').filter((l) => /fleet|relay|dropped|gone/.test(l)).slice(-8).join('\n')}`);
    });

    // Calls to dan, one WebSocket phone, from callers on many source ports: INVITE → 200 → ACK → BYE → 200 each time.
    const dan = await edge.newEndpoint(a, 'dan');
    const danPhone = await wsPhone(url, dan, 'dan0');
    closers.push(() => danPhone.conn.close());
    const calls: number[] = [];
    const byes: number[] = [];
    for (let i = 0; i < 10; i++) {
      const ua = callers[i % callers.length]!;
      const res = await ua.call('INVITE', `sip:dan@${a.sipDomain}`, { keep: true });
      calls.push(res.status);
      if (res.status === 200 && ua.lastDialog) byes.push(await ua.lastDialog.bye());
    }
    expect(calls).toEqual(new Array(10).fill(200));
    expect(byes).toEqual(new Array(10).fill(200));
    await until('dan got every ACK and BYE', () => (danPhone.count('ACK') === 10 && danPhone.count('BYE') === 10 ? true : undefined), 5000);
    expect(danPhone.count('INVITE')).toBe(10);
    // Nothing reached the wrong device: bob's phones saw no INVITE for dan.
    for (const p of phones) expect(p.count('INVITE')).toBe(0);
    const relayedLines = edge.server.output().split('\n').filter((l) => l.includes('relay')).length;
    console.log(`fleet relay: 16/16 MESSAGEs 200 to ${phones.length} phones on 2 workers, 10/10 calls and BYEs 200; relay log lines ${relayedLines}`);
  }, 90_000);
});

// On the LTS runtime: each worker has its own SO_REUSEPORT UDP socket, so a phone's
// CANCEL reaches the worker that holds its INVITE (on Node 20's shared socket it may
// not: docs/workers.md).
describe('a fleet of three nodes (127.0.0.2-4, SIP_WORKERS=2 each, one Redis, LTS runtime)', () => {
  let redis: RedisServerHandle;
  const nodes: Edge[] = [];
  const closers: Array<() => void> = [];
  const HOSTS = ['127.0.0.2', '127.0.0.3', '127.0.0.4'];

  beforeAll(async () => {
    redis = await startRedis();
    for (const host of HOSTS) {
      nodes.push(
        await startEdge(
          { REDIS_URL: redis.url, SIP_WORKERS: '2', SIP_HOST: host, NONCE_SECRET: 'fleet-three-nodes-nonce-secret-0123', NODE_ID: `n${host.slice(-1)}` },
          { node: ltsRuntime().bin },
        ),
      );
    }
    for (const n of nodes) await until('workers', () => (n.server.logs.filter((l) => l.msg === 'worker listening').length >= 2 ? true : undefined), 30_000);
  }, 120_000);
  afterAll(async () => {
    for (const c of closers) c();
    for (const n of nodes) await n.stop();
    await redis?.stop();
  });

  it('UDP phones on two nodes reach WebSocket phones on the third and each other: 200 MESSAGEs and 200 calls, every one delivered to the right device', async () => {
    const [wsNode, n3, n4] = nodes as [Edge, Edge, Edge];
    const a: Account = await wsNode.newAccount();
    // Three WebSocket phones on node .2, each its own endpoint.
    const ws: Array<{ e: Endpoint; p: Awaited<ReturnType<typeof wsPhone>> }> = [];
    for (let i = 0; i < 3; i++) {
      const e = await wsNode.newEndpoint(a, `web${i}`);
      const p = await wsPhone(`ws://${HOSTS[0]}:${wsNode.server.ports.ws}`, e, `web${i}`);
      closers.push(() => p.conn.close());
      expect(p.status).toBe(200);
      ws.push({ e, p });
    }
    // UDP phones: two on node .3, two on node .4.
    const udp: Array<{ e: Endpoint; ua: TestUa }> = [];
    for (const [k, n] of [n3, n3, n4, n4].entries()) {
      const e = await wsNode.newEndpoint(a, `desk${k}`);
      const ua = await TestUa.start(n.server.ports.udp as number, e);
      ua.edgeHost = HOSTS[nodes.indexOf(n)] as string;
      closers.push(() => ua.close());
      expect(await ua.register()).toBe(200);
      udp.push({ e, ua });
    }
    let messages = 0;
    let calls = 0;
    let lastInvite = 0;
    const failures: string[] = [];
    // 200 MESSAGEs and 200 calls spread over every (UDP caller, target) pair: WebSocket
    // targets on node .2, UDP targets on the other UDP node.
    for (let i = 0; i < 200 && failures.length < 3; i++) {
      const from = udp[i % udp.length]!;
      const toWs = i % 2 === 0;
      const target = toWs ? ws[i % ws.length]!.e : udp[(i + 2) % udp.length]!.e;
      const uri = `sip:${target.username}@${a.sipDomain}`;
      const m = await from.ua.call('MESSAGE', uri).catch((e: Error) => ({ status: e.message }));
      if (m.status === 200) messages++;
      else failures.push(`#${i} MESSAGE ${from.e.username}→${target.username}: ${m.status}`);
      // The account's cps_limit (10 by default) applies fleet-wide: calls are paced under it.
      const wait = lastInvite + 110 - Date.now();
      if (wait > 0) await new Promise((r) => setTimeout(r, wait));
      lastInvite = Date.now();
      const c = await from.ua.call('INVITE', uri, { keep: true }).catch((e: Error) => ({ status: e.message }));
      if (c.status === 200 && from.ua.lastDialog) {
        const bye = await from.ua.lastDialog.bye().catch((e: Error) => e.message);
        if (bye === 200) calls++;
        else failures.push(`BYE ${from.e.username}→${target.username}: ${bye}`);
      } else failures.push(`#${i} INVITE ${from.e.username}→${target.username}: ${c.status}`);
    }
    console.log(`three nodes: ${messages}/200 MESSAGEs and ${calls}/200 calls (INVITE, 200, ACK, BYE) delivered; failures: ${failures.slice(0, 5).join('; ') || 'none'}`);
    expect(failures).toEqual([]);
    // On the wire: each WebSocket phone got exactly the requests addressed to it.
    for (const { e, p } of ws) {
      const requests = p.frames.filter((f) => /^(MESSAGE|INVITE|BYE) /.test(f));
      for (const f of requests.filter((x) => !x.startsWith('BYE'))) expect(f.startsWith(`${f.split(' ')[0]} sip:${e.username}@`), f.slice(0, 80)).toBe(true);
      const expected = [...Array(200).keys()].filter((i) => i % 2 === 0 && i % ws.length === ws.findIndex((w) => w.e === e)).length;
      expect(p.count('MESSAGE')).toBe(expected);
      expect(p.count('INVITE')).toBe(expected);
      expect(p.count('BYE')).toBe(expected);
    }
  }, 300_000);

  it('SIP.js phones over WS and SIPp phones over UDP and TCP, on every ordered pair of nodes: 204 calls (answered and cancelled, both directions) and 204 MESSAGEs, each on the right device', async () => {
    const N = 16; // answered calls, and MESSAGEs, per direction and pair of nodes
    const pairs: Array<[number, number]> = [];
    for (let x = 0; x < 3; x++) for (let y = 0; y < 3; y++) if (x !== y) pairs.push([x, y]);
    const wsUrl = (i: number): string => `ws://${HOSTS[i]}:${(nodes[i] as Edge).server.ports.ws}`;
    type PairRun = { label: string; phone: PhoneProcess; cids: string[]; out: string[]; sipp: Array<[string, SippRun, string]> };

    /** SIP.js on node x, SIPp on node y; one account per pair (each has its own cps_limit of 10). */
    const runPair = async ([x, y]: [number, number]): Promise<PairRun> => {
      const nx = nodes[x] as Edge;
      const ny = nodes[y] as Edge;
      const label = `${HOSTS[x]}(SIP.js)↔${HOSTS[y]}(SIPp)`;
      const a = await nx.newAccount();
      const aor = (e: Endpoint): string => `sip:${e.username}@${a.sipDomain}`;
      const js = await nx.newEndpoint(a, `js${x}${y}`);
      const phone = startPhoneProcess(wsUrl(x), js, { answer: true });
      closers.push(() => phone.child.kill('SIGKILL'));
      await until(`${label}: SIP.js registered`, () => (phone.events.some((ev) => ev.state === 'Registered') ? true : undefined), 15_000);
      const sippRuns: Array<[string, SippRun, string]> = [];
      const cids: string[] = [];
      const out: string[] = [];
      const sippAs = async (what: string, scenario: string, e: Endpoint, transport: 'udp' | 'tcp', calls: number, extra: { keys?: Record<string, string>; rate?: number; pauseMs?: number } = {}): Promise<{ run: Promise<SippRun>; cid: string }> => {
        const cid = cidStr();
        cids.push(cid.split('%u')[0] as string);
        const run = runSipp({
          scenario,
          host: HOSTS[y],
          port: ny.server.ports[transport] as number,
          transport,
          users: [{ user: e.username, domain: a.sipDomain, password: e.password }],
          calls,
          rate: extra.rate ?? 50,
          cidStr: cid,
          keys: extra.keys,
          pauseMs: extra.pauseMs,
          traceMessages: true,
          recvTimeoutMs: null,
          timeoutMs: 60_000,
        }).then((r) => {
          sippRuns.push([what, r, e.username]);
          return r;
        });
        return { run, cid };
      };

      // 1. SIP.js → SIPp UAS over UDP: N answered calls (the callee's SIPp maps each INVITE to its call by Call-ID).
      const uas = await ny.newEndpoint(a, `uas${x}${y}`);
      const u = await sippAs('UAS answering', 'call-uas-answer.xml', uas, 'udp', N);
      await ny.waitBindings(uas, 1);
      // SIPp registers once per call (each waits for its own INVITE): let all N registrations finish.
      await new Promise((r) => setTimeout(r, 1500));
      for (let k = 1; k <= N; k++) {
        await new Promise((r) => setTimeout(r, 110)); // under the account's cps_limit (10)
        const r = await phone.command({ cmd: 'call', to: aor(uas), callId: u.cid.replace('%u', String(k)), holdMs: 50 }).catch((err: Error) => ({ invite: err.message, bye: null }));
        out.push(`call→UDP ${r.invite}/${r.bye}`);
      }
      // 2. SIP.js → SIPp over UDP: a call cancelled after the 180.
      const ringer = await ny.newEndpoint(a, `uasring${x}${y}`);
      const rc = await sippAs('UAS ringing, cancelled', 'call-uas-ring-cancel.xml', ringer, 'udp', 1);
      await ny.waitBindings(ringer, 1);
      await new Promise((r) => setTimeout(r, 110));
      const cancelled = await phone.command({ cmd: 'call', to: aor(ringer), callId: rc.cid.replace('%u', '1'), cancel: true }).catch((err: Error) => ({ invite: err.message }));
      out.push(`cancel→UDP ${cancelled.invite}`);
      // 3. SIPp UAC over TCP → SIP.js: N answered calls (INVITE, 200, ACK, BYE from the SIPp side).
      const uac = await ny.newEndpoint(a, `uac${x}${y}`);
      const c = await sippAs('UAC calling SIP.js', 'call-uac.xml', uac, 'tcp', N, { keys: { callee: js.username }, rate: 8, pauseMs: 50 });
      // 4. SIPp UAC over TCP → SIP.js, cancelled before the answer (a caller named "ring…" is only rung).
      const cancelCaller = await ny.newEndpoint(a, `ringuac${x}${y}`);
      await c.run;
      const cc = await sippAs('UAC cancelling', 'call-uac-cancel.xml', cancelCaller, 'tcp', 1, { keys: { callee: js.username }, pauseMs: 300 });
      await cc.run;
      // 5. MESSAGEs: SIP.js → SIPp over UDP, then SIPp over TCP → SIP.js.
      const mrcpt = await ny.newEndpoint(a, `muas${x}${y}`);
      const mu = await sippAs('MESSAGE recipient', 'message-uas.xml', mrcpt, 'udp', N);
      await ny.waitBindings(mrcpt, 1);
      await new Promise((r) => setTimeout(r, 1500));
      for (let k = 1; k <= N; k++) {
        const r = await phone.command({ cmd: 'message', to: aor(mrcpt), callId: mu.cid.replace('%u', String(k)) }).catch((err: Error) => ({ status: err.message }));
        out.push(`message→UDP ${r.status}`);
      }
      const msender = await ny.newEndpoint(a, `muac${x}${y}`);
      const mc = await sippAs('MESSAGE sender', 'message-uac.xml', msender, 'tcp', N + 2, { keys: { callee: js.username }, rate: 20 });
      await Promise.all([u.run, rc.run, mu.run, mc.run]);
      return { label, phone, cids, out, sipp: sippRuns };
    };

    const t0 = Date.now();
    // Two pairs at a time: the machine has two cores for three nodes of three processes each.
    const results: PairRun[] = [];
    for (let i = 0; i < pairs.length; i += 2) results.push(...(await Promise.all(pairs.slice(i, i + 2).map(runPair))));
    const seconds = (Date.now() - t0) / 1000;

    let calls = 0;
    let messages = 0;
    const failures: string[] = [];
    for (const r of results) {
      for (const o of r.out) {
        const ok = o.startsWith('call→UDP') ? o.endsWith(' 200/200') : o.startsWith('cancel') ? o.endsWith(' 487') : o.endsWith(' 200');
        if (!ok) failures.push(`${r.label} SIP.js ${o}`);
        else if (o.startsWith('message')) messages++;
        else calls++;
      }
      for (const [what, run, user] of r.sipp) {
        // A late UDP retransmission of a request to this very phone, after its SIPp call ended
        // (the 200 crossed it), is discarded by SIPp: not a fault; anything else discarded is.
        run.errors = run.errors
          .split(/\n(?=\d{4}-\d\d-\d\d\t)/)
          .filter((entry) => !(entry.includes("Discarding message which can't be mapped") && new RegExp(`\\n(MESSAGE|INVITE|BYE|ACK) sip:${user}@`).test(entry) && r.cids.some((c) => entry.includes(`Call-ID: ${c}`))))
          .join('\n')
          .trim();
        const expected = what === 'UAS answering' || what === 'UAC calling SIP.js' || what === 'MESSAGE recipient' ? N : what === 'MESSAGE sender' ? N + 2 : 1;
        if (run.code !== 0 || run.successful !== expected || run.failed !== 0 || run.errors !== '') {
          failures.push(`${r.label} SIPp ${what}: exit ${run.code}, ${run.successful}/${expected} ok, ${run.failed} failed ${run.errors.slice(0, 1500)}`);
          continue;
        }
        if (what === 'UAC calling SIP.js' || what === 'UAC cancelling') calls += run.successful;
        if (what === 'MESSAGE sender') messages += run.successful;
        // On the wire at the SIPp phone: every INVITE and MESSAGE it received was addressed to it.
        for (const line of run.messages.split('\n').filter((l) => /^\s*(INVITE|MESSAGE) sip:/.test(l) && (what.startsWith('UAS') || what === 'MESSAGE recipient'))) {
          if (!line.trim().startsWith(`${line.trim().split(' ')[0]} sip:${user}@`)) failures.push(`${r.label} SIPp ${what} (${user}) received ${line.trim().slice(0, 80)}`);
        }
      }
      // On the wire at the SIP.js phone: only requests of its own pair's calls and MESSAGEs.
      const got = r.phone.events.filter((ev) => ev.event === 'request' && ev.method !== 'OPTIONS');
      const foreign = got.filter((ev) => !r.cids.some((c) => String(ev.callId).startsWith(c)));
      if (foreign.length > 0) failures.push(`${r.label}: SIP.js phone got ${foreign.length} requests of other calls, e.g. ${foreign[0]?.method} ${foreign[0]?.callId}`);
      const count = (m: string): number => got.filter((ev) => ev.method === m).length;
      if (count('INVITE') !== N + 1 || count('MESSAGE') !== N + 2 || count('BYE') !== N || count('CANCEL') !== 1) {
        failures.push(`${r.label}: SIP.js phone got INVITE ${count('INVITE')}, MESSAGE ${count('MESSAGE')}, BYE ${count('BYE')}, CANCEL ${count('CANCEL')}`);
      }
    }
    const kinds = new Map<string, number>();
    for (const f of failures) kinds.set(f.replace(/[\d.]+\(SIP\.js\)↔[\d.]+\(SIPp\) /, '').slice(0, 60), (kinds.get(f.replace(/[\d.]+\(SIP\.js\)↔[\d.]+\(SIPp\) /, '').slice(0, 60)) ?? 0) + 1);
    console.log(`three nodes, SIP.js ↔ SIPp on ${pairs.length} ordered pairs of nodes: ${calls} calls and ${messages} MESSAGEs delivered in ${seconds.toFixed(1)} s; failures: ${failures.length ? [...kinds].map(([k, v]) => `${v} × ${k}`).join(' | ') : 'none'}`);
    expect(failures).toEqual([]);
    expect(calls).toBeGreaterThanOrEqual(200);
    expect(messages).toBeGreaterThanOrEqual(200);
  }, 600_000);

  it('SIPp phones on different nodes: an answered call (INVITE, 180, 200, ACK, BYE) and a CANCEL before the answer, from UDP on one node to TCP on another', async () => {
    const [n2, n3] = nodes as [Edge, Edge, Edge];
    const a = await n2.newAccount();
    const completed = (r: SippResult, who: string): void => {
      expect(r.errors, `${who}: ${r.errors}`).toBe('');
      expect(r.code, `${who} exit status`).toBe(0);
      expect(r.successful, `${who} successful calls`).toBe(1);
      expect(r.failed, `${who} failed calls`).toBe(0);
    };
    for (const [uas, uac] of [
      ['call-uas-answer.xml', 'call-uac.xml'],
      ['call-uas-ring-cancel.xml', 'call-uac-cancel.xml'],
    ] as const) {
      const callee = await n2.newEndpoint(a, `tcp${uas.length}${uac.length}`);
      const caller = await n2.newEndpoint(a, `udp${uas.length}${uac.length}`);
      const cid = cidStr();
      // The callee's TCP flow is held by a process of node .2; the caller sends to node .3.
      const b = sipp({ scenario: uas, host: HOSTS[0], port: n2.server.ports.tcp as number, transport: 'tcp', endpoint: callee, cidStr: cid });
      await n2.waitBindings(callee, 1);
      const c = await sipp({ scenario: uac, host: HOSTS[1], port: n3.server.ports.udp as number, transport: 'udp', endpoint: caller, cidStr: cid, keys: { callee: callee.username }, pauseMs: 200 });
      completed(c, `caller (${uac})`);
      completed(await b, `callee (${uas})`);
    }
  }, 120_000);

  it('SIP.js phones over WS on node .2 and UDP phones on nodes .3/.4 exchange MESSAGEs in both directions', async () => {
    const [n2, n3, n4] = nodes as [Edge, Edge, Edge];
    const a = await n2.newAccount();
    const desks: Array<{ e: Endpoint; ua: TestUa }> = [];
    for (const [k, n] of [n3, n4].entries()) {
      const e = await n2.newEndpoint(a, `sdesk${k}`);
      const ua = await TestUa.start(n.server.ports.udp as number, e);
      ua.edgeHost = HOSTS[nodes.indexOf(n)] as string;
      closers.push(() => ua.close());
      expect(await ua.register()).toBe(200);
      desks.push({ e, ua });
    }
    // Two SIP.js phones on node .2: each sends 10 MESSAGEs to a UDP phone on another node.
    const browsers: Array<{ e: Endpoint; p: PhoneProcess }> = [];
    for (let k = 0; k < 2; k++) {
      const e = await n2.newEndpoint(a, `sjs${k}`);
      const p = startPhoneProcess(`ws://${HOSTS[0]}:${n2.server.ports.ws}`, e, { messageTo: `sip:${desks[k]!.e.username}@${a.sipDomain}`, messageCount: 10 });
      closers.push(() => p.child.kill('SIGKILL'));
      browsers.push({ e, p });
    }
    await until('the SIP.js phones sent their MESSAGEs', () => (browsers.every((b) => b.p.count('sent') === 10) ? true : undefined), 30_000);
    for (const b of browsers) expect(b.p.events.filter((x) => x.event === 'sent').map((x) => x.status)).toEqual(new Array(10).fill(200));
    // Each UDP phone got exactly its 10.
    for (const d of desks) expect(d.ua.requests.filter((r) => r.method === 'MESSAGE').length).toBe(10);
    // And back: each UDP phone sends 10 MESSAGEs to a SIP.js phone on node .2.
    for (const [k, d] of desks.entries()) {
      for (let i = 0; i < 10; i++) expect((await d.ua.call('MESSAGE', `sip:${browsers[k]!.e.username}@${a.sipDomain}`)).status).toBe(200);
    }
    await until('the SIP.js phones got theirs', () => (browsers.every((b) => b.p.count('message') === 10) ? true : undefined), 10_000);
    console.log('three nodes, SIP.js: 20/20 MESSAGEs WS→UDP and 20/20 UDP→WS across nodes');
  }, 120_000);

  it('WebSocket phones on node .2 call UDP phones on nodes .3/.4 (INVITE, 200, ACK, BYE): the other direction', async () => {
    const [n2, n3, n4] = nodes as [Edge, Edge, Edge];
    const a = await n2.newAccount();
    const desks: Array<{ e: Endpoint; ua: TestUa }> = [];
    for (const [k, n] of [n3, n4].entries()) {
      const e = await n2.newEndpoint(a, `cdesk${k}`);
      const ua = await TestUa.start(n.server.ports.udp as number, e);
      ua.edgeHost = HOSTS[nodes.indexOf(n)] as string;
      closers.push(() => ua.close());
      expect(await ua.register()).toBe(200);
      desks.push({ e, ua });
    }
    const callers = [];
    for (let k = 0; k < 2; k++) {
      const e = await n2.newEndpoint(a, `cweb${k}`);
      const p = await wsPhone(`ws://${HOSTS[0]}:${n2.server.ports.ws}`, e, `cweb${k}`);
      closers.push(() => p.conn.close());
      expect(p.status).toBe(200);
      callers.push(p);
    }
    const results: string[] = [];
    for (let i = 0; i < 20; i++) {
      // Paced under the account's cps_limit.
      await new Promise((r) => setTimeout(r, 110));
      const desk = desks[i % 2]!;
      const r = await callers[i % 2]!.call(`sip:${desk.e.username}@${a.sipDomain}`);
      results.push(`${r.invite}/${r.bye}`);
    }
    expect(results).toEqual(new Array(20).fill('200/200'));
    await until('every INVITE, ACK and BYE on the UDP phones', () => (desks.every((d) => d.ua.requests.filter((q) => q.method === 'BYE').length === 10) ? true : undefined), 5000);
    for (const d of desks) expect(d.ua.requests.filter((q) => q.method === 'INVITE').length).toBe(10);
    console.log('three nodes: 20/20 calls from WebSocket phones on node .2 to UDP phones on nodes .3/.4');
  }, 120_000);
});
