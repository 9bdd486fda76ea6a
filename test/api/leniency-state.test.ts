/**
 * Issue 13 on both stores: what SDKs send that must not fail (an empty JSON
 * body, cache-buster query parameters, usernames in another case), and the
 * endpoint's registration state with several devices (`sip_expires` is the
 * last expiry, `sip_registered` filter).
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { Aor } from '../../src/store/location/location.js';
import { STORE_KINDS, bindingWrite, registerBindings, startHarness, stopRedisServer, type Creds, type Harness, apiSuite } from '../support/api-harness.js';
import { expectBadRequest } from './shapes.js';

afterAll(stopRedisServer);

describe.each(STORE_KINDS)('API leniencies and registration state (%s store)', (kind) => {
  const s = apiSuite(kind, 'Endpoint');

  const createOk = async (body: Record<string, unknown>): Promise<string> => {
    const r = await s.h.request('POST', s.base, { auth: s.acct, body });
    expect(r.status, r.text).toBe(201);
    return String(r.json.endpoint_id);
  };
  const aorOf = (username: string): Aor => ({ domain: s.acct.sipDomain, user: username });
  const names = (r: { json: Record<string, unknown> }): string[] =>
    (r.json.objects as Array<Record<string, unknown>>).map((o) => String(o.username));
  const JSON_HEADER = { 'content-type': 'application/json' };

  describe('an empty body with Content-Type: application/json is no body', () => {
    it('DELETE answers 204, then 404, as without the header', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      const first = await s.h.request('DELETE', `${s.base}${id}/`, { auth: s.acct, raw: '', headers: JSON_HEADER });
      expect(first.status, first.text).toBe(204);
      const again = await s.h.request('DELETE', `${s.base}${id}/`, { auth: s.acct, raw: '', headers: JSON_HEADER });
      expect(again.status).toBe(404);
      expect((await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct })).status).toBe(404);
    });

    it('an update with an empty body (or {}) answers 400 naming the problem and changes nothing', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1', alias: 'Desk' });
      for (const raw of ['', '  ', '{}']) {
        const r = await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, raw, headers: JSON_HEADER });
        expect(r.status, `body ${JSON.stringify(raw)}`).toBe(400);
        expectBadRequest(r.body, ['body']);
        const details = (r.json as { details: Record<string, string> }).details;
        expect(details.body).toMatch(/no field to change/);
        expect(details.body).toMatch(/alias/);
      }
      const after = await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct });
      expect(after.json.alias).toBe('Desk');
    });

    it('malformed JSON is still 400 and a non-empty body still parses', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      const bad = await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, raw: '{"alias":', headers: JSON_HEADER });
      expect(bad.status).toBe(400);
      const ok = await s.h.request('POST', `${s.base}${id}/`, { auth: s.acct, raw: '{"alias":"Phone"}', headers: JSON_HEADER });
      expect(ok.status, ok.text).toBe(202);
      expect((await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct })).json.alias).toBe('Phone');
    });
  });

  describe('unknown query parameters on lists are ignored', () => {
    it('Endpoint, Application and Subaccount lists answer as without them', async () => {
      await createOk({ username: 'alice', password: 'secret-pass-1' });
      await createOk({ username: 'bob', password: 'secret-pass-1' });
      const paths = [s.base, `/api/v1/Account/${s.acct.id}/Application/`, `/api/v1/Account/${s.acct.id}/Subaccount/`];
      for (const path of paths) {
        const plain = await s.h.request('GET', path, { auth: s.acct });
        const busted = await s.h.request('GET', `${path}?_=1700000000&no_such_filter=1&limit=20`, { auth: s.acct });
        expect(busted.status, `${path} ${busted.text}`).toBe(200);
        expect(busted.json.meta).toEqual(plain.json.meta);
        expect(busted.json.objects).toEqual(plain.json.objects);
      }
      // Known parameters are still validated.
      expect((await s.h.request('GET', `${s.base}?_=1&limit=0`, { auth: s.acct })).status).toBe(400);
    });
  });

  describe('username__exact and alias__exact compare ignoring case, as uniqueness does', () => {
    it('finds the endpoint whatever the case of the query', async () => {
      await createOk({ username: 'Alice', password: 'secret-pass-1', alias: 'Front_Desk' });
      await createOk({ username: 'bob', password: 'secret-pass-1', alias: 'Back' });
      for (const q of ['username__exact=alice', 'username__exact=ALICE', 'username__exact=Alice', 'alias__exact=front_desk', 'alias__exact=FRONT_DESK']) {
        const r = await s.h.request('GET', `${s.base}?${q}`, { auth: s.acct });
        expect(r.status).toBe(200);
        expect(names(r), q).toEqual(['Alice']);
        expect(r.json.meta).toMatchObject({ total_count: 1 });
      }
      expect(names(await s.h.request('GET', `${s.base}?username__exact=alic`, { auth: s.acct }))).toEqual([]);
    });
  });

  describe('registration state with several devices', () => {
    it('sip_expires is the last expiry over the live bindings; contact and user agent come from the latest REGISTER', async () => {
      const id = await createOk({ username: 'alice', password: 'secret-pass-1' });
      const now = Date.now();
      // The long-lived device registers first, the short one last.
      await registerBindings(s.h.location, aorOf('alice'), [bindingWrite({ uri: 'sip:alice@192.0.2.1:5060', expiresAt: now + 300_000, userAgent: 'Desk/1' })], now);
      await registerBindings(
        s.h.location,
        aorOf('alice'),
        [bindingWrite({ uri: 'sip:alice@192.0.2.2:5062', expiresAt: now + 60_000, userAgent: 'Mobile/2' })],
        now + 5,
      );
      const one = await s.h.request('GET', `${s.base}${id}/`, { auth: s.acct });
      const listed = (await s.h.request('GET', s.base, { auth: s.acct })).json.objects as Array<Record<string, unknown>>;
      for (const view of [one.json, listed[0] as Record<string, unknown>]) {
        expect(view.sip_registered).toBe('true');
        expect(Math.abs(Date.parse(String(view.sip_expires)) - (now + 300_000))).toBeLessThan(1000);
        expect(view.sip_contact).toBe('192.0.2.2:5062');
        expect(view.sip_user_agent).toBe('Mobile/2');
      }
      // After the short binding lapses the endpoint is still registered until the long one's expiry.
      const later = now + 120_000;
      const state = await s.h.location.lookup(aorOf('alice'), later);
      expect(state.map((b) => b.userAgent)).toEqual(['Desk/1']);
    });

    it('sip_registered=true|false lists who is online, with paging and total_count', async () => {
      const now = Date.now();
      const usernames = ['u1', 'u2', 'u3', 'u4', 'u5'];
      for (const u of usernames) await createOk({ username: u, password: 'secret-pass-1' });
      for (const u of ['u2', 'u4', 'u5']) {
        await registerBindings(s.h.location, aorOf(u), [bindingWrite({ uri: `sip:${u}@192.0.2.9:5060`, expiresAt: now + 300_000 })], now);
      }
      const on = await s.h.request('GET', `${s.base}?sip_registered=true`, { auth: s.acct });
      expect(on.status, on.text).toBe(200);
      expect(names(on)).toEqual(['u2', 'u4', 'u5']);
      expect(on.json.meta).toEqual({ limit: 20, offset: 0, total_count: 3 });
      for (const o of on.json.objects as Array<Record<string, unknown>>) expect(o.sip_registered).toBe('true');
      const off = await s.h.request('GET', `${s.base}?sip_registered=false`, { auth: s.acct });
      expect(names(off)).toEqual(['u1', 'u3']);
      expect(off.json.meta).toMatchObject({ total_count: 2 });
      const paged = await s.h.request('GET', `${s.base}?sip_registered=true&limit=1&offset=1`, { auth: s.acct });
      expect(names(paged)).toEqual(['u4']);
      expect(paged.json.meta).toEqual({ limit: 1, offset: 1, total_count: 3 });
      const combined = await s.h.request('GET', `${s.base}?sip_registered=true&username__startswith=u5`, { auth: s.acct });
      expect(names(combined)).toEqual(['u5']);
      const bad = await s.h.request('GET', `${s.base}?sip_registered=maybe`, { auth: s.acct });
      expect(bad.status).toBe(400);
      expectBadRequest(bad.body, ['sip_registered']);
    });
  });
});
