/**
 * Calls between SIPp endpoints through the edge leave CDRs and send the spec's
 * callbacks (docs/events.md "Calls", docs/callbacks.md) to a local HTTPS receiver
 * whose private CA the server trusts through NODE_EXTRA_CA_CERTS: Ring, StartApp
 * and Hangup with valid signatures; retries after 500s; a receiver that never
 * answers gets 1 + 3 attempts and then a dead letter; a node killed with a
 * callback pending (or mid-delivery) has it delivered by the node started after it.
 */
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { verifyCallback } from '../../src/events/signature.js';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { cidStr, sipp, type SippResult } from '../support/proxy-harness.js';
import { startHttpsReceiver, type HttpsReceiver, type ReceivedRequest } from '../support/https-receiver.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { until } from '../support/wait.js';

const NO_ANSWER_S = 2;
/** CALLBACK_TIMEOUT of this suite: a hung attempt is still hanging when the node is killed under it. */
const ATTEMPT_S = 2;
/** CALLBACK_RETRY_DELAYS and CALLBACK_LEASE of this suite (defaults 2,4,8 and 15). */
const RETRY_S = [0.5, 1, 2];
const LEASE_S = 4;

type Params = Record<string, string>;
const paramsOf = (r: ReceivedRequest): Params => Object.fromEntries(new URLSearchParams(r.method === 'GET' ? (r.url.split('?')[1] ?? '') : r.body));

