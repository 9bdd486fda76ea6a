/**
 * The registrar and RFC 8599 push parameters: 555 for a service not offered, 400 naming
 * malformed pn-* parameters, Feature-Caps +sip.pns in the 200 OK, and a binding with push
 * parameters that outlives the close of its flow (asleep) while one without is removed.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { DigestAuthenticator } from '../../../src/auth/authenticator.js';
import { NonceManager } from '../../../src/auth/nonce.js';
import { SipError } from '../../../src/errors.js';
import { createLogger } from '../../../src/logger.js';
import { deriveCredential } from '../../../src/provisioning/endpoints.js';
import { isAsleep, pushOf } from '../../../src/push/params.js';
import { Registrar } from '../../../src/registrar/registrar.js';
import { getHeader, getHeaders, parseCSeq, parseVia } from '../../../src/sip/headers.js';
import type { SipRequest } from '../../../src/sip/message.js';
import { parseMessage } from '../../../src/sip/parser.js';
import type { Aor, Binding } from '../../../src/store/location/location.js';
import { MemoryCredentialStore } from '../../../src/store/credentials/memory.js';
import { MemoryLocationStore } from '../../../src/store/location/memory.js';
import { authorize, registerMessage, type RegisterSpec } from '../../support/sip-client.js';

const DOMAIN = 'acme.sip.localhost';
const PASSWORD = 'alice-secret-1';
const AOR = { domain: DOMAIN, user: 'alice' };
const TOKEN = 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';
const PUSH = `;pn-provider=apns;pn-prid=${TOKEN};pn-param=ABCDE12345.com.example.phone.voip`;

describe('Registrar with push parameters (RFC 8599)', () => {
  let location: MemoryLocationStore;
  let registrar: Registrar;
  let registered: Array<[Aor, readonly Binding[]]>;
  let cseq = 0;
  let conn = 'tcp-1';

  beforeEach(async () => {
    const credentials = new MemoryCredentialStore();
    await credentials.put(DOMAIN, 'alice', deriveCredential('ep-alice', 'alice', DOMAIN, PASSWORD));
    location = new MemoryLocationStore({ sweepIntervalMs: 0 });
    registered = [];
    conn = 'tcp-1';
    registrar = new Registrar({
      store: location,
      auth: new DigestAuthenticator({ credentials, nonces: new NonceManager({ secret: Buffer.from('unit-test-nonce-secret-0123456789'), ttlSeconds: 300 }), algorithms: ['MD5'] }),
      policy: { minExpires: 60, maxExpires: 7200, defaultExpires: 3600, clampMinExpires: false, maxContacts: 10 },
      sipDomain: 'sip.localhost',
      nodeId: 'unit',
      log: createLogger('silent'),
      push: true,
      pushProviders: ['apns', 'fcm'],
      onRegistered: (aor, bs) => registered.push([aor, bs]),
    });
  });

  function send(text: string) {
    const p = parseMessage(Buffer.from(text));
    if (!p.ok || p.msg.kind !== 'request') throw new Error('bad test message');
    const req = p.msg as SipRequest;
    const via = parseVia(getHeaders(req, 'via')[0] as string);
    if (!via) throw new Error('bad via');
    const flow = { transport: 'tcp' as const, remoteAddress: '192.0.2.7', remotePort: 40000, localAddress: '127.0.0.1', localPort: 5060, connId: conn };
    return registrar.handle({ req, flow, callId: getHeader(req, 'call-id') as string, cseq: parseCSeq(getHeader(req, 'cseq') as string) as NonNullable<ReturnType<typeof parseCSeq>>, via, received: 'sip:192.0.2.7:40000;transport=tcp' });
  }

  async function register(contact: string, callId = 'call-1') {
    const base: RegisterSpec = { transport: 'TCP', user: 'alice', domain: DOMAIN, viaHost: '192.0.2.7', viaPort: 40000, callId, cseq: ++cseq, contacts: [contact] };
    const first = await send(registerMessage(base));
    const challenge = first.headers.find(([n]) => n === 'WWW-Authenticate')?.[1] as string;
    return send(registerMessage({ ...base, cseq: ++cseq, authorization: authorize(challenge, { user: 'alice', password: PASSWORD, method: 'REGISTER', uri: `sip:${DOMAIN}` }) }));
  }
  const refusal = async (p: Promise<unknown>): Promise<SipError> => {
    try {
      await p;
    } catch (e) {
      if (e instanceof SipError) return e;
      throw e;
    }
    throw new Error('expected a refusal');
  };

  it('stores the push parameters with the binding and answers with Feature-Caps +sip.pns', async () => {
    const r = await register(`<sip:alice@192.0.2.7:40000;transport=tcp${PUSH}>`);
    expect(r.status).toBe(200);
    expect(r.headers).toContainEqual(['Feature-Caps', '*;+sip.pns="apns"']);
    const [b] = await location.lookup(AOR);
    expect(pushOf(b as Binding)).toEqual({ provider: 'apns', prid: TOKEN, param: 'ABCDE12345.com.example.phone.voip' });
    expect(registered).toHaveLength(1);
    expect(registered[0]?.[1][0]?.connId).toBe('tcp-1');
  });

  it('a contact without push parameters gets no Feature-Caps', async () => {
    const r = await register('<sip:alice@192.0.2.7:40000;transport=tcp>');
    expect(r.status).toBe(200);
    expect(r.headers.some(([n]) => n === 'Feature-Caps')).toBe(false);
  });

  it('another push service: 555, nothing written', async () => {
    const e = await refusal(register('<sip:alice@192.0.2.7:40000;transport=tcp;pn-provider=webpush;pn-prid=abc>'));
    expect(e.status).toBe(555);
    expect(await location.lookup(AOR)).toEqual([]);
  });

  it('a malformed pn-prid: 400 naming it, nothing written', async () => {
    const e = await refusal(register(`<sip:alice@192.0.2.7:40000;transport=tcp;pn-provider=fcm;pn-prid=${'x'.repeat(2000)}>`));
    expect(e.status).toBe(400);
    expect(e.reason).toContain('pn-prid');
    expect(await location.lookup(AOR)).toEqual([]);
  });

  it('the flow closes: the push binding stays registered, asleep; one without push params is removed', async () => {
    await register(`<sip:alice@192.0.2.7:40000;transport=tcp${PUSH}>`);
    await register('<sip:alice@192.0.2.7:40001;transport=tcp>', 'call-2');
    expect(await location.lookup(AOR)).toHaveLength(2);
    await registrar.flowClosed('tcp-1');
    const left = await location.lookup(AOR);
    expect(left).toHaveLength(1);
    expect(isAsleep(left[0] as Binding)).toBe(true);
    expect(left[0]?.uri).toContain('pn-prid=');

    // The device registers again (its own Call-ID, a new flow): awake again.
    conn = 'tcp-2';
    const r = await register(`<sip:alice@192.0.2.7:40000;transport=tcp${PUSH}>`);
    expect(r.status).toBe(200);
    const now = await location.lookup(AOR);
    expect(now).toHaveLength(1);
    expect(now[0]?.connId).toBe('tcp-2');
    expect(isAsleep(now[0] as Binding)).toBe(false);
  });

  it('a known service that is not configured here: 555 with Feature-Caps naming the configured ones', async () => {
    const credentials = new MemoryCredentialStore();
    await credentials.put(DOMAIN, 'alice', deriveCredential('ep-alice', 'alice', DOMAIN, PASSWORD));
    registrar = new Registrar({
      store: location,
      auth: new DigestAuthenticator({ credentials, nonces: new NonceManager({ secret: Buffer.from('unit-test-nonce-secret-0123456789'), ttlSeconds: 300 }), algorithms: ['MD5'] }),
      policy: { minExpires: 60, maxExpires: 7200, defaultExpires: 3600, clampMinExpires: false, maxContacts: 10 },
      sipDomain: 'sip.localhost',
      nodeId: 'unit',
      log: createLogger('silent'),
      push: true,
      pushProviders: ['apns'],
    });
    const e = await refusal(register('<sip:alice@192.0.2.7:40000;transport=tcp;pn-provider=fcm;pn-prid=abc>'));
    expect(e.status).toBe(555);
    expect(e.headers).toContainEqual(['Feature-Caps', '*;+sip.pns="apns"']);
    expect((await register(`<sip:alice@192.0.2.7:40000;transport=tcp${PUSH}>`)).status).toBe(200);
  });

  it('a device without +sip.instance that wakes on a new port replaces its sleeping binding (same pn-prid)', async () => {
    await register(`<sip:alice@192.0.2.7:40000;transport=tcp${PUSH}>`);
    await registrar.flowClosed('tcp-1');
    expect(isAsleep((await location.lookup(AOR))[0] as Binding)).toBe(true);
    conn = 'tcp-2';
    expect((await register(`<sip:alice@192.0.2.7:40077;transport=tcp${PUSH}>`, 'call-9')).status).toBe(200);
    const now = await location.lookup(AOR);
    expect(now).toHaveLength(1);
    expect(now[0]?.uri).toContain(':40077;');
    expect(now[0]?.connId).toBe('tcp-2');
  });

  it('pn-provider alone: 200 with Feature-Caps naming it, and the binding is removed when its flow closes (nothing to push to)', async () => {
    const r = await register('<sip:alice@192.0.2.7:40000;transport=tcp;pn-provider=fcm>');
    expect(r.status).toBe(200);
    expect(r.headers).toContainEqual(['Feature-Caps', '*;+sip.pns="fcm"']);
    await registrar.flowClosed('tcp-1');
    expect(await location.lookup(AOR)).toEqual([]);
  });
});
