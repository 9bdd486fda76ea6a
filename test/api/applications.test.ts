/**
 * The Application resource over HTTP on both stores: fields and defaults of the
 * spec's table, the one default_endpoint_app per owner, and what endpoints see
 * when applications are attached, defaulted and deleted.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { STORE_KINDS, startHarness, stopRedisServer, type Creds, type Harness, apiSuite } from '../support/api-harness.js';
import { modelProblems } from '../support/vendor-sdk-models.js';
import { APPLICATION_FIELDS, ISO_DATE_TIME, expectBadRequest, expectError, keys } from './shapes.js';

afterAll(stopRedisServer);

describe.each(STORE_KINDS)('Application API (%s store)', (kind) => {
  const s = apiSuite(kind, 'Application');

  const createApp = async (body: Record<string, unknown>, who: Creds = s.acct, path = s.base): Promise<string> => {
    const r = await s.h.request('POST', path, { auth: who, body });
    expect(r.status, r.text).toBe(201);
    return String(r.json.app_id);
  };
  const getApp = async (id: string) => (await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct })).json;
  const createEndpoint = async (body: Record<string, unknown>, who: Creds = s.acct): Promise<string> => {
    const r = await s.h.request('POST', `/api/v1/Account/${who.id}/Endpoint/`, { auth: who, body: { password: 'secret-pass-1', ...body } });
    expect(r.status, r.text).toBe(201);
    return String(r.json.endpoint_id);
  };
  const endpointApp = async (id: string, who: Creds = s.acct) =>
    (await s.h.request('GET', `/api/v1/Account/${who.id}/Endpoint/${id}/`, { auth: who })).json.application;

  it('creates with 201 {api_id, message, app_id} (the SDK CreateApplicationResponse); app_id is numeric', async () => {
    const r = await s.h.request('POST', s.base, { auth: s.acct, body: { app_name: 'IVR', answer_url: 'https://example.test/answer' } });
    expect(r.status).toBe(201);
    expect(keys(r.json)).toEqual(['api_id', 'app_id', 'message']);
    expect(modelProblems('CreateApplicationResponse', r.json)).toEqual([]);
    expect(r.json.message).toBe('created');
    expect(r.json.app_id).toMatch(/^[1-9]\d*$/);
    expect(Number.isSafeInteger(Number(r.json.app_id))).toBe(true);
    const got = await s.h.request('GET', `${s.base}${String(r.json.app_id)}/`, { auth: s.acct });
    expect(got.json.resource_uri).toBe(`/v1/Account/${s.acct.id}/Application/${String(r.json.app_id)}/`);
  });

  it('retrieves every field of the spec table with its default', async () => {
    const id = await createApp({ app_name: 'IVR', answer_url: 'https://example.test/answer' });
    const a = await getApp(id);
    expect(keys(a)).toEqual([...APPLICATION_FIELDS, 'api_id'].sort());
    expect(a).toMatchObject({
      app_id: id,
      app_name: 'IVR',
      application_type: 'XML',
      answer_url: 'https://example.test/answer',
      answer_method: 'POST',
      hangup_url: '',
      hangup_method: 'POST',
      fallback_answer_url: '',
      fallback_method: 'POST',
      message_url: '',
      message_method: 'POST',
      sip_transfer_url: '',
      sip_transfer_method: 'POST',
      default_number_app: false,
      default_endpoint_app: false,
      default_app: false,
      enabled: true,
      log_incoming_message: true,
      public_uri: false,
      sip_uri: `sip:${id}@app.${s.acct.sipDomain}`,
      sub_account: null,
      resource_uri: `/v1/Account/${s.acct.id}/Application/${id}/`,
    });
    expect(a.created_at).toMatch(ISO_DATE_TIME);
    expect(a.updated_at).toMatch(ISO_DATE_TIME);
  });

  it('answers 400 naming every bad field (required, https-only URLs, methods, types)', async () => {
    const r = await s.h.request('POST', s.base, {
      auth: s.acct,
      body: { answer_url: 'http://insecure.example/', hangup_method: 'PUT', enabled: 'yes', app_id: '1', hangup_url: 'ftp://x' },
    });
    expect(r.status).toBe(400);
    expectBadRequest(r.body, ['app_name', 'answer_url', 'hangup_method', 'enabled', 'app_id', 'hangup_url']);
  });

  it('lists with meta and pages within bounds', async () => {
    const ids = [await createApp({ app_name: 'a', answer_url: 'https://e.test/' }), await createApp({ app_name: 'b', answer_url: 'https://e.test/' })];
    const r = await s.h.request('GET', `${s.base}?limit=1&offset=1`, { auth: s.acct });
    expect(r.status).toBe(200);
    expect(keys(r.json)).toEqual(['api_id', 'meta', 'objects']);
    expect(r.json.meta).toEqual({ limit: 1, offset: 1, total_count: 2 });
    const objs = r.json.objects as Array<Record<string, unknown>>;
    expect(objs.map((o) => o.app_id)).toEqual([ids[1]]);
    expect(keys(objs[0])).toEqual(APPLICATION_FIELDS);
    for (const qs of ['limit=0', 'limit=101', 'offset=-1']) {
      const bad = await s.h.request('GET', `${s.base}?${qs}`, { auth: s.acct });
      expect(bad.status).toBe(400);
      expectBadRequest(bad.body, [qs.split('=')[0] ?? '']);
    }
  });

  it('updates only the supplied fields (202 {api_id, message}: the SDK UpdateApplicationResponse); fixed fields are 400', async () => {
    const id = await createApp({ app_name: 'IVR', answer_url: 'https://example.test/answer' });
    const r = await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, body: { app_name: 'Menu', hangup_url: 'https://example.test/hangup', hangup_method: 'GET' } });
    expect(r.status).toBe(202);
    expect(modelProblems('UpdateApplicationResponse', r.json)).toEqual([]);
    expect(r.json.message).toBe('changed');
    expect(await getApp(id)).toMatchObject({ app_name: 'Menu', hangup_url: 'https://example.test/hangup', hangup_method: 'GET', answer_url: 'https://example.test/answer' });
    const bad = await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, body: { app_id: '5', sub_account: 'SA1' } });
    expect(bad.status).toBe(400);
    expectBadRequest(bad.body, ['app_id', 'sub_account']);
  });

  it('answers 404 with the general error object for an unknown app_id', async () => {
    for (const [method, body] of [['GET', undefined], ['POST', { app_name: 'x' }], ['DELETE', undefined]] as const) {
      const r = await s.h.request(method, `${s.base}123456789/`, { auth: s.acct, body });
      expect(r.status).toBe(404);
      expectError(r.body, 'not_found');
    }
  });

  it('keeps at most one default_endpoint_app per account: setting it moves the flag', async () => {
    const first = await createApp({ app_name: 'one', answer_url: 'https://e.test/', default_endpoint_app: true });
    expect((await getApp(first)).default_endpoint_app).toBe(true);
    const second = await createApp({ app_name: 'two', answer_url: 'https://e.test/', default_endpoint_app: true });
    expect((await getApp(first)).default_endpoint_app).toBe(false);
    expect((await getApp(second)).default_endpoint_app).toBe(true);
    expect((await s.h.request('POST', `${s.base}${first}/`, { auth: s.acct, body: { default_endpoint_app: true } })).status).toBe(202);
    const list = await s.h.request('GET', s.base, { auth: s.acct });
    const flagged = (list.json.objects as Array<Record<string, unknown>>).filter((o) => o.default_endpoint_app === true).map((o) => o.app_id);
    expect(flagged).toEqual([first]);
    expect((await s.h.request('POST', `${s.base}${first}/`, { auth: s.acct, body: { default_endpoint_app: false } })).status).toBe(202);
    expect((await getApp(first)).default_endpoint_app).toBe(false);
  });

  it('an endpoint created without application gets the default endpoint app; explicit null means none', async () => {
    const none = await createEndpoint({ username: 'before' });
    expect(await endpointApp(none)).toBeNull();
    const def = await createApp({ app_name: 'Default', answer_url: 'https://e.test/default', default_endpoint_app: true });
    const other = await createApp({ app_name: 'Other', answer_url: 'https://e.test/other' });
    const withDefault = await createEndpoint({ username: 'dflt' });
    expect(await endpointApp(withDefault)).toEqual({ app_id: def, app_name: 'Default', answer_url: 'https://e.test/default', answer_method: 'POST' });
    const explicit = await createEndpoint({ username: 'explicit', application: Number(other) });
    expect((await endpointApp(explicit)) as Record<string, unknown>).toMatchObject({ app_id: other });
    const asString = await createEndpoint({ username: 'asstring', application: other });
    expect((await endpointApp(asString)) as Record<string, unknown>).toMatchObject({ app_id: other });
    const nulled = await createEndpoint({ username: 'nulled', application: null });
    expect(await endpointApp(nulled)).toBeNull();
  });

  it('deleting an application detaches it from its endpoints (204, then application null)', async () => {
    const id = await createApp({ app_name: 'Gone', answer_url: 'https://e.test/', default_endpoint_app: true });
    const ep1 = await createEndpoint({ username: 'one', application: Number(id) });
    const ep2 = await createEndpoint({ username: 'two' });
    const r = await s.h.request('DELETE', `${s.base}${id}/`, { auth: s.acct });
    expect(r.status).toBe(204);
    expect(r.text).toBe('');
    expect(await endpointApp(ep1)).toBeNull();
    expect(await endpointApp(ep2)).toBeNull();
    const list = await s.h.request('GET', `/api/v1/Account/${s.acct.id}/Endpoint/?application_id__isnull=true`, { auth: s.acct });
    expect((list.json.meta as Record<string, unknown>).total_count).toBe(2);
    expect((await s.h.request('GET', `/api/v1/Account/${s.acct.id}/Endpoint/?application_id__exact=${id}`, { auth: s.acct })).json.objects).toEqual([]);
    // The default went with it.
    expect(await endpointApp(await createEndpoint({ username: 'three' }))).toBeNull();
  });

  it("a sub-account's applications are its own: its endpoints default to its default app, not the parent's", async () => {
    const sub = await s.h.newSubAccount(s.acct);
    const subBase = `/api/v1/Account/${sub.id}/Application/`;
    const parentDefault = await createApp({ app_name: 'ParentDefault', answer_url: 'https://e.test/p', default_endpoint_app: true });
    const subDefault = await createApp({ app_name: 'SubDefault', answer_url: 'https://e.test/s', default_endpoint_app: true }, sub, subBase);
    // Both defaults hold: one per owner.
    expect((await getApp(parentDefault)).default_endpoint_app).toBe(true);
    expect((await getApp(subDefault)).default_endpoint_app).toBe(true);
    expect((await getApp(subDefault)).sub_account).toBe(sub.id);
    const ep = await createEndpoint({ username: 'subep' }, sub);
    expect((await endpointApp(ep, sub)) as Record<string, unknown>).toMatchObject({ app_id: subDefault });
    // The sub-account lists only its own applications; the parent sees all.
    const own = await s.h.request('GET', subBase, { auth: sub });
    expect((own.json.objects as Array<Record<string, unknown>>).map((o) => o.app_id)).toEqual([subDefault]);
    const all = await s.h.request('GET', s.base, { auth: s.acct });
    expect((all.json.meta as Record<string, unknown>).total_count).toBe(2);
    const filtered = await s.h.request('GET', `${s.base}?sub_account=${sub.id}`, { auth: s.acct });
    expect((filtered.json.objects as Array<Record<string, unknown>>).map((o) => o.app_id)).toEqual([subDefault]);
    // A main-account endpoint cannot use the sub-account's application.
    const r = await s.h.request('POST', `/api/v1/Account/${s.acct.id}/Endpoint/`, {
      auth: s.acct,
      body: { username: 'mainep', password: 'secret-pass-1', application: Number(subDefault) },
    });
    expect(r.status).toBe(400);
    expectBadRequest(r.body, ['application']);
  });

  it('Idempotency-Key on create replays the first response', async () => {
    const body = { app_name: 'Once', answer_url: 'https://e.test/' };
    const headers = { 'idempotency-key': 'app-key-1' };
    const a = await s.h.request('POST', s.base, { auth: s.acct, body, headers });
    const b = await s.h.request('POST', s.base, { auth: s.acct, body, headers });
    expect(b.status).toBe(201);
    expect(b.text).toBe(a.text);
    expect(((await s.h.request('GET', s.base, { auth: s.acct })).json.meta as Record<string, unknown>).total_count).toBe(1);
  });
});
