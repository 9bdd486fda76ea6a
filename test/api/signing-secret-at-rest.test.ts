/**
 * Callback signing secrets at rest (README "Secrets at rest", docs/callbacks.md), on the
 * in-memory store and on a real redis-server: what the store holds is `enc:v1:<kid>:…`,
 * never the secret; the callback the server signs with the stored secret verifies with
 * the secret the API showed once; a key rotation keeps old secrets readable and seals
 * new ones with the new key; a plaintext record of before still signs and is sealed
 * when next written; a secret sealed with a key the server no longer holds is
 * dead-lettered with a clear log line; no secret reaches a log line or an error body.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackDispatcher } from '../../src/events/dispatcher.js';
import { CallbackNetworkGuard } from '../../src/events/network-guard.js';
import { verifyCallback } from '../../src/events/signature.js';
import { sealSigningSecrets } from '../../src/events/signing-secrets.js';
import { deliverCallback } from '../../src/events/webhook.js';
import { createLogger } from '../../src/logger.js';
import { createSecretBox, randomDataKey, type DataKey } from '../../src/security/secret-box.js';
import type { CallStore, OutboxItem } from '../../src/store/calls/calls.js';
import { startHttpsReceiver, type HttpsReceiver, type ReceivedRequest } from '../support/https-receiver.js';
import { STORE_KINDS, startHarness, stopRedisServer, type Harness } from '../support/api-harness.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { until } from '../support/wait.js';

/** A logger writing JSON lines into `lines`. */
function capture(lines: string[]) {
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      lines.push(...chunk.toString('utf8').split('\n').filter(Boolean));
      done();
    },
  });
  return createLogger('trace', sink);
}

const LOOPBACK = new CallbackNetworkGuard(['127.0.0.0/8']);

let ca: TestCa;
let rx: HttpsReceiver;
beforeAll(async () => {
  ca = makeTestCa();
  rx = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (_req, res) => res.writeHead(200).end('ok'));
});
afterAll(async () => {
  await rx?.close();
  ca?.remove();
  await stopRedisServer();
});

