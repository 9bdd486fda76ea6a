/**
 * The messaging API in process (docs/messaging.md), on the memory and Redis stores,
 * against a local WhatsApp Cloud API stub that checks the Bearer token and the body as
 * Meta would, answers `{messages:[{id:"wamid…"}]}`, and later posts signed status
 * webhooks back: text and template sends reach `read`; a forged signature is 401 and
 * records nothing; the same status twice counts once; Meta's verification GET; the
 * 24-hour window; provider 4xx and timeouts; event subscriptions delivered signed
 * (X-Webhook-Signature) through the callback outbox; the SIP channel both ways; and the
 * rate limit (request 1 001 in a minute → 429 + Retry-After), also across two API
 * servers sharing one redis-server.
 */
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createMessaging, signBody, type Messaging, type SipMessenger } from '../../src/messaging/index.js';
import { createWhatsAppClient } from '../../src/messaging/whatsapp.js';
import { CallbackDispatcher } from '../../src/events/dispatcher.js';
import { deliverCallback } from '../../src/events/webhook.js';
import { CallbackNetworkGuard } from '../../src/events/network-guard.js';
import { verifyCallback } from '../../src/events/signature.js';
import { createLogger } from '../../src/logger.js';
import { startHarness, STORE_KINDS, stopRedisServer, type Creds, type Harness } from '../support/api-harness.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.js';
import { until } from '../support/wait.js';

const APP_SECRET = 'meta-app-secret-0123456789abcdef';
const VERIFY_TOKEN = 'verify-token-xyz';
const ACCESS_TOKEN = 'EAAG-test-access-token-secret-value';

interface StubRequest {
  path: string;
  auth: string | undefined;
  body: Record<string, unknown>;
}

/** A local WhatsApp Cloud API: checks what Meta checks, answers as Meta does, posts status webhooks back. */
class CloudApiStub {
  server!: Server;
  port = 0;
  requests: StubRequest[] = [];
  /** What the next sends are answered with. */
  mode: 'ok' | 'reject' | 'hang' = 'ok';
  #n = 0;
  readonly #hanging: ServerResponse[] = [];

