/**
 * End to end, through the real server process (`node dist/main.js`): an account
 * from the partner API → an endpoint over HTTP → SIPp registers with its
 * credentials → the API shows the live registration → a password update drops
 * it and the old password is refused → delete: 204, registration refused, the
 * username never comes back. On the embedded store and on a real redis-server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { runSipp, type SippRun } from '../support/sipp.js';
import { ISO_DATE_TIME, SIP_REGISTRATION_FIELDS, expectError, keys } from './shapes.js';

const PARTNER_ID = 'PAE2EPARTNER00000001';
const PARTNER_TOKEN = 'e2e-partner-token-0123456789';

describe.each(['memory', 'redis'] as const)('Endpoint API with SIPp on the real server (%s store)', (kind) => {
  let redis: RedisServerHandle | null = null;
  let server: ServerProcess;
  let http: string;

  beforeAll(async () => {
    if (kind === 'redis') redis = await startRedis();
    server = await startServer({
      PARTNER_AUTH_ID: PARTNER_ID,
      PARTNER_AUTH_TOKEN: PARTNER_TOKEN,
      ...(redis ? { REDIS_URL: redis.url } : {}),
    });
    expect(server.ports.http).not.toBeNull();
    http = `http://127.0.0.1:${server.ports.http}`;
  });
  afterAll(async () => {
    await server?.stop();
    await redis?.stop();
  });

  const call = async (method: string, path: string, auth: { id: string; token: string }, body?: unknown) => {
    const res = await fetch(http + path, {
      method,
      headers: {
        accept: 'application/json',
        'x-auth-id': auth.id,
        'x-auth-token': auth.token,
        ...(body === undefined ? {} : { 'content-type': 'application/json' }),
      },
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await res.text();
    return { status: res.status, text, json: (text ? JSON.parse(text) : {}) as Record<string, unknown> };
  };

  const completed = (run: SippRun): void => {
    expect(run.errors, run.stdout + run.stderr).toBe('');
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.successful).toBe(1);
    expect(run.failed).toBe(0);
  };

  it('create → SIPp registers → retrieve shows it → password update drops it and refuses the old password → delete', async () => {
    const created = await call('POST', '/api/v1/partner/accounts', { id: PARTNER_ID, token: PARTNER_TOKEN }, {
      name: 'E2E',
      email: 'e2e@example.test',
      password: 'console-password',
      country: 'IN',
    });
    expect(created.status, created.text).toBe(201);
    const acct = { id: String(created.json.auth_id), token: String(created.json.auth_token) };
    const domain = String(created.json.sip_domain);
    const base = `/api/v1/Account/${acct.id}/Endpoint/`;
    const port = server.ports.udp as number;

    const ep = await call('POST', base, acct, { username: 'e2ephone', password: 'first-secret-1' });
    expect(ep.status, ep.text).toBe(201);
    expect(ep.json.sip_uri).toBe(`sip:e2ephone@${domain}`);
    const url = `${base}${String(ep.json.endpoint_id)}/`;
    expect((await call('GET', url, acct)).json.sip_registered).toBe('false');

    // SIPp registers with the endpoint's credentials.
    const user = { user: 'e2ephone', domain, password: 'first-secret-1' };
    completed(await runSipp({ scenario: 'register.xml', port, transport: 'udp', users: [user] }));
    const reg = await call('GET', url, acct);
    expect(reg.status).toBe(200);
    expect(reg.json.sip_registered).toBe('true');
    expect(reg.json.sip_contact).toMatch(/^127\.0\.0\.1:\d+$/);
    expect(reg.json.sip_expires).toMatch(ISO_DATE_TIME);
    expect(Date.parse(String(reg.json.sip_expires))).toBeGreaterThan(Date.now() + 3000_000);
    expect(reg.json.sip_user_agent).toBe('SIPp-e2ephone');
    const r = reg.json.sip_registration as Record<string, unknown>;
    expect(keys(r)).toEqual(SIP_REGISTRATION_FIELDS);
    expect(r.contact).toBe(`sip:e2ephone@${String(reg.json.sip_contact)};transport=UDP`);
    expect(r.expires).toBe(reg.json.sip_expires);
    expect(r.user_agent).toBe('SIPp-e2ephone');
    expect(r.received).toMatch(/^sip:127\.0\.0\.1:\d+;transport=udp$/);
    expect(r.path).toBeNull();
    const list = await call('GET', `${base}?username__exact=e2ephone`, acct);
    expect((list.json.objects as Array<Record<string, unknown>>)[0]).toMatchObject({ sip_registered: 'true', sip_contact: reg.json.sip_contact });

    // Password update: the binding is gone at once; the old password is refused.
    expect((await call('POST', url, acct, { password: 'second-secret-2' })).status).toBe(202);
    const after = await call('GET', url, acct);
    expect(after.json.sip_registered).toBe('false');
    expect(after.json.sip_contact).toBeNull();
    expect('sip_registration' in after.json).toBe(false);
    completed(await runSipp({ scenario: 'wrong-password.xml', port, transport: 'udp', users: [user] }));
    expect((await call('GET', url, acct)).json.sip_registered).toBe('false');
    // The new one works.
    const renewed = { ...user, password: 'second-secret-2' };
    completed(await runSipp({ scenario: 'register.xml', port, transport: 'udp', users: [renewed] }));
    expect((await call('GET', url, acct)).json.sip_registered).toBe('true');

    // Delete: 204, registration refused even with the last password, the URI never returns.
    const del = await call('DELETE', url, acct);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    completed(await runSipp({ scenario: 'wrong-password.xml', port, transport: 'udp', users: [renewed] }));
    const gone = await call('GET', url, acct);
    expect(gone.status).toBe(404);
    expectError(gone.json, 'not_found', ['endpoint_id']);
    const again = await call('POST', base, acct, { username: 'e2ephone', password: 'third-secret-3' });
    expect(again.status).toBe(409);
    expectError(again.json, 'username_taken');
  }, 120_000);
});
