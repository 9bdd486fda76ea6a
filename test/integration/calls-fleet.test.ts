/**
 * Calls the platform placed, across a fleet (issue 24; docs/calls.md "Live calls", "Node
 * failure"): two nodes on one Redis and one rtpengine. A call placed through node B's API is
 * listed live by node A's, and a DELETE on node A ends it (the phone gets its BYE). Five
 * live calls of node B survive node B's SIGKILL only as long as the fleet takes to declare
 * it dead: node A then ends each one (a BYE to each phone from its stored dialog, cause
 * NODE_FAILURE in the CDR), and node A lists none — no ghost live calls.
 */
import { createSocket } from 'node:dgram';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { startRtpengine, type RtpengineHandle } from '../support/rtpengine.mjs';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { freePort } from '../support/ports.mjs';
import type { SippRun } from '../support/sipp.js';
import { registeredPhone } from '../support/calls-harness.js';
import { until } from '../support/wait.js';

describe('placed calls across two nodes', () => {
  let ca: TestCa;
  let redis: RedisServerHandle;
  let engine: RtpengineHandle;
  let app: HttpsReceiver;
  let a: Edge;
  let b: Edge;
  let account: Account;

  beforeAll(async () => {
    ca = makeTestCa();
    redis = await startRedis();
    engine = await startRtpengine({ rtpPorts: 80 });
    // The application keeps every call up (a long Wait) until someone ends it.
    app = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (req, res: ServerResponse) => {
      // /transfer: the document a transfer moves the call to; everything else keeps the call up.
      const doc = req.url.startsWith('/transfer') ? '<Response><Speak>You have been transferred</Speak><Hangup/></Response>' : '<Response><Wait length="120"/></Response>';
      res.writeHead(200, { 'content-type': 'application/xml' }).end(doc);
    });
    const env = {
      REDIS_URL: redis.url,
      NONCE_SECRET: 'calls-fleet-nonce-secret-0123456789',
      RTPENGINE_NG: engine.id,
      NODE_EXTRA_CA_CERTS: ca.caCertFile,
      CALLBACK_ALLOWED_NETWORKS: '127.0.0.0/8',
      SIP_TLS_PORT: 'off',
      SIP_WSS_PORT: 'off',
    };
    [a, b] = await Promise.all([startEdge({ ...env, NODE_ID: 'node-a' }), startEdge({ ...env, NODE_ID: 'node-b' })]);
    account = await a.newAccount({ cps_limit: 20, concurrent_calls_limit: 20 });
  }, 60_000);
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await app?.close();
    await engine?.dispose();
    await redis?.stop();
    ca?.remove();
  });

  const path = (): string => `/api/v1/Account/${account.authId}/Call/`;
  const live = async (e: Edge): Promise<string[]> => ((await e.api(account, 'GET', `${path()}?status=live`)).json.calls as string[]) ?? [];

  /** A SIPp phone registered through node B (UDP), answering `calls` calls and waiting for their BYEs. */
  const phone = async (e: Endpoint, calls: number, sinkPort?: number): Promise<{ run: Promise<SippRun> }> =>
    registeredPhone(b, account, e, 'api-call-uas.xml', { sinkPort: sinkPort ?? (await freePort()), calls, timeoutMs: 90_000 });
  const place = async (on: Edge, from: Endpoint, to: Endpoint): Promise<void> => {
    const r = await on.api(account, 'POST', path(), {
      from: `sip:${from.username}@${account.sipDomain}`,
      to: `sip:${to.username}@${account.sipDomain}`,
      answer_url: `https://127.0.0.1:${app.port}/answer`,
    });
    expect(r.status, JSON.stringify(r.json)).toBe(201);
  };

  it('a call placed on node B is listed live by node A, and a DELETE on node A ends it', async () => {
    const callee = await a.newEndpoint(account, 'fleetcallee');
    const caller = await a.newEndpoint(account, 'fleetcaller');
    const p = await phone(callee, 1);
    await b.waitBindings(callee, 1);
    await place(b, caller, callee);
    const ids = await until('the call in progress on node A', async () => {
      const l = await live(a);
      if (l.length !== 1) return undefined;
      const one = await a.api(account, 'GET', `${path()}${l[0]}/?status=live`);
      return one.status === 200 && one.json.call_status === 'in-progress' ? l : undefined;
    }, 10_000);
    expect((await a.api(account, 'DELETE', `${path()}${ids[0]}/`)).status).toBe(204);
    const run = await p.run;
    expect(run.code, run.errors).toBe(0);
    await until('no live call on either node', async () => ((await live(a)).length === 0 && (await live(b)).length === 0 ? true : undefined), 5_000);
    const cdr = await until('the CDR', async () => ((await a.api(account, 'GET', `/api/v1/Account/${account.authId}/CDR/`)).json.objects as Array<Record<string, unknown>>).find((c) => c.call_uuid === ids[0]), 10_000);
    expect(cdr.hangup_cause).toBe('API_HANGUP');
  }, 60_000);

  it('in-call commands through node A for a call node B runs: Speak reaches the phone, a transfer runs new XML that hangs up', async () => {
    const callee = await a.newEndpoint(account, 'fleetcmd');
    const caller = await a.newEndpoint(account, 'fleetcmdcaller');
    const sink = createSocket('udp4');
    const times: number[] = [];
    sink.on('message', (m) => {
      if (m.length >= 12 && m[0] >> 6 === 2) times.push(Date.now());
    });
    await new Promise<void>((r) => sink.bind(0, '127.0.0.1', r));
    const p = await phone(callee, 1, sink.address().port);
    await b.waitBindings(callee, 1);
    await place(b, caller, callee);
    const id = await until('the call in progress on node A', async () => {
      const l = await live(a);
      if (l.length !== 1) return undefined;
      return (await a.api(account, 'GET', `${path()}${l[0]}/?status=live`)).json.call_status === 'in-progress' ? l[0] : undefined;
    }, 10_000);
    // The call waits silently: no RTP reaches the phone until the Speak API asks for some.
    await new Promise((r) => setTimeout(r, 500));
    const quiet = times.length;
    const speak = await a.api(account, 'POST', `${path()}${id}/Speak/`, { text: 'This is an announcement from the operator' });
    expect(speak.status, JSON.stringify(speak.json)).toBe(202);
    await until('the announcement at the phone', async () => (times.length > quiet + 25 ? true : undefined), 10_000);
    const t = await a.api(account, 'POST', `${path()}${id}/`, { legs: 'aleg', aleg_url: `https://127.0.0.1:${app.port}/transfer` });
    expect(t.status, JSON.stringify(t.json)).toBe(202);
    const run = await p.run;
    sink.close();
    expect(run.code, run.errors).toBe(0);
    expect(app.requests.some((q) => q.url.startsWith('/transfer'))).toBe(true);
    const cdr = await until('the CDR', async () => ((await a.api(account, 'GET', `/api/v1/Account/${account.authId}/CDR/`)).json.objects as Array<Record<string, unknown>>).find((c) => c.call_uuid === id), 10_000);
    expect(cdr.hangup_cause).toBe('NORMAL_CLEARING');
  }, 60_000);

  it('node B SIGKILLed with 5 live calls: node A ends each (BYE to every phone, NODE_FAILURE) and lists none', async () => {
    const callee = await a.newEndpoint(account, 'fleetfive');
    const caller = await a.newEndpoint(account, 'fleetfivecaller');
    const p = await phone(callee, 5);
    await b.waitBindings(callee, 1);
    for (let i = 0; i < 5; i++) await place(b, caller, callee);
    const ids = await until('5 live calls on node A', async () => {
      const l = await live(a);
      if (l.length !== 5) return undefined;
      for (const id of l) if ((await a.api(account, 'GET', `${path()}${id}/?status=live`)).json.call_status !== 'in-progress') return undefined;
      return l;
    }, 15_000).catch(async (err: unknown) => {
      for (const id of await live(a)) console.log(id, JSON.stringify((await a.api(account, 'GET', `${path()}${id}/?status=live`)).json));
      console.log(b.server.output().split('\n').filter((l) => /b2bua|warn|error/i.test(l)).slice(-20).join('\n'));
      throw err;
    });
    const killedAt = Date.now();
    await b.server.stop('SIGKILL');
    await until('no live call on node A', async () => ((await live(a)).length === 0 ? true : undefined), 20_000);
    const gone = Date.now() - killedAt;
    console.info(`node B killed with 5 live calls: node A listed none after ${gone} ms`);
    expect(gone).toBeLessThan(12_000);
    // Every phone got its BYE (the SIPp UAS ends each call on it) from node A.
    const run = await p.run;
    expect(run.code, run.errors).toBe(0);
    expect(run.successful).toBe(5);
    const cdrs = await until('5 CDRs', async () => {
      const l = ((await a.api(account, 'GET', `/api/v1/Account/${account.authId}/CDR/`)).json.objects as Array<Record<string, unknown>>).filter((c) => ids.includes(String(c.call_uuid)));
      return l.length === 5 ? l : undefined;
    }, 10_000);
    for (const c of cdrs) expect(c.hangup_cause).toBe('NODE_FAILURE');
  }, 90_000);
});