  async start(): Promise<void> {
    this.server = createServer((req, res) => this.#handle(req, res));
    await new Promise<void>((r) => this.server.listen(0, '127.0.0.1', r));
    this.port = (this.server.address() as AddressInfo).port;
  }

  get base(): string {
    return `http://127.0.0.1:${this.port}/v21.0`;
  }

  #handle(req: IncomingMessage, res: ServerResponse): void {
    let raw = '';
    req.on('data', (c: Buffer) => (raw += c.toString('utf8')));
    req.on('end', () => {
      const answer = (status: number, body: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      const m = /^\/v21\.0\/([0-9]+)\/messages$/.exec(req.url ?? '');
      if (req.method !== 'POST' || !m) return answer(404, { error: { code: 803, message: 'Unknown path' } });
      let body: Record<string, unknown>;
      try {
        body = JSON.parse(raw) as Record<string, unknown>;
      } catch {
        return answer(400, { error: { code: 100, message: 'Invalid JSON' } });
      }
      this.requests.push({ path: req.url ?? '', auth: req.headers.authorization, body });
      if (req.headers.authorization !== `Bearer ${ACCESS_TOKEN}`) return answer(401, { error: { code: 190, message: 'Invalid OAuth access token' } });
      const problem = shapeProblem(body);
      if (problem) return answer(400, { error: { code: 100, message: `(#100) ${problem}` } });
      if (this.mode === 'hang') {
        this.#hanging.push(res);
        return;
      }
      if (this.mode === 'reject') return answer(400, { error: { code: 131047, title: 'Re-engagement message', message: 'Message failed to send because more than 24 hours have passed' } });
      this.#n++;
      answer(200, { messaging_product: 'whatsapp', contacts: [{ input: body.to, wa_id: body.to }], messages: [{ id: `wamid.STUB${this.#n}` }] });
    });
  }

  async close(): Promise<void> {
    for (const r of this.#hanging.splice(0)) r.destroy();
    this.server.closeAllConnections();
    await new Promise<void>((r) => this.server.close(() => r()));
  }
}

/** What Meta refuses in a send body (null: fine). */
function shapeProblem(b: Record<string, unknown>): string | null {
  if (b.messaging_product !== 'whatsapp') return 'messaging_product must be whatsapp';
  if (typeof b.to !== 'string' || !/^[0-9]{7,15}$/.test(b.to)) return 'to must be a phone number';
  const type = b.type;
  if (typeof type !== 'string' || typeof b[type] !== 'object' || b[type] === null) return 'the type object is missing';
  if (type === 'text' && typeof (b.text as { body?: unknown }).body !== 'string') return 'text.body is required';
  if (type === 'template') {
    const t = b.template as { name?: unknown; language?: { code?: unknown }; components?: unknown };
    if (typeof t.name !== 'string' || typeof t.language?.code !== 'string') return 'template name and language.code are required';
    if (t.components !== undefined && !Array.isArray(t.components)) return 'components must be an array';
    for (const c of (t.components ?? []) as Array<{ type?: unknown; parameters?: unknown }>) {
      if (typeof c.type !== 'string' || !Array.isArray(c.parameters)) return 'each component needs type and parameters';
      for (const p of c.parameters as Array<{ type?: unknown }>) if (typeof p.type !== 'string') return 'each parameter needs a type';
    }
  }
  return null;
}

/** A status webhook body as Meta posts it. */
function statusBody(pnid: string, wamid: string, status: string, extra: Record<string, unknown> = {}): string {
  return JSON.stringify({
    object: 'whatsapp_business_account',
    entry: [{ id: 'WABA', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550001111', phone_number_id: pnid }, statuses: [{ id: wamid, status, timestamp: String(Math.floor(Date.now() / 1000)), recipient_id: '14155550100', ...extra }] } }] }],
  });
}

/** An inbound message webhook body as Meta posts it. */
function inboundBody(pnid: string, from: string, text: string, wamid = `wamid.IN${randomUUID()}`, tsSeconds = Math.floor(Date.now() / 1000)): string {
  return JSON.stringify({
    object: 'whatsapp_business_account',
    entry: [{ id: 'WABA', changes: [{ field: 'messages', value: { messaging_product: 'whatsapp', metadata: { display_phone_number: '15550001111', phone_number_id: pnid }, contacts: [{ profile: { name: 'Ann' }, wa_id: from }], messages: [{ from, id: wamid, timestamp: String(tsSeconds), type: 'text', text: { body: text } }] } }] }],
  });
}

afterAll(() => stopRedisServer());

let ca: TestCa;
beforeAll(() => {
  ca = makeTestCa();
});
afterAll(() => ca.remove());

describe.each(STORE_KINDS)('messaging API on %s', (kind) => {
  let h: Harness;
  let a: Creds & { sipDomain: string };
  let stub: CloudApiStub;
  let messaging: Messaging;
  let receiver: HttpsReceiver;
  let dispatcher: CallbackDispatcher;
  let logs = '';
  const sipSends: Array<{ domain: string; from: string; to: string; type: string; body: string }> = [];
  let sipStatus = 200;
  const sip: SipMessenger = {
    async send(domain, fromUri, toAor, contentType, body) {
      sipSends.push({ domain, from: fromUri, to: toAor, type: contentType, body });
      return { status: sipStatus };
    },
  };

  beforeAll(async () => {
    stub = new CloudApiStub();
    await stub.start();
    receiver = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (_r, res) => {
      res.writeHead(200);
      res.end('ok');
    });
    const logger = createLogger('debug', { write: (line: string) => void (logs += line) });
    h = await startHarness(
      kind,
      { whatsappApiBaseUrl: stub.base, whatsappAppSecret: APP_SECRET, whatsappVerifyToken: VERIFY_TOKEN },
      {
        logger,
        messaging: (d) => {
          messaging = createMessaging({ ...d, outbox: d.calls, whatsapp: createWhatsAppClient(stub.base, 1500), sip, sendPollMs: 50, log: logger.child({ component: 'messaging' }), onQueued: () => dispatcher?.wake() });
          messaging.start();
          return messaging;
        },
      },
    );
    const allowed = new CallbackNetworkGuard(['127.0.0.0/8']);
    dispatcher = new CallbackDispatcher({
      store: h.calls,
      log: createLogger('silent'),
      retryDelay: () => null,
      pollMs: 50,
      deliver: (item, secret) => deliverCallback({ url: item.url, method: item.method, params: item.params, secret, callbackId: item.id, allowed, ca: ca.caCert, signatureHeader: item.signatureHeader }),
    });
    dispatcher.start();
  });
  afterAll(async () => {
    await dispatcher.stop();
    await messaging.close();
    await h.close();
    await stub.close();
    await receiver.close();
  });
  beforeEach(async () => {
    a = await h.newAccount();
    stub.mode = 'ok';
    sipStatus = 200;
  });

  const req = (method: string, path: string, body?: unknown, headers: Record<string, string> = {}) => h.request(method, path, { auth: a, body, headers });
  let pnidSeq = 100000 + (kind === 'redis' ? 50000 : 0);
  const newChannel = async (): Promise<{ id: string; pnid: string }> => {
    const pnid = String(++pnidSeq);
    const r = await req('POST', '/v1/messaging/channels', { type: 'whatsapp', name: 'support', waba_id: '4242', phone_number_id: pnid, access_token: ACCESS_TOKEN, display_phone_number: '+15550001111' });
    expect(r.status, r.text).toBe(201);
    return { id: String(r.json.id), pnid };
  };
  const meta = (raw: string, signature: string | null = signBody(raw, APP_SECRET)) =>
    h.request('POST', '/v1/messaging/webhooks/whatsapp', { raw, headers: { 'content-type': 'application/json', ...(signature !== null ? { 'x-hub-signature-256': signature } : {}) } });
  const message = async (id: string): Promise<Record<string, unknown>> => (await req('GET', `/v1/messaging/messages/${id}`)).json;
  const openWindow = async (pnid: string, from = '14155550100'): Promise<void> => {
    const r = await meta(inboundBody(pnid, from, 'hi there'));
    expect(r.status, r.text).toBe(200);
  };

  it('channels: create, list, get, update, delete; access_token write-only, sealed at rest, never logged', async () => {
    const { id, pnid } = await newChannel();
    const got = await req('GET', `/v1/messaging/channels/${id}`);
    expect(got.status).toBe(200);
    expect(got.json).toMatchObject({ id, channel_id: id, type: 'whatsapp', waba_id: '4242', phone_number_id: pnid, access_token_set: true });
    expect(got.text).not.toContain(ACCESS_TOKEN);
    const stored = await messaging.store.getChannel(a.id, id);
    expect(stored?.sealedAccessToken).toMatch(/^enc:v1:test:/);
    expect(JSON.stringify(stored)).not.toContain(ACCESS_TOKEN);
    const put = await req('PUT', `/v1/messaging/channels/${id}`, { name: 'sales', access_token: 'EAAG-rotated-token-0000' });
    expect(put.status, put.text).toBe(200);
    expect(put.json.name).toBe('sales');
    expect(messaging.channels.accessToken((await messaging.store.getChannel(a.id, id))!)).toBe('EAAG-rotated-token-0000');
    const list = await req('GET', '/v1/messaging/channels');
    expect((list.json.objects as Array<{ id: string }>).map((c) => c.id)).toEqual([id]);
    // The same phone_number_id cannot be a second channel; bad fields are named.
    const dup = await req('POST', '/v1/messaging/channels', { type: 'whatsapp', waba_id: '1', phone_number_id: pnid, access_token: 'x' });
    expect(dup.status).toBe(409);
    const bad = await req('POST', '/v1/messaging/channels', { type: 'whatsapp', waba_id: 'abc', phone_number_id: '1' });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.json.details as object).sort()).toEqual(['waba_id']);
    const missing = await req('POST', '/v1/messaging/channels', { type: 'whatsapp', waba_id: '1', phone_number_id: '99' });
    expect(missing.json.details).toEqual({ access_token: 'is required for a whatsapp channel' });
    const numbers = await req('GET', '/v1/messaging/numbers');
    expect(numbers.json.objects).toEqual([{ number: '+15550001111', phone_number_id: pnid, waba_id: '4242', channel_id: id, name: 'sales', whatsapp: true }]);
    expect((await req('DELETE', `/v1/messaging/channels/${id}`)).status).toBe(204);
    expect((await req('GET', `/v1/messaging/channels/${id}`)).status).toBe(404);
    // Another account does not see it; sub-account credentials are refused.
    const other = await h.newAccount();
    expect((await h.request('GET', `/v1/messaging/channels`, { auth: other })).json.objects).toEqual([]);
    const sub = await h.newSubAccount(a);
    expect((await h.request('GET', '/v1/messaging/channels', { auth: sub })).status).toBe(403);
    expect(logs).not.toContain(ACCESS_TOKEN);
    expect(logs).not.toContain('EAAG-rotated-token-0000');
  });

  it('send text and template against the stub: 201 pending, the Bearer token and body Meta expects, statuses reach read; the same status twice counts once', async () => {
    const { id: ch, pnid } = await newChannel();
    await openWindow(pnid);
    const before = stub.requests.length;
    const text = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550100', type: 'text', text: { body: 'Your order shipped' } });
    expect(text.status, text.text).toBe(201);
    expect(text.json).toMatchObject({ status: 'pending', type: 'text', to: '+14155550100', channel_id: ch, text: { body: 'Your order shipped' } });
    const tpl = await req('POST', '/v1/messaging/send', {
      channel_id: ch,
      to: '+14155550100',
      type: 'template',
      template: { name: 'order_update', language: 'en_US', components: [{ type: 'body', parameters: ['Ann', { type: 'text', text: '#1234' }] }] },
    });
    expect(tpl.status, tpl.text).toBe(201);
    const ids = [String(text.json.id), String(tpl.json.id)];
    const wamids = await until('both accepted by the stub', async () => {
      const ms = await Promise.all(ids.map(message));
      return ms.every((m) => typeof m.provider_message_id === 'string') ? ms.map((m) => String(m.provider_message_id)) : undefined;
    });
    const sent = stub.requests.slice(before);
    expect(sent).toHaveLength(2);
    expect(sent.every((r) => r.auth === `Bearer ${ACCESS_TOKEN}` && r.path === `/v21.0/${pnid}/messages`)).toBe(true);
    expect(sent.find((r) => r.body.type === 'text')?.body).toEqual({ messaging_product: 'whatsapp', recipient_type: 'individual', to: '14155550100', type: 'text', text: { body: 'Your order shipped' }, biz_opaque_callback_data: ids[0] });
    expect(sent.find((r) => r.body.type === 'template')?.body.template).toEqual({
      name: 'order_update',
      language: { code: 'en_US' },
      components: [{ type: 'body', parameters: [{ type: 'text', text: 'Ann' }, { type: 'text', text: '#1234' }] }],
    });
    // The stub's status webhooks: sent, delivered, delivered again (a duplicate), read; a late "sent" changes nothing.
    for (const wamid of wamids) {
      for (const st of ['sent', 'delivered', 'delivered', 'read', 'sent']) expect((await meta(statusBody(pnid, wamid, st))).status).toBe(200);
    }
    for (const id of ids) {
      const m = await message(id);
      expect(m.status).toBe('read');
      expect((m.statuses as Array<{ status: string }>).map((s) => s.status)).toEqual(['pending', 'sent', 'delivered', 'read']);
    }
    // Exactly one provider request per message.
    expect(stub.requests.length - before).toBe(2);
  });

  it('a forged or missing X-Hub-Signature-256 is 401 and records nothing; Meta verification GET echoes the challenge', async () => {
    const { pnid } = await newChannel();
    const raw = inboundBody(pnid, '14155550111', 'forged hello');
    const forged = await meta(raw, signBody(raw, 'not-the-app-secret-000000000000'));
    expect(forged.status).toBe(401);
    expect(forged.json.error).toBe('invalid_signature');
    // A signature of another body (the bytes as received are what is signed).
    expect((await meta(raw, signBody(raw.replace('forged', 'Forged'), APP_SECRET))).status).toBe(401);
    expect((await meta(raw, null)).status).toBe(401);
    expect((await req('GET', '/v1/messaging/conversations')).json.meta).toMatchObject({ total: 0 });
    const ok = await meta(raw);
    expect(ok.status).toBe(200);
    expect(ok.json).toMatchObject({ received: 1 });
    // The same inbound message again is recorded once.
    expect((await meta(raw)).json).toMatchObject({ received: 0, duplicates: 1 });
    const convs = await req('GET', '/v1/messaging/conversations');
    expect(convs.json.meta).toMatchObject({ total: 1 });
    // Whatever Accept header Meta sends.
    const v = await h.request('GET', `/v1/messaging/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=${VERIFY_TOKEN}&hub.challenge=1158201444`, { auth: null, headers: { accept: 'text/plain' } });
    expect(v.status).toBe(200);
    expect(v.text).toBe('1158201444');
    const wrong = await h.request('GET', '/v1/messaging/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=nope&hub.challenge=1', { auth: null });
    expect(wrong.status).toBe(403);
  });

  it("the 24-hour window: free-form outside it → 400 naming the rule; templates always; an inbound message opens it; conversations list and get", async () => {
    const { id: ch, pnid } = await newChannel();
    const first = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550123', type: 'text', text: { body: 'hello?' } });
    expect(first.status).toBe(400);
    expect(first.json.error).toBe('outside_customer_service_window');
    expect(String(first.json.message)).toContain('24-hour customer-service window');
    // A contact who wrote 25 hours ago: still closed; an image too.
    await meta(inboundBody(pnid, '14155550123', 'old', undefined, Math.floor(Date.now() / 1000) - 25 * 3600));
    const img = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550123', type: 'image', image: { link: 'https://cdn.example/a.png', caption: 'x' } });
    expect(img.status).toBe(400);
    expect(img.json.error).toBe('outside_customer_service_window');
    const tpl = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550123', type: 'template', template: { name: 'hello_world', language: 'en_US' } });
    expect(tpl.status, tpl.text).toBe(201);
    await meta(inboundBody(pnid, '14155550123', 'now'));
    const now = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550123', type: 'image', image: { link: 'https://cdn.example/a.png', caption: 'x' } });
    expect(now.status, now.text).toBe(201);
    const convs = await req('GET', '/v1/messaging/conversations');
    const c = (convs.json.objects as Array<Record<string, unknown>>)[0] as Record<string, unknown>;
    expect(c).toMatchObject({ channel_id: ch, contact: '+14155550123', window_open: true, message_count: 4 });
    const one = await req('GET', `/v1/messaging/conversations/${String(c.id)}`);
    expect((one.json.messages as Array<{ direction: string; type: string }>).map((m) => `${m.direction}:${m.type}`)).toEqual(['inbound:text', 'outbound:template', 'inbound:text', 'outbound:image']);
    expect((await req('GET', '/v1/messaging/conversations/cv_000000000000000000000000')).status).toBe(404);
  });

  it('bad input: non-E.164 to → 400, unknown channel → 404; Idempotency-Key replays the first send and sends once', async () => {
    const { id: ch, pnid } = await newChannel();
    await openWindow(pnid);
    for (const to of ['14155550100', '+0123', 'bob', '+1 415 555 0100']) {
      const r = await req('POST', '/v1/messaging/send', { channel_id: ch, to, type: 'text', text: { body: 'x' } });
      expect(r.status, to).toBe(400);
      expect(r.json.details).toEqual({ to: 'must be an E.164 number such as +14155550100' });
    }
    const unknown = await req('POST', '/v1/messaging/send', { channel_id: 'ch_ffffffffffffffffffff', to: '+14155550100', type: 'text', text: { body: 'x' } });
    expect(unknown.status).toBe(404);
    const noBody = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550100', type: 'text' });
    expect(noBody.json.details).toEqual({ 'text.body': 'is required with type text' });
    const before = stub.requests.length;
    const key = randomUUID();
    const one = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550100', type: 'text', text: { body: 'once' } }, { 'idempotency-key': key });
    const two = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550100', type: 'text', text: { body: 'once' } }, { 'idempotency-key': key });
    expect([one.status, two.status]).toEqual([201, 201]);
    expect(two.headers.get('idempotent-replayed')).toBe('true');
    expect(two.json.id).toBe(one.json.id);
    await until('sent', async () => ((await message(String(one.json.id))).provider_message_id ? true : undefined));
    await messaging.idle();
    expect(stub.requests.length - before).toBe(1);
    // The MessageSender's own key (campaigns): the same contact once.
    const s1 = await messaging.send({ authId: a.id }, { channelId: ch, to: '+14155550100', type: 'text', text: { body: 'c' }, idempotencyKey: 'cmp1:+14155550100', campaignId: 'cmp1' });
    const s2 = await messaging.send({ authId: a.id }, { channelId: ch, to: '+14155550100', type: 'text', text: { body: 'c' }, idempotencyKey: 'cmp1:+14155550100', campaignId: 'cmp1' });
    expect(s2.id).toBe(s1.id);
    expect(s1.campaignId).toBe('cmp1');
  });

  it('provider 4xx → failed with its error code; a provider timeout → failed provider_timeout, requested once, and relinked by a later status carrying our id', async () => {
    const { id: ch, pnid } = await newChannel();
    await openWindow(pnid);
    stub.mode = 'reject';
    const r = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550100', type: 'text', text: { body: 'late' } });
    const failed = await until('failed', async () => {
      const m = await message(String(r.json.id));
      return m.status === 'failed' ? m : undefined;
    });
    expect(failed.error).toEqual({ code: '131047', title: 'Re-engagement message' });
    stub.mode = 'hang';
    const before = stub.requests.length;
    const t = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550100', type: 'text', text: { body: 'slow' } });
    const timedOut = await until('timed out', async () => {
      const m = await message(String(t.json.id));
      return m.status === 'failed' ? m : undefined;
    });
    expect((timedOut.error as { code: string }).code).toBe('provider_timeout');
    await new Promise((res) => setTimeout(res, 400));
    expect(stub.requests.length - before).toBe(1);
    // Meta did send it after all: its status webhook carries our id (biz_opaque_callback_data).
    expect((await meta(statusBody(pnid, 'wamid.LATE1', 'delivered', { biz_opaque_callback_data: String(t.json.id) }))).status).toBe(200);
    const after = await message(String(t.json.id));
    expect(after).toMatchObject({ status: 'delivered', provider_message_id: 'wamid.LATE1', error: null });
    // A failed status keeps the provider's error code.
    stub.mode = 'ok';
    const f2 = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550100', type: 'template', template: { name: 'x', language: 'en' } });
    const w = await until('accepted', async () => ((await message(String(f2.json.id))).provider_message_id as string | null) ?? undefined);
    await meta(statusBody(pnid, w, 'failed', { errors: [{ code: 131026, title: 'Message undeliverable' }] }));
    await meta(statusBody(pnid, w, 'delivered'));
    expect(await message(String(f2.json.id))).toMatchObject({ status: 'failed', error: { code: '131026', title: 'Message undeliverable' } });
  });

  it('webhooks: create, list, get, test, delete; message.inbound and message.status delivered signed with X-Webhook-Signature', async () => {
    // The account's callback signing secret (given at account creation; this replaces it).
    const secret = String((await req('POST', `/api/v1/Account/${a.id}/SigningSecret/`)).json.callback_signing_secret);
    expect(await h.calls.signingSecret(a.sipDomain)).toBe(secret);
    const url = `https://127.0.0.1:${receiver.port}/hooks/${a.id}`;
    const created = await req('POST', '/v1/messaging/webhooks', { url, events: ['message.inbound', 'message.status'], description: 'crm' });
    expect(created.status, created.text).toBe(201);
    const wid = String(created.json.id);
    expect((await req('POST', '/v1/messaging/webhooks', { url: 'http://insecure.example/x' })).status).toBe(400);
    expect((await req('GET', '/v1/messaging/webhooks')).json.objects).toHaveLength(1);
    expect((await req('GET', `/v1/messaging/webhooks/${wid}`)).json).toMatchObject({ url, events: ['message.inbound', 'message.status'], description: 'crm' });
    const mine = () => receiver.requests.filter((r) => r.url === `/hooks/${a.id}`).map((r) => ({ r, p: Object.fromEntries(new URLSearchParams(r.body)) }));
    const test = await req('POST', `/v1/messaging/webhooks/${wid}/test`);
    expect(test.status).toBe(202);
    await until('test event', () => (mine().some((x) => x.p.Event === 'webhook.test') ? true : undefined));
    const { id: ch, pnid } = await newChannel();
    await meta(inboundBody(pnid, '14155550100', 'I need help'));
    const inbound = await until('message.inbound', () => mine().find((x) => x.p.Event === 'message.inbound'));
    expect(inbound.p).toMatchObject({ Event: 'message.inbound', ChannelId: ch, From: '+14155550100', Text: 'I need help', Direction: 'inbound', WebhookId: wid });
    const sig = String(inbound.r.headers['x-webhook-signature']);
    expect(verifyCallback(secret, String(inbound.r.headers['x-sipedge-timestamp']), inbound.r.body, sig)).toBe(true);
    const s = await req('POST', '/v1/messaging/send', { channel_id: ch, to: '+14155550100', type: 'text', text: { body: 'on it' } });
    const wamid = await until('accepted', async () => ((await message(String(s.json.id))).provider_message_id as string | null) ?? undefined);
    await meta(statusBody(pnid, wamid, 'delivered'));
    await meta(statusBody(pnid, wamid, 'delivered'));
    const st = await until('message.status', () => mine().find((x) => x.p.Event === 'message.status' && x.p.Status === 'delivered'));
    expect(st.p).toMatchObject({ MessageId: String(s.json.id), ProviderMessageId: wamid });
    await new Promise((res) => setTimeout(res, 300));
    expect(mine().filter((x) => x.p.Event === 'message.status' && x.p.Status === 'delivered')).toHaveLength(1);
    expect((await req('DELETE', `/v1/messaging/webhooks/${wid}`)).status).toBe(204);
    expect((await req('GET', `/v1/messaging/webhooks/${wid}`)).status).toBe(404);
  });

  it('no access token, app secret or verify token in any log line (after every test above)', () => {
    expect(logs).toContain('hub.verify_token=[redacted]');
    for (const secret of [ACCESS_TOKEN, 'EAAG-rotated-token-0000', APP_SECRET, VERIFY_TOKEN]) expect(logs).not.toContain(secret);
  });

  it('a sip channel: send to an endpoint as SIP MESSAGE from sip:channel-<id>@<domain>; its reply becomes an inbound message and fires message.inbound', async () => {
    await req('POST', `/api/v1/Account/${a.id}/SigningSecret/`);
    const url = `https://127.0.0.1:${receiver.port}/sip/${a.id}`;
    await req('POST', '/v1/messaging/webhooks', { url, events: ['message.inbound'] });
    const c = await req('POST', '/v1/messaging/channels', { type: 'sip', name: 'desk' });
    expect(c.status, c.text).toBe(201);
    const ch = String(c.json.id);
    const address = `sip:channel-${ch}@${a.sipDomain}`;
    expect(c.json.sip_address).toBe(address);
    const r = await req('POST', '/v1/messaging/send', { channel_id: ch, to: 'alice', type: 'text', text: { body: 'Hello Alice' } });
    expect(r.status, r.text).toBe(201);
    await until('delivered', async () => ((await message(String(r.json.id))).status === 'delivered' ? true : undefined));
    expect(sipSends.at(-1)).toEqual({ domain: a.sipDomain, from: address, to: `sip:alice@${a.sipDomain}`, type: 'text/plain;charset=UTF-8', body: 'Hello Alice' });
    const foreign = await req('POST', '/v1/messaging/send', { channel_id: ch, to: 'sip:alice@other.sip.test', type: 'text', text: { body: 'x' } });
    expect(foreign.status).toBe(400);
    sipStatus = 480;
    const off = await req('POST', '/v1/messaging/send', { channel_id: ch, to: `sip:bob@${a.sipDomain}`, type: 'text', text: { body: 'x' } });
    await until('failed', async () => ((await message(String(off.json.id))).status === 'failed' ? true : undefined));
    expect((await message(String(off.json.id))).error).toMatchObject({ code: 'sip_480' });
    expect(await messaging.fromEndpoint(a.sipDomain, 'alice', address, 'Hi back')).toMatchObject({ status: 200 });
    expect((await messaging.fromEndpoint('other.sip.test', 'alice', address, 'x')).status).toBe(404);
    expect((await messaging.fromEndpoint(a.sipDomain, 'alice', `sip:channel-ch_00000000000000000000@${a.sipDomain}`, 'x')).status).toBe(404);
    expect((await messaging.fromEndpoint(a.sipDomain, 'alice', address, '{}', 'application/json')).status).toBe(415);
    expect((await messaging.fromEndpoint(a.sipDomain, 'alice', address, Buffer.alloc(5000, 97), 'text/plain')).status).toBe(413);
    const convs = (await req('GET', '/v1/messaging/conversations')).json.objects as Array<{ id: string; contact: string }>;
    const alice = convs.find((x) => x.contact === 'alice');
    const msgs = (await req('GET', `/v1/messaging/conversations/${alice?.id}`)).json.messages as Array<{ direction: string; text: { body: string } }>;
    expect(msgs.map((m) => `${m.direction}:${m.text.body}`)).toEqual(['outbound:Hello Alice', 'inbound:Hi back']);
    const ev = await until('message.inbound', () => receiver.requests.find((x) => x.url === `/sip/${a.id}`));
    expect(Object.fromEntries(new URLSearchParams(ev.body))).toMatchObject({ Event: 'message.inbound', From: 'alice', Text: 'Hi back', ChannelId: ch });
    expect(ev.headers['x-webhook-signature']).toMatch(/^[0-9a-f]{64}$/);
  });
});

/** Waits out the end of the current minute when fewer than `need` seconds are left in it. */
async function freshMinute(need = 20): Promise<void> {
  const left = 60 - (Date.now() / 1000) % 60;
  if (left < need) await new Promise((r) => setTimeout(r, left * 1000 + 50));
}

describe('messaging rate limit', () => {
  it('request 1 001 in a minute → 429 with Retry-After; X-RateLimit-* on every answer (401 too); another key is not affected', async () => {
    const h = await startHarness('memory');
    try {
      const a = await h.newAccount();
      const b = await h.newAccount();
      await freshMinute();
      const first = await h.request('GET', '/v1/messaging/channels', { auth: a });
      expect(first.headers.get('x-ratelimit-limit')).toBe('1000');
      expect(first.headers.get('x-ratelimit-remaining')).toBe('999');
      const reset = Number(first.headers.get('x-ratelimit-reset'));
      expect(reset).toBeGreaterThan(0);
      expect(reset).toBeLessThanOrEqual(60);
      const statuses = await Promise.all(Array.from({ length: 999 }, () => h.request('GET', '/v1/messaging/channels', { auth: a }).then((r) => r.status)));
      expect(statuses.every((s) => s === 200)).toBe(true);
      const over = await h.request('GET', '/v1/messaging/channels', { auth: a });
      expect(over.status).toBe(429);
      expect(over.json.error).toBe('rate_limited');
      expect(Number(over.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(over.headers.get('x-ratelimit-remaining')).toBe('0');
      expect((await h.request('GET', '/v1/messaging/channels', { auth: b })).status).toBe(200);
      const bad = await h.request('GET', '/v1/messaging/channels', { auth: { id: a.id, token: 'wrong' } });
      expect(bad.status).toBe(401);
      expect(bad.headers.get('x-ratelimit-limit')).toBe('1000');
      // The voice API's own limit is separate.
      expect((await h.request('GET', `/api/v1/Account/${a.id}/`, { auth: a })).status).toBe(200);
    } finally {
      await h.close();
    }
  });

  it('two API servers sharing one redis-server share the count: 600 + 400, then 429 on either', async () => {
    const h1 = await startHarness('redis');
    const h2 = await startHarness('redis');
    try {
      const a = await h1.newAccount();
      await freshMinute();
      const r1 = await Promise.all(Array.from({ length: 600 }, () => h1.request('GET', '/v1/messaging/channels', { auth: a }).then((r) => r.status)));
      const r2 = await Promise.all(Array.from({ length: 400 }, () => h2.request('GET', '/v1/messaging/channels', { auth: a }).then((r) => r.status)));
      expect([...r1, ...r2].every((s) => s === 200)).toBe(true);
      const over2 = await h2.request('GET', '/v1/messaging/channels', { auth: a });
      const over1 = await h1.request('GET', '/v1/messaging/conversations', { auth: a });
      expect([over1.status, over2.status]).toEqual([429, 429]);
      expect(Number(over1.headers.get('retry-after'))).toBeGreaterThan(0);
      expect(Number(over2.headers.get('retry-after'))).toBeLessThanOrEqual(60);
    } finally {
      await h1.close();
      await h2.close();
    }
  });
});
