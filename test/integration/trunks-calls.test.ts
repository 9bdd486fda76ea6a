/**
 * The phone network on the wire (issue 23 items 4–6; docs/trunks.md "Inbound", "Outbound"):
 * a real server, SIPp phones, and SIPp "carriers" on 127.0.0.7–127.0.0.9 configured through
 * the API (numbers bought from the inventory, trunks with origination URIs, IP ACLs and
 * credentials).
 *
 * - out: the priority-1 gateway answers 503, the priority-2 one 200; the carrier sees the
 *   account's number as caller ID; the CDR names the trunk, the number and the gateway;
 * - 100 calls over two gateways of one priority weighted 3:1 split within ±10 %;
 * - a carrier that challenges gets the trunk's credential (SIPp verifies the digest);
 * - every gateway silent → 503 to the caller within 5 s, and the next call 503 at once;
 * - in: a carrier in an INBOUND trunk's ACL calls a number routed to an endpoint: the
 *   endpoint's SIPp answers; from an address in no ACL the same INVITE is challenged; an
 *   unknown number gets 404; a disabled trunk 403.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { getHeader } from '../../src/sip/headers.js';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { cidStr, sipp, TestUa } from '../support/proxy-harness.js';
import { freePort } from '../support/ports.mjs';
import { runSipp, type SippRun } from '../support/sipp.js';
import { until } from '../support/wait.js';

const ADMIN = 'trunks-test-admin-token-0123456789';
const INVENTORY = `e164,country,region,number_type,setup_fee,monthly_fee,currency,provider
+918040000001,IN,Karnataka,landline,1.00,2.00,USD,test
+918040000002,IN,Karnataka,landline,1.00,2.00,USD,test
+918040000003,IN,Karnataka,landline,1.00,2.00,USD,test
+918040000004,IN,Karnataka,landline,1.00,2.00,USD,test
+918040000005,IN,Karnataka,landline,1.00,2.00,USD,test
+918040000006,IN,Karnataka,landline,1.00,2.00,USD,test
`;
const DIALLED = '+918012345678';

/** The Call-IDs of the INVITEs a SIPp received (its message trace). */
function invitedCallIds(messages: string): Set<string> {
  const ids = new Set<string>();
  for (const block of messages.split(/\n-{10,}/)) {
    if (!/message received[^\n]*\n\s*INVITE sip:/.test(block)) continue;
    const id = /^Call-ID:\s*(\S+)/im.exec(block)?.[1];
    if (id) ids.add(id);
  }
  return ids;
}

/** A SIPp carrier on `ip`: the scenario, as many calls as it may take, killed when `stop` settles. */
async function carrier(ip: string, scenario: string, o: { calls?: number; stop?: Promise<unknown>; keys?: Record<string, string>; port?: number } = {}): Promise<{ port: number; run: Promise<SippRun> }> {
  const port = o.port ?? (await freePort());
  const run = runSipp({
    scenario,
    host: '127.0.0.1',
    port: 9, // a UAS: never sends first
    transport: 'udp',
    users: [{ user: 'carrier', domain: 'carrier.example', password: 'x' }],
    calls: o.calls ?? 1,
    localIp: ip,
    localPort: port,
    keys: o.keys,
    stop: o.stop,
    stopSignal: 'SIGKILL',
    // A carrier answers OPTIONS (the edge's gateway pings) with 200.
    extraArgs: ['-aa', '-deadcall_wait', '1000'],
    traceMessages: true,
    // A gateway ping (OPTIONS, auto-answered) opens a SIPp call that then waits for an INVITE: let it lapse.
    recvTimeoutMs: 2000,
    timeoutMs: 60_000,
  });
  return { port, run };
}

