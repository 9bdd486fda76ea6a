/**
 * The Cloud API client's outcomes (src/messaging/whatsapp.ts) against local servers:
 * what may be retried (no connection; an error answer) and what may not (no answer
 * once the request was sent), and the provider's error code on a 4xx.
 */
import { createServer, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import { createWhatsAppClient } from '../../../src/messaging/whatsapp.js';
import { signatureValid, signBody, verifyHandshake } from '../../../src/messaging/inbound.js';
import { freePort } from '../../support/ports.mjs';

const servers: Server[] = [];
afterEach(async () => {
  for (const s of servers.splice(0)) {
    s.closeAllConnections();
    await new Promise<void>((r) => s.close(() => r()));
  }
});

async function serve(handler: Parameters<typeof createServer>[1]): Promise<string> {
  const s = createServer(handler);
  servers.push(s);
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', r));
  return `http://127.0.0.1:${(s.address() as AddressInfo).port}/v21.0`;
}

describe('WhatsApp Cloud API client', () => {
  it('ok: the message id; the token only in the Authorization header', async () => {
    let seen: { url?: string; auth?: string } = {};
    const base = await serve((req, res) => {
      seen = { url: req.url, auth: req.headers.authorization };
      res.writeHead(200, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ messages: [{ id: 'wamid.OK' }] }));
    });
    const c = createWhatsAppClient(base, 1000);
    expect(await c.send('123', 'tok', { type: 'text' })).toEqual({ kind: 'ok', providerMessageId: 'wamid.OK' });
    expect(seen).toEqual({ url: '/v21.0/123/messages', auth: 'Bearer tok' });
    c.close();
  });

  it('4xx: rejected with the provider error code; 429 and 5xx: retry', async () => {
    let status = 400;
    const base = await serve((_req, res) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify({ error: { code: status === 400 ? 131047 : 2, message: 'Re-engagement message' } }));
    });
    const c = createWhatsAppClient(base, 1000);
    expect(await c.send('1', 't', {})).toEqual({ kind: 'rejected', status: 400, code: '131047', title: 'Re-engagement message' });
    status = 503;
    expect((await c.send('1', 't', {})).kind).toBe('retry');
    status = 429;
    expect((await c.send('1', 't', {})).kind).toBe('retry');
    c.close();
  });

  it('no connection → retry; connected and no answer in time → unknown (never retried)', async () => {
    const closed = `http://127.0.0.1:${await freePort()}/v21.0`;
    const c1 = createWhatsAppClient(closed, 1000);
    expect((await c1.send('1', 't', {})).kind).toBe('retry');
    c1.close();
    const base = await serve(() => {
      // never answers
    });
    const c2 = createWhatsAppClient(base, 300);
    const out = await c2.send('1', 't', {});
    expect(out.kind).toBe('unknown');
    c2.close();
  });
});

describe('Meta webhook checks', () => {
  it('X-Hub-Signature-256 over the raw bytes; verification handshake', () => {
    const raw = Buffer.from('{"a":1}');
    expect(signatureValid(raw, signBody(raw, 's3cret'), 's3cret')).toBe(true);
    expect(signatureValid(Buffer.from('{"a": 1}'), signBody(raw, 's3cret'), 's3cret')).toBe(false);
    expect(signatureValid(raw, signBody(raw, 'other'), 's3cret')).toBe(false);
    expect(signatureValid(raw, undefined, 's3cret')).toBe(false);
    expect(signatureValid(raw, 'sha256=zz', 's3cret')).toBe(false);
    expect(verifyHandshake({ 'hub.mode': 'subscribe', 'hub.verify_token': 'vt', 'hub.challenge': '42' }, 'vt')).toBe('42');
    expect(verifyHandshake({ 'hub.mode': 'subscribe', 'hub.verify_token': 'vx', 'hub.challenge': '42' }, 'vt')).toBe(null);
    expect(verifyHandshake({ 'hub.mode': 'unsubscribe', 'hub.verify_token': 'vt', 'hub.challenge': '42' }, 'vt')).toBe(null);
    expect(verifyHandshake({ 'hub.mode': 'subscribe', 'hub.verify_token': 'vt', 'hub.challenge': '42' }, null)).toBe(null);
  });
});