describe.each([
  { name: 'embedded store', redis: false },
  { name: 'Redis', redis: true },
])('calls through the edge: callbacks and CDRs ($name)', ({ redis: withRedis }) => {
  let ca: TestCa;
  let redis: RedisServerHandle | null = null;
  let edge: Edge;
  let rx: HttpsReceiver;
  let account: Account;
  let secret: string;
  /** How the receiver answers, by path: a list of statuses (0 = never answer) used in turn, then 200. */
  const plan = new Map<string, number[]>();
  let n = 0;

  const env = (): Record<string, string> => ({
    SIP_NO_ANSWER_TIMEOUT: String(NO_ANSWER_S),
    NODE_EXTRA_CA_CERTS: ca.caCertFile,
    CALLBACK_ALLOWED_NETWORKS: '127.0.0.0/8',
    // The retry schedule shortened (same shape as the default 3 s attempts, 2/4/8 s apart, 15 s lease).
    CALLBACK_TIMEOUT: String(ATTEMPT_S),
    CALLBACK_RETRY_DELAYS: RETRY_S.join(','),
    CALLBACK_LEASE: String(LEASE_S),
    NONCE_SECRET: 'callbacks-cdr-test-nonce-secret-0123',
    ...(redis ? { REDIS_URL: redis.url } : {}),
  });

  beforeAll(async () => {
    ca = makeTestCa();
    if (withRedis) redis = await startRedis();
    rx = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (req, res: ServerResponse) => {
      const path = req.url.split('?')[0] as string;
      const next = plan.get(path)?.shift() ?? 200;
      if (next === 0) return; // never answers
      res.writeHead(next).end('ok');
    });
    edge = await startEdge(env());
    account = await edge.newAccount();
    // A known secret: replace the one given at creation (shown once, not kept by the test harness).
    const r = await fetch(`${edge.base}/api/v1/Account/${account.authId}/SigningSecret/`, {
      method: 'POST',
      headers: { 'x-auth-id': account.authId, 'x-auth-token': account.authToken },
    });
    expect(r.status).toBe(201);
    secret = String(((await r.json()) as { callback_signing_secret: string }).callback_signing_secret);
  }, 60_000);
  afterAll(async () => {
    await edge?.stop();
    await rx?.close();
    await redis?.stop();
    ca?.remove();
  });

  const api = (method: string, path: string, body?: unknown) => edge.api(account, method, path, body);

  /** A caller whose application sends callbacks to the receiver under `/<tag>/…`, and a callee. */
  const pair = async (tag: string, method: 'POST' | 'GET' = 'POST'): Promise<{ a: Endpoint; b: Endpoint }> => {
    n++;
    const base = `https://127.0.0.1:${rx.port}/${tag}`;
    const app = await api('POST', `/api/v1/Account/${account.authId}/Application/`, {
      app_name: `app-${tag}`,
      answer_url: `${base}/answer`,
      answer_method: method,
      hangup_url: `${base}/hangup`,
      hangup_method: method,
    });
    expect(app.status).toBe(201);
    const a = await edge.newEndpoint(account, `caller${n}`);
    await edge.updateEndpoint(a, { application: Number(app.json.app_id) });
    return { a, b: await edge.newEndpoint(account, `callee${n}`) };
  };

  const call = async (tag: string, uas: string, uac: string, method: 'POST' | 'GET' = 'POST'): Promise<{ a: Endpoint; b: Endpoint; caller: SippResult; callId: string }> => {
    const { a, b } = await pair(tag, method);
    const port = edge.server.ports.udp as number;
    const cid = cidStr();
    const callee = sipp({ scenario: uas, port, transport: 'udp', endpoint: b, cidStr: cid });
    await edge.waitBindings(b, 1);
    const caller = await sipp({ scenario: uac, port, transport: 'udp', endpoint: a, cidStr: cid, keys: { callee: b.username }, pauseMs: 1200 });
    await callee;
    // SIPp's -cid_str: %u is the call number (1 for a single call).
    return { a, b, caller, callId: cid.replace('%u', '1') };
  };

  const at = (tag: string, kind: string): ReceivedRequest[] => rx.requests.filter((r) => r.url.startsWith(`/${tag}/${kind}`));
  const checkSignature = (r: ReceivedRequest): void => {
    const ts = String(r.headers['x-sipedge-timestamp']);
    const signed = r.method === 'GET' ? (r.url.split('?')[1] ?? '') : r.body;
    expect(verifyCallback(secret, ts, signed, String(r.headers['x-sipedge-signature']))).toBe(true);
    expect(r.headers['user-agent']).toBe('SipEdge-Webhook/1.0');
    if (r.method === 'POST') expect(r.headers['content-type']).toMatch(/^application\/x-www-form-urlencoded/);
  };
  const cdrOf = async (callId: string): Promise<Record<string, unknown>> => {
    const page = await api('GET', `/api/v1/Account/${account.authId}/CDR/?sip_call_id=${encodeURIComponent(callId)}`);
    expect(page.status).toBe(200);
    const objects = page.json.objects as Array<Record<string, unknown>>;
    expect(objects).toHaveLength(1);
    return objects[0] as Record<string, unknown>;
  };

  it('an answered call: Ring, StartApp and Hangup, signed, with the spec parameters; its CDR', async () => {
    const { a, b, caller, callId } = await call('ans', 'call-uas-answer.xml', 'call-uac.xml');
    expect(caller.failed, caller.errors).toBe(0);
    await until('three callbacks', () => (at('ans', 'answer').length >= 2 && at('ans', 'hangup').length >= 1 ? true : undefined), 10_000);
    // Callbacks are delivered concurrently: their arrival order is not their order. Their
    // timestamps are (Ring before StartApp).
    const answers = at('ans', 'answer').map(paramsOf);
    const ring = answers.find((p) => p.Event === 'Ring') as Params;
    const start = answers.find((p) => p.Event === 'StartApp') as Params;
    expect(Date.parse(ring.timestamp as string)).toBeLessThanOrEqual(Date.parse(start.timestamp as string));
    const hangup = paramsOf(at('ans', 'hangup')[0] as ReceivedRequest);
    for (const r of [...at('ans', 'answer'), ...at('ans', 'hangup')]) checkSignature(r);
    expect(ring).toMatchObject({ Event: 'Ring', auth_id: account.authId, From: a.username, To: b.username, Direction: 'outbound' });
    expect(start).toMatchObject({ Event: 'StartApp', CallUUID: ring.CallUUID });
    expect(hangup).toMatchObject({ Event: 'Hangup', CallUUID: ring.CallUUID, From: a.username, To: b.username, Status: 'answered', Direction: 'outbound', HangupCause: 'NORMAL_CLEARING' });
    for (const p of [ring, start, hangup]) {
      expect(Date.parse(p.timestamp as string)).toBeGreaterThan(Date.now() - 60_000);
      expect(p.CallbackId).toMatch(/^[0-9a-f-]{36}$/);
    }
    expect(new Set([ring.CallbackId, start.CallbackId, hangup.CallbackId]).size).toBe(3);
    expect(Number(hangup.Duration)).toBeGreaterThanOrEqual(1);
    expect(Date.parse(hangup.EndTime as string)).toBeGreaterThan(Date.parse(hangup.StartTime as string));
    const cdr = await cdrOf(callId);
    expect(cdr).toMatchObject({
      call_uuid: ring.CallUUID,
      from_number: a.username,
      to_number: b.username,
      call_status: 'answered',
      hangup_cause: 'NORMAL_CLEARING',
      hangup_disposition: 'recv_bye',
      call_direction: 'outbound',
      context: 'endpoint',
      billed_amount: '0.00000',
      sip_status: 200,
    });
    expect(cdr.duration).toBe(Number(hangup.Duration));
    expect(cdr.bill_duration).toBe(cdr.duration);
    const one = await api('GET', `/api/v1/Account/${account.authId}/CDR/${String(ring.CallUUID)}/`);
    expect(one.status).toBe(200);
    expect(one.json.call_uuid).toBe(ring.CallUUID);
  }, 60_000);

  it('busy (486), cancelled and no-answer calls: their CDRs and Hangup callbacks (GET with the query signed)', async () => {
    const busy = await call('busy', 'call-uas-busy.xml', 'call-uac-busy.xml', 'GET');
    const cancel = await call('cancel', 'call-uas-ring-cancel.xml', 'call-uac-cancel.xml');
    const noAnswer = await call('noans', 'call-uas-ring-cancel.xml', 'call-uac-noanswer.xml');
    for (const r of [busy, cancel, noAnswer]) expect(r.caller.failed, r.caller.errors).toBe(0);
    expect(await cdrOf(busy.callId)).toMatchObject({ call_status: 'busy', duration: 0, hangup_cause: 'USER_BUSY', hangup_disposition: 'send_refuse', sip_status: 486 });
    expect(await cdrOf(cancel.callId)).toMatchObject({ call_status: 'cancelled', duration: 0, hangup_cause: 'ORIGINATOR_CANCEL', hangup_disposition: 'recv_cancel', sip_status: 487 });
    expect(await cdrOf(noAnswer.callId)).toMatchObject({ call_status: 'no-answer', duration: 0, hangup_cause: 'NO_ANSWER', hangup_disposition: 'send_cancel', sip_status: 408 });
    await until('the hangups', () => (['busy', 'cancel', 'noans'].every((t) => at(t, 'hangup').length === 1) ? true : undefined), 10_000);
    const statuses = ['busy', 'cancel', 'noans'].map((t) => paramsOf(at(t, 'hangup')[0] as ReceivedRequest).Status);
    expect(statuses).toEqual(['busy', 'cancelled', 'no-answer']);
    const g = at('busy', 'hangup')[0] as ReceivedRequest;
    expect(g.method).toBe('GET');
    checkSignature(g);
    // The filters, over the HTTP API: by status-bearing fields and dates.
    const today = new Date().toISOString().slice(0, 10);
    const list = async (q: string): Promise<string[]> => ((await api('GET', `/api/v1/Account/${account.authId}/CDR/?${q}`)).json.objects as Array<{ sip_call_id: string }>).map((c) => c.sip_call_id);
    expect(await list('hangup_cause=USER_BUSY')).toEqual([busy.callId]);
    expect(await list(`from_number=${cancel.a.username}`)).toEqual([cancel.callId]);
    expect(await list(`start_date=${today}&end_date=${today}&hangup_disposition=send_cancel`)).toEqual([noAnswer.callId]);
    expect((await api('GET', `/api/v1/Account/${account.authId}/CDR/?start_date=${today}`)).status).toBe(400);
    expect((await api('GET', `/api/v1/Account/${account.authId}/CDR/?per_page=101`)).status).toBe(400);
  }, 60_000);

  it('a receiver that answers 500 twice gets the third attempt, with the same CallbackId', async () => {
    plan.set('/retry/hangup', [500, 500]);
    const { caller } = await call('retry', 'call-uas-busy.xml', 'call-uac-busy.xml');
    expect(caller.failed, caller.errors).toBe(0);
    await until('three attempts', () => (at('retry', 'hangup').length >= 3 ? true : undefined), 15_000);
    const ids = at('retry', 'hangup').map((r) => paramsOf(r).CallbackId);
    expect(new Set(ids).size).toBe(1);
    await new Promise((r) => setTimeout(r, 500));
    expect(at('retry', 'hangup')).toHaveLength(3);
  }, 60_000);

  it('a MESSAGE sends a signed Message callback to message_url when the application logs incoming messages, and none when it does not', async () => {
    const port = edge.server.ports.udp as number;
    const send = async (tag: string, log: boolean): Promise<{ a: Endpoint; b: Endpoint; callId: string }> => {
      n++;
      const app = await api('POST', `/api/v1/Account/${account.authId}/Application/`, {
        app_name: `app-${tag}`,
        answer_url: `https://127.0.0.1:${rx.port}/${tag}/answer`,
        message_url: `https://127.0.0.1:${rx.port}/${tag}/message`,
        log_incoming_message: log,
      });
      expect(app.status).toBe(201);
      const a = await edge.newEndpoint(account, `sender${n}`);
      await edge.updateEndpoint(a, { application: Number(app.json.app_id) });
      const b = await edge.newEndpoint(account, `recipient${n}`);
      const cid = cidStr();
      const rcpt = sipp({ scenario: 'message-uas.xml', port, transport: 'udp', endpoint: b, cidStr: cid });
      await edge.waitBindings(b, 1);
      const sender = await sipp({ scenario: 'message-uac.xml', port, transport: 'udp', endpoint: a, cidStr: cid, keys: { callee: b.username } });
      expect(sender.failed, sender.errors).toBe(0);
      expect((await rcpt).failed).toBe(0);
      return { a, b, callId: cid.replace('%u', '1') };
    };
    const logged = await send('msg', true);
    await send('msgoff', false);
    await until('the Message callback', () => (at('msg', 'message').length >= 1 ? true : undefined), 10_000);
    const r = at('msg', 'message')[0] as ReceivedRequest;
    checkSignature(r);
    expect(r.method).toBe('POST');
    const p = paramsOf(r);
    expect(p).toMatchObject({ Event: 'Message', auth_id: account.authId, From: logged.a.username, To: logged.b.username, Status: 'delivered', SipStatus: '200', SipCallId: logged.callId });
    // The body as SIPp sent it (its scenario line ends in CRLF), byte for byte.
    expect(p.Text).toBe(`hello from ${logged.a.username}\r\n`);
    expect(p.BodyBytes).toBe(String(Buffer.byteLength(p.Text as string)));
    expect(p.ContentType).toMatch(/^text\/plain/);
    expect(p.MessageUUID).toBe(p.CallUUID);
    expect(p.CallbackId).toMatch(/^[0-9a-f-]{36}$/);
    // The other application does not log incoming messages: nothing reaches its URL.
    await new Promise((res) => setTimeout(res, 700));
    expect(at('msgoff', 'message')).toHaveLength(0);
    expect(at('msg', 'message')).toHaveLength(1);
  }, 60_000);

  // Redis only (the outbox must outlive a node): registered for that store alone.
  if (!withRedis) return;

  it('a receiver that never answers gets exactly 1 + 3 attempts, then a dead letter', async () => {
    plan.set('/hang/hangup', [0, 0, 0, 0, 0, 0]);
    await call('hang', 'call-uas-busy.xml', 'call-uac-busy.xml');
    // 4 attempts of 2 s with 0.5, 1 and 2 s between them: about 11.5 s.
    const dead = await until(
      'the dead letter',
      async () => {
        const r = await api('GET', `/api/v1/Account/${account.authId}/CallbackDeadLetter/`);
        const l = r.json.objects as Array<Record<string, unknown>>;
        return l.find((d) => String(d.url).endsWith('/hang/hangup'));
      },
      40_000,
    );
    expect(at('hang', 'hangup')).toHaveLength(4);
    expect(dead).toMatchObject({ event: 'Hangup', attempts: 4 });
    expect(String(dead.reason)).toMatch(/after 4 attempts/);
    const metrics = await (await fetch(`${edge.base}/metrics`)).text();
    expect(metrics).toMatch(/sip_callbacks_dead_total\{event="Hangup"\} [1-9]/);
    await new Promise((r) => setTimeout(r, 1000));
    expect(at('hang', 'hangup')).toHaveLength(4);
  }, 60_000);

  it('a node killed with callbacks pending: the next node delivers them (retry due, and a lease cut mid-delivery)', async () => {
    // The first attempt fails (a retry is due 2 s later) or hangs (the node is killed while it waits).
    plan.set('/pending/hangup', [500]);
    plan.set('/midway/hangup', [0]);
    // The hanging one first (it hangs for CALLBACK_TIMEOUT, 2 s), then the failing one, whose
    // retry is due 0.5 s after its failure: the node is killed as soon as that failure is
    // seen (placing the second call could take longer than 0.5 s on a loaded machine, so the
    // failing call goes second).
    await call('midway', 'call-uas-busy.xml', 'call-uac-busy.xml');
    await until('the first attempt that hangs', () => (at('midway', 'hangup').length === 1 ? true : undefined), 10_000);
    await call('pending', 'call-uas-busy.xml', 'call-uac-busy.xml');
    await until('both first attempts', () => (at('pending', 'hangup').length === 1 && at('midway', 'hangup').length === 1 ? true : undefined), 10_000, 10);
    const dead = edge;
    await dead.server.stop('SIGKILL');
    edge = await startEdge(env());
    // The retry is due 0.5 s after the failure; the cut delivery's lease ends 4 s after its claim.
    await until('both delivered by the new node', () => (at('pending', 'hangup').length === 2 && at('midway', 'hangup').length === 2 ? true : undefined), 30_000);
    for (const t of ['pending', 'midway']) {
      const [first, again] = at(t, 'hangup').map(paramsOf) as [Params, Params];
      expect(again.CallbackId).toBe(first.CallbackId);
      expect(again.CallUUID).toBe(first.CallUUID);
    }
  }, 90_000);
});
