/**
 * The push clients' credentials and the waker, without sockets: the APNs provider token
 * (ES256; kid, iss, iat; renewed within the hour), the FCM JWT bearer assertion (RS256;
 * iss, aud, scope, exp), and PushService (one push per device, one retry on a 5xx, a dead
 * token removes the binding, a REGISTER wakes the waiting request, PUSH_WAIT ends it).
 */
import { generateKeyPairSync } from 'node:crypto';
import { decodeProtectedHeader, jwtVerify } from 'jose';
import { Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/logger.js';
import { ApnsClient, APNS_TOKEN_TTL_MS } from '../../../src/push/apns.js';
import { FcmClient, FCM_SCOPE, parseServiceAccount } from '../../../src/push/fcm.js';
import { createPush } from '../../../src/push/index.js';
import { PushService } from '../../../src/push/service.js';
import type { PushAttempt, PushRequest, PushSender } from '../../../src/push/types.js';
import { ConfigError } from '../../../src/errors.js';
import type { Binding } from '../../../src/store/location/location.js';
import { MemoryLocationStore } from '../../../src/store/location/memory.js';

const ec = generateKeyPairSync('ec', { namedCurve: 'P-256' });
const rsa = generateKeyPairSync('rsa', { modulusLength: 2048 });
const pem = (k: typeof ec.privateKey): string => k.export({ type: 'pkcs8', format: 'pem' }) as string;

describe('APNs provider token', () => {
  it('ES256, kid = key id, iss = team id, iat now; kept, then made again within the hour', async () => {
    let now = 1_700_000_000_000;
    const c = new ApnsClient({ url: 'https://127.0.0.1:1', keyPem: pem(ec.privateKey), keyId: 'KEY1234567', teamId: 'TEAM123456', now: () => now });
    const t1 = await c.token();
    expect(decodeProtectedHeader(t1)).toEqual({ alg: 'ES256', kid: 'KEY1234567' });
    const { payload } = await jwtVerify(t1, ec.publicKey, { algorithms: ['ES256'], issuer: 'TEAM123456', currentDate: new Date(now) });
    expect(payload.iat).toBe(now / 1000);
    now += 10 * 60_000;
    expect(await c.token()).toBe(t1);
    now += APNS_TOKEN_TTL_MS;
    const t2 = await c.token();
    expect(t2).not.toBe(t1);
    expect(APNS_TOKEN_TTL_MS).toBeLessThan(3600_000);
    expect(APNS_TOKEN_TTL_MS).toBeGreaterThanOrEqual(20 * 60_000);
    c.close();
  });
});

describe('FCM service account', () => {
  const account = { client_email: 'edge@p.iam.gserviceaccount.com', private_key: pem(rsa.privateKey), token_uri: 'https://oauth2.example.test/token', project_id: 'p' };

  it('the JWT bearer assertion: RS256, iss = client_email, aud = token_uri, the messaging scope, an hour', async () => {
    const c = new FcmClient({ url: 'https://fcm.example.test', account });
    const a = await c.assertion();
    expect(decodeProtectedHeader(a).alg).toBe('RS256');
    const { payload } = await jwtVerify(a, rsa.publicKey, { algorithms: ['RS256'], issuer: account.client_email, audience: account.token_uri });
    expect(payload.scope).toBe(FCM_SCOPE);
    expect((payload.exp as number) - (payload.iat as number)).toBe(3600);
  });

  it('a service account file without its key is refused, naming the field', () => {
    expect(() => parseServiceAccount(JSON.stringify({ client_email: 'x', token_uri: 'y' }))).toThrow('no private_key');
  });
});

describe('createPush (settings)', () => {
  const base = { apnsUrl: 'https://127.0.0.1:1', apnsKeyFile: null, apnsKeyId: null, apnsTeamId: null, fcmUrl: 'https://127.0.0.1:1', fcmServiceAccountFile: null, pushWait: 10 };
  const deps = { location: new MemoryLocationStore({ sweepIntervalMs: 0 }), log: createLogger('silent') };
  it('nothing set: push off (null)', () => {
    expect(createPush(base, deps)).toBeNull();
  });
  it('a key file that is missing: ConfigError naming the setting', () => {
    expect(() => createPush({ ...base, apnsKeyFile: '/nonexistent/AuthKey.p8', apnsKeyId: 'K', apnsTeamId: 'T' }, deps)).toThrow(ConfigError);
    expect(() => createPush({ ...base, apnsKeyFile: '/nonexistent/AuthKey.p8', apnsKeyId: 'K', apnsTeamId: 'T' }, deps)).toThrow(/^APNS_KEY_FILE: cannot read/);
    expect(() => createPush({ ...base, fcmServiceAccountFile: '/nonexistent/sa.json' }, deps)).toThrow(/^FCM_SERVICE_ACCOUNT_FILE: cannot read/);
  });
  it('APNS_KEY_FILE without key id and team id is refused', () => {
    expect(() => createPush({ ...base, apnsKeyFile: '/x.p8' }, deps)).toThrow('APNS_KEY_FILE needs APNS_KEY_ID and APNS_TEAM_ID');
  });
});

describe('PushService', () => {
  const TOKEN = 'f'.repeat(64);
  const aor = { domain: 'acme.sip.localhost', user: 'alice' };
  const binding = (connId: string | null, uriPort = 40000): Binding => ({
    key: '<urn:uuid:1>',
    uri: `sip:alice@192.0.2.7:${uriPort};transport=tcp;pn-provider=apns;pn-prid=${TOKEN};pn-param=T.com.example.voip`,
    contact: '',
    expiresAt: Date.now() + 600_000,
    updatedAt: Date.now(),
    callId: 'c',
    cseq: 1,
    userAgent: null,
    received: 'sip:192.0.2.7:40000;transport=tcp',
    transport: 'tcp',
    path: null,
    q: null,
    instanceId: '<urn:uuid:1>',
    regId: null,
    nodeId: 'n1',
    connId,
  });
  const sender = (answers: PushAttempt[]): PushSender & { sent: PushRequest[] } => {
    const sent: PushRequest[] = [];
    return {
      sent,
      async send(r) {
        sent.push(r);
        return answers.shift() ?? { outcome: 'sent', status: 200 };
      },
      close() {},
    };
  };
  const metric = async (reg: Registry): Promise<string> => reg.metrics();

  it('one push for two requests to the same sleeping device; its REGISTER wakes both', async () => {
    const s = sender([]);
    const reg = new Registry();
    const svc = new PushService({ senders: { apns: s }, waitMs: 2000, location: new MemoryLocationStore({ sweepIntervalMs: 0 }), log: createLogger('silent'), registry: reg });
    const w1 = svc.wake(aor, binding(null), 'call-1', 'INVITE');
    const w2 = svc.wake(aor, binding(null), 'call-2', 'MESSAGE');
    await new Promise((r) => setTimeout(r, 10));
    expect(s.sent).toHaveLength(1);
    expect(s.sent[0]?.callId).toBe('call-1');
    svc.registered(aor, [binding('tcp-9', 40001)]);
    expect((await w1)?.connId).toBe('tcp-9');
    expect((await w2)?.connId).toBe('tcp-9');
    expect(await metric(reg)).toMatch(/sip_push_sent_total\{provider="apns",outcome="sent"\} 1/);
    // Asleep again soon after: the next request pushes again.
    const w3 = svc.wake(aor, binding(null), 'call-3', 'INVITE');
    await new Promise((r) => setTimeout(r, 10));
    expect(s.sent).toHaveLength(2);
    svc.registered(aor, [binding('tcp-10', 40002)]);
    expect((await w3)?.connId).toBe('tcp-10');
    svc.close();
  });

  it('a 5xx is tried once more; nothing registers within PUSH_WAIT: null', async () => {
    const s = sender([{ outcome: 'retry', status: 503 }, { outcome: 'retry', status: 503 }]);
    const reg = new Registry();
    const svc = new PushService({ senders: { apns: s }, waitMs: 150, location: new MemoryLocationStore({ sweepIntervalMs: 0 }), log: createLogger('silent'), registry: reg });
    const t0 = Date.now();
    expect(await svc.wake(aor, binding(null), 'call-1', 'INVITE')).toBeNull();
    expect(Date.now() - t0).toBeGreaterThanOrEqual(140);
    expect(s.sent).toHaveLength(2);
    expect(await metric(reg)).toMatch(/sip_push_sent_total\{provider="apns",outcome="failed"\} 1/);
    svc.close();
  });

  it('a dead token removes the binding and ends the wait at once', async () => {
    const location = new MemoryLocationStore({ sweepIntervalMs: 0 });
    const b = binding(null);
    const { updatedAt: _u, ...write } = b;
    await location.register(aor, { callId: 'c', cseq: 1, now: Date.now(), removeAll: false, writes: [write], removes: [], maxContacts: 10 });
    const s = sender([{ outcome: 'gone', status: 410, reason: 'Unregistered' }]);
    const svc = new PushService({ senders: { apns: s }, waitMs: 5000, location, log: createLogger('silent') });
    const t0 = Date.now();
    expect(await svc.wake(aor, b, 'call-1', 'INVITE')).toBeNull();
    expect(Date.now() - t0).toBeLessThan(1000);
    expect(await location.lookup(aor)).toEqual([]);
    svc.close();
  });

  it('a provider that is not configured: no push, null at once', async () => {
    const svc = new PushService({ senders: {}, waitMs: 5000, location: new MemoryLocationStore({ sweepIntervalMs: 0 }), log: createLogger('silent') });
    expect(await svc.wake(aor, binding(null), 'c', 'INVITE')).toBeNull();
  });

  it('the service unreachable: each request ends at PUSH_WAIT, the error is logged once per interval, not per call', async () => {
    const lines: string[] = [];
    const log = createLogger('info', { write: (l: string) => void lines.push(l) });
    const down: PushSender = {
      async send() {
        throw new Error('connect ECONNREFUSED 127.0.0.1:1');
      },
      close() {},
    };
    const svc = new PushService({ senders: { apns: down }, waitMs: 200, location: new MemoryLocationStore({ sweepIntervalMs: 0 }), log });
    const devices = [1, 2, 3].map((i) => ({ ...binding(null), key: `k${i}`, instanceId: `i${i}`, uri: binding(null).uri.replace(TOKEN, `${i}`.repeat(64)) }));
    const results = await Promise.all(devices.map((b, i) => svc.wake(aor, b, `call-${i}`, 'INVITE')));
    expect(results).toEqual([null, null, null]);
    const warned = lines.filter((l) => l.includes('push not sent'));
    expect(warned).toHaveLength(1);
    for (const d of devices) expect(lines.join('')).not.toContain(d.uri.split('pn-prid=')[1]?.split(';')[0]);
    svc.close();
  });
});
