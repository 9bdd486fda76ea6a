/**
 * Registrar.handle against RFC 3261 §10.3 "Processing REGISTER Requests", its
 * steps in the RFC's own words, on the real Registrar, the real digest
 * authenticator and the real memory stores (no sockets).
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { DigestAuthenticator } from '../../../src/auth/authenticator.js';
import { NonceManager } from '../../../src/auth/nonce.js';
import type { IncomingRequest } from '../../../src/core/incoming.js';
import { SipError } from '../../../src/errors.js';
import { createLogger } from '../../../src/logger.js';
import { deriveCredential } from '../../../src/provisioning/endpoints.js';
import { Registrar } from '../../../src/registrar/registrar.js';
import { getHeader, getHeaders, parseCSeq, parseVia } from '../../../src/sip/headers.js';
import type { SipRequest } from '../../../src/sip/message.js';
import { parseMessage } from '../../../src/sip/parser.js';
import { MemoryCredentialStore } from '../../../src/store/credentials/memory.js';
import { MemoryLocationStore } from '../../../src/store/location/memory.js';
import { authorize, registerMessage, type RegisterSpec } from '../../support/sip-client.js';

const DOMAIN = 'acme.sip.localhost';
const PASSWORD = 'alice-secret-1';

describe('Registrar.handle (RFC 3261 §10.3)', () => {
  let location: MemoryLocationStore;
  let registrar: Registrar;
  let cseq = 0;

  beforeEach(async () => {
    const credentials = new MemoryCredentialStore();
    await credentials.put(DOMAIN, 'alice', deriveCredential('ep-alice', 'alice', DOMAIN, PASSWORD));
    location = new MemoryLocationStore();
    registrar = new Registrar({
      store: location,
      auth: new DigestAuthenticator({ credentials, nonces: new NonceManager({ secret: Buffer.from('unit-test-nonce-secret-0123456789'), ttlSeconds: 300 }), algorithms: ['MD5'] }),
      policy: { minExpires: 60, maxExpires: 7200, defaultExpires: 3600, clampMinExpires: false, maxContacts: 10 },
      sipDomain: 'sip.localhost',
      nodeId: 'unit',
      log: createLogger('silent'),
    });
  });

  /** The request as the core hands it over (parsed, with its flow). */
  function incoming(text: string): IncomingRequest {
    const p = parseMessage(Buffer.from(text));
    if (!p.ok || p.msg.kind !== 'request') throw new Error('bad test message');
    const req = p.msg as SipRequest;
    const via = parseVia(getHeaders(req, 'via')[0] as string);
    if (!via) throw new Error('bad via');
    return {
      req,
      flow: { transport: 'udp', remoteAddress: '192.0.2.7', remotePort: 5062, localAddress: '127.0.0.1', localPort: 5060, connId: null },
      callId: getHeader(req, 'call-id') as string,
      cseq: parseCSeq(getHeader(req, 'cseq') as string) as NonNullable<ReturnType<typeof parseCSeq>>,
      via,
      received: 'sip:192.0.2.7:5062;transport=udp',
    };
  }

  /** A REGISTER, answered once with credentials when challenged; the final reply or SipError. */
  async function register(spec: Partial<RegisterSpec> = {}, password = PASSWORD) {
    const base: RegisterSpec = { transport: 'UDP', user: 'alice', domain: DOMAIN, viaHost: '192.0.2.7', viaPort: 5062, callId: 'call-1', cseq: ++cseq, ...spec };
    const first = await registrar.handle(incoming(registerMessage(base)));
    if (first.status !== 401) return first;
    const challenge = first.headers.find(([n]) => n === 'WWW-Authenticate')?.[1] as string;
    const auth = authorize(challenge, { user: base.user, password, method: 'REGISTER', uri: `sip:${DOMAIN}` });
    return registrar.handle(incoming(registerMessage({ ...base, cseq: ++cseq, authorization: auth })));
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
  const contacts = (r: { headers: Array<[string, string]> }): string[] => r.headers.filter(([n]) => n === 'Contact').map(([, v]) => v);

  it('step 2: processes Require — an extension it does not understand gets 420 (Bad Extension) with Unsupported', async () => {
    const e = await refusal(register({ extra: ['Require: frobnicate'] }));
    expect(e.status).toBe(420);
    expect(e.headers).toContainEqual(['Unsupported', 'frobnicate']);
  });

  it('step 3: SHOULD authenticate the UAC — without credentials a 401 with a challenge, with wrong ones never a binding', async () => {
    const challenge = await registrar.handle(incoming(registerMessage({ transport: 'UDP', user: 'alice', domain: DOMAIN, viaHost: '192.0.2.7', viaPort: 5062, callId: 'c', cseq: 1 })));
    expect(challenge.status).toBe(401);
    expect(challenge.headers.some(([n, v]) => n === 'WWW-Authenticate' && v.startsWith('Digest '))).toBe(true);
    const wrong = await register({}, 'not-the-password');
    expect(wrong.status).toBe(401);
    expect(await location.lookup({ domain: DOMAIN, user: 'alice' })).toEqual([]);
  });

  it('step 4: SHOULD determine if the authenticated user is authorized to modify registrations for this address-of-record — credentials of another user get 403', async () => {
    const first = await registrar.handle(incoming(registerMessage({ transport: 'UDP', user: 'alice', domain: DOMAIN, viaHost: '192.0.2.7', viaPort: 5062, callId: 'x', cseq: 1 })));
    const challenge = first.headers.find(([n]) => n === 'WWW-Authenticate')?.[1] as string;
    const asBob = authorize(challenge, { user: 'bob', password: 'bob-secret-1', method: 'REGISTER', uri: `sip:${DOMAIN}` });
    const e = await refusal(registrar.handle(incoming(registerMessage({ transport: 'UDP', user: 'alice', domain: DOMAIN, viaHost: '192.0.2.7', viaPort: 5062, callId: 'x', cseq: 2, authorization: asBob }))));
    expect(e.status).toBe(403);
  });

  it('step 5: extracts the address-of-record from the To header field — a To that names no user is 400', async () => {
    const text = registerMessage({ transport: 'UDP', user: 'alice', domain: DOMAIN, viaHost: '192.0.2.7', viaPort: 5062, callId: 'c5', cseq: 1 }).replace(
      `To: <sip:alice@${DOMAIN}>`,
      `To: <sip:${DOMAIN}>`,
    );
    expect((await refusal(registrar.handle(incoming(text)))).status).toBe(400);
  });

  it('step 6: checks whether the request contains the Contact header field — without one it is a query answered with the current bindings', async () => {
    await register({ contacts: ['<sip:alice@192.0.2.7:5062>'] });
    const query = await register({ contacts: [] });
    expect(query.status).toBe(200);
    expect(contacts(query)).toHaveLength(1);
    expect(await location.lookup({ domain: DOMAIN, user: 'alice' })).toHaveLength(1);
  });

  it('step 6: "*" with an Expires other than 0 is 400 (Invalid Request); "*" with Expires 0 removes every binding', async () => {
    await register({ contacts: ['<sip:alice@192.0.2.7:5062>', '<sip:alice@192.0.2.8:5060>'] });
    expect((await refusal(register({ contacts: ['*'], expires: 60 }))).status).toBe(400);
    const r = await register({ contacts: ['*'], expires: 0 });
    expect(r.status).toBe(200);
    expect(await location.lookup({ domain: DOMAIN, user: 'alice' })).toEqual([]);
  });

  it('step 7: processes each contact address — the expires parameter wins over Expires, a too brief one is 423 (Interval Too Brief) with Min-Expires', async () => {
    const now = Date.now();
    await register({ contacts: ['<sip:alice@192.0.2.7:5062>;expires=120'], expires: 3600 });
    const [b] = await location.lookup({ domain: DOMAIN, user: 'alice' });
    expect(Math.round(((b?.expiresAt ?? 0) - now) / 1000)).toBeGreaterThanOrEqual(119);
    expect(Math.round(((b?.expiresAt ?? 0) - now) / 1000)).toBeLessThanOrEqual(121);
    const e = await refusal(register({ contacts: ['<sip:alice@192.0.2.7:5062>'], expires: 10 }));
    expect(e.status).toBe(423);
    expect(e.headers).toContainEqual(['Min-Expires', '60']);
  });

  it('step 7: if the binding exists with the same Call-ID and a higher CSeq, the registrar MUST NOT update it (500)', async () => {
    await register({ callId: 'ordered', cseq: 10 });
    const e = await refusal(registrar.handle(incoming(registerMessage({ transport: 'UDP', user: 'alice', domain: DOMAIN, viaHost: '192.0.2.7', viaPort: 5062, callId: 'ordered', cseq: 3 }))).then(async (first) => {
      const challenge = first.headers.find(([n]) => n === 'WWW-Authenticate')?.[1] as string;
      const auth = authorize(challenge, { user: 'alice', password: PASSWORD, method: 'REGISTER', uri: `sip:${DOMAIN}` });
      return registrar.handle(incoming(registerMessage({ transport: 'UDP', user: 'alice', domain: DOMAIN, viaHost: '192.0.2.7', viaPort: 5062, callId: 'ordered', cseq: 4, authorization: auth })));
    }));
    expect(e.status).toBe(500);
  });

  it('step 8: returns a 200 (OK) response listing every current binding with its expires parameter', async () => {
    await register({ contacts: ['<sip:alice@192.0.2.7:5062>'], callId: 'dev-1' });
    const r = await register({ contacts: ['<sip:alice@192.0.2.8:5060>'], callId: 'dev-2', expires: 600 });
    expect(r.status).toBe(200);
    const c = contacts(r);
    expect(c).toHaveLength(2);
    for (const v of c) expect(v).toMatch(/;expires=\d+$/);
    expect(c.some((v) => v.startsWith('<sip:alice@192.0.2.8:5060>') && /expires=(599|600)$/.test(v))).toBe(true);
  });
});

