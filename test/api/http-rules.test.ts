/**
 * Rules every route follows (docs/design.md "Choices where the spec leaves room" and
 * spec "Authentication", "Limits"): Accept and Content-Type, request ids,
 * authentication failures, rate limits, unknown routes, and credentials that
 * never reach the logs.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { PARTNER, STORE_KINDS, startHarness, stopRedisServer, type Creds, type Harness } from '../support/api-harness.js';
import { expectBadRequest, expectError } from './shapes.js';

afterAll(stopRedisServer);

describe.each(STORE_KINDS)('HTTP rules (%s store)', (kind) => {
  let h: Harness;
  let acct: Creds & { sipDomain: string };
  let base: string;

  beforeAll(async () => {
    h = await startHarness(kind);
    acct = await h.newAccount();
    base = `/api/v1/Account/${acct.id}/Endpoint/`;
  });
  afterAll(async () => {
    await h.close();
  });

  describe('Accept (406)', () => {
    it.each(['application/json', '*/*', 'application/*', 'text/html, application/json;q=0.5', 'APPLICATION/JSON; charset=utf-8'])(
      'accepts %s',
      async (accept) => {
        expect((await h.request('GET', base, { auth: acct, headers: { accept } })).status).toBe(200);
      },
    );

    it('accepts a request without Accept', async () => {
      const res = await fetch(h.base + base, { headers: { 'x-auth-id': acct.id, 'x-auth-token': acct.token } });
      // fetch sends "*/*" by default; send an empty one explicitly too.
      expect(res.status).toBe(200);
      const empty = await h.request('GET', base, { auth: acct, headers: { accept: '' } });
      expect(empty.status).toBe(200);
    });

    it.each(['text/html', 'application/xml', 'application/json;q=0', 'text/*'])('answers 406 for %s', async (accept) => {
      const r = await h.request('GET', base, { auth: acct, headers: { accept } });
      expect(r.status).toBe(406);
      expectError(r.body, 'not_acceptable');
    });
  });

  describe('Content-Type (415)', () => {
    it.each(['text/plain', 'application/x-www-form-urlencoded', 'application/xml'])('answers 415 for a %s body', async (type) => {
      const r = await h.request('POST', base, { auth: acct, raw: 'username=x', headers: { 'content-type': type } });
      expect(r.status).toBe(415);
      expectError(r.body, 'unsupported_media_type');
    });

    it('accepts application/json with a charset', async () => {
      const r = await h.request('POST', base, {
        auth: acct,
        raw: JSON.stringify({ username: 'charset', password: 'secret-pass-1' }),
        headers: { 'content-type': 'application/json; charset=utf-8' },
      });
      expect(r.status).toBe(201);
    });

    it('answers 400 for malformed JSON, an empty JSON body and a non-object body', async () => {
      for (const raw of ['{bad', '', '[1,2]', '"text"']) {
        const r = await h.request('POST', base, { auth: acct, raw, headers: { 'content-type': 'application/json' } });
        expect(r.status, raw).toBe(400);
        expectBadRequest(r.body, ['body']);
      }
    });
  });

  describe('request id', () => {
    it('every response carries a fresh X-Request-Id equal to the api_id of its body', async () => {
      const a = await h.request('GET', base, { auth: acct, headers: { 'x-request-id': 'client-chosen' } });
      const b = await h.request('GET', base, { auth: acct });
      expect(a.headers.get('x-request-id')).toBe(a.json.api_id);
      expect(a.headers.get('x-request-id')).not.toBe('client-chosen');
      expect(b.json.api_id).not.toBe(a.json.api_id);
      const err = await h.request('GET', `${base}1/`, { auth: acct });
      expect(err.headers.get('x-request-id')).toBe(err.json.api_id);
      const empty = await h.request('DELETE', `${base}1/`, { auth: acct });
      expect(empty.headers.get('x-request-id')).toMatch(/^[0-9a-f-]{36}$/);
    });
  });

  describe('authentication (401)', () => {
    it.each([
      ['no credentials', {}],
      ['only X-Auth-ID', { 'x-auth-id': 'MAXXXXXXXXXXXXXXXXXX' }],
      ['only X-Auth-Token', { 'x-auth-token': 'token' }],
      ['a malformed Auth ID', { 'x-auth-id': 'bad id with spaces', 'x-auth-token': 'token' }],
      ['an unknown Auth ID', { 'x-auth-id': 'MANOSUCHACCOUNT00000', 'x-auth-token': 'token' }],
      ['an over-long token', { 'x-auth-id': 'MANOSUCHACCOUNT00000', 'x-auth-token': 'x'.repeat(600) }],
      ['a Basic Authorization header', { authorization: 'Basic dXNlcjpwYXNz' }],
    ])('answers 401 with the general error object for %s', async (_what, headers) => {
      const r = await h.request('GET', base, { headers });
      expect(r.status).toBe(401);
      expectError(r.body, 'unauthorized');
    });

    it("answers 401 for the account's Auth ID with a wrong token", async () => {
      const r = await h.request('GET', base, { auth: { id: acct.id, token: `${acct.token}x` } });
      expect(r.status).toBe(401);
      expectError(r.body, 'unauthorized');
    });
  });

  describe('unknown routes', () => {
    it.each(['/api/v1/Account/', '/api/v1/Account/MAXX/Nothing/', '/api/v1/partner/nothing', '/api/v2/Account/X/Endpoint/', '/'])(
      'answers 404 with the general error object for %s',
      async (path) => {
        const r = await h.request('GET', path, { auth: acct });
        expect(r.status).toBe(404);
        expectError(r.body, 'not_found');
        expect(r.headers.get('x-ratelimit-limit')).not.toBeNull();
      },
    );

    it('serves every path with and without its trailing slash', async () => {
      expect((await h.request('GET', base.slice(0, -1), { auth: acct })).status).toBe(200);
      expect((await h.request('GET', '/api/v1/partner/me/', { auth: { id: PARTNER.authId, token: PARTNER.authToken } })).status).toBe(200);
    });
  });
});

