/**
 * Cross-tenant isolation: two accounts (A, B), one sub-account of A (S) and a
 * partner (P). Every combination of credentials and path gets the status the
 * spec gives (401 bad credentials, 403 wrong credential scope, 404 another
 * tenant's path or resource), and no response body carries another tenant's data.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PARTNER, STORE_KINDS, startHarness, stopRedisServer, type Creds, type Harness, type Reply } from '../support/api-harness.js';
import { expectError } from './shapes.js';

afterAll(stopRedisServer);

type Tenant = 'A' | 'B' | 'S';
type Caller = Tenant | 'P' | 'Pjwt' | 'none' | 'wrong';
type Family = 'account' | 'ep' | 'app' | 'sub' | 'partner';
type Op = 'list' | 'create' | 'get' | 'update' | 'delete';

interface Case {
  caller: Caller;
  family: Family;
  op: Op;
  /** Auth ID in the path (Account routes). */
  path?: Tenant;
  /** Owner of the resource the path names (item routes). */
  owner?: Tenant;
}

const CALLERS: Caller[] = ['A', 'B', 'S', 'P', 'Pjwt', 'none', 'wrong'];
const TENANTS: Tenant[] = ['A', 'B', 'S'];

function cases(): Case[] {
  const out: Case[] = [];
  for (const caller of CALLERS) {
    out.push({ caller, family: 'partner', op: 'get' }, { caller, family: 'partner', op: 'create' });
    for (const path of TENANTS) {
      out.push({ caller, family: 'account', op: 'get', path });
      for (const family of ['ep', 'app', 'sub'] as const) {
        out.push({ caller, family, op: 'list', path }, { caller, family, op: 'create', path });
        const owners: Tenant[] = family === 'sub' ? ['S'] : TENANTS;
        for (const owner of owners) {
          for (const op of ['get', 'update', 'delete'] as const) out.push({ caller, family, op, path, owner });
        }
      }
    }
  }
  return out;
}

/** Which tenants' resources a caller may see. */
const SEES: Record<Caller, Tenant[]> = { A: ['A', 'S'], B: ['B'], S: ['S'], P: [], Pjwt: [], none: [], wrong: [] };

const SUCCESS: Record<Op, number> = { list: 200, create: 201, get: 200, update: 202, delete: 204 };

type Shape = 'general' | 'empty' | 'endpoint404' | 'ok';

/** The spec's answer for a case. */
function expected(c: Case): { status: number; shape: Shape } {
  if (c.caller === 'none' || c.caller === 'wrong') return { status: 401, shape: 'general' };
  const partner = c.caller === 'P' || c.caller === 'Pjwt';
  if (c.family === 'partner') return partner ? { status: SUCCESS[c.op], shape: 'ok' } : { status: 403, shape: 'general' };
  if (partner) return { status: 403, shape: 'general' };
  const notFound = (): { status: number; shape: Shape } => {
    if (c.family === 'ep' && c.op === 'get') return { status: 404, shape: 'endpoint404' };
    if (c.family === 'ep' && (c.op === 'update' || c.op === 'delete')) return { status: 404, shape: 'empty' };
    return { status: 404, shape: 'general' };
  };
  if (c.path !== c.caller) return notFound();
  // Account-level operations are the main account's alone.
  if ((c.family === 'account' || c.family === 'sub') && c.caller === 'S') return { status: 403, shape: 'general' };
  if (c.owner !== undefined && !SEES[c.caller].includes(c.owner)) return notFound();
  return { status: SUCCESS[c.op], shape: 'ok' };
}

const label = (c: Case): string =>
  `${c.caller} ${c.op} ${c.family}${c.path ? ` on ${c.path}'s path` : ''}${c.owner ? ` (resource of ${c.owner})` : ''}`;

