/**
 * Every Endpoint operation of the spec over real HTTP, on both stores: status
 * codes, exact field sets and types, every filter, pagination bounds, error
 * bodies, idempotency, and live registration state from the location store.
 */
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest';
import { computeHa1 } from '../../src/auth/digest.js';
import type { Aor } from '../../src/store/location/location.js';
import {
  STORE_KINDS,
  bindingWrite,
  registerBindings,
  startHarness,
  stopRedisServer,
  type Creds,
  type Harness,
  apiSuite,
} from '../support/api-harness.js';
import {
  ENDPOINT_LIST_FIELDS,
  ENDPOINT_RETRIEVE_FIELDS,
  ENDPOINT_RETRIEVE_REGISTERED_FIELDS,
  expectBadRequest,
  expectEndpointTypes,
  expectError,
  keys,
} from './shapes.js';

afterAll(stopRedisServer);

describe.each(STORE_KINDS)('Endpoint API (%s store)', (kind) => {
  const s = apiSuite(kind, 'Endpoint');
  afterEach(() => {
    vi.restoreAllMocks();
  });

  const create = async (body: Record<string, unknown>, headers: Record<string, string> = {}) =>
    s.h.request('POST', s.base, { auth: s.acct, body, headers });
  const createOk = async (body: Record<string, unknown>): Promise<string> => {
    const r = await create(body);
    expect(r.status, r.text).toBe(201);
    return String(r.json.endpoint_id);
  };
  const aorOf = (username: string): Aor => ({ domain: s.acct.sipDomain, user: username });

  describe('create (POST .../Endpoint/)', () => {
    it('answers 201 with exactly {api_id, message: "created", endpoint_id, sip_uri, resource_uri}', async () => {
      const r = await create({ username: 'alice', password: 'secret-pass-1', alias: 'Front-Desk_1' });
      expect(r.status).toBe(201);
      expect(keys(r.json)).toEqual(['api_id', 'endpoint_id', 'message', 'resource_uri', 'sip_uri']);
      expect(r.json.message).toBe('created');
      expect(r.json.api_id).toBe(r.headers.get('x-request-id'));
      expect(r.json.endpoint_id).toMatch(/^\d+$/);
      expect(r.json.sip_uri).toBe(`sip:alice@${s.acct.id.toLowerCase()}.sip.test`);
      expect(r.json.resource_uri).toBe(`/v1/Account/${s.acct.id}/Endpoint/${String(r.json.endpoint_id)}/`);
    });

    it('stores only HA1 values (MD5 and SHA-256 over username:realm:password), realm = account SIP domain', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      const cred = await s.h.credentials.get(s.acct.sipDomain, 'alice');
      expect(cred).toEqual({
        endpointId: id,
        ha1Md5: computeHa1('MD5', 'alice', s.acct.sipDomain, 'secret-pass-1'),
        ha1Sha256: computeHa1('SHA-256', 'alice', s.acct.sipDomain, 'secret-pass-1'),
      });
    });

    it('applies the spec defaults: alias = username, allow_* as specified, application null, unregistered', async () => {
      const id = await createOk({ username: 'bob', password: 'secret-pass-1' });
      const r = await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct });
      expect(r.status).toBe(200);
      expect(r.json).toMatchObject({
        username: 'bob',
        alias: 'bob',
        application: null,
        allow_voice: true,
        allow_message: true,
        allow_video: false,
        allow_same_domain: true,
        allow_other_domains: false,
        allow_phones: true,
        allow_apps: true,
        sub_account: null,
        sip_registered: 'false',
      });
    });

    it('keeps every allow_* flag given at creation', async () => {
      const flags = {
        allow_voice: false,
        allow_message: false,
        allow_video: true,
        allow_same_domain: false,
        allow_other_domains: true,
        allow_phones: false,
        allow_apps: false,
      };
      const id = await createOk({ username: 'flags', password: 'secret-pass-1', ...flags });
      const r = await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct });
      expect(r.json).toMatchObject(flags);
    });

    it('answers 400 naming every bad field at once', async () => {
      const r = await create({
        username: 'al-ice',
        password: 'short',
        alias: 'bad alias!',
        allow_voice: 'yes',
        application: 'not-a-number',
        sub_account: 'SA_NOPE',
        unknown_field: 1,
      });
      expect(r.status).toBe(400);
      const d = expectBadRequest(r.body, ['username', 'password', 'alias', 'allow_voice', 'application', 'sub_account', 'unknown_field']);
      expect(d.username).toMatch(/letters and digits/);
      expect(d.password).toMatch(/8/);
    });

    it('answers 400 when username or password is missing', async () => {
      const r = await create({});
      expect(r.status).toBe(400);
      expectBadRequest(r.body, ['username', 'password']);
    });

    it.each([
      ['hyphen', 'al-ice'],
      ['underscore', 'al_ice'],
      ['space', 'al ice'],
      ['symbol', 'al@ice'],
      ['empty', ''],
      ['non-ASCII letter', 'alicé'],
    ])('rejects a username with a %s (400)', async (_what, username) => {
      const r = await create({ username, password: 'secret-pass-1' });
      expect(r.status).toBe(400);
      expectBadRequest(r.body, ['username']);
    });

    it('does not coerce JSON types: a number username and a "true" string flag are 400', async () => {
      const r = await create({ username: 12345, password: 'secret-pass-1', allow_video: 'true' });
      expect(r.status).toBe(400);
      expectBadRequest(r.body, ['username', 'allow_video']);
    });

    it('answers 409 with the general error object when the username is taken (also in another case)', async () => {
      await createOk({ username: 'alice', password: 'secret-pass-1' });
      for (const username of ['alice', 'ALICE']) {
        const r = await create({ username, password: 'secret-pass-2' });
        expect(r.status).toBe(409);
        expectError(r.body, 'username_taken');
      }
    });

    it('answers 400 when application names no application of the account', async () => {
      const r = await create({ username: 'alice', password: 'secret-pass-1', application: 123456789 });
      expect(r.status).toBe(400);
      expectBadRequest(r.body, ['application']);
    });
  });

  describe('retrieve (GET .../Endpoint/<id>/)', () => {
    it('answers 200 with every field of the spec table and the stated types (unregistered)', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      const r = await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct });
      expect(r.status).toBe(200);
      expect(r.headers.get('content-type')).toMatch(/^application\/json/);
      expect(keys(r.json)).toEqual(ENDPOINT_RETRIEVE_FIELDS);
      expectEndpointTypes(r.json, true);
      expect(r.json.api_id).toBe(r.headers.get('x-request-id'));
      expect(r.json.sip_registrations).toEqual([]);
      expect(r.text).not.toContain('secret-pass-1');
      expect(r.json).not.toHaveProperty('password');
    });

    it('answers 404 with exactly {api_id, error, message, endpoint_id}', async () => {
      const r = await s.h.request('GET', `${s.base}999999999/`, { auth: s.acct });
      expect(r.status).toBe(404);
      expectError(r.body, 'not_found', ['endpoint_id']);
      expect(r.json.endpoint_id).toBe('999999999');
    });

    it('shows live registration state: contact host:port, expires, user agent and sip_registration', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      const expiresAt = Date.now() + 120_000;
      await registerBindings(s.h.location, aorOf('alice'), [
        bindingWrite({
          uri: 'sip:alice@198.51.100.7:5062;transport=tcp',
          expiresAt,
          userAgent: 'Softphone/2.1',
          received: 'sip:198.51.100.7:40000;transport=tcp',
          transport: 'tcp',
          path: '<sip:edge.example;lr>',
        }),
      ]);
      const r = await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct });
      expect(r.status).toBe(200);
      expect(keys(r.json)).toEqual(ENDPOINT_RETRIEVE_REGISTERED_FIELDS);
      expectEndpointTypes(r.json, true);
      expect(r.json.sip_registered).toBe('true');
      expect(r.json.sip_contact).toBe('198.51.100.7:5062');
      expect(r.json.sip_expires).toBe(new Date(expiresAt).toISOString());
      expect(r.json.sip_user_agent).toBe('Softphone/2.1');
      expect(r.json.sip_registration).toEqual({
        contact: 'sip:alice@198.51.100.7:5062;transport=tcp',
        expires: new Date(expiresAt).toISOString(),
        user_agent: 'Softphone/2.1',
        received: 'sip:198.51.100.7:40000;transport=tcp',
        path: '<sip:edge.example;lr>',
      });
      expect(r.json.sip_registrations).toHaveLength(1);
    });

    it('speaks for the most recently refreshed binding and lists all in sip_registrations', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      const now = Date.now();
      await registerBindings(s.h.location, aorOf('alice'), [bindingWrite({ uri: 'sip:alice@192.0.2.1', expiresAt: now + 60_000, userAgent: 'Old' })], now - 1000);
      await registerBindings(s.h.location, aorOf('alice'), [bindingWrite({ uri: 'sip:alice@192.0.2.2:5080', expiresAt: now + 90_000, userAgent: 'New' })], now);
      const r = await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct });
      expect(r.json.sip_contact).toBe('192.0.2.2:5080');
      expect(r.json.sip_user_agent).toBe('New');
      const all = r.json.sip_registrations as Array<Record<string, unknown>>;
      expect(all.map((b) => b.contact)).toEqual(['sip:alice@192.0.2.2:5080', 'sip:alice@192.0.2.1']);
      // A URI without a port shows the default of its transport.
      expect(all[1]?.sip_contact).toBe('192.0.2.1:5060');
    });

    it('never shows an expired binding as registered, whether or not a timer ran', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      const past = Date.now() - 10_000;
      await registerBindings(s.h.location, aorOf('alice'), [bindingWrite({ uri: 'sip:alice@192.0.2.1', expiresAt: past + 5_000 })], past);
      const r = await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct });
      expect(r.json.sip_registered).toBe('false');
      expect(r.json.sip_contact).toBeNull();
      expect('sip_registration' in r.json).toBe(false);
    });
  });

  describe('list (GET .../Endpoint/)', () => {
    let appId: string;
    let sub: Creds;
    const ids: Record<string, string> = {};

    beforeEach(async () => {
      const app = await s.h.request('POST', `/api/v1/Account/${s.acct.id}/Application/`, {
        auth: s.acct,
        body: { app_name: 'IVR', answer_url: 'https://example.test/answer' },
      });
      appId = String(app.json.app_id);
      sub = await s.h.newSubAccount(s.acct);
      // Lists are ordered by creation time, ties (the same millisecond) by endpoint id: a
      // few ms apart, the expected order below is the creation order on any machine.
      const apart = (): Promise<void> => new Promise((r) => setTimeout(r, 3));
      ids.alice = await createOk({ username: 'alice', password: 'secret-pass-1', alias: 'front-desk' });
      await apart();
      ids.alicia = await createOk({ username: 'alicia', password: 'secret-pass-1', alias: 'back_office' });
      await apart();
      ids.bob = await createOk({ username: 'bob', password: 'secret-pass-1', application: Number(appId) });
      await apart();
      ids.carol = await createOk({ username: 'carol', password: 'secret-pass-1', sub_account: sub.id });
    });

    const list = async (qs: string) => s.h.request('GET', `${s.base}${qs}`, { auth: s.acct });
    const names = (r: { json: Record<string, unknown> }): string[] =>
      (r.json.objects as Array<Record<string, unknown>>).map((o) => String(o.username));

    it('answers {api_id, meta {limit, offset, total_count}, objects} with registered and unregistered endpoints', async () => {
      await registerBindings(s.h.location, aorOf('bob'), [bindingWrite({ uri: 'sip:bob@192.0.2.9:5070', expiresAt: Date.now() + 60_000 })]);
      const r = await list('');
      expect(r.status).toBe(200);
      expect(keys(r.json)).toEqual(['api_id', 'meta', 'objects']);
      expect(r.json.meta).toEqual({ limit: 20, offset: 0, total_count: 4 });
      const objs = r.json.objects as Array<Record<string, unknown>>;
      expect(objs.map((o) => o.username)).toEqual(['alice', 'alicia', 'bob', 'carol']);
      for (const o of objs) {
        expect(keys(o)).toEqual(ENDPOINT_LIST_FIELDS);
        expectEndpointTypes(o, false);
      }
      const bob = objs.find((o) => o.username === 'bob');
      expect(bob).toMatchObject({ sip_registered: 'true', sip_contact: '192.0.2.9:5070', sip_user_agent: 'TestPhone/1.0' });
      expect(bob?.application).toEqual({ app_id: appId, app_name: 'IVR' });
      expect(objs.find((o) => o.username === 'alice')).toMatchObject({ sip_registered: 'false', sip_contact: null, sip_expires: null });
      expect(objs.find((o) => o.username === 'carol')?.sub_account).toBe(sub.id);
    });

    it('reads live state for the whole page with one lookupMany call and no per-endpoint lookup', async () => {
      const many = vi.spyOn(s.h.location, 'lookupMany');
      const one = vi.spyOn(s.h.location, 'lookup');
      const r = await list('');
      expect(r.status).toBe(200);
      expect(many).toHaveBeenCalledTimes(1);
      expect(many.mock.calls[0]?.[0]).toHaveLength(4);
      expect(one).not.toHaveBeenCalled();
    });

    it.each([
      ['username__contains=lic', ['alice', 'alicia']],
      ['username__exact=alice', ['alice']],
      ['username__exact=ALICE', ['alice']],
      ['username__startswith=ali', ['alice', 'alicia']],
      ['username__startswith=b', ['bob']],
      ['alias__contains=desk', ['alice']],
      ['alias__exact=back_office', ['alicia']],
      ['alias__exact=bob', ['bob']],
      ['application_id__isnull=true', ['alice', 'alicia', 'carol']],
      ['application_id__isnull=false', ['bob']],
      ['username__startswith=ali&alias__contains=office', ['alicia']],
      ['username__contains=zzz', []],
    ])('filters with %s', async (qs, expected) => {
      const r = await list(`?${qs}`);
      expect(r.status, r.text).toBe(200);
      expect(names(r)).toEqual(expected);
      expect((r.json.meta as Record<string, unknown>).total_count).toBe(expected.length);
    });

    it('filters with application_id__exact and sub_account', async () => {
      expect(names(await list(`?application_id__exact=${appId}`))).toEqual(['bob']);
      expect(names(await list(`?sub_account=${sub.id}`))).toEqual(['carol']);
      expect(names(await list('?sub_account=SANOSUCHSUBACCOUNT'))).toEqual([]);
    });

    it('pages with limit and offset; total_count counts every match', async () => {
      const r = await list('?limit=2&offset=1');
      expect(r.json.meta).toEqual({ limit: 2, offset: 1, total_count: 4 });
      expect(names(r)).toEqual(['alicia', 'bob']);
      const past = await list('?offset=10');
      expect(past.json.meta).toEqual({ limit: 20, offset: 10, total_count: 4 });
      expect(names(past)).toEqual([]);
      const filtered = await list('?username__startswith=ali&limit=1&offset=1');
      expect(filtered.json.meta).toEqual({ limit: 1, offset: 1, total_count: 2 });
      expect(names(filtered)).toEqual(['alicia']);
      expect((await list('?limit=100')).status).toBe(200);
      expect((await list('?limit=1')).status).toBe(200);
    });

    it.each([
      ['limit=0', ['limit']],
      ['limit=101', ['limit']],
      ['offset=-1', ['offset']],
      ['limit=abc', ['limit']],
      ['limit=1.5', ['limit']],
      ['limit=0&offset=-5', ['limit', 'offset']],
      ['application_id__exact=x', ['application_id__exact']],
      ['application_id__isnull=maybe', ['application_id__isnull']],
    ])('answers 400 for %s naming %j', async (qs, fields) => {
      const r = await list(`?${qs}`);
      expect(r.status).toBe(400);
      expectBadRequest(r.body, fields);
    });
  });

  describe('update (POST .../Endpoint/<id>/)', () => {
    it('answers 202 with no body and changes only the supplied fields', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1', alias: 'one', allow_video: false });
      const before = (await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct })).json;
      await new Promise((r) => setTimeout(r, 5));
      const r = await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, body: { alias: 'two', allow_video: true } });
      expect(r.status).toBe(202);
      expect(r.text).toBe('');
      const after = (await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct })).json;
      expect(after.alias).toBe('two');
      expect(after.allow_video).toBe(true);
      for (const f of ['username', 'allow_voice', 'allow_message', 'allow_same_domain', 'created_at', 'sip_uri']) {
        expect(after[f], f).toEqual(before[f]);
      }
      expect(after.updated_at).not.toBe(before.updated_at);
    });

    it('answers 400 naming each locked field (and any other bad field)', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      const r = await s.h.request('POST', `${s.base}${id}/`, {
        auth: s.acct,
        body: {
          username: 'x',
          endpoint_id: '1',
          domain: 'd',
          allow_same_domain: true,
          allow_other_domains: true,
          allow_phones: true,
          allow_apps: true,
          password: 'short',
        },
      });
      expect(r.status).toBe(400);
      const d = expectBadRequest(r.body, [
        'username',
        'endpoint_id',
        'domain',
        'allow_same_domain',
        'allow_other_domains',
        'allow_phones',
        'allow_apps',
        'password',
      ]);
      expect(d.username).toMatch(/locked/);
      // Nothing changed.
      expect((await s.h.credentials.get(s.acct.sipDomain, 'alice'))?.ha1Md5).toBe(computeHa1('MD5', 'alice', s.acct.sipDomain, 'secret-pass-1'));
    });

    it('answers 404 with no body for an unknown endpoint', async () => {
      const r = await s.h.request('POST', `${s.base}999999999/`, { auth: s.acct, body: { alias: 'x' } });
      expect(r.status).toBe(404);
      expect(r.text).toBe('');
    });

    it('a password change stores the new HA1s, removes every live binding at once and reports the AOR', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      const now = Date.now();
      await registerBindings(s.h.location, aorOf('alice'), [
        bindingWrite({ uri: 'sip:alice@192.0.2.1', expiresAt: now + 60_000 }),
        bindingWrite({ uri: 'sip:alice@192.0.2.2', expiresAt: now + 60_000 }),
      ]);
      expect((await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct })).json.sip_registered).toBe('true');
      const r = await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, body: { password: 'new-secret-2' } });
      expect(r.status).toBe(202);
      expect(await s.h.location.lookup(aorOf('alice'))).toEqual([]);
      expect(s.h.removed).toEqual([aorOf('alice')]);
      expect((await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct })).json.sip_registered).toBe('false');
      const cred = await s.h.credentials.get(s.acct.sipDomain, 'alice');
      expect(cred?.ha1Md5).toBe(computeHa1('MD5', 'alice', s.acct.sipDomain, 'new-secret-2'));
      expect(cred?.ha1Sha256).toBe(computeHa1('SHA-256', 'alice', s.acct.sipDomain, 'new-secret-2'));
    });

    it('an update without a password leaves bindings alone', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      await registerBindings(s.h.location, aorOf('alice'), [bindingWrite({ uri: 'sip:alice@192.0.2.1', expiresAt: Date.now() + 60_000 })]);
      expect((await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, body: { alias: 'x' } })).status).toBe(202);
      expect(await s.h.location.lookup(aorOf('alice'))).toHaveLength(1);
      expect(s.h.removed).toEqual([]);
    });

    it('attaches and detaches an application (null)', async () => {
      const app = await s.h.request('POST', `/api/v1/Account/${s.acct.id}/Application/`, {
        auth: s.acct,
        body: { app_name: 'Main', answer_url: 'https://example.test/a', answer_method: 'GET' },
      });
      const appId = String(app.json.app_id);
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      expect((await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, body: { application: Number(appId) } })).status).toBe(202);
      const got = await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct });
      expect(got.json.application).toEqual({ app_id: appId, app_name: 'Main', answer_url: 'https://example.test/a', answer_method: 'GET' });
      expect((await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, body: { application: null } })).status).toBe(202);
      expect((await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct })).json.application).toBeNull();
      const bad = await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, body: { application: 42 } });
      expect(bad.status).toBe(400);
      expectBadRequest(bad.body, ['application']);
    });
  });

  describe('delete (DELETE .../Endpoint/<id>/)', () => {
    it('answers 204 with an empty body, unregisters at once, drops the credential and retires the username', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      await registerBindings(s.h.location, aorOf('alice'), [bindingWrite({ uri: 'sip:alice@192.0.2.1', expiresAt: Date.now() + 60_000 })]);
      const r = await s.h.request('DELETE', `${s.base}${id}/`, { auth: s.acct });
      expect(r.status).toBe(204);
      expect(r.text).toBe('');
      expect(await s.h.location.lookup(aorOf('alice'))).toEqual([]);
      expect(await s.h.credentials.get(s.acct.sipDomain, 'alice')).toBeNull();
      expect(s.h.removed).toEqual([aorOf('alice')]);
      const again = await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct });
      expect(again.status).toBe(404);
      // The SIP URI never comes back, in any letter case.
      for (const username of ['alice', 'Alice']) {
        const re = await create({ username, password: 'secret-pass-1' });
        expect(re.status).toBe(409);
        expectError(re.body, 'username_taken');
      }
    });

    it('answers 404 with no body when missing or already deleted', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      expect((await s.h.request('DELETE', `${s.base}${id}/`, { auth: s.acct })).status).toBe(204);
      for (const path of [`${s.base}${id}/`, `${s.base}999999999/`]) {
        const r = await s.h.request('DELETE', path, { auth: s.acct });
        expect(r.status).toBe(404);
        expect(r.text).toBe('');
      }
    });
  });

  describe('Idempotency-Key on create', () => {
    it('the same key and body within 24 h return the first response again and create nothing', async () => {
      const body = { username: 'alice', password: 'secret-pass-1' };
      const key = { 'idempotency-key': 'f0b0c4a2-1f2e-4b8e-9a55-0c6f3b0d9e11' };
      const first = await create(body, key);
      expect(first.status).toBe(201);
      const second = await create(body, key);
      expect(second.status).toBe(201);
      expect(second.text).toBe(first.text);
      expect(second.headers.get('idempotent-replayed')).toBe('true');
      const list = await s.h.request('GET', s.base, { auth: s.acct });
      expect((list.json.meta as Record<string, unknown>).total_count).toBe(1);
    });

    it('the same key with another body is 422 with the general error object', async () => {
      const key = { 'idempotency-key': 'key-1' };
      expect((await create({ username: 'alice', password: 'secret-pass-1' }, key)).status).toBe(201);
      const r = await create({ username: 'bob', password: 'secret-pass-1' }, key);
      expect(r.status).toBe(422);
      expectError(r.body, 'idempotency_key_reused');
      expect(((await s.h.request('GET', s.base, { auth: s.acct })).json.meta as Record<string, unknown>).total_count).toBe(1);
    });

    it('a refused request does not consume its key', async () => {
      const key = { 'idempotency-key': 'key-2' };
      expect((await create({ username: 'bad-name', password: 'secret-pass-1' }, key)).status).toBe(400);
      expect((await create({ username: 'good', password: 'secret-pass-1' }, key)).status).toBe(201);
    });

    it('keys are per account: another account may use the same key', async () => {
      const other = await s.h.newAccount();
      const key = { 'idempotency-key': 'shared-key' };
      expect((await create({ username: 'alice', password: 'secret-pass-1' }, key)).status).toBe(201);
      const r = await s.h.request('POST', `/api/v1/Account/${other.id}/Endpoint/`, {
        auth: other,
        body: { username: 'alice', password: 'secret-pass-1' },
        headers: key,
      });
      expect(r.status).toBe(201);
      expect(r.headers.get('idempotent-replayed')).toBeNull();
    });

    it('rejects a malformed key with 400', async () => {
      const r = await create({ username: 'alice', password: 'secret-pass-1' }, { 'idempotency-key': 'x'.repeat(300) });
      expect(r.status).toBe(400);
      expectBadRequest(r.body, ['Idempotency-Key']);
    });
  });
});
