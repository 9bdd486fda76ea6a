/**
 * The messaging API's `sip` channel on the wire (issue 26; docs/messaging.md "SIP channel"):
 * a real server, a SIP.js phone registered over WebSocket, an HTTPS receiver subscribed to
 * `message.inbound`. `POST /v1/messaging/send` to the endpoint reaches the phone as a SIP
 * MESSAGE (from the channel's address, through the proxy); the phone's reply to the
 * channel's address appears in the conversation and fires a signed `message.inbound`.
 */
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Messager, Registerer, UserAgent } from 'sip.js';
import { startEdge, type Account, type Edge } from '../support/edge.js';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { until } from '../support/wait.js';
import { verifyCallback } from '../../src/events/signature.js';

/** Node 20 has no WebSocket global: SIP.js's transport constructs this one, subprotocol `sip`. */
class NodeWebSocket extends WebSocket {
  constructor(url: string | URL, protocols?: string | string[]) {
    super(url, protocols ?? 'sip');
  }
}

describe('a sip messaging channel between the API and a SIP.js phone', () => {
  let ca: TestCa;
  let edge: Edge;
  let rx: HttpsReceiver;
  let account: Account;
  let ua: UserAgent | null = null;

  beforeAll(async () => {
    (globalThis as { WebSocket?: unknown }).WebSocket ??= NodeWebSocket;
    ca = makeTestCa();
    rx = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (_req, res: ServerResponse) => void res.writeHead(200).end('ok'));
    edge = await startEdge({ NODE_EXTRA_CA_CERTS: ca.caCertFile, CALLBACK_ALLOWED_NETWORKS: '127.0.0.0/8', SIP_TLS_PORT: 'off', SIP_WSS_PORT: 'off' });
    account = await edge.newAccount();
  }, 60_000);
  afterAll(async () => {
    await ua?.stop();
    await edge?.stop();
    await rx?.close();
    ca?.remove();
  });

  it('send → the phone gets a MESSAGE; its reply → the conversation and a signed message.inbound', async () => {
    const secretRes = await fetch(`${edge.base}/api/v1/Account/${account.authId}/SigningSecret/`, { method: 'POST', headers: { 'x-auth-id': account.authId, 'x-auth-token': account.authToken } });
    const secret = String(((await secretRes.json()) as { callback_signing_secret: string }).callback_signing_secret);
    const alice = await edge.newEndpoint(account, 'alicemsg');
    const received: Array<{ from: string; body: string }> = [];
    ua = new UserAgent({
      uri: UserAgent.makeURI(`sip:${alice.username}@${account.sipDomain}`),
      authorizationUsername: alice.username,
      authorizationPassword: alice.password,
      transportOptions: { server: `ws://127.0.0.1:${edge.server.ports.ws}` },
      logLevel: 'error',
      delegate: {
        onMessage: (m) => {
          received.push({ from: m.request.from.uri.toString(), body: m.request.body });
          void m.accept();
        },
      },
    });
    await ua.start();
    const agent = ua;
    await new Promise<void>((resolve, reject) => {
      void new Registerer(agent, { expires: 300 }).register({ requestDelegate: { onAccept: () => resolve(), onReject: (r) => reject(new Error(`REGISTER ${r.message.statusCode}`)) } });
    });

    const ch = await edge.api(account, 'POST', '/v1/messaging/channels', { type: 'sip', name: 'support' });
    expect(ch.status, JSON.stringify(ch.json)).toBe(201);
    const channelId = String(ch.json.id);
    const address = `sip:channel-${channelId}@${account.sipDomain}`;
    const sub = await edge.api(account, 'POST', '/v1/messaging/webhooks', { url: `https://127.0.0.1:${rx.port}/inbound`, events: ['message.inbound'] });
    expect(sub.status, JSON.stringify(sub.json)).toBe(201);

    // Out: the API's message reaches the phone as a MESSAGE from the channel's address.
    const sent = await edge.api(account, 'POST', '/v1/messaging/send', { channel_id: channelId, to: alice.username, type: 'text', text: { body: 'Your order has shipped' } });
    expect(sent.status, JSON.stringify(sent.json)).toBe(201);
    const got = await until('the MESSAGE at the phone', async () => received.find((r) => r.body === 'Your order has shipped'), 10_000);
    expect(got.from).toBe(address);
    const status = await until(
      'the message delivered',
      async () => {
        const m = await edge.api(account, 'GET', `/v1/messaging/messages/${String(sent.json.id)}`);
        return m.json.status === 'delivered' ? m.json : undefined;
      },
      10_000,
    );
    expect(status.status).toBe('delivered');

    // In: the phone answers the channel; the reply is in the conversation and fires message.inbound.
    const target = UserAgent.makeURI(address);
    if (!target) throw new Error('bad channel address');
    const answered = new Promise<number>((resolve) => {
      void new Messager(agent, target, 'Thanks! When will it arrive?').message({ requestDelegate: { onAccept: (r) => resolve(r.message.statusCode ?? 0), onReject: (r) => resolve(r.message.statusCode ?? 0) } });
    });
    expect(await answered).toBe(200);
    const hook = await until('message.inbound', async () => rx.requests.find((q) => q.url.startsWith('/inbound') && decodeURIComponent(q.body.replace(/\+/g, ' ')).includes('When will it arrive')), 15_000).catch((err: unknown) => {
      console.log(JSON.stringify(rx.requests.map((q) => [q.url, q.body.slice(0, 300)])));
      throw err;
    });
    const signature = String(hook.headers['x-webhook-signature'] ?? '');
    const timestamp = String(hook.headers['x-sipedge-timestamp'] ?? '');
    expect(verifyCallback(secret, timestamp, hook.body, signature)).toBe(true);
    expect(verifyCallback(secret, timestamp, `${hook.body}x`, signature)).toBe(false);
    const convs = await edge.api(account, 'GET', '/v1/messaging/conversations');
    const conv = (convs.json.objects as Array<Record<string, unknown>>).find((c) => c.channel_id === channelId);
    expect(conv).toBeDefined();
    const one = await edge.api(account, 'GET', `/v1/messaging/conversations/${String(conv?.id)}`);
    const bodies = (one.json.messages as Array<Record<string, unknown>>).map((m) => [m.direction, JSON.stringify(m.text ?? m.body ?? '')]);
    expect(bodies.some(([d, b]) => d === 'inbound' && String(b).includes('When will it arrive'))).toBe(true);
    expect(bodies.some(([d, b]) => d === 'outbound' && String(b).includes('Your order has shipped'))).toBe(true);
  }, 60_000);

  it('the messaging rate limit covers every /v1/messaging route, the catalog\'s too (X-RateLimit-* from one budget per key)', async () => {
    const headers = { accept: 'application/json', 'x-auth-id': account.authId, 'x-auth-token': account.authToken };
    const one = await fetch(`${edge.base}/v1/messaging/contacts`, { headers });
    const two = await fetch(`${edge.base}/v1/messaging/channels`, { headers });
    expect(one.status).toBe(200);
    expect(one.headers.get('x-ratelimit-limit')).toBe('1000');
    expect(two.headers.get('x-ratelimit-limit')).toBe('1000');
    // The two routes draw on the same minute's budget.
    expect(Number(one.headers.get('x-ratelimit-remaining')) - Number(two.headers.get('x-ratelimit-remaining'))).toBe(1);
  });
});