describe.each(STORE_KINDS)('cross-tenant isolation (%s store)', (kind) => {
  let h: Harness;
  const creds = {} as Record<Tenant, Creds>;
  const ep = {} as Record<Tenant, string>;
  const app = {} as Record<Tenant, string>;
  let jwt = '';
  /** Strings private to each tenant: none may appear in a body another tenant receives. */
  const markers = {} as Record<Tenant, string[]>;
  let n = 0;

  beforeAll(async () => {
    h = await startHarness(kind, { apiRateLimit: 1_000_000 });
    creds.A = await h.newAccount();
    creds.B = await h.newAccount();
    creds.S = await h.newSubAccount(creds.A, 'customer_use');
    for (const t of TENANTS) {
      const base = `/api/v1/Account/${creds[t].id}`;
      const e = await h.request('POST', `${base}/Endpoint/`, {
        auth: creds[t],
        body: { username: `tenant${t}user`, password: 'secret-pass-1', alias: `tenant${t}-alias` },
      });
      expect(e.status, e.text).toBe(201);
      ep[t] = String(e.json.endpoint_id);
      const a = await h.request('POST', `${base}/Application/`, {
        auth: creds[t],
        body: { app_name: `tenant${t}-app`, answer_url: `https://tenant${t}.example/answer` },
      });
      expect(a.status, a.text).toBe(201);
      app[t] = String(a.json.app_id);
      markers[t] = [creds[t].token, `tenant${t}user`, `tenant${t}-alias`, `tenant${t}-app`, `tenant${t}.example`, ep[t], app[t], creds[t].id];
    }
    // B's SIP domain is B's alone; A's is shared with S (S's endpoints live in it).
    markers.B.push(creds.B.id.toLowerCase());
    const login = await h.request('POST', '/api/v1/partner/login', { body: { email: PARTNER.email, password: PARTNER.password } });
    jwt = String((login.json.tokens as Record<string, unknown>).access_token);
  });

  afterAll(async () => {
    // Nothing a refused request touched has changed.
    for (const t of TENANTS) {
      const e = await h.request('GET', `/api/v1/Account/${creds[t].id}/Endpoint/${ep[t]}/`, { auth: creds[t] });
      expect(e.status).toBe(200);
      expect(e.json.alias).toBe(`tenant${t}-alias`);
      const a = await h.request('GET', `/api/v1/Account/${creds[t].id}/Application/${app[t]}/`, { auth: creds[t] });
      expect(a.status).toBe(200);
    }
    expect((await h.request('GET', `/api/v1/Account/${creds.S.id}/Endpoint/`, { auth: creds.S })).status).toBe(200);
    await h.close();
  });

  function headersFor(caller: Caller): { auth?: Creds; headers?: Record<string, string> } {
    switch (caller) {
      case 'P':
        return { auth: { id: PARTNER.authId, token: PARTNER.authToken } };
      case 'Pjwt':
        return { headers: { authorization: `Bearer ${jwt}` } };
      case 'none':
        return {};
      case 'wrong':
        return { auth: { id: creds.A.id, token: 'not-the-token-of-A-0123456789' } };
      default:
        return { auth: creds[caller] };
    }
  }

  /** A fresh resource of `owner` for a delete that is expected to succeed. */
  async function throwaway(family: Family, owner: Tenant): Promise<string> {
    n++;
    const base = `/api/v1/Account/${creds[owner].id}`;
    if (family === 'ep') {
      const r = await h.request('POST', `${base}/Endpoint/`, { auth: creds[owner], body: { username: `tmp${n}`, password: 'secret-pass-1' } });
      return String(r.json.endpoint_id);
    }
    if (family === 'app') {
      const r = await h.request('POST', `${base}/Application/`, { auth: creds[owner], body: { app_name: 'tmp', answer_url: 'https://x.example/' } });
      return String(r.json.app_id);
    }
    const r = await h.request('POST', `${base}/Subaccount/`, { auth: creds[owner], body: { name: 'tmp' } });
    return String(r.json.auth_id);
  }

  async function run(c: Case, want: { status: number; shape: Shape }): Promise<{ r: Reply; url: string }> {
    const opts = headersFor(c.caller);
    n++;
    if (c.family === 'partner') {
      if (c.op === 'get') return { r: await h.request('GET', '/api/v1/partner/me', opts), url: '/api/v1/partner/me' };
      const body = { name: 'New', email: `new${n}@example.test`, password: 'console-pass', country: 'IN' };
      return { r: await h.request('POST', '/api/v1/partner/accounts', { ...opts, body }), url: '/api/v1/partner/accounts' };
    }
    const path = creds[c.path as Tenant].id;
    const seg = { ep: 'Endpoint', app: 'Application', sub: 'Subaccount', account: '' }[c.family];
    const base = c.family === 'account' ? `/api/v1/Account/${path}/` : `/api/v1/Account/${path}/${seg}/`;
    if (c.family === 'account') return { r: await h.request('GET', base, opts), url: base };
    if (c.op === 'list') return { r: await h.request('GET', base, opts), url: base };
    if (c.op === 'create') {
      const body =
        c.family === 'ep'
          ? { username: `new${n}`, password: 'secret-pass-1' }
          : c.family === 'app'
            ? { app_name: 'new', answer_url: 'https://new.example/' }
            : { name: 'new' };
      return { r: await h.request('POST', base, { ...opts, body }), url: base };
    }
    const owner = c.owner as Tenant;
    let id = c.family === 'ep' ? ep[owner] : c.family === 'app' ? app[owner] : creds[owner].id;
    if (c.op === 'delete' && want.status === 204) id = await throwaway(c.family, c.family === 'sub' ? 'A' : owner);
    const url = `${base}${id}/`;
    if (c.op === 'get') return { r: await h.request('GET', url, opts), url };
    if (c.op === 'delete') return { r: await h.request('DELETE', url, opts), url };
    const body = c.family === 'ep' ? { allow_video: false } : c.family === 'app' ? { enabled: true } : { name: 'Sub' };
    return { r: await h.request('POST', url, { ...opts, body }), url };
  }

  it.each(cases().map((c) => [label(c), c] as const))('%s', async (_name, c) => {
    const want = expected(c);
    const { r, url } = await run(c, want);
    expect(r.status, r.text).toBe(want.status);
    switch (want.shape) {
      case 'general':
        expectError(r.body, ({ 401: 'unauthorized', 403: 'forbidden', 404: 'not_found' } as Record<number, string>)[want.status] ?? '');
        break;
      case 'empty':
        expect(r.text).toBe('');
        break;
      case 'endpoint404':
        expectError(r.body, 'not_found', ['endpoint_id']);
        break;
      case 'ok':
        // An Application update answers 202 {api_id, message: "changed"}, as the vendor's SDK reads it.
        if (want.status === 202 && c.family === 'app') expect(r.json).toEqual({ api_id: expect.any(String), message: 'changed' });
        else if (want.status === 202 || want.status === 204) expect(r.text).toBe('');
        else expect(typeof r.json.api_id).toBe('string');
        break;
    }
    // No body leaks what the caller may not see (what it sent in the URL is its own).
    const visible = c.caller in SEES ? SEES[c.caller] : [];
    for (const t of TENANTS) {
      if (visible.includes(t)) continue;
      for (const m of markers[t]) {
        if (url.includes(m)) continue;
        expect(r.text, `${label(c)} leaks ${t}'s ${m}`).not.toContain(m);
      }
    }
    // A token is never shown again after its creation response.
    for (const t of TENANTS) expect(r.text).not.toContain(creds[t].token);
  });

  it('a disabled sub-account cannot use its credentials (403); re-enabled it can', async () => {
    const sub = await h.newSubAccount(creds.A);
    const url = `/api/v1/Account/${sub.id}/Endpoint/`;
    expect((await h.request('GET', url, { auth: sub })).status).toBe(200);
    expect((await h.request('POST', `/api/v1/Account/${creds.A.id}/Subaccount/${sub.id}/`, { auth: creds.A, body: { enabled: false } })).status).toBe(202);
    const r = await h.request('GET', url, { auth: sub });
    expect(r.status).toBe(403);
    expectError(r.body, 'forbidden');
    expect((await h.request('POST', `/api/v1/Account/${creds.A.id}/Subaccount/${sub.id}/`, { auth: creds.A, body: { enabled: true } })).status).toBe(202);
    expect((await h.request('GET', url, { auth: sub })).status).toBe(200);
  });

  it("a sub-account cannot create endpoints for a sibling or attach its parent's applications", async () => {
    const url = `/api/v1/Account/${creds.S.id}/Endpoint/`;
    const sibling = await h.newSubAccount(creds.A);
    const r = await h.request('POST', url, {
      auth: creds.S,
      body: { username: 'sneaky', password: 'secret-pass-1', sub_account: sibling.id, application: Number(app.A) },
    });
    expect(r.status).toBe(400);
    expect(Object.keys(r.json.details as object).sort()).toEqual(['application', 'sub_account']);
    expect(r.text).not.toContain('tenantA-app');
  });

  it('the parent lists its sub-account endpoints; the sub-account lists only its own', async () => {
    const parent = await h.request('GET', `/api/v1/Account/${creds.A.id}/Endpoint/?username__startswith=tenant`, { auth: creds.A });
    const names = (parent.json.objects as Array<Record<string, unknown>>).map((o) => o.username);
    expect(names).toEqual(['tenantAuser', 'tenantSuser']);
    const own = await h.request('GET', `/api/v1/Account/${creds.S.id}/Endpoint/?username__startswith=tenant`, { auth: creds.S });
    expect((own.json.objects as Array<Record<string, unknown>>).map((o) => o.username)).toEqual(['tenantSuser']);
    const other = await h.request('GET', `/api/v1/Account/${creds.S.id}/Endpoint/?sub_account=${creds.A.id}`, { auth: creds.S });
    expect(other.json.objects).toEqual([]);
  });
});