describe('trunks and numbers on the wire', () => {
  let edge: Edge;
  let dir: string;
  let account: Account;
  let n = 0;

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sip-edge-numbers-'));
    writeFileSync(join(dir, 'numbers.csv'), INVENTORY);
    edge = await startEdge({
      NUMBER_INVENTORY_FILE: join(dir, 'numbers.csv'),
      ADMIN_AUTH_TOKEN: ADMIN,
      TRUNK_PING_INTERVAL: '1',
      SIP_TLS_PORT: 'off',
      SIP_WSS_PORT: 'off',
    });
  }, 60_000);
  const fundedAccount = async (): Promise<Account> => {
    // cps_limit 100: the 100-call test places 50 a second.
    const a = await edge.newAccount({ cps_limit: 100, concurrent_calls_limit: 200 });
    const r = await fetch(`${edge.base}/api/v1/admin/accounts/${a.authId}/credit`, {
      method: 'POST',
      headers: { 'x-admin-token': ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: '100.00', currency: 'USD', description: 'test funds' }),
    });
    expect(r.status, await r.clone().text()).toBeLessThan(300);
    return a;
  };
  /** Each test its own funded account: an account's calls leave through its first OUTBOUND trunk. */
  beforeEach(async () => {
    account = await fundedAccount();
  });
  afterAll(async () => {
    await edge?.stop();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const api = async (method: string, path: string, body?: unknown, a: Account = account) => {
    const r = await edge.api(a, method, path, body);
    return r;
  };
  const ok = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
    const r = await api(method, path, body);
    expect(r.status, `${method} ${path}: ${JSON.stringify(r.json)}`).toBeLessThan(300);
    return r.json as Record<string, unknown>;
  };
  const base = (): string => `/api/v1/Account/${account.authId}`;
  const enc = (e164: string): string => encodeURIComponent(e164);

  /** An endpoint that may call phones, with its own number bought and routed to it. */
  const phoneWithNumber = async (e164: string): Promise<Endpoint> => {
    const e = await edge.newEndpoint(account, `pstn${++n}`, { allow_phones: true });
    await ok('POST', `${base()}/numbers/purchase-from-inventory`, { e164 });
    await ok('POST', `${base()}/numbers/${enc(e164)}/endpoint`, { endpoint_id: e.endpointId });
    return e;
  };
  const trunk = async (type: 'INBOUND' | 'OUTBOUND', extra: Record<string, unknown> = {}): Promise<string> =>
    String((await ok('POST', `${base()}/trunks`, { name: `t${++n}`, trunk_type: type, ...extra })).trunk_id);
  const gateway = async (trunkId: string, uri: string, priority: number, weight = 1): Promise<void> => {
    await ok('POST', `${base()}/origination-uris`, { trunk_id: trunkId, sip_uri: uri, priority, weight });
  };
  const cdrOf = (sipCallIdPart: string): Promise<Record<string, unknown>> =>
    until(
      `the CDR of ${sipCallIdPart}`,
      async () => ((await api('GET', `${base()}/CDR/`)).json.objects as Array<Record<string, unknown>>).find((c) => String(c.sip_call_id).includes(sipCallIdPart)),
      10_000,
    );
  const invitesIn = (messages: string): string[] => messages.split(/\n(?=-{5,}|\S+\s+\d+:\d+)/).filter((m) => /^INVITE sip:/m.test(m));

  it('tries the priority-2 gateway after the priority-1 one answers 503, with the account\'s number as caller ID', async () => {
    const caller = await phoneWithNumber('+918040000001');
    const t = await trunk('OUTBOUND');
    const down = await carrier('127.0.0.7', 'carrier-uas-503.xml');
    const up = await carrier('127.0.0.8', 'carrier-uas.xml');
    await gateway(t, `sip:127.0.0.7:${down.port}`, 1);
    await gateway(t, `sip:127.0.0.8:${up.port}`, 2);
    const cid = cidStr();
    const call = await sipp({ scenario: 'call-uac.xml', port: edge.server.ports.udp as number, transport: 'udp', endpoint: caller, cidStr: cid, keys: { callee: DIALLED } });
    const [d, u] = [await down.run, await up.run];
    expect(call.errors).toBe('');
    expect(call.successful).toBe(1);
    expect(d.successful, d.errors).toBe(1);
    expect(u.successful, u.errors).toBe(1);
    // What the answering carrier saw: the dialled number in E.164, the account's number as caller ID.
    const invite = invitesIn(u.messages)[0] ?? '';
    expect(invite).toMatch(new RegExp(`^INVITE sip:\\${DIALLED}@127\\.0\\.0\\.8:${up.port} SIP/2\\.0`, 'm'));
    expect(invite).toMatch(/^From: <sip:\+918040000001@[^>]+>;tag=/im);
    expect(invite).toMatch(/^P-Asserted-Identity: <sip:\+918040000001@/im);
    expect(/^From: .*$/im.exec(invite)?.[0]).not.toContain(caller.username);
    const cdr = await cdrOf(cid.split('%')[0]);
    // The carrier is the gateway that answered (127.0.0.8), not the one that refused (127.0.0.7).
    expect(cdr).toMatchObject({ call_status: 'answered', to_number: DIALLED, trunk_id: t, phone_number: '+918040000001', context: 'trunk', carrier_address: '127.0.0.8' });
  }, 60_000);

  it('splits 100 calls 3:1 over two gateways of one priority (±10 %)', async () => {
    const caller = await phoneWithNumber('+918040000002');
    const t = await trunk('OUTBOUND');
    let done!: () => void;
    const stop = new Promise<void>((r) => (done = r));
    const heavy = await carrier('127.0.0.7', 'carrier-uas.xml', { calls: 1000, stop });
    const light = await carrier('127.0.0.8', 'carrier-uas.xml', { calls: 1000, stop });
    await gateway(t, `sip:127.0.0.7:${heavy.port}`, 1, 3);
    await gateway(t, `sip:127.0.0.8:${light.port}`, 1, 1);
    const r = await runSipp({
      scenario: 'call-uac.xml',
      port: edge.server.ports.udp as number,
      transport: 'udp',
      users: [{ user: caller.username, domain: account.sipDomain, password: caller.password }],
      calls: 100,
      rate: 50,
      limit: 50,
      keys: { callee: DIALLED },
      timeoutMs: 60_000,
    });
    done();
    const [h, l] = [invitedCallIds((await heavy.run).messages), invitedCallIds((await light.run).messages)];
    expect(r.successful, r.errors).toBe(100);
    // Every call reached one carrier, once (none tried twice: both answered).
    console.log(`3:1 weights: ${h.size} calls to the weight-3 gateway, ${l.size} to the weight-1 one`);
    expect(h.size + l.size).toBe(100);
    expect([...h].filter((id) => l.has(id))).toEqual([]);
    // 75 expected at weight 3 of 4; ±10 % of the calls.
    expect(h.size).toBeGreaterThanOrEqual(65);
    expect(h.size).toBeLessThanOrEqual(85);
  }, 120_000);

  it('refuses to delete a trunk that a number is routed to, naming the number (409)', async () => {
    await phoneWithNumber('+918040000006');
    const t = await trunk('OUTBOUND');
    await ok('POST', `${base()}/numbers/${enc('+918040000006')}/assign`, { trunk_group_id: t });
    const r = await api('DELETE', `${base()}/trunks/${t}`);
    expect(r.status).toBe(409);
    expect(JSON.stringify(r.json)).toContain('+918040000006');
    await ok('DELETE', `${base()}/numbers/${enc('+918040000006')}/assign`);
    expect((await api('DELETE', `${base()}/trunks/${t}`)).status).toBeLessThan(300);
  });

  it('answers a carrier\'s challenge with the trunk\'s credential', async () => {
    const caller = await phoneWithNumber('+918040000003');
    const t = await trunk('OUTBOUND');
    await ok('POST', `${base()}/credentials`, { trunk_id: t, username: `acme-out-${n}`, password: 'Carrier-Secret-42' });
    const gw = await carrier('127.0.0.7', 'carrier-uas-auth.xml', { keys: { authuser: `acme-out-${n}`, authpass: 'Carrier-Secret-42' } });
    await gateway(t, `sip:127.0.0.7:${gw.port}`, 1);
    const call = await sipp({ scenario: 'call-uac.xml', port: edge.server.ports.udp as number, transport: 'udp', endpoint: caller, cidStr: cidStr(), keys: { callee: DIALLED } });
    const g = await gw.run;
    expect(call.errors).toBe('');
    expect(call.successful).toBe(1);
    expect(g.successful, g.errors).toBe(1);
    const [first, second] = invitesIn(g.messages);
    expect(first).toMatch(/^CSeq: 4 INVITE/im);
    expect(second).toMatch(/^CSeq: 5 INVITE/im);
    expect(second).toMatch(/^Authorization: Digest .*realm="carrier\.example".*qop=auth/im);
    // The caller's later requests carry the CSeq the carrier expects (one up): its ACK 5, its BYE 6
    // (the last ACK: the first one is the edge's own for the 401).
    const received = (method: string): string => [...g.messages.split(/\n(?=-{5,})/)].reverse().find((m) => new RegExp(`received[^\\n]*\\n\\s*${method} sip:`).test(m)) ?? '';
    expect(received('ACK')).toMatch(/^CSeq: 5 ACK/im);
    expect(received('BYE')).toMatch(/^CSeq: 6 BYE/im);
    // The password never leaves in the clear.
    expect(g.messages).not.toContain('Carrier-Secret-42');
  }, 60_000);

  it('answers 503 within 5 s when no gateway answers, then 503 at once while they stay down; a gateway that answers pings again is used again', async () => {
    const caller = await phoneWithNumber('+918040000004');
    const t = await trunk('OUTBOUND');
    const firstPort = await freePort();
    await gateway(t, `sip:127.0.0.7:${firstPort}`, 1);
    await gateway(t, `sip:127.0.0.8:${await freePort()}`, 2);
    const upMetric = async (): Promise<string | undefined> =>
      (await (await fetch(`${edge.base}/metrics`)).text()).split('\n').find((l) => l.startsWith('sip_trunk_gateway_up{') && l.includes(t) && l.includes(`127.0.0.7:${firstPort}`));
    const ua = await TestUa.start(edge.server.ports.udp as number, caller);
    try {
      expect(await ua.register()).toBe(200);
      const t0 = Date.now();
      const first = await ua.call('INVITE', `sip:${DIALLED}@${account.sipDomain}`);
      const took = Date.now() - t0;
      expect(first.status).toBe(503);
      expect(took).toBeLessThan(5000);
      const t1 = Date.now();
      const second = await ua.call('INVITE', `sip:${DIALLED}@${account.sipDomain}`);
      expect(second.status).toBe(503);
      expect(getHeader(second, 'warning')).toMatch(/no origination URI of trunk/);
      expect(Date.now() - t1).toBeLessThan(1000);
      expect(await upMetric()).toMatch(/ 0$/);
      // The first gateway comes back: its pings are answered, calls use it again.
      // (Each auto-answered ping counts as a SIPp call: room for many, killed at the end.)
      let stop!: () => void;
      const back = await carrier('127.0.0.7', 'carrier-uas.xml', { port: firstPort, calls: 1000, stop: new Promise<void>((r) => (stop = r)) });
      await until('the gateway up again', async () => ((await upMetric())?.endsWith(' 1') ? true : undefined), 5000);
      const third = await ua.call('INVITE', `sip:${DIALLED}@${account.sipDomain}`);
      expect(third.status).toBe(200);
      await new Promise((r) => setTimeout(r, 300)); // its BYE
      stop();
      expect(invitedCallIds((await back.run).messages).size).toBe(1);
    } finally {
      ua.close();
    }
  }, 30_000);

  describe('calls from the phone network', () => {
    let callee: Endpoint;
    let inbound: string;
    let owner: Account;
    const NUMBER = '+918040000005';

    beforeAll(async () => {
      account = owner = await fundedAccount();
      callee = await phoneWithNumber(NUMBER);
      inbound = await trunk('INBOUND');
      await ok('POST', `${base()}/ip-acl`, { trunk_id: inbound, ip_address: '127.0.0.9/32' });
    }, 30_000);
    beforeEach(() => {
      account = owner;
    });

    it('rings the endpoint a number is routed to when a carrier in the ACL calls it', async () => {
      const cid = cidStr();
      const port = edge.server.ports.udp as number;
      const answer = sipp({ scenario: 'call-uas-answer.xml', port, transport: 'udp', endpoint: callee, cidStr: cid });
      await edge.waitBindings(callee, 1);
      const pstn = await runSipp({
        scenario: 'carrier-uac.xml',
        port,
        transport: 'udp',
        users: [{ user: 'carrier', domain: 'carrier.example', password: 'x' }],
        calls: 1,
        localIp: '127.0.0.9',
        cidStr: cid,
        keys: { dialled: NUMBER },
        traceMessages: true,
        timeoutMs: 30_000,
      });
      const b = await answer;
      expect(pstn.errors).toBe('');
      expect(pstn.successful).toBe(1);
      expect(b.successful, b.errors).toBe(1);
      const cdr = await cdrOf(cid.split('%')[0]);
      expect(cdr).toMatchObject({ call_status: 'answered', call_direction: 'inbound', to_number: NUMBER, trunk_id: inbound, carrier_address: '127.0.0.9' });
    }, 60_000);

    it('challenges the same INVITE from an address in no ACL, and answers an unknown number 404', async () => {
      const port = edge.server.ports.udp as number;
      const stranger = await TestUa.start(port, undefined, '127.0.0.10');
      const known = await TestUa.start(port, undefined, '127.0.0.9');
      try {
        const challenged = await stranger.call('INVITE', `sip:${NUMBER}@127.0.0.1:${port}`);
        expect(challenged.status).toBe(407);
        expect(getHeader(challenged, 'proxy-authenticate')).toMatch(/realm="[^"]+"/);
        // Unknown and not-ours numbers look alike (no enumeration without credentials either way).
        expect((await stranger.call('INVITE', `sip:+918099999999@127.0.0.1:${port}`)).status).toBe(407);
        expect((await known.call('INVITE', `sip:+918099999999@127.0.0.1:${port}`)).status).toBe(404);
        await ok('PUT', `${base()}/trunks/${inbound}`, { enabled: false });
        const refused = await known.call('INVITE', `sip:${NUMBER}@127.0.0.1:${port}`);
        expect(refused.status).toBe(403);
        expect(getHeader(refused, 'warning')).toMatch(/disabled/);
      } finally {
        await ok('PUT', `${base()}/trunks/${inbound}`, { enabled: true });
        stranger.close();
        known.close();
      }
    }, 30_000);

    it('forwards a call to a number routed to a trunk out through that trunk\'s gateway, the PSTN caller ID passed on', async () => {
      const fwd = await trunk('OUTBOUND');
      const gw = await carrier('127.0.0.8', 'carrier-uas.xml');
      await gateway(fwd, `sip:127.0.0.8:${gw.port}`, 1);
      await ok('POST', `${base()}/numbers/${enc(NUMBER)}/assign`, { trunk_group_id: fwd });
      try {
        const pstn = await runSipp({
          scenario: 'carrier-uac.xml',
          port: edge.server.ports.udp as number,
          transport: 'udp',
          users: [{ user: 'carrier', domain: 'carrier.example', password: 'x' }],
          calls: 1,
          localIp: '127.0.0.9',
          keys: { dialled: NUMBER },
          timeoutMs: 30_000,
        });
        const g = await gw.run;
        expect(pstn.errors).toBe('');
        expect(pstn.successful).toBe(1);
        expect(g.successful, g.errors).toBe(1);
        const invite = invitesIn(g.messages)[0] ?? '';
        expect(invite).toMatch(new RegExp(`^INVITE sip:\\${NUMBER}@127\\.0\\.0\\.8:${gw.port} SIP/2\\.0`, 'm'));
        expect(invite).toMatch(/^From: <sip:\+14155550123@/im);
      } finally {
        await ok('POST', `${base()}/numbers/${enc(NUMBER)}/endpoint`, { endpoint_id: callee.endpointId });
      }
    }, 30_000);

    it('holds a trunk to its max_concurrent_calls: the next call gets 503 with Retry-After until one ends', async () => {
      const port = edge.server.ports.udp as number;
      const phone = await TestUa.start(port, callee);
      const pstn = await TestUa.start(port, undefined, '127.0.0.9');
      try {
        expect(await phone.register()).toBe(200);
        await ok('PUT', `${base()}/trunks/${inbound}`, { max_concurrent_calls: 1 });
        const first = await pstn.call('INVITE', `sip:${NUMBER}@127.0.0.1:${port}`, { keep: true });
        expect(first.status).toBe(200);
        const held = pstn.lastDialog;
        const refused = await pstn.call('INVITE', `sip:${NUMBER}@127.0.0.1:${port}`);
        expect(refused.status).toBe(503);
        expect(getHeader(refused, 'retry-after')).toBe('5');
        expect(getHeader(refused, 'warning')).toMatch(/max_concurrent_calls of trunk/);
        // A trunk with a call up is not deleted.
        const busy = await api('DELETE', `${base()}/trunks/${inbound}`);
        expect(busy.status).toBe(409);
        expect(JSON.stringify(busy.json)).toMatch(/trunk_in_use/);
        expect(await held?.bye()).toBe(200);
        expect((await pstn.call('INVITE', `sip:${NUMBER}@127.0.0.1:${port}`)).status).toBe(200);
      } finally {
        await ok('PUT', `${base()}/trunks/${inbound}`, { max_concurrent_calls: 0 });
        phone.close();
        pstn.close();
      }
    }, 30_000);
  });
});
