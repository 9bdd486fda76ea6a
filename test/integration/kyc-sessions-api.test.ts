/**
 * Partner KYC sessions in process over real HTTP, on the embedded stores and on a
 * redis-server: create (email and redirect flows, fields required per flow, another
 * partner's account refused), one active session per account (409, and free again after
 * revoke), list filters and paging, get, revoke (409 when closed), resend cooldown (429
 * with the seconds left), the hosted page (opened on first visit, in_progress, then
 * kyc_completed through its submit in test mode), and the answers checked against the
 * SDK's ListKycSessionsResponse model.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { LIMITED_PARTNER, PARTNER, STORE_KINDS, startHarness, stopRedisServer, type Creds, type Harness } from '../support/api-harness.js';
import { modelProblems } from '../support/vendor-sdk-models.js';
import { Writable } from 'node:stream';
import { createLogger } from '../../src/logger.js';

const P: Creds = { id: PARTNER.authId, token: PARTNER.authToken };

afterAll(async () => {
  await stopRedisServer();
});

describe.each(STORE_KINDS)('partner KYC sessions on %s', (kind) => {
  let h: Harness;
  const logs: string[] = [];
  const tokens: string[] = [];
  beforeAll(async () => {
    const sink = new Writable({
      write(chunk: Buffer, _enc, done) {
        logs.push(chunk.toString('utf8'));
        done();
      },
    });
    h = await startHarness(kind, { partners: [PARTNER, LIMITED_PARTNER] }, { logger: createLogger('trace', sink) });
  });
  afterAll(async () => {
    await h.close();
  });

  const create = (body: Record<string, unknown>, auth: Creds = P) => h.request('POST', '/api/v1/partner/kyc-sessions', { auth, body });
  const pathOf = (url: unknown): string => {
    const p = new URL(String(url)).pathname;
    tokens.push(p.split('/').pop() ?? '');
    return p;
  };

  it('creates email and redirect sessions; fields required per flow; not for another partner\'s account; one active per account', async () => {
    const a = await h.newAccount();
    const bad = await create({ account_auth_id: a.id });
    expect(bad.status).toBe(400);
    expect(bad.json.details).toHaveProperty('customer_email');
    expect((await create({ account_auth_id: a.id, flow_type: 'redirect' })).json.details).toHaveProperty('redirect_url');
    expect((await create({ account_auth_id: a.id, flow_type: 'email', customer_email: 'x@example.test', expires_in_days: 0 })).json.details).toHaveProperty('expires_in_days');
    expect((await create({ account_auth_id: a.id, flow_type: 'email', customer_email: 'x@example.test', webhook_url: 'http://plain.example.test/' })).json.details).toHaveProperty('webhook_url');
    const other = await create({ account_auth_id: a.id, customer_email: 'x@example.test' }, { id: LIMITED_PARTNER.authId, token: LIMITED_PARTNER.authToken });
    expect(other.status).toBe(400);
    expect(other.json.details).toHaveProperty('account_auth_id');
    expect((await create({ account_auth_id: a.id, customer_email: 'x@example.test' }, a)).status).toBe(403);

    const s = await create({ account_auth_id: a.id, customer_email: 'owner@example.test', metadata: { customer_ref: 'C-1' } });
    expect(s.status).toBe(201);
    expect(s.json).toMatchObject({ account_auth_id: a.id, status: 'email_sent', customer_email: 'owner@example.test', metadata: { customer_ref: 'C-1' }, kyc_type: null });
    const days = (Date.parse(String(s.json.expires_at)) - Date.parse(String(s.json.created_at))) / 86_400_000;
    expect(days).toBeCloseTo(7, 3);
    expect(String(s.json.widget_url)).toMatch(/^http:\/\/127\.0\.0\.1:\d+\/kyc\/s\/[\w-]{20,}$/);
    const dup = await create({ account_auth_id: a.id, flow_type: 'redirect', redirect_url: 'https://partner.example.test/done' });
    expect(dup.status).toBe(409);
    expect(dup.json.error).toBe('kyc_session_active');
    const rv = await h.request('DELETE', `/api/v1/partner/kyc-sessions/${String(s.json.id)}`, { auth: P, body: { reason: 'wrong email' } });
    expect(rv.status).toBe(200);
    expect(rv.json.status).toBe('revoked');
    expect((await h.request('DELETE', `/api/v1/partner/kyc-sessions/${String(s.json.id)}`, { auth: P, body: {} })).status).toBe(409);
    expect((await h.request('GET', pathOf(s.json.widget_url), { headers: { accept: 'text/html' } })).text).toContain('This KYC link is revoked');
    const r = await create({ account_auth_id: a.id, flow_type: 'redirect', redirect_url: 'https://partner.example.test/done', expires_in_days: 3 });
    expect(r.status).toBe(201);
    expect(r.json.status).toBe('link_ready');
  });

  it('lists with filters and paging (the SDK model), gets one, 404 for another partner\'s', async () => {
    const a = await h.newAccount();
    const b = await h.newAccount();
    const sa = await create({ account_auth_id: a.id, customer_email: 'a@example.test' });
    await create({ account_auth_id: b.id, flow_type: 'redirect', redirect_url: 'https://partner.example.test/r' });
    const list = await h.request('GET', `/api/v1/partner/kyc-sessions?account_auth_id=${a.id}`, { auth: P });
    expect(list.status).toBe(200);
    expect(list.json).toMatchObject({ total: 1, page: 1, size: 20 });
    expect(modelProblems('ListKycSessionsResponse', list.json)).toEqual([]);
    const paged = await h.request('GET', '/api/v1/partner/kyc-sessions?size=1&page=2', { auth: P });
    expect((paged.json.sessions as unknown[]).length).toBe(1);
    expect(Number(paged.json.total)).toBeGreaterThanOrEqual(2);
    const linkReady = await h.request('GET', '/api/v1/partner/kyc-sessions?status=link_ready', { auth: P });
    expect((linkReady.json.sessions as Array<{ status: string }>).every((x) => x.status === 'link_ready')).toBe(true);
    const one = await h.request('GET', `/api/v1/partner/kyc-sessions/${String(sa.json.id)}`, { auth: P });
    expect(one.json).toMatchObject({ id: sa.json.id, status: 'email_sent' });
    expect((await h.request('GET', `/api/v1/partner/kyc-sessions/${String(sa.json.id)}`, { auth: { id: LIMITED_PARTNER.authId, token: LIMITED_PARTNER.authToken } })).status).toBe(404);
    expect((await h.request('GET', '/api/v1/partner/kyc-sessions/kyc_sess_nope', { auth: P })).status).toBe(404);
  });

  it('resend: 429 with the seconds left within 30 minutes', async () => {
    const a = await h.newAccount();
    const s = await create({ account_auth_id: a.id, customer_email: 'a@example.test' });
    const r = await h.request('POST', `/api/v1/partner/kyc-sessions/${String(s.json.id)}/resend`, { auth: P });
    expect(r.status).toBe(429);
    expect(r.json.error).toBe('resend_cooldown');
    expect(Number(r.json.retry_after)).toBeGreaterThan(1790);
    expect(Number(r.json.retry_after)).toBeLessThanOrEqual(1800);
    expect(r.headers.get('retry-after')).toBe(String(r.json.retry_after));
  });

  it('the hosted page: opened on first visit, in_progress, then kyc_completed (test mode); a bad PAN is 400 naming pan', async () => {
    const a = await h.newAccount();
    const s = await create({ account_auth_id: a.id, flow_type: 'redirect', redirect_url: 'https://partner.example.test/done?x=1' });
    const page = pathOf(s.json.widget_url);
    const html = await h.request('GET', page, { headers: { accept: 'text/html' } });
    expect(html.status).toBe(200);
    expect(html.headers.get('content-type')).toMatch(/^text\/html/);
    expect(html.text).toContain('Verify your business');
    expect(html.text).toContain('Test mode');
    const get = async (): Promise<Record<string, unknown>> => (await h.request('GET', `/api/v1/partner/kyc-sessions/${String(s.json.id)}`, { auth: P })).json;
    expect(await get()).toMatchObject({ status: 'opened', first_opened_at: expect.any(String) });
    const bad = await h.request('POST', `${page}/submit`, { body: { business_type: 'private_limited', pan: 'ABC', gstin: 'TESTSUCCESS0001' } });
    expect(bad.status).toBe(400);
    expect(bad.json.details).toHaveProperty('pan');
    const half = await h.request('POST', `${page}/submit`, { body: { business_type: 'private_limited', pan: 'TESTSUCCESS0001', gstin: 'TESTFAIL0001' } });
    expect(half.json).toMatchObject({ status: 'in_progress', overall_status: 'failed', mock: true, verifications: { pan: 'verified', gst: 'failed' } });
    const done = await h.request('POST', `${page}/submit`, { body: { business_type: 'private_limited', pan: 'TESTSUCCESS0001', gstin: 'TESTSUCCESS0001' } });
    expect(done.json).toMatchObject({ status: 'kyc_completed', overall_status: 'verified' });
    expect(await get()).toMatchObject({ status: 'kyc_completed', kyc_type: 'company', completed_at: expect.any(String) });
    const after = await h.request('GET', page, { headers: { accept: 'text/html' } });
    expect(after.text).toContain('KYC completed');
    expect(after.text).toContain(`https://partner.example.test/done?x=1&#38;session_id=${String(s.json.id)}&#38;status=kyc_completed&#38;auth_id=${a.id}`);
    expect((await h.request('POST', `${page}/submit`, { body: { business_type: 'individual', pan: 'TESTSUCCESS0001', access_request_id: 'MOCK_AR_SUCCESS' } })).status).toBe(409);
    expect((await h.request('GET', '/kyc/s/not-a-token', { headers: { accept: 'text/html' } })).status).toBe(404);
    // Completed: a new session may be created for the account.
    expect((await create({ account_auth_id: a.id, customer_email: 'a@example.test' })).status).toBe(201);
  });

  it('a parent account\'s session for its sub-account: the page sets business_type and unblocks calls; sub-account credentials 403, another account 404', async () => {
    const a = await h.newAccount();
    const other = await h.newAccount();
    const sub = await h.newSubAccount(a, 'customer_use');
    const path = `/api/v1/sub-accounts/${sub.id}/kyc-sessions`;
    const body = { account_auth_id: sub.id, flow_type: 'redirect', redirect_url: 'https://app.example.test/kyc-done' };
    expect((await h.request('POST', path, { auth: sub, body })).status).toBe(403);
    expect((await h.request('POST', path, { auth: other, body })).status).toBe(404);
    const wrong = await h.request('POST', path, { auth: a, body: { ...body, account_auth_id: a.id } });
    expect(wrong.status).toBe(400);
    expect(wrong.json.details).toHaveProperty('account_auth_id');
    const s = await h.request('POST', path, { auth: a, body });
    expect(s.status).toBe(201);
    expect(s.json).toMatchObject({ account_auth_id: sub.id, status: 'link_ready' });
    expect((await h.request('POST', path, { auth: a, body })).status).toBe(409);
    const blocked = async (): Promise<unknown> => (await h.request('GET', `/api/v1/Account/${a.id}/Subaccount/${sub.id}/`, { auth: a })).json;
    expect(await blocked()).toMatchObject({ kyc_calls_blocked: true, business_type: '' });
    const page = pathOf(s.json.widget_url);
    expect((await h.request('GET', page, { headers: { accept: 'text/html' } })).status).toBe(200);
    const done = await h.request('POST', `${page}/submit`, { body: { business_type: 'llp', pan: 'TESTSUCCESS0001', gstin: 'TESTSUCCESS0001' } });
    expect(done.json).toMatchObject({ status: 'kyc_completed', overall_status: 'verified' });
    expect(await blocked()).toMatchObject({ kyc_calls_blocked: false, business_type: 'llp' });
    expect((await h.request('GET', `/api/v1/sub-accounts/${sub.id}/kyc/status`, { auth: a })).json).toMatchObject({ overall_status: 'verified', kyc_calls_blocked: false, verifications: { pan: 'verified', gst: 'verified' } });
    // Not a partner's session: the partner does not see it.
    expect((await h.request('GET', `/api/v1/partner/kyc-sessions/${String(s.json.id)}`, { auth: P })).status).toBe(404);
  });

  it('the logs never hold a page token or a checked value', () => {
    const text = logs.join('');
    expect(text).toContain('/kyc/s/[token]');
    expect(tokens.length).toBeGreaterThan(2);
    for (const t of tokens) expect(text).not.toContain(t);
    expect(text).not.toContain('TESTSUCCESS0001');
  });
});
