/**
 * The partner API (login, profile, customer accounts), the Account resource and
 * the health probes, over HTTP on both stores.
 */
import { createHmac } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Authenticator, PARTNER_TOKEN_CLOCK_TOLERANCE_S, PARTNER_TOKEN_TTL_S } from '../../src/api/auth.js';
import { MemoryDirectory } from '../../src/store/directory/memory.js';
import { LIMITED_PARTNER, PARTNER, STORE_KINDS, startHarness, stopRedisServer, type Harness } from '../support/api-harness.js';
import { ACCOUNT_FIELDS, ISO_DATE_TIME, PARTNER_PROFILE_FIELDS, expectBadRequest, expectError, keys } from './shapes.js';

afterAll(stopRedisServer);

const partnerAuth = { id: PARTNER.authId, token: PARTNER.authToken };

describe.each(STORE_KINDS)('partner API, Account resource and probes (%s store)', (kind) => {
  let h: Harness;

  beforeAll(async () => {
    h = await startHarness(kind);
  });
  afterAll(async () => {
    await h.close();
  });

  describe('POST /api/v1/partner/login', () => {
    it('exchanges email and password for {tokens {access_token, token_type: Bearer, expires_in}}', async () => {
      const r = await h.request('POST', '/api/v1/partner/login', { body: { email: PARTNER.email, password: PARTNER.password } });
      expect(r.status).toBe(200);
      expect(keys(r.json)).toEqual(['api_id', 'tokens']);
      const t = r.json.tokens as Record<string, unknown>;
      expect(keys(t)).toEqual(['access_token', 'expires_in', 'token_type']);
      expect(t.token_type).toBe('Bearer');
      expect(Number.isInteger(t.expires_in)).toBe(true);
      expect(typeof t.access_token).toBe('string');
      const me = await h.request('GET', '/api/v1/partner/me', { headers: { authorization: `Bearer ${String(t.access_token)}` } });
      expect(me.status).toBe(200);
      expect(me.json.id).toBe(PARTNER.id);
    });

    it('answers invalid_credentials for a wrong password or unknown email', async () => {
      for (const body of [
        { email: PARTNER.email, password: 'wrong-password' },
        { email: 'nobody@example.test', password: PARTNER.password },
      ]) {
        const r = await h.request('POST', '/api/v1/partner/login', { body });
        expect(r.status).toBe(401);
        expectError(r.body, 'invalid_credentials');
      }
    });

    it('answers 400 without email or password', async () => {
      const r = await h.request('POST', '/api/v1/partner/login', { body: {} });
      expect(r.status).toBe(400);
      expectBadRequest(r.body, ['email', 'password']);
    });

    it('refuses a tampered or foreign Bearer token with 401', async () => {
      const r = await h.request('POST', '/api/v1/partner/login', { body: { email: PARTNER.email, password: PARTNER.password } });
      const token = String((r.json.tokens as Record<string, unknown>).access_token);
      const [hd, , sig] = token.split('.');
      const forged = `${hd}.${Buffer.from(JSON.stringify({ iss: 'sip-edge', aud: 'partner', sub: PARTNER.id, aid: PARTNER.authId, exp: 9e9 })).toString('base64url')}.${sig}`;
      for (const bearer of [forged, 'garbage', `${token}x`]) {
        const me = await h.request('GET', '/api/v1/partner/me', { headers: { authorization: `Bearer ${bearer}` } });
        expect(me.status).toBe(401);
        expectError(me.body, 'unauthorized');
      }
    });
  });

  it('GET /api/v1/partner/me returns the PartnerProfile with capability flags', async () => {
    const r = await h.request('GET', '/api/v1/partner/me', { auth: partnerAuth });
    expect(r.status).toBe(200);
    expect(keys(r.json)).toEqual(PARTNER_PROFILE_FIELDS);
    expect(r.json).toMatchObject({
      id: PARTNER.id,
      name: PARTNER.name,
      email: PARTNER.email,
      company: PARTNER.company,
      can_create_accounts: true,
      can_transfer_balance: false,
    });
    for (const f of ['balance', 'tds_percentage']) expect(typeof r.json[f]).toBe('number');
    expect(typeof r.json.tds_applicable).toBe('boolean');
    for (const f of ['phone', 'currency', 'gstin', 'gst_status', 'account_type', 'status']) expect(typeof r.json[f]).toBe('string');
    expect(r.json.created_at).toMatch(ISO_DATE_TIME);
    expect(r.text).not.toContain(PARTNER.authToken);
    expect(r.text).not.toContain(PARTNER.password ?? '');
  });

  describe('POST /api/v1/partner/accounts', () => {
    it('creates a customer account and returns auth_id, auth_token and callback_signing_secret once', async () => {
      const r = await h.request('POST', '/api/v1/partner/accounts', {
        auth: partnerAuth,
        body: { name: 'Acme', email: 'ops@acme.example', password: 'console-password', country: 'in' },
      });
      expect(r.status).toBe(201);
      expect(keys(r.json)).toEqual([...ACCOUNT_FIELDS, 'api_id', 'auth_token', 'callback_signing_secret', 'message'].sort());
      expect(r.json.auth_id).toMatch(/^MA[A-Z0-9]{18}$/);
      expect(String(r.json.callback_signing_secret)).toMatch(/^[A-Za-z0-9_-]{43}$/);
      expect(r.json).toMatchObject({
        message: 'created',
        name: 'Acme',
        email: 'ops@acme.example',
        country: 'IN',
        account_type: 'PREPAID',
        enabled: true,
        is_active: true,
        sip_domain: `${String(r.json.auth_id).toLowerCase()}.sip.test`,
      });
      expect(Number.isInteger(r.json.cps_limit)).toBe(true);
      expect(Number.isInteger(r.json.concurrent_calls_limit)).toBe(true);
      expect(r.text).not.toContain('console-password');

      const creds = { id: String(r.json.auth_id), token: String(r.json.auth_token) };
      const acct = await h.request('GET', `/api/v1/Account/${creds.id}/`, { auth: creds });
      expect(acct.status).toBe(200);
      expect(keys(acct.json)).toEqual([...ACCOUNT_FIELDS, 'api_id'].sort());
      expect(acct.json.id).toBe(creds.id);
      expect(acct.text).not.toContain(creds.token);
    });

    it('answers 400 naming every bad field', async () => {
      const r = await h.request('POST', '/api/v1/partner/accounts', {
        auth: partnerAuth,
        body: { email: 'not-an-email', password: 'short', country: 'IND' },
      });
      expect(r.status).toBe(400);
      expectBadRequest(r.body, ['name', 'email', 'password', 'country']);
    });

    it('cps_limit and concurrent_calls_limit: optional, set by the partner, defaults 10 and 100, integers 1..100000', async () => {
      const base = { name: 'Limits', email: 'limits@example.test', password: 'console-password', country: 'IN' };
      const dflt = await h.request('POST', '/api/v1/partner/accounts', { auth: partnerAuth, body: base });
      expect(dflt.status).toBe(201);
      expect(dflt.json).toMatchObject({ cps_limit: 10, concurrent_calls_limit: 100 });

      const set = await h.request('POST', '/api/v1/partner/accounts', { auth: partnerAuth, body: { ...base, cps_limit: 2500, concurrent_calls_limit: 100000 } });
      expect(set.status).toBe(201);
      expect(set.json).toMatchObject({ cps_limit: 2500, concurrent_calls_limit: 100000 });
      // Stored: the account reads them back.
      const creds = { id: String(set.json.auth_id), token: String(set.json.auth_token) };
      const acct = await h.request('GET', `/api/v1/Account/${creds.id}/`, { auth: creds });
      expect(acct.json).toMatchObject({ cps_limit: 2500, concurrent_calls_limit: 100000 });

      const one = await h.request('POST', '/api/v1/partner/accounts', { auth: partnerAuth, body: { ...base, cps_limit: 1, concurrent_calls_limit: 1 } });
      expect(one.status).toBe(201);
      expect(one.json).toMatchObject({ cps_limit: 1, concurrent_calls_limit: 1 });

      for (const [cps, cc] of [
        [0, 100001],
        [1.5, '50'],
        [-1, null],
        ['10', 0],
      ] as const) {
        const bad = await h.request('POST', '/api/v1/partner/accounts', { auth: partnerAuth, body: { ...base, cps_limit: cps, concurrent_calls_limit: cc } });
        expect(bad.status, `${String(cps)} / ${String(cc)}`).toBe(400);
        expectBadRequest(bad.body, ['cps_limit', 'concurrent_calls_limit']);
      }
    });

    it('answers 403 when the partner may not create accounts', async () => {
      const r = await h.request('POST', '/api/v1/partner/accounts', {
        auth: { id: LIMITED_PARTNER.authId, token: LIMITED_PARTNER.authToken },
        body: { name: 'Acme', email: 'ops@acme.example', password: 'console-password', country: 'IN' },
      });
      expect(r.status).toBe(403);
      expectError(r.body, 'forbidden');
    });

    it('Idempotency-Key: a retry returns the same credentials and creates one account', async () => {
      const body = { name: 'Retry', email: 'retry@example.test', password: 'console-password', country: 'DE' };
      const headers = { 'idempotency-key': `acct-${kind}` };
      const a = await h.request('POST', '/api/v1/partner/accounts', { auth: partnerAuth, body, headers });
      const b = await h.request('POST', '/api/v1/partner/accounts', { auth: partnerAuth, body, headers });
      expect(a.status).toBe(201);
      expect(b.status).toBe(201);
      expect(b.json).toEqual(a.json);
      const other = await h.request('POST', '/api/v1/partner/accounts', { auth: partnerAuth, body: { ...body, name: 'Other' }, headers });
      expect(other.status).toBe(422);
      expectError(other.body, 'idempotency_key_reused');
    });
  });

  describe('probes', () => {
    it('GET /healthz answers 200 without credentials', async () => {
      const r = await h.request('GET', '/healthz', { headers: { accept: 'text/plain' } });
      expect(r.status).toBe(200);
      expect(r.json.status).toBe('ok');
    });

    it('GET /readyz answers 200 while the stores answer, 503 with the error object when the location store does not', async () => {
      const ok = await h.request('GET', '/readyz');
      expect(ok.status).toBe(200);
      const ping = h.location.ping.bind(h.location);
      h.location.ping = async () => false;
      try {
        const down = await h.request('GET', '/readyz');
        expect(down.status).toBe(503);
        expectError(down.body, 'not_ready');
      } finally {
        h.location.ping = ping;
      }
    });

    it('probes are exempt from rate limits', async () => {
      const r = await h.request('GET', '/healthz');
      expect(r.headers.get('x-ratelimit-limit')).toBeNull();
    });
  });
});