describe('Registrar flows shared by several endpoints (issue 28 item 3)', () => {
  const now = 1_700_000_000_000;
  /**
   * A registrar whose REGISTERs all arrive over one TCP flow from 192.0.2.7, for endpoints
   * `users` (password `<user>-secret-1`); `reg` answers a challenge once and expects 200.
   */
  async function overOneFlow(users: string[]) {
    const credentials = new MemoryCredentialStore();
    for (const u of users) await credentials.put(DOMAIN, u, deriveCredential(`ep-${u}`, u, DOMAIN, `${u}-secret-1`));
    const held: number[] = [];
    const closed: string[] = [];
    const registrar = new Registrar({
      store: new MemoryLocationStore(),
      auth: new DigestAuthenticator({ credentials, nonces: new NonceManager({ secret: Buffer.from('unit-test-nonce-secret-0123456789'), ttlSeconds: 300 }), algorithms: ['MD5'] }),
      policy: { minExpires: 60, maxExpires: 7200, defaultExpires: 3600, clampMinExpires: false, maxContacts: 10 },
      sipDomain: 'sip.localhost',
      nodeId: 'unit',
      log: createLogger('silent'),
      now: () => now,
      onFlowHeld: (_flow, until) => held.push(until),
      closeFlow: (transport, connId) => closed.push(`${transport}/${connId}`),
    });
    const flow = { transport: 'tcp' as const, remoteAddress: '192.0.2.7', remotePort: 40000, localAddress: '127.0.0.1', localPort: 5060, connId: 'tcp-1' };
    let cseq = 0;
    const send = (text: string) => {
      const p = parseMessage(Buffer.from(text));
      if (!p.ok || p.msg.kind !== 'request') throw new Error('bad test message');
      const req = p.msg as SipRequest;
      const via = parseVia(getHeaders(req, 'via')[0] as string);
      if (!via) throw new Error('bad via');
      return registrar.handle({ req, flow, callId: getHeader(req, 'call-id') as string, cseq: parseCSeq(getHeader(req, 'cseq') as string) as NonNullable<ReturnType<typeof parseCSeq>>, via, received: 'sip:192.0.2.7:40000;transport=tcp' });
    };
    /** A REGISTER of `user` over the flow; what the flow is held until after it. */
    const reg = async (user: string, expires: number): Promise<number | undefined> => {
      const base: RegisterSpec = { transport: 'TCP', user, domain: DOMAIN, viaHost: '192.0.2.7', viaPort: 40000, callId: `c-${user}`, cseq: ++cseq, expires };
      const first = await send(registerMessage(base));
      const challenge = first.headers.find(([n]) => n === 'WWW-Authenticate')?.[1] as string;
      const r = await send(registerMessage({ ...base, cseq: ++cseq, authorization: authorize(challenge, { user, password: `${user}-secret-1`, method: 'REGISTER', uri: `sip:${DOMAIN}` }) }));
      expect(r.status).toBe(200);
      return held.at(-1);
    };
    return { registrar, held, closed, reg };
  }

  it('removing one endpoint of two on a TCP flow keeps the flow but re-holds it only until the other\'s bindings end; removing the last closes it', async () => {
    const { registrar, held, closed, reg } = await overOneFlow(['alice', 'bob']);
    await reg('alice', 3600);
    await reg('bob', 120);
    expect(held.at(-1)).toBe(now + 3600_000);
    held.length = 0;
    expect(registrar.endpointRemoved({ domain: DOMAIN, user: 'alice' })).toBe(0);
    expect(closed).toEqual([]);
    // The flow now carries bob's 120 s binding only: held until then, not alice's hour.
    expect(held).toEqual([now + 120_000]);
    expect(registrar.endpointRemoved({ domain: DOMAIN, user: 'bob' })).toBe(1);
    expect(closed).toEqual(['tcp/tcp-1']);
  });

  it('a flow carrying several AORs is held until the latest of their bindings, as REGISTERs lengthen, shorten and remove them', async () => {
    const { reg } = await overOneFlow(['alice', 'bob', 'carol']);
    expect(await reg('alice', 3600)).toBe(now + 3600_000);
    expect(await reg('bob', 120)).toBe(now + 3600_000);
    expect(await reg('carol', 600)).toBe(now + 3600_000);
    // The latest one goes: the flow is held until the next latest (carol's 600 s).
    expect(await reg('alice', 0)).toBe(now + 600_000);
    // One that is not the latest lengthens past it, then another shortens: the latest stays.
    expect(await reg('bob', 1800)).toBe(now + 1800_000);
    expect(await reg('carol', 60)).toBe(now + 1800_000);
    // The latest shortens below another: that other one now.
    expect(await reg('bob', 60)).toBe(now + 60_000);
    expect(await reg('bob', 0)).toBe(now + 60_000);
    expect(await reg('carol', 0)).toBe(0);
  });
});
