/**
 * The trunk routes in process (docs/trunks.md), on the memory and Redis stores: CRUD
 * round trips with the vendor's synonyms, credentials whose password is never
 * answered nor logged, 400s for bad CIDRs / non-SIP URIs / bad trunk types, another
 * account's trunk not found, and deletes refused while numbers route to a trunk.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { startHarness, STORE_KINDS, stopRedisServer, type Creds, type Harness } from '../support/api-harness.js';

afterAll(() => stopRedisServer());

describe.each(STORE_KINDS)('trunks API on %s', (kind) => {
  let h: Harness;
  let a: Creds & { sipDomain: string };
  let logs = '';
  const numbersOf = new Map<string, string[]>();
  const callsOf = new Map<string, number>();
  beforeAll(async () => {
    const logger = createLogger('debug', { write: (line: string) => void (logs += line) });
    h = await startHarness(kind, {}, {
      logger,
      trunkDeps: {
        numbersUsing: async (_authId, trunkId) => numbersOf.get(trunkId) ?? [],
        activeCalls: async (trunkId) => callsOf.get(trunkId) ?? 0,
      },
    });
  });
  afterAll(async () => {
    await h.close();
  });
  beforeEach(async () => {
    a = await h.newAccount();
  });
  const base = (c: Creds = a): string => `/api/v1/Account/${c.id}`;
  const req = (method: string, path: string, body?: unknown, auth: Creds = a) => h.request(method, path, { auth, body });
  const newTrunk = async (body: Record<string, unknown> = {}, c: Creds = a): Promise<Record<string, unknown>> => {
    const r = await req('POST', `${base(c)}/trunks`, { name: 'carrier', ...body }, c);
    expect(r.status, r.text).toBe(201);
    return r.json;
  };

  it('trunk CRUD with the vendor synonyms, answered under both names', async () => {
    const t = await newTrunk({ trunk_direction: 'inbound', trunk_status: 'inactive', concurrent_calls_limit: 10, cps_limit: 3, transport: 'tcp', recording: true });
    const id = String(t.trunk_id);
    expect(t).toMatchObject({
      account_id: a.id,
      trunk_type: 'INBOUND',
      trunk_direction: 'inbound',
      enabled: false,
      trunk_status: 'inactive',
      max_concurrent_calls: 10,
      concurrent_calls_limit: 10,
      cps_limit: 3,
      transport: 'tcp',
      recording: true,
      sip_domain: `${id}.sip.test`,
      trunk_domain: `${id}.sip.test`,
    });
    const got = await req('GET', `${base()}/trunks/${id}`);
    expect(got.status).toBe(200);
    expect(got.json.created_at).toBe(t.created_at);
    const put = await req('PUT', `${base()}/trunks/${id}`, { trunk_type: 'OUTBOUND', enabled: true, max_concurrent_calls: 4, name: 'renamed' });
    expect(put.status, put.text).toBe(200);
    expect(put.json).toMatchObject({ trunk_type: 'OUTBOUND', trunk_direction: 'outbound', enabled: true, trunk_status: 'active', max_concurrent_calls: 4, concurrent_calls_limit: 4, name: 'renamed', cps_limit: 3 });
    const vendorPut = await req('PUT', `${base()}/trunks/${id}`, { trunk_status: 'disabled' });
    expect(vendorPut.json.enabled).toBe(false);
    await newTrunk({ trunk_type: 'OUTBOUND', name: 'second' });
    const list = await req('GET', `${base()}/trunks?limit=1`);
    expect(list.json.meta).toMatchObject({ limit: 1, offset: 0, total: 2 });
    expect((list.json.objects as Array<Record<string, unknown>>).map((x) => x.name)).toEqual(['renamed']);
    // Idempotency-Key: the same create again answers the first trunk and creates nothing.
    const key = randomUUID();
    const once = await h.request('POST', `${base()}/trunks`, { auth: a, body: { name: 'idem' }, headers: { 'idempotency-key': key } });
    const twice = await h.request('POST', `${base()}/trunks`, { auth: a, body: { name: 'idem' }, headers: { 'idempotency-key': key } });
    expect([once.status, twice.status]).toEqual([201, 201]);
    expect(twice.headers.get('idempotent-replayed')).toBe('true');
    expect(twice.json.trunk_id).toBe(once.json.trunk_id);
    expect(((await req('GET', `${base()}/trunks`)).json.objects as unknown[]).length).toBe(3);
    const del = await req('DELETE', `${base()}/trunks/${id}`);
    expect(del.status).toBe(204);
    expect((await req('GET', `${base()}/trunks/${id}`)).status).toBe(404);
  });

  it('credentials: created, listed, updated and deleted; the password never answered nor logged; usernames unique (409)', async () => {
    const t = await newTrunk({ trunk_type: 'OUTBOUND' });
    const username = `gw${randomUUID().slice(0, 8)}`;
    const password = `Pw-${randomUUID()}`;
    const c = await req('POST', `${base()}/credentials`, { trunk_id: t.trunk_id, username, password });
    expect(c.status, c.text).toBe(201);
    expect(c.json).toMatchObject({ trunk_id: t.trunk_id, username, realm: 'sip.test', enabled: true, account_id: a.id });
    const id = String(c.json.id);
    const texts = [c.text];
    texts.push((await req('GET', `${base()}/trunks/credentials`)).text);
    const one = await req('GET', `${base()}/credentials/${id}`);
    expect(one.json).toMatchObject({ id, username, trunk_id: t.trunk_id });
    texts.push(one.text);
    texts.push((await req('GET', `${base()}/trunks/${String(t.trunk_id)}`)).text);
    const newPassword = `Pw2-${randomUUID()}`;
    const up = await req('PUT', `${base()}/credentials/${id}`, { password: newPassword });
    expect(up.status, up.text).toBe(200);
    texts.push(up.text);
    for (const text of texts) {
      expect(text).not.toContain(password);
      expect(text).not.toContain(newPassword);
      expect(text).not.toMatch(/"password"|ha1|sealed/i);
    }
    expect(JSON.parse(texts[3] as string).credential_uuid).toBe(id);
    expect(logs).not.toContain(password);
    expect(logs).not.toContain(newPassword);
    expect(logs).toContain(`/credentials/${id}`); // the capture sees these requests

    const b = await h.newAccount();
    const tb = await newTrunk({}, b);
    const dup = await req('POST', `${base(b)}/credentials`, { trunk_id: tb.trunk_id, username: username.toUpperCase(), password: 'x-password' }, b);
    expect(dup.status).toBe(409);
    expect(dup.json.error).toBe('username_taken');
    expect(dup.text).not.toContain('x-password');
    expect((await req('DELETE', `${base()}/credentials/${id}`)).status).toBe(204);
    expect((await req('POST', `${base(b)}/credentials`, { trunk_id: tb.trunk_id, username, password: 'x-password' }, b)).status).toBe(201);
  });

  it('IP ACLs (IPv4/IPv6, CIDR or plain) and origination URIs round trip; bad input is 400 naming the field', async () => {
    const t = await newTrunk({ trunk_type: 'INBOUND' });
    const v4 = await req('POST', `${base()}/ip-acl`, { trunk_id: t.trunk_id, name: 'carrier', ip_address: '192.0.2.17/28' });
    expect(v4.status, v4.text).toBe(201);
    expect(v4.json.ip_address).toBe('192.0.2.16/28');
    const v6 = await req('POST', `${base()}/ip-acl`, { trunk_id: t.trunk_id, ip_address: '2001:DB8:0:0::1' });
    expect(v6.json.ip_address).toBe('2001:db8::1/128');
    const list = await req('GET', `${base()}/trunks/ip-acl`);
    expect((list.json.objects as unknown[]).length).toBe(2);
    const upd = await req('PUT', `${base()}/ip-acl/${String(v6.json.id)}`, { name: 'v6', ip_address: '2001:db8:1::/48' });
    expect(upd.json).toMatchObject({ name: 'v6', ip_address: '2001:db8:1::/48' });

    const u = await req('POST', `${base()}/origination-uris`, { trunk_id: t.trunk_id, name: 'primary', sip_uri: 'sip:gw1.example.net:5060;transport=tcp', priority: 1, weight: 3 });
    expect(u.status, u.text).toBe(201);
    expect(u.json).toMatchObject({ uri: 'sip:gw1.example.net:5060;transport=tcp', sip_uri: 'sip:gw1.example.net:5060;transport=tcp', priority: 1, weight: 3, transport: 'tcp', enabled: true });
    const u2 = await req('PUT', `${base()}/origination-uris/${String(u.json.id)}`, { name: 'primary', priority: 2, uri: 'sips:gw2.example.net' });
    expect(u2.json).toMatchObject({ priority: 2, uri: 'sips:gw2.example.net', transport: 'tls' });
    expect(((await req('GET', `${base()}/trunks/origination-uris`)).json.objects as unknown[]).length).toBe(1);
    expect((await req('GET', `${base()}/origination-uris/${String(u.json.id)}`)).json.priority).toBe(2);
    expect((await req('GET', `${base()}/ip-acl/${String(v4.json.id)}`)).json.ip_address).toBe('192.0.2.16/28');
    expect((await req('DELETE', `${base()}/ip-acl/${String(v4.json.id)}`)).status).toBe(204);
    expect((await req('GET', `${base()}/ip-acl/${String(v4.json.id)}`)).status).toBe(404);

    const bad: Array<[string, string, unknown, string]> = [
      ['POST', '/ip-acl', { trunk_id: t.trunk_id, ip_address: '192.0.2.0/33' }, 'ip_address'],
      ['POST', '/ip-acl', { trunk_id: t.trunk_id, ip_address: 'gw.example.net' }, 'ip_address'],
      ['POST', '/origination-uris', { trunk_id: t.trunk_id, sip_uri: 'https://gw.example.net' }, 'sip_uri'],
      ['POST', '/origination-uris', { trunk_id: t.trunk_id, sip_uri: 'sip:gw.example.net;transport=sctp' }, 'sip_uri'],
      ['POST', '/origination-uris', { trunk_id: t.trunk_id, sip_uri: 'sip:gw.example.net', weight: 0 }, 'weight'],
      ['POST', '/trunks', { name: 'x', trunk_type: 'SIDEWAYS' }, 'trunk_type'],
      ['POST', '/trunks', { name: 'x', trunk_type: 'INBOUND', trunk_direction: 'outbound' }, 'trunk_direction'],
      ['POST', '/trunks', { name: 'x', trunk_status: 'maybe' }, 'trunk_status'],
      ['POST', '/trunks', { name: 'x', sip_domain: 'evil.example' }, 'sip_domain'],
      ['POST', '/trunks', { name: 'x', ip_whitelist: ['10.0.0.0/8', 'nope'] }, 'ip_whitelist/1'],
      ['PUT', `/trunks/${String(t.trunk_id)}`, { trunk_type: 'both' }, 'trunk_type'],
    ];
    for (const [method, path, body, field] of bad) {
      const r = await req(method, `${base()}${path}`, body);
      expect(r.status, `${path} ${JSON.stringify(body)}: ${r.text}`).toBe(400);
      expect(Object.keys(r.json.details as object)).toContain(field);
    }
    expect(((await req('GET', `${base()}/trunks`)).json.objects as unknown[]).length).toBe(1);
  });

  it('the vendor inline create (username, password, ip_whitelist) links the children; links are settable', async () => {
    const t = await newTrunk({ trunk_type: 'INBOUND', username: `in${randomUUID().slice(0, 8)}`, password: 'inline-secret-1', ip_whitelist: ['198.51.100.0/24', '2001:db8:5::1'] });
    expect(t.credential_uuid).toEqual(expect.any(String));
    expect(t.ipacl_uuid).toEqual(expect.any(String));
    expect(JSON.stringify(t)).not.toContain('inline-secret-1');
    const acls = (await req('GET', `${base()}/trunks/ip-acl?trunk_id=${String(t.trunk_id)}`)).json.objects as Array<Record<string, unknown>>;
    expect(acls.map((x) => x.ip_address)).toEqual(['198.51.100.0/24', '2001:db8:5::1/128']);
    expect((await req('GET', `${base()}/credentials/${String(t.credential_uuid)}`)).status).toBe(200);
    const second = acls[1]?.id;
    const linked = await req('PUT', `${base()}/trunks/${String(t.trunk_id)}`, { ipacl_uuid: second });
    expect(linked.json.ipacl_uuid).toBe(second);
    const other = await newTrunk();
    const wrong = await req('PUT', `${base()}/trunks/${String(other.trunk_id)}`, { ipacl_uuid: second });
    expect(wrong.status).toBe(400);
    expect(wrong.json.details).toHaveProperty('ipacl_uuid');
  });

  it("another account's trunk and children are 404; sub-accounts are refused (403)", async () => {
    const b = await h.newAccount();
    const tb = await newTrunk({}, b);
    const ub = await req('POST', `${base(b)}/origination-uris`, { trunk_id: tb.trunk_id, sip_uri: 'sip:b.example' }, b);
    const id = String(tb.trunk_id);
    expect((await req('GET', `${base()}/trunks/${id}`)).status).toBe(404);
    expect((await req('PUT', `${base()}/trunks/${id}`, { name: 'mine' })).status).toBe(404);
    expect((await req('DELETE', `${base()}/trunks/${id}`)).status).toBe(404);
    for (const [path, body] of [
      ['/credentials', { trunk_id: id, username: `x${randomUUID().slice(0, 8)}`, password: 'p-p-p-p' }],
      ['/ip-acl', { trunk_id: id, ip_address: '192.0.2.1' }],
      ['/origination-uris', { trunk_id: id, sip_uri: 'sip:a.example' }],
    ] as const) {
      const r = await req('POST', `${base()}${path}`, body);
      expect(r.status, `${path}: ${r.text}`).toBe(404);
    }
    expect((await req('GET', `${base()}/origination-uris/${String(ub.json.id)}`)).status).toBe(404);
    expect((await req('DELETE', `${base()}/origination-uris/${String(ub.json.id)}`)).status).toBe(404);
    const theirs = await req('GET', `${base(b)}/trunks`, undefined, b);
    expect((theirs.json.objects as unknown[]).length).toBe(1);
    expect((await h.request('GET', `${base(b)}/trunks`, { auth: a })).status).toBe(404);
    expect(((await req('GET', `${base()}/trunks`)).json.objects as unknown[]).length).toBe(0);
    const sub = await h.newSubAccount(a);
    expect((await h.request('GET', `${base(sub)}/trunks`, { auth: sub })).status).toBe(403);
    // Still there for its owner.
    expect((await req('GET', `${base(b)}/trunks/${id}`, undefined, b)).status).toBe(200);
  });

  it('DELETE of a trunk: 409 while calls are up, 409 naming the numbers routed to it, then 204 and its children gone', async () => {
    const t = await newTrunk({ trunk_type: 'INBOUND' });
    const id = String(t.trunk_id);
    await req('POST', `${base()}/ip-acl`, { trunk_id: id, ip_address: '203.0.113.9' });
    callsOf.set(id, 2);
    numbersOf.set(id, ['+919800000001', '+14155550100']);
    const busy = await req('DELETE', `${base()}/trunks/${id}`);
    expect(busy.status).toBe(409);
    expect(busy.json).toMatchObject({ error: 'trunk_in_use', active_calls: 2 });
    callsOf.delete(id);
    const routed = await req('DELETE', `${base()}/trunks/${id}`);
    expect(routed.status).toBe(409);
    expect(routed.json).toMatchObject({ error: 'trunk_has_numbers', numbers: ['+919800000001', '+14155550100'] });
    expect(String(routed.json.message)).toContain('+919800000001');
    numbersOf.delete(id);
    expect((await req('DELETE', `${base()}/trunks/${id}`)).status).toBe(204);
    expect(((await req('GET', `${base()}/trunks/ip-acl`)).json.objects as unknown[]).length).toBe(0);
  });
});