describe.each(STORE_KINDS)('signing secrets at rest (%s store)', (kind) => {
  let h: Harness;
  const apiLog: string[] = [];
  /** Every secret seen in plaintext by this suite: none may appear in a log line. */
  const secrets: string[] = [];
  let n = 0;

  beforeAll(async () => {
    h = await startHarness(kind, {}, { logger: capture(apiLog) });
  });
  afterAll(async () => {
    await h?.close();
  });

  /** A new account through the partner API, with the secret shown at creation. */
  const account = async (): Promise<{ id: string; token: string; domain: string; secret: string }> => {
    n++;
    const r = await h.request('POST', '/api/v1/partner/accounts', {
      auth: { id: 'PATESTPARTNER0000001', token: 'partner-token-0123456789abcdef' },
      body: { name: `At rest ${n}`, email: `rest${n}@example.test`, password: 'console-password', country: 'in' },
    });
    expect(r.status).toBe(201);
    const secret = String(r.json.callback_signing_secret);
    secrets.push(secret);
    return { id: String(r.json.auth_id), token: String(r.json.auth_token), domain: String(r.json.sip_domain), secret };
  };
  const newSecret = async (a: { id: string; token: string }): Promise<string> => {
    const r = await h.request('POST', `/api/v1/Account/${a.id}/SigningSecret/`, { auth: a });
    expect(r.status).toBe(201);
    const s = String(r.json.callback_signing_secret);
    secrets.push(s);
    return s;
  };
  /** What the store really holds: the memory store's own value, or a GET on Redis. */
  const raw = async (domain: string): Promise<string | null> => {
    const kept = await h.rawCalls.signingSecret(domain);
    if (h.redis) {
      const keys = await h.redis.keys(`*cbsecret:{${domain}}`);
      expect(keys).toHaveLength(1);
      expect(await h.redis.get(keys[0] as string)).toBe(kept);
    }
    return kept;
  };
  /** One callback of `domain` delivered by a dispatcher reading secrets through `store`; the request the receiver got (or null when none came). */
  const deliver = async (store: CallStore, a: { id: string; domain: string }, log: string[] = []): Promise<ReceivedRequest | null> => {
    const id = `cb-${kind}-${++n}`;
    const item: OutboxItem = {
      id,
      domain: a.domain,
      authId: a.id,
      event: 'Hangup',
      url: `https://127.0.0.1:${rx.port}/at-rest/${id}`,
      method: 'POST',
      params: { Event: 'Hangup', CallUUID: id },
      attempts: 0,
      fallback: null,
      createdAt: Date.now(),
    };
    await store.enqueue(item);
    let done = false;
    const dispatcher = new CallbackDispatcher({
      store,
      log: capture(log),
      pollMs: 20,
      retryDelay: () => null,
      deliver: (it, secret) => deliverCallback({ url: it.url, method: it.method, params: it.params, secret, callbackId: it.id, allowed: LOOPBACK, ca: ca.caCert }),
      onAttempt: () => (done = true),
      onDead: () => (done = true),
    });
    dispatcher.start();
    try {
      await until('the callback attempted or dead-lettered', () => (done ? true : undefined), 10_000);
    } finally {
      await dispatcher.stop();
    }
    return rx.requests.find((r) => r.url === `/at-rest/${id}`) ?? null;
  };
  const verifies = (r: ReceivedRequest | null, secret: string): boolean =>
    r !== null && verifyCallback(secret, String(r.headers['x-sipedge-timestamp']), r.body, String(r.headers['x-sipedge-signature']));

  it('the secret shown at creation and each new one are kept sealed (enc:v1:<kid>:…), never in the clear', async () => {
    const a = await account();
    const first = await raw(a.domain);
    expect(first).toMatch(/^enc:v1:test:/);
    expect(first).not.toContain(a.secret);
    const s = await newSecret(a);
    const second = await raw(a.domain);
    expect(second).toMatch(/^enc:v1:test:/);
    expect(second).not.toContain(s);
    expect(second).not.toBe(first);
    // Read back through the box, it is the secret the API showed.
    expect(await h.calls.signingSecret(a.domain)).toBe(s);
  });

  it('the callback signed with the stored secret verifies with the secret the API returned once', async () => {
    const a = await account();
    const s = await newSecret(a);
    const r = await deliver(h.calls, a);
    expect(r).not.toBeNull();
    expect(verifies(r, s)).toBe(true);
    expect(verifies(r, a.secret)).toBe(false);
  });

  it('rotation: with a new key first, old secrets still sign; new ones are sealed with the new kid; without the old key they are dead-lettered, clearly logged', async () => {
    const a = await account();
    const s = await newSecret(a);
    const testKey: DataKey = { kid: 'test', key: Buffer.from(h.config.dataEncryptionKeys[0]?.key ?? '', 'base64') };
    const next = randomDataKey('k2');
    const rotated = sealSigningSecrets(h.rawCalls, createSecretBox([next, testKey]));
    expect(verifies(await deliver(rotated, a), s)).toBe(true);

    // Written after the rotation: sealed with k2, read by the rotated ring and by k2 alone.
    await rotated.setSigningSecret(a.domain, 'rotated-secret-0123456789abcdef');
    secrets.push('rotated-secret-0123456789abcdef');
    expect(await raw(a.domain)).toMatch(/^enc:v1:k2:/);
    const onlyNew = sealSigningSecrets(h.rawCalls, createSecretBox([next]));
    expect(verifies(await deliver(onlyNew, a), 'rotated-secret-0123456789abcdef')).toBe(true);

    // A secret still under the old kid, read by a server that dropped that key.
    const b = await account();
    const log: string[] = [];
    expect(await deliver(onlyNew, b, log)).toBeNull();
    const line = log.find((l) => l.includes('cannot be decrypted with DATA_ENCRYPTION_KEY'));
    expect(line).toBeDefined();
    expect(JSON.parse(line as string)).toMatchObject({ level: 'error', kid: 'test', why: 'unknown_kid', account: b.id });
    const dead = await h.request('GET', `/api/v1/Account/${b.id}/CallbackDeadLetter/`, { auth: b });
    expect(dead.status).toBe(200);
    const reasons = (dead.json.objects as Array<Record<string, unknown>>).map((d) => String(d.reason));
    expect(reasons.some((x) => /signing secret cannot be decrypted/.test(x))).toBe(true);
    for (const s2 of secrets) {
      expect(dead.text).not.toContain(s2);
      for (const l of log) expect(l).not.toContain(s2);
    }
  });

  it('a plaintext record written before encryption still signs, and is sealed when next written', async () => {
    const a = await account();
    const legacy = 'legacy-plaintext-secret-0123456789';
    secrets.push(legacy);
    await h.rawCalls.setSigningSecret(a.domain, legacy);
    expect(await raw(a.domain)).toBe(legacy);
    expect(verifies(await deliver(h.calls, a), legacy)).toBe(true);
    const s = await newSecret(a);
    const sealed = await raw(a.domain);
    expect(sealed).toMatch(/^enc:v1:test:/);
    expect(sealed).not.toContain(s);
    expect(verifies(await deliver(h.calls, a), s)).toBe(true);
  });

  it('no secret appears in the API log', () => {
    // The suite's account creations and replacements were logged (the check reads real lines).
    expect(apiLog.some((l) => l.includes('callback signing secret replaced'))).toBe(true);
    expect(secrets.length).toBeGreaterThan(5);
    for (const s of secrets) for (const l of apiLog) expect(l).not.toContain(s);
  });
});
