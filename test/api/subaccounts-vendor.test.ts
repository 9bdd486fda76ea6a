/**
 * The vendor SDK's sub-account paths (`/api/v1/accounts/<auth_id>/sub-accounts/`)
 * on the memory store and a real redis-server: each answer parses with the SDK's
 * model (exact fields, types, nulls), and they act on the same records as `Subaccount/`.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { STORE_KINDS, apiSuite, stopRedisServer } from '../support/api-harness.js';
import { modelFields, modelProblems } from '../support/vendor-sdk-models.js';

afterAll(stopRedisServer);

describe.each(STORE_KINDS)('vendor sub-account paths on the %s store', (kind) => {
  const s = apiSuite(kind, 'Subaccount');
  const vbase = (): string => `/api/v1/accounts/${s.acct.id}/sub-accounts/`;

  it('create answers CreateSubaccountResponse with a token that authenticates; retrieve never shows it again', async () => {
    const r = await s.h.request('POST', vbase(), { auth: s.acct, body: { name: 'Branch', email: 'b@example.test', password: 'not-kept-123', kyc_mode: 'customer_use' } });
    expect(r.status).toBe(201);
    expect(modelProblems('CreateSubaccountResponse', r.json)).toEqual([]);
    const creds = r.json.auth_credentials as { auth_id: string; auth_token: string };
    expect((r.json.sub_account as Record<string, unknown>).auth_token).toBe(creds.auth_token);
    // The token works, on the sub-account's own endpoints.
    expect((await s.h.request('GET', `/api/v1/Account/${creds.auth_id}/Endpoint/`, { auth: { id: creds.auth_id, token: creds.auth_token } })).status).toBe(200);
    const got = await s.h.request('GET', `${vbase()}${creds.auth_id}`, { auth: s.acct });
    expect(got.status).toBe(200);
    expect(modelProblems('RetrieveSubaccountResponse', got.json)).toEqual([]);
    expect(Object.keys(got.json).sort()).toEqual(modelFields('RetrieveSubaccountResponse'));
    expect(got.json.auth_token).toBe('');
    // The same record as the spec's path, with its KYC fields there.
    const spec = await s.h.request('GET', `${s.base}${creds.auth_id}/`, { auth: s.acct });
    expect(spec.json).toMatchObject({ auth_id: creds.auth_id, name: 'Branch', kyc_mode: 'customer_use', kyc_calls_blocked: true });
  });

  it('list answers ListSubaccountsResponse paged by page/size', async () => {
    for (const name of ['A', 'B', 'C']) await s.h.newSubAccount(s.acct).then(() => name);
    const r = await s.h.request('GET', `${vbase()}?page=2&size=2`, { auth: s.acct });
    expect(r.status).toBe(200);
    expect(modelProblems('ListSubaccountsResponse', r.json), JSON.stringify(modelProblems('ListSubaccountsResponse', r.json))).toEqual([]);
    expect(r.json).toMatchObject({ total: 3, page: 2, size: 2 });
    expect(r.json.sub_accounts).toHaveLength(1);
  });

  it('PUT updates and answers UpdateSubaccountResponse; DELETE answers DeleteSubaccountResponse, then 404', async () => {
    const sub = await s.h.newSubAccount(s.acct);
    const u = await s.h.request('PUT', `${vbase()}${sub.id}`, { auth: s.acct, body: { name: 'Renamed', enabled: false } });
    expect(u.status).toBe(200);
    expect(modelProblems('UpdateSubaccountResponse', u.json)).toEqual([]);
    expect(u.json).toMatchObject({ name: 'Renamed', enabled: false, is_active: false });
    const bad = await s.h.request('PUT', `${vbase()}${sub.id}`, { auth: s.acct, body: { auth_token: 'x' } });
    expect(bad.status).toBe(400);
    const d = await s.h.request('DELETE', `${vbase()}${sub.id}`, { auth: s.acct });
    expect(d.status).toBe(200);
    expect(modelProblems('DeleteSubaccountResponse', d.json)).toEqual([]);
    expect((await s.h.request('GET', `${vbase()}${sub.id}`, { auth: s.acct })).status).toBe(404);
  });

  it("a sub-account's own credentials cannot manage sub-accounts there (403)", async () => {
    const sub = await s.h.newSubAccount(s.acct);
    expect((await s.h.request('GET', `/api/v1/accounts/${sub.id}/sub-accounts/`, { auth: sub })).status).toBe(403);
  });
});