describe('Authenticator partner tokens', () => {
  const SECRET = 'secret-0123456789abcdef';
  /** The HS256 key the Authenticator derives from its secret (to forge tokens the way a peer could). */
  const keyOf = (secret: string): Buffer => createHmac('sha256', secret).update('sip-edge partner login token').digest();
  const claimsNow = (now: number): Record<string, unknown> => {
    const iat = Math.floor(now / 1000);
    return { iss: 'sip-edge', aud: 'partner', sub: PARTNER.id, aid: PARTNER.authId, iat, exp: iat + PARTNER_TOKEN_TTL_S, jti: 'j-1' };
  };
  /** A JWT built by hand: `header` as given, HMAC of `hash` (sha256/sha512) with `key`. */
  const handMade = (header: Record<string, unknown>, claims: Record<string, unknown>, key: Buffer, hash = 'sha256'): string => {
    const h = Buffer.from(JSON.stringify(header)).toString('base64url');
    const p = Buffer.from(JSON.stringify(claims)).toString('base64url');
    return `${h}.${p}.${createHmac(hash, key).update(`${h}.${p}`).digest('base64url')}`;
  };

  it('a token expires after expires_in seconds (a few seconds of clock skew allowed, no more)', async () => {
    const auth = new Authenticator(new MemoryDirectory(), [PARTNER], SECRET);
    const now = Date.UTC(2030, 0, 1);
    const { token, expiresIn } = await auth.issuePartnerToken(PARTNER, now);
    expect(expiresIn).toBe(3600);
    const [header, claims] = token.split('.').slice(0, 2).map((x) => JSON.parse(Buffer.from(x, 'base64url').toString('utf8')) as Record<string, unknown>);
    expect(header).toEqual({ alg: 'HS256', typ: 'JWT' });
    expect(claims).toMatchObject({ iss: 'sip-edge', aud: 'partner', sub: PARTNER.id, aid: PARTNER.authId, iat: now / 1000, exp: now / 1000 + expiresIn });
    expect(typeof claims?.jti).toBe('string');
    expect((await auth.verifyPartnerToken(token, now + 1000))?.id).toBe(PARTNER.id);
    expect((await auth.verifyPartnerToken(token, now + (expiresIn - 1) * 1000))?.id).toBe(PARTNER.id);
    expect((await auth.verifyPartnerToken(token, now + (expiresIn + PARTNER_TOKEN_CLOCK_TOLERANCE_S - 1) * 1000))?.id).toBe(PARTNER.id);
    expect(await auth.verifyPartnerToken(token, now + (expiresIn + PARTNER_TOKEN_CLOCK_TOLERANCE_S) * 1000)).toBeNull();
    // Issued in the future (beyond the skew allowed): refused.
    expect(await auth.verifyPartnerToken(token, now - (PARTNER_TOKEN_CLOCK_TOLERANCE_S + 1) * 1000)).toBeNull();
    expect(PARTNER_TOKEN_CLOCK_TOLERANCE_S).toBeLessThanOrEqual(30);
  });

  it('tokens of one secret are accepted by every node sharing it, and by no other', async () => {
    const a = new Authenticator(new MemoryDirectory(), [PARTNER], SECRET);
    const b = new Authenticator(new MemoryDirectory(), [PARTNER], SECRET);
    const c = new Authenticator(new MemoryDirectory(), [PARTNER], 'another-secret-0123456789');
    const { token } = await a.issuePartnerToken(PARTNER);
    expect((await b.verifyPartnerToken(token))?.id).toBe(PARTNER.id);
    expect(await c.verifyPartnerToken(token)).toBeNull();
  });

  it('a token of a partner no longer configured is refused', async () => {
    const a = new Authenticator(new MemoryDirectory(), [PARTNER], SECRET);
    const b = new Authenticator(new MemoryDirectory(), [LIMITED_PARTNER], SECRET);
    expect(await b.verifyPartnerToken((await a.issuePartnerToken(PARTNER)).token)).toBeNull();
  });

  it('the algorithm is pinned to HS256: alg none, HS512 under the same key, and other issuers or audiences are refused', async () => {
    const auth = new Authenticator(new MemoryDirectory(), [PARTNER], SECRET);
    const now = Date.now();
    const key = keyOf(SECRET);
    // A token laid out as the hand-written issuer of earlier versions made them is still accepted.
    expect((await auth.verifyPartnerToken(handMade({ alg: 'HS256', typ: 'JWT' }, claimsNow(now), key), now))?.id).toBe(PARTNER.id);
    expect(await auth.verifyPartnerToken(handMade({ alg: 'HS512', typ: 'JWT' }, claimsNow(now), key, 'sha512'), now)).toBeNull();
    const none = `${Buffer.from(JSON.stringify({ alg: 'none', typ: 'JWT' })).toString('base64url')}.${Buffer.from(JSON.stringify(claimsNow(now))).toString('base64url')}.`;
    expect(await auth.verifyPartnerToken(none, now)).toBeNull();
    expect(await auth.verifyPartnerToken(handMade({ alg: 'HS256', typ: 'JWT' }, { ...claimsNow(now), iss: 'elsewhere' }, key), now)).toBeNull();
    expect(await auth.verifyPartnerToken(handMade({ alg: 'HS256', typ: 'JWT' }, { ...claimsNow(now), aud: 'customer' }, key), now)).toBeNull();
    expect(await auth.verifyPartnerToken(handMade({ alg: 'HS256', typ: 'JWT' }, { ...claimsNow(now), sub: 'PT-other' }, key), now)).toBeNull();
  });
});
