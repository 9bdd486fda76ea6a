/**
 * The SubAccount resource over HTTP on both stores: fields, the token shown
 * once, KYC blocking, and deletion (refused while it owns resources, or cascading).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { STORE_KINDS, bindingWrite, registerBindings, startHarness, stopRedisServer, type Creds, type Harness, apiSuite } from '../support/api-harness.js';
import { ISO_DATE_TIME, SUBACCOUNT_FIELDS, expectBadRequest, expectError, keys } from './shapes.js';

afterAll(stopRedisServer);

describe.each(STORE_KINDS)('SubAccount API (%s store)', (kind) => {
  const s = apiSuite(kind, 'Subaccount');

  it('creates with 201: the SubAccount fields plus auth_token, shown this once', async () => {
    const r = await s.h.request('POST', s.base, { auth: s.acct, body: { name: 'Reseller One', business_type: 'private_limited', kyc_mode: 'customer_use' } });
    expect(r.status).toBe(201);
    expect(keys(r.json)).toEqual([...SUBACCOUNT_FIELDS, 'api_id', 'auth_token', 'message'].sort());
    expect(r.json).toMatchObject({
      message: 'created',
      name: 'Reseller One',
      enabled: true,
      kyc_mode: 'customer_use',
      business_type: 'private_limited',
      kyc_calls_blocked: true,
      account: s.acct.id,
    });
    expect(r.json.auth_id).toMatch(/^SA[A-Z0-9]{18}$/);
    expect(String(r.json.auth_token).length).toBeGreaterThanOrEqual(32);
    expect(r.json.created_at).toMatch(ISO_DATE_TIME);

    const got = await s.h.request('GET', `${s.base}${String(r.json.auth_id)}/`, { auth: s.acct });
    expect(got.status).toBe(200);
    expect(keys(got.json)).toEqual([...SUBACCOUNT_FIELDS, 'api_id'].sort());
    expect(got.text).not.toContain(String(r.json.auth_token));
  });

  it('personal_use is the default and does not block calls; customer_use starts blocked', async () => {
    const p = await s.h.request('POST', s.base, { auth: s.acct, body: { name: 'p' } });
    expect(p.json).toMatchObject({ kyc_mode: 'personal_use', kyc_calls_blocked: false, business_type: '' });
    const c = await s.h.request('POST', s.base, { auth: s.acct, body: { name: 'c', kyc_mode: 'customer_use' } });
    expect(c.json.kyc_calls_blocked).toBe(true);
  });

  it('its credentials work on its own Account path at once', async () => {
    const sub = await s.h.newSubAccount(s.acct);
    const r = await s.h.request('GET', `/api/v1/Account/${sub.id}/Endpoint/`, { auth: sub });
    expect(r.status).toBe(200);
    const wrong = await s.h.request('GET', `/api/v1/Account/${sub.id}/Endpoint/`, { auth: { id: sub.id, token: 'x'.repeat(40) } });
    expect(wrong.status).toBe(401);
  });

  it('answers 400 naming every bad field', async () => {
    const r = await s.h.request('POST', s.base, { auth: s.acct, body: { kyc_mode: 'business', enabled: 1, extra: true } });
    expect(r.status).toBe(400);
    expectBadRequest(r.body, ['name', 'kyc_mode', 'enabled', 'extra']);
  });

  it('lists with meta and bounds', async () => {
    await s.h.newSubAccount(s.acct);
    await s.h.newSubAccount(s.acct);
    const r = await s.h.request('GET', `${s.base}?limit=1`, { auth: s.acct });
    expect(r.status).toBe(200);
    expect(r.json.meta).toEqual({ limit: 1, offset: 0, total_count: 2 });
    expect(keys((r.json.objects as unknown[])[0])).toEqual(SUBACCOUNT_FIELDS);
    expect((await s.h.request('GET', `${s.base}?limit=101`, { auth: s.acct })).status).toBe(400);
  });

  it('updates (202): a kyc_mode change recomputes kyc_calls_blocked; fixed fields are 400', async () => {
    const sub = await s.h.newSubAccount(s.acct);
    const url = `${s.base}${sub.id}/`;
    expect((await s.h.request('POST', url, { auth: s.acct, body: { kyc_mode: 'customer_use', name: 'Renamed' } })).status).toBe(202);
    expect((await s.h.request('GET', url, { auth: s.acct })).json).toMatchObject({ kyc_mode: 'customer_use', kyc_calls_blocked: true, name: 'Renamed' });
    const bad = await s.h.request('POST', url, { auth: s.acct, body: { kyc_calls_blocked: false, auth_token: 'x' } });
    expect(bad.status).toBe(400);
    expectBadRequest(bad.body, ['kyc_calls_blocked', 'auth_token']);
  });

  it('answers 404 with the general error object for an unknown sub-account', async () => {
    const r = await s.h.request('GET', `${s.base}SANOSUCHSUBACCOUNT00/`, { auth: s.acct });
    expect(r.status).toBe(404);
    expectError(r.body, 'not_found');
  });

  it('refuses to delete a sub-account that owns endpoints (409) unless cascade=true', async () => {
    const sub = await s.h.newSubAccount(s.acct);
    const ep = await s.h.request('POST', `/api/v1/Account/${sub.id}/Endpoint/`, { auth: sub, body: { username: 'subphone', password: 'secret-pass-1' } });
    expect(ep.status).toBe(201);
    await s.h.request('POST', `/api/v1/Account/${sub.id}/Application/`, { auth: sub, body: { app_name: 'a', answer_url: 'https://e.test/' } });
    const aor = { domain: s.acct.sipDomain, user: 'subphone' };
    await registerBindings(s.h.location, aor, [bindingWrite({ uri: 'sip:subphone@192.0.2.5', expiresAt: Date.now() + 60_000 })]);

    const refused = await s.h.request('DELETE', `${s.base}${sub.id}/`, { auth: s.acct });
    expect(refused.status).toBe(409);
    expectError(refused.body, 'subaccount_not_empty');

    const r = await s.h.request('DELETE', `${s.base}${sub.id}/?cascade=true`, { auth: s.acct });
    expect(r.status).toBe(204);
    expect(r.text).toBe('');
    expect(await s.h.location.lookup(aor)).toEqual([]);
    expect(await s.h.credentials.get(s.acct.sipDomain, 'subphone')).toBeNull();
    expect((await s.h.request('GET', `/api/v1/Account/${sub.id}/Endpoint/`, { auth: sub })).status).toBe(401);
    expect((await s.h.request('GET', `${s.base}${sub.id}/`, { auth: s.acct })).status).toBe(404);
    // Its endpoints' usernames are retired on the account like any deleted endpoint's.
    const reuse = await s.h.request('POST', `/api/v1/Account/${s.acct.id}/Endpoint/`, { auth: s.acct, body: { username: 'subphone', password: 'secret-pass-1' } });
    expect(reuse.status).toBe(409);
  });

  it('deletes an empty sub-account (204); its credentials stop working', async () => {
    const sub = await s.h.newSubAccount(s.acct);
    expect((await s.h.request('DELETE', `${s.base}${sub.id}/`, { auth: s.acct })).status).toBe(204);
    expect((await s.h.request('GET', `/api/v1/Account/${sub.id}/Endpoint/`, { auth: sub })).status).toBe(401);
  });

  it('Idempotency-Key on create replays the first response, token included, and creates one sub-account', async () => {
    const headers = { 'idempotency-key': 'sub-key-1' };
    const a = await s.h.request('POST', s.base, { auth: s.acct, body: { name: 'Once' }, headers });
    const b = await s.h.request('POST', s.base, { auth: s.acct, body: { name: 'Once' }, headers });
    expect(b.status).toBe(201);
    expect(b.json).toEqual(a.json);
    expect(((await s.h.request('GET', s.base, { auth: s.acct })).json.meta as Record<string, unknown>).total_count).toBe(1);
    const sub = { id: String(b.json.auth_id), token: String(b.json.auth_token) };
    expect((await s.h.request('GET', `/api/v1/Account/${sub.id}/Endpoint/`, { auth: sub })).status).toBe(200);
  });
});
