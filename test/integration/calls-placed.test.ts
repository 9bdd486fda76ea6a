/**
 * Calls the platform places (issue 24; docs/calls.md) on the wire: a real server with a
 * real rtpengine, SIPp phones, and an HTTPS application server (the test's receiver, its
 * CA trusted by the server) answering answer_url and action requests with XML.
 *
 * - POST /Call/ to a SIPp endpoint whose answer_url returns Speak + Play + Hangup: the RTP
 *   reaching the phone's media address lasts as long as the two prompts (± 20 %), then the
 *   phone gets a BYE; the Hangup callback and the CDR agree;
 * - an IVR: Gather numDigits=1 with a Speak prompt; the phone sends RFC 4733 digit 2; the
 *   action URL gets Digits=2 and its XML Dials a second SIPp endpoint; the phone's RTP then
 *   reaches the second endpoint's media address through rtpengine (the legs are bridged).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { startRtpengine, type RtpengineHandle } from '../support/rtpengine.mjs';
import { freePort } from '../support/ports.mjs';
import { runSipp, type SippRun } from '../support/sipp.js';
import { registeredPhone, rtpSink } from '../support/calls-harness.js';
import { until } from '../support/wait.js';
import { wavDurationMs } from '../../src/voicexml/tts.js';

const ADMIN = 'calls-placed-admin-token-0123456789';

describe('calls placed by the API run their application on rtpengine', () => {
  let ca: TestCa;
  let engine: RtpengineHandle;
  let edge: Edge;
  let app: HttpsReceiver;
  let account: Account;
  let dir: string;
  let toneMs = 0;
  /** answer_url / action documents by path. */
  const docs = new Map<string, string>();

  beforeAll(async () => {
    ca = makeTestCa();
    dir = mkdtempSync(join(tmpdir(), 'sip-edge-calls-'));
    // One second of a 440 Hz tone as an 8 kHz WAV: the Play prompt.
    // "Hello" as the server renders it (flite, the default WOMAN voice): its length is the Speak prompt's.
    execFileSync('flite', ['-voice', 'slt', '-t', 'Hello', '-o', join(dir, 'hello.wav')]);
    const tone = toneWav(1000);
    toneMs = 1000;
    const dtmfPort = await freePort();
    engine = await startRtpengine({ extraArgs: [`--dtmf-log-dest=127.0.0.1:${dtmfPort}`] });
    app = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (req, res: ServerResponse) => {
      const path = req.url.split('?')[0] as string;
      if (path === '/tone.wav') {
        res.writeHead(200, { 'content-type': 'audio/wav' }).end(tone);
        return;
      }
      const doc = docs.get(path);
      if (doc) res.writeHead(200, { 'content-type': 'application/xml' }).end(doc);
      else res.writeHead(200).end('ok');
    });
    writeFileSync(join(dir, 'deck.csv'), 'prefix,rate_per_minute,initial_increment,subsequent_increment,connect_fee,currency,description\n1555,0.60000,1,1,0,USD,per second\n');
    writeFileSync(join(dir, 'numbers.csv'), 'e164,country,region,number_type,setup_fee,monthly_fee,currency,provider\n+918040000101,IN,Karnataka,landline,1.00,2.00,USD,test\n');
    edge = await startEdge({
      NUMBER_INVENTORY_FILE: join(dir, 'numbers.csv'),
      // Calls to +1555… are rated (402 without a balance); other numbers go to a gateway that is not there.
      RATE_DECK_FILE: join(dir, 'deck.csv'),
      OUTBOUND_GATEWAY_URI: 'sip:127.0.0.1:9',
      ADMIN_AUTH_TOKEN: ADMIN,
      RTPENGINE_NG: engine.id,
      CALLS_DTMF_LISTEN: `127.0.0.1:${dtmfPort}`,
      CALLS_MEDIA_DIR: join(dir, 'media'),
      NODE_EXTRA_CA_CERTS: ca.caCertFile,
      CALLBACK_ALLOWED_NETWORKS: '127.0.0.0/8',
      LOG_LEVEL: process.env.CALLS_TEST_LOG ?? 'info',
      SIP_TLS_PORT: 'off',
      SIP_WSS_PORT: 'off',
    });
    account = await edge.newAccount({ cps_limit: 20, concurrent_calls_limit: 20 });
  }, 60_000);
  afterAll(async () => {
    await edge?.stop();
    await app?.close();
    await engine?.dispose();
    ca?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const url = (path: string): string => `https://127.0.0.1:${app.port}${path}`;
  const base = (): string => `/api/v1/Account/${account.authId}`;

  /** A SIPp phone registered as `e`, answering one call with `scenario`; its media goes to `sinkPort`. */
  const phone = (e: Endpoint, scenario: string, sinkPort: number, pauseMs = 0): Promise<{ run: Promise<SippRun> }> => registeredPhone(edge, account, e, scenario, { sinkPort, pauseMs });

  it('Speak + Play + Hangup: RTP to the phone for as long as the prompts, then a BYE; the Hangup callback and the CDR agree', async () => {
    const callee = await edge.newEndpoint(account, 'apicallee1');
    const caller = await edge.newEndpoint(account, 'apicaller1');
    const sink = await rtpSink();
    docs.set('/answer1', `<Response><Speak>Hello</Speak><Play>${url('/tone.wav')}</Play><Hangup/></Response>`);
    const ring = await phone(callee, 'api-call-uas.xml', sink.port);
    await edge.waitBindings(callee, 1);
    const r = await edge.api(account, 'POST', `${base()}/Call/`, {
      from: `sip:${caller.username}@${account.sipDomain}`,
      to: `sip:${callee.username}@${account.sipDomain}`,
      answer_url: url('/answer1'),
      hangup_url: url('/hangup1'),
    });
    expect(r.status, JSON.stringify(r.json)).toBe(201);
    expect(r.json.message).toBe('call fired');
    const requestUuid = String(r.json.request_uuid);
    const run = await ring.run;
    if (run.code !== 0) console.log(edge.server.output().split('\n').filter((l) => !/registrar|REGISTER/.test(l)).slice(-60).join('\n'));
    expect(run.code, run.errors).toBe(0);
    sink.socket.close();

    // How long "Hello" lasts as the server rendered it (the same flite, the same text).
    const helloMs = await wavDurationMs(join(dir, 'hello.wav'));
    const expected = helloMs + toneMs;
    const first = sink.times[0] as number;
    const last = sink.times[sink.times.length - 1] as number;
    const heard = last - first;
    console.info(`placed call: prompts ${expected} ms, RTP at the phone for ${heard} ms (${sink.times.length} packets)`);
    expect(sink.times.length).toBeGreaterThan((expected / 20) * 0.8);
    expect(heard).toBeGreaterThan(expected * 0.8);
    expect(heard).toBeLessThan(expected * 1.2);

    // The answer_url request carried the call's parameters.
    const answer = app.requests.find((q) => q.url.startsWith('/answer1'));
    const params = new URLSearchParams(answer?.body ?? '');
    expect(params.get('RequestUUID')).toBe(requestUuid);
    expect(params.get('Direction')).toBe('outbound');
    const callUuid = params.get('CallUUID') as string;
    expect(callUuid).toMatch(/^[0-9a-f-]{36}$/);

    const hangup = await until('the Hangup callback', async () => app.requests.find((q) => q.url.startsWith('/hangup1')), 10_000);
    const h = new URLSearchParams(hangup.body);
    expect(h.get('Event')).toBe('Hangup');
    expect(h.get('CallUUID')).toBe(callUuid);
    const cdr = await until(
      'the CDR',
      async () => ((await edge.api(account, 'GET', `${base()}/CDR/`)).json.objects as Array<Record<string, unknown>>).find((c) => c.call_uuid === callUuid),
      10_000,
    );
    expect(cdr.call_status).toBe('answered');
    expect(cdr.call_direction).toBe('outbound');
    expect(cdr.bridge_uuid).toBe(callUuid);
    expect(String(cdr.duration)).toBe(h.get('Duration'));
    expect(cdr.hangup_cause).toBe(h.get('HangupCause'));
    // Nothing is live afterwards.
    const live = await edge.api(account, 'GET', `${base()}/Call/?status=live`);
    expect(live.json.calls).toEqual([]);
  }, 60_000);

  it('bad XML at answer_url → fallback_url; a verb that needs a mixing server ends the call cleanly with a cause saying so', async () => {
    const callee = await edge.newEndpoint(account, 'apicallee3');
    const caller = await edge.newEndpoint(account, 'apicaller3');
    const sink = await rtpSink();
    docs.set('/broken', '<Response><Speak>unclosed');
    docs.set('/fallback3', '<Response><Conference>room</Conference></Response>');
    const ring = await phone(callee, 'api-call-uas.xml', sink.port);
    await edge.waitBindings(callee, 1);
    const r = await edge.api(account, 'POST', `${base()}/Call/`, {
      from: `sip:${caller.username}@${account.sipDomain}`,
      to: `sip:${callee.username}@${account.sipDomain}`,
      answer_url: url('/broken'),
      fallback_url: url('/fallback3'),
    });
    expect(r.status, JSON.stringify(r.json)).toBe(201);
    const run = await ring.run;
    sink.socket.close();
    expect(run.code, run.errors).toBe(0);
    expect(app.requests.some((q) => q.url.startsWith('/fallback3'))).toBe(true);
    const callUuid = new URLSearchParams(app.requests.find((q) => q.url.startsWith('/broken'))?.body ?? '').get('CallUUID');
    const cdr = await until(
      'the CDR',
      async () => ((await edge.api(account, 'GET', `${base()}/CDR/`)).json.objects as Array<Record<string, unknown>>).find((c) => c.call_uuid === callUuid),
      10_000,
    );
    expect(cdr.hangup_cause).toBe('XML_UNSUPPORTED_VERB: Conference');
  }, 60_000);

  it('refused before anything is sent: an unknown from → 400, over cps_limit → 429 with Retry-After', async () => {
    const callee = await edge.newEndpoint(account, 'apicallee4');
    const bad = await edge.api(account, 'POST', `${base()}/Call/`, { from: '+15550001111', to: `sip:${callee.username}@${account.sipDomain}`, answer_url: url('/answer1') });
    expect(bad.status).toBe(400);
    expect(bad.json.error).toBe('invalid_from');
    const slow = await edge.newAccount({ cps_limit: 1, concurrent_calls_limit: 5 });
    const from = await edge.newEndpoint(slow, 'cpsfrom');
    const to = await edge.newEndpoint(slow, 'cpsto');
    const sink = await rtpSink();
    const localPort = await freePort();
    const users = [{ user: to.username, domain: slow.sipDomain, password: to.password }];
    expect((await runSipp({ scenario: 'register.xml', port: edge.server.ports.udp as number, transport: 'udp', users, localPort, timeoutMs: 15_000 })).code).toBe(0);
    const callee2 = runSipp({ scenario: 'api-call-uas.xml', port: edge.server.ports.udp as number, transport: 'udp', users, calls: 1, localPort, keys: { sink_port: sink.port }, recvTimeoutMs: null, timeoutMs: 30_000, extraArgs: ['-mp', String(await freePort())] });
    const body = { from: `sip:${from.username}@${slow.sipDomain}`, to: `sip:${to.username}@${slow.sipDomain}`, answer_url: url('/answer1') };
    const first = await edge.api(slow, 'POST', `/api/v1/Account/${slow.authId}/Call/`, body);
    expect(first.status, JSON.stringify(first.json)).toBe(201);
    const res = await fetch(`${edge.base}/api/v1/Account/${slow.authId}/Call/`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: 'application/json', 'x-auth-id': slow.authId, 'x-auth-token': slow.authToken },
      body: JSON.stringify(body),
    });
    expect(res.status).toBe(429);
    expect(Number(res.headers.get('retry-after'))).toBeGreaterThanOrEqual(1);
    expect(((await res.json()) as { error: string }).error).toBe('limit_reached');
    expect((await callee2).code).toBe(0);
    sink.socket.close();
  }, 60_000);

  it('a call from the phone network to a number routed to an application: answered here, its XML spoken, then a BYE', async () => {
    const credit = await fetch(`${edge.base}/api/v1/admin/accounts/${account.authId}/credit`, {
      method: 'POST',
      headers: { 'x-admin-token': ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: '20.00', currency: 'USD', description: 'test funds' }),
    });
    expect(credit.status).toBeLessThan(300);
    const ok = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
      const r = await edge.api(account, method, path, body);
      expect(r.status, `${method} ${path}: ${JSON.stringify(r.json)}`).toBeLessThan(300);
      return r.json;
    };
    const number = '+918040000101';
    docs.set('/inbound', '<Response><Speak>Welcome to the sales line</Speak><Hangup/></Response>');
    const appId = String((await ok('POST', `${base()}/Application/`, { app_name: 'sales-ivr', answer_url: url('/inbound'), hangup_url: url('/inbound-hangup') })).app_id);
    await ok('POST', `${base()}/numbers/purchase-from-inventory`, { e164: number });
    await ok('POST', `${base()}/numbers/${encodeURIComponent(number)}/application`, { application_id: appId });
    const trunk = String((await ok('POST', `${base()}/trunks`, { name: 'carrier-in', trunk_type: 'INBOUND' })).trunk_id);
    await ok('POST', `${base()}/ip-acl`, { trunk_id: trunk, ip_address: '127.0.0.9/32' });
    const sink = await rtpSink();
    const pstn = await runSipp({
      scenario: 'carrier-uac-app.xml',
      port: edge.server.ports.udp as number,
      transport: 'udp',
      users: [{ user: 'carrier', domain: 'carrier.example', password: 'x' }],
      calls: 1,
      localIp: '127.0.0.9',
      keys: { dialled: number, sink_port: sink.port },
      traceMessages: true,
      timeoutMs: 30_000,
    });
    sink.socket.close();
    expect(pstn.errors).toBe('');
    expect(pstn.successful).toBe(1);
    // The application's answer_url was fetched for the call (not sent a StartApp callback).
    const answer = app.requests.find((q) => q.url.startsWith('/inbound') && !q.url.startsWith('/inbound-hangup'));
    const params = new URLSearchParams(answer?.body ?? '');
    expect(params.get('Direction')).toBe('inbound');
    expect(params.get('From')).toBe('+14155550123');
    expect(params.get('Event')).not.toBe('StartApp_callback');
    expect(app.requests.filter((q) => q.url.startsWith('/inbound') && !q.url.startsWith('/inbound-hangup'))).toHaveLength(1);
    const welcomeMs = await speechMs('Welcome to the sales line');
    const heard = (sink.times[sink.times.length - 1] as number) - (sink.times[0] as number);
    console.info(`application call: speech ${welcomeMs} ms, RTP at the carrier for ${heard} ms`);
    expect(heard).toBeGreaterThan(welcomeMs * 0.8);
    expect(heard).toBeLessThan(welcomeMs * 1.2);
    const callUuid = params.get('CallUUID');
    const hangup = await until('the Hangup callback', async () => app.requests.find((q) => q.url.startsWith('/inbound-hangup')), 10_000);
    expect(new URLSearchParams(hangup.body).get('CallUUID')).toBe(callUuid);
    const cdr = await until(
      'the CDR',
      async () => ((await edge.api(account, 'GET', `${base()}/CDR/`)).json.objects as Array<Record<string, unknown>>).find((c) => c.call_uuid === callUuid),
      10_000,
    );
    expect(cdr).toMatchObject({ call_status: 'answered', call_direction: 'inbound', context: 'app', hangup_cause: 'NORMAL_CLEARING' });
  }, 60_000);

  it('refused before anything is sent: no balance for a rated call → 402; a KYC-blocked sub-account calling a phone → 403', async () => {
    const poor = await edge.newAccount();
    const e = await edge.newEndpoint(poor, 'poorphone', { allow_phones: true });
    const r = await edge.api(poor, 'POST', `/api/v1/Account/${poor.authId}/Call/`, { from: `sip:${e.username}@${poor.sipDomain}`, to: '+15551230000', answer_url: url('/answer1') });
    expect(r.status, JSON.stringify(r.json)).toBe(402);
    expect(r.json.error).toBe('insufficient_balance');
    // A customer_use sub-account whose business needs KYC is blocked from calling phones.
    const rich = await edge.newAccount();
    const credit = await fetch(`${edge.base}/api/v1/admin/accounts/${rich.authId}/credit`, {
      method: 'POST',
      headers: { 'x-admin-token': ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: '10.00', currency: 'USD', description: 'test funds' }),
    });
    expect(credit.status).toBeLessThan(300);
    const sub = await edge.newSubAccount(rich, 'customer_use');
    expect((await edge.api(rich, 'POST', `/api/v1/Account/${rich.authId}/Subaccount/${sub}/`, { business_type: 'private_limited' })).status).toBe(202);
    const subPhone = await edge.newEndpoint(rich, 'kycblocked', { sub_account: sub, allow_phones: true });
    const k = await edge.api(rich, 'POST', `/api/v1/Account/${rich.authId}/Call/`, { from: `sip:${subPhone.username}@${rich.sipDomain}`, to: '+15551230000', answer_url: url('/answer1') });
    expect(k.status, JSON.stringify(k.json)).toBe(403);
    expect(String(k.json.message)).toMatch(/kyc_calls_blocked/);
    // Nothing is left live for either account.
    expect((await edge.api(poor, 'GET', `/api/v1/Account/${poor.authId}/Call/?status=live`)).json.calls).toEqual([]);
    expect((await edge.api(rich, 'GET', `/api/v1/Account/${rich.authId}/Call/?status=queued`)).json.calls).toEqual([]);
  }, 30_000);

  it('IVR: Gather hears RFC 4733 digit 2 from the phone, the action URL Dials a second endpoint, the legs are bridged through rtpengine', async () => {
    const first = await edge.newEndpoint(account, 'ivrcaller');
    const second = await edge.newEndpoint(account, 'ivrsecond');
    const from = await edge.newEndpoint(account, 'ivrfrom');
    const sinkA = await rtpSink();
    const sinkB = await rtpSink();
    docs.set('/ivr', `<Response><Gather numDigits="1" action="${url('/ivr-digit')}" executionTimeout="10"><Speak>Press two for sales</Speak></Gather><Hangup/></Response>`);
    docs.set('/ivr-digit', `<Response><Dial timeout="20"><User>sip:${second.username}@${account.sipDomain}</User></Dial><Hangup/></Response>`);
    // The first phone sends its digit 1.5 s after answering (during the prompt), then its
    // media keeps flowing from SIPp's media port; the second phone answers the Dial.
    const ringA = await phone(first, 'api-call-uas-dtmf.xml', sinkA.port, 1500);
    const ringB = await phone(second, 'api-call-uas.xml', sinkB.port);
    await edge.waitBindings(first, 1);
    await edge.waitBindings(second, 1);
    const r = await edge.api(account, 'POST', `${base()}/Call/`, {
      from: `sip:${from.username}@${account.sipDomain}`,
      to: `sip:${first.username}@${account.sipDomain}`,
      answer_url: url('/ivr'),
    });
    expect(r.status, JSON.stringify(r.json)).toBe(201);
    const action = await until('the Gather action', async () => app.requests.find((q) => q.url.startsWith('/ivr-digit')), 20_000).catch((err: unknown) => {
      console.log(edge.server.output().split('\n').filter((l) => !/registrar|"url":"\/api/.test(l)).slice(-30).join('\n'));
      console.log(engine.log().split('\n').slice(-40).join('\n'));
      throw err;
    });
    expect(new URLSearchParams(action.body).get('Digits')).toBe('2');
    // Bridged: the B leg is live beside the A leg, and the second phone hears the first.
    const live = await until(
      'the bridged call',
      async () => {
        const l = await edge.api(account, 'GET', `${base()}/Call/?status=live`);
        const ids = (l.json.calls as string[]) ?? [];
        for (const id of ids) {
          const one = await edge.api(account, 'GET', `${base()}/Call/${id}/?status=live`);
          if (one.status === 200 && one.json.call_status === 'in-progress') return one.json;
        }
        return undefined;
      },
      15_000,
    );
    expect(live.direction).toBe('outbound');
    // The second phone's media address gets RTP (the first phone's, relayed): the legs are bridged.
    const before = sinkB.times.length;
    await until('RTP at the second phone', async () => (sinkB.times.length > before + 10 ? true : undefined), 10_000).catch(async (err: unknown) => {
      await edge.api(account, 'DELETE', `${base()}/Call/${String(live.call_uuid)}/`);
      await new Promise((r) => setTimeout(r, 500));
      console.log(edge.server.output().split('\n').filter((l) => !/"registrar"|"api"/.test(l)).slice(-30).join('\n'));
      throw err;
    });
    // The first phone's digit ended its prompt; hang up from the API: both phones get BYE.
    const ids = (await edge.api(account, 'GET', `${base()}/Call/?status=live`)).json.calls as string[];
    for (const id of ids) expect((await edge.api(account, 'DELETE', `${base()}/Call/${id}/`)).status).toBe(204);
    const [a, b] = await Promise.all([ringA.run, ringB.run]);
    expect(a.code, a.errors).toBe(0);
    expect(b.code, b.errors).toBe(0);
    sinkA.socket.close();
    sinkB.socket.close();
    console.info(`IVR: the dialled phone got ${sinkB.times.length} RTP packets from the caller through rtpengine`);
    // Both legs have CDRs, linked by the A leg's call_uuid as bridge_uuid.
    const aUuid = String(live.call_uuid);
    const legs = await until(
      'both legs\' CDRs',
      async () => {
        const l = (await edge.api(account, 'GET', `${base()}/CDR/`)).json.objects as Array<Record<string, unknown>>;
        const linked = l.filter((c) => c.bridge_uuid === aUuid);
        return linked.length === 2 ? linked : undefined;
      },
      10_000,
    );
    expect(legs.map((c) => c.call_status)).toEqual(['answered', 'answered']);
    expect(legs.some((c) => c.call_uuid === aUuid)).toBe(true);
    expect(legs.some((c) => String(c.to_number).includes(second.username))).toBe(true);
  }, 90_000);
});

/** How long flite's WOMAN voice (slt) says `text`, ms (the server renders the same). */
async function speechMs(text: string): Promise<number> {
  const d = mkdtempSync(join(tmpdir(), 'sip-edge-speech-'));
  try {
    execFileSync('flite', ['-voice', 'slt', '-t', text, '-o', join(d, 's.wav')]);
    return await wavDurationMs(join(d, 's.wav'));
  } finally {
    rmSync(d, { recursive: true, force: true });
  }
}

/** 1 s of a 440 Hz tone, 8 kHz 16-bit mono WAV. */
function toneWav(ms: number): Buffer {
  const n = Math.round((8000 * ms) / 1000);
  const data = Buffer.alloc(n * 2);
  for (let i = 0; i < n; i++) data.writeInt16LE(Math.round(8000 * Math.sin((2 * Math.PI * 440 * i) / 8000)), i * 2);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0);
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVE', 8);
  h.write('fmt ', 12);
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(8000, 24);
  h.writeUInt32LE(16000, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36);
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}