describe.each(STORE_KINDS)('rate limits (%s store)', (kind) => {
  let h: Harness;
  let acct: Creds & { sipDomain: string };
  let other: Creds & { sipDomain: string };

  beforeAll(async () => {
    h = await startHarness(kind, { apiRateLimit: 5 });
  });
  afterAll(async () => {
    await h.close();
  });

  it('sends X-RateLimit-Limit/Remaining/Reset on every response and 429 with Retry-After past the limit', async () => {
    // Provisioning spends the partner's quota, not the account's.
    acct = await h.newAccount();
    other = await h.newAccount();
    const url = `/api/v1/Account/${acct.id}/Endpoint/`;
    const remaining: number[] = [];
    for (let i = 0; i < 5; i++) {
      const r = await h.request('GET', url, { auth: acct });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-ratelimit-limit')).toBe('5');
      expect(Number(r.headers.get('x-ratelimit-reset'))).toBeGreaterThan(0);
      remaining.push(Number(r.headers.get('x-ratelimit-remaining')));
    }
    expect(remaining).toEqual([4, 3, 2, 1, 0]);
    const limited = await h.request('GET', url, { auth: acct });
    expect(limited.status).toBe(429);
    expectError(limited.body, 'rate_limited');
    expect(Number(limited.headers.get('retry-after'))).toBeGreaterThan(0);
    expect(limited.headers.get('x-ratelimit-remaining')).toBe('0');
    // Every route, error answers included, counts against the same key.
    expect((await h.request('POST', url, { auth: acct, body: {} })).status).toBe(429);

    // Another account's quota is its own; so is a caller who only knows the Auth ID.
    const mine = await h.request('GET', `/api/v1/Account/${other.id}/Endpoint/`, { auth: other });
    expect(mine.status).toBe(200);
    expect(mine.headers.get('x-ratelimit-remaining')).toBe('4');
    const guesser = await h.request('GET', url, { auth: { id: acct.id, token: 'guess' } });
    expect(guesser.status).toBe(401);
    expect(guesser.headers.get('x-ratelimit-limit')).toBe('5');

    // Probes are never limited.
    expect((await h.request('GET', '/healthz')).status).toBe(200);
  });
});

describe('rate limits with Redis configured', () => {
  it('shares counters between nodes on the same Redis', async () => {
    const one = await startHarness('redis', { apiRateLimit: 5 });
    const two = await startHarness('redis', { apiRateLimit: 5 });
    try {
      const acct = await one.newAccount();
      const url = `/api/v1/Account/${acct.id}/Endpoint/`;
      const statuses: number[] = [];
      for (let i = 0; i < 6; i++) statuses.push((await (i % 2 === 0 ? one : two).request('GET', url, { auth: acct })).status);
      expect(statuses).toEqual([200, 200, 200, 200, 200, 429]);
    } finally {
      await one.close();
      await two.close();
    }
  });
});

describe('credentials never reach the logs', () => {
  it('no token, password or HA1 appears in the JSON log at trace level', async () => {
    let logged = '';
    const sink = new Writable({
      write(chunk: Buffer, _enc, cb) {
        logged += chunk.toString();
        cb();
      },
    });
    const h = await startHarness('memory', {}, { logger: createLogger('trace', sink) });
    try {
      const acct = await h.newAccount();
      const base = `/api/v1/Account/${acct.id}/Endpoint/`;
      const c = await h.request('POST', base, { auth: acct, body: { username: 'alice', password: 'very-secret-pw-1' } });
      await h.request('POST', `${base}${String(c.json.endpoint_id)}/`, { auth: acct, body: { password: 'very-secret-pw-2' } });
      await h.request('POST', base, { auth: acct, body: { username: 'bad-name', password: 'very-secret-pw-3' } });
      await h.request('GET', base, { auth: { id: acct.id, token: 'wrong-token-value' } });
      const sub = await h.newSubAccount(acct);
      await h.request('POST', '/api/v1/partner/login', { body: { email: PARTNER.email, password: PARTNER.password } });
      const cred = await h.credentials.get(acct.sipDomain, 'alice');
      expect(logged).toContain('endpoint created');
      for (const secret of [
        acct.token,
        sub.token,
        PARTNER.authToken,
        PARTNER.password ?? '',
        'very-secret-pw-1',
        'very-secret-pw-2',
        'very-secret-pw-3',
        'wrong-token-value',
        'console-password',
        cred?.ha1Md5 ?? '',
        cred?.ha1Sha256 ?? '',
      ]) {
        expect(secret).not.toBe('');
        expect(logged).not.toContain(secret);
      }
    } finally {
      await h.close();
    }
  });
});
