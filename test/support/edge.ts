/**
 * The edge as an operator meets it: the real server process (`node dist/main.js`,
 * every port 0) with a configured partner, and a small client of its HTTP API that
 * provisions partner → account → endpoint and reads endpoints back. The e2e suites
 * never write to a store directly: what they assert is what an operator would see.
 */
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startServer, type ServerProcess } from './server-process.js';

/** The partner the e2e servers are configured with (PARTNER_AUTH_ID/PARTNER_AUTH_TOKEN). */
export const E2E_PARTNER = Object.freeze({ id: 'E2EPARTNER', token: 'e2e-partner-token-0123456789abcdef' });

export interface Account {
  authId: string;
  authToken: string;
  /** `<auth_id lower-cased>.<SIP_DOMAIN>`: the SIP domain and digest realm. */
  sipDomain: string;
}

export interface Endpoint {
  account: Account;
  endpointId: string;
  username: string;
  password: string;
}

/** A binding as GET …/Endpoint/<id>/ shows it (`sip_registration`, `sip_registrations[]`). */
export interface RegistrationView {
  contact: string;
  expires: string;
  user_agent: string;
  received: string;
  path: string | null;
  sip_contact?: string;
  transport?: string;
}

/** The fields of the Endpoint resource these suites read. */
export interface EndpointView {
  endpoint_id: string;
  username: string;
  sip_uri: string;
  sip_registered: 'true' | 'false';
  sip_contact: string | null;
  sip_expires: string | null;
  sip_user_agent: string | null;
  sip_registration?: RegistrationView;
  sip_registrations: RegistrationView[];
}

export type Flags = Partial<
  Record<'allow_voice' | 'allow_video' | 'allow_message' | 'allow_same_domain' | 'allow_other_domains' | 'allow_phones' | 'allow_apps', boolean>
>;

/** What a new endpoint gets: policy flags, a sub-account, a password (default `<username>-Secret-9`). */
export type EndpointOptions = Flags & { sub_account?: string; password?: string };

export interface Edge {
  server: ServerProcess;
  /** `http://127.0.0.1:<http port>` */
  base: string;
  /** A new customer account, created by the partner over the API. */
  /** A customer account of the development partner; `extra`: more fields of its create body (`cps_limit` …). */
  newAccount(extra?: Record<string, unknown>): Promise<Account>;
  /** A new endpoint of `account`, created with the account's own credentials over the API. */
  newEndpoint(account: Account, username: string, opts?: EndpointOptions): Promise<Endpoint>;
  /** POST …/Endpoint/<id>/ (update); throws unless 2xx. */
  updateEndpoint(e: Endpoint, patch: Record<string, unknown>): Promise<void>;
  /** A new sub-account of `account`; its Auth ID. */
  newSubAccount(account: Account, kycMode: 'personal_use' | 'customer_use'): Promise<string>;
  /** A new application of `account`; its app id. */
  newApplication(account: Account): Promise<string>;
  /** GET /api/v1/Account/<auth_id>/Endpoint/<endpoint_id>/ */
  endpoint(e: Endpoint): Promise<EndpointView>;
  /** Polls the endpoint until `until` holds (every 50 ms); throws with the last view after timeoutMs. */
  waitForEndpoint(e: Endpoint, until: (v: EndpointView) => boolean, timeoutMs?: number): Promise<EndpointView>;
  /** Polls the API until the endpoint has at least `n` live bindings. */
  waitBindings(e: Endpoint, n: number, timeoutMs?: number): Promise<void>;
  /** Polls the API until the endpoint has at most `n` live bindings. */
  waitBindingsAtMost(e: Endpoint, n: number, timeoutMs?: number): Promise<void>;
  /** PEM of the server's self-signed development certificate (certificate only, no key). */
  devCertificate(): string;
  /** A request to the API with an account's own credentials (JSON body when given); status and parsed body. */
  api(account: Account, method: string, path: string, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }>;
  /** The development certificate written to a PEM file of its own (a CA file for clients), and how to remove it. */
  devCaFile(): { file: string; remove(): void };
  stop(): Promise<void>;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** Starts the server with the e2e partner configured; `env` adds to or overrides the defaults. */
export async function startEdge(env: Record<string, string> = {}, opts: { node?: string } = {}): Promise<Edge> {
  const server = await startServer(
    {
      PARTNER_AUTH_ID: E2E_PARTNER.id,
      PARTNER_AUTH_TOKEN: E2E_PARTNER.token,
      LOG_LEVEL: 'info',
      ...env,
    },
    15_000,
    opts.node,
  );
  const base = `http://127.0.0.1:${server.ports.http}`;

  const call = async (method: string, path: string, auth: { id: string; token: string }, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const headers: Record<string, string> = { accept: 'application/json', 'x-auth-id': auth.id, 'x-auth-token': auth.token };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(base + path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    let json: Record<string, unknown> = {};
    if (text !== '') json = JSON.parse(text) as Record<string, unknown>;
    return { status: res.status, json };
  };

  const as = (a: Account) => ({ id: a.authId, token: a.authToken });
  /** Live bindings as the API shows them (sip_registrations on retrieve). */
  const waitCount = async (e: Endpoint, ok: (count: number) => boolean, want: string, timeoutMs: number): Promise<void> => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const v = await edge.endpoint(e);
      const count = Array.isArray(v.sip_registrations) ? v.sip_registrations.length : v.sip_registered === 'true' ? 1 : 0;
      if (ok(count)) return;
      if (Date.now() > deadline) throw new Error(`${e.username}: ${count} bindings, expected ${want}`);
      await sleep(50);
    }
  };
  let accounts = 0;
  const edge: Edge = {
    server,
    base,
    async newAccount(extra = {}) {
      accounts++;
      const r = await call('POST', '/api/v1/partner/accounts', E2E_PARTNER, {
        name: `E2E customer ${accounts}`,
        email: `e2e${accounts}@example.test`,
        password: 'a-long-console-password',
        country: 'IN',
        ...extra,
      });
      if (r.status !== 201) throw new Error(`POST /api/v1/partner/accounts: ${r.status} ${JSON.stringify(r.json)}`);
      return { authId: String(r.json.auth_id), authToken: String(r.json.auth_token), sipDomain: String(r.json.sip_domain) };
    },
    async newEndpoint(account, username, opts = {}) {
      const { password = `${username}-Secret-9`, ...extra } = opts;
      const r = await call('POST', `/api/v1/Account/${account.authId}/Endpoint/`, as(account), { username, password, ...extra });
      if (r.status !== 201) throw new Error(`POST Endpoint ${username}: ${r.status} ${JSON.stringify(r.json)}`);
      return { account, endpointId: String(r.json.endpoint_id), username, password };
    },
    async updateEndpoint(e, patch) {
      const r = await call('POST', `/api/v1/Account/${e.account.authId}/Endpoint/${e.endpointId}/`, as(e.account), patch);
      if (r.status >= 300) throw new Error(`POST Endpoint ${e.endpointId}: ${r.status} ${JSON.stringify(r.json)}`);
    },
    async newSubAccount(account, kycMode) {
      const r = await call('POST', `/api/v1/Account/${account.authId}/Subaccount/`, as(account), { name: `sub-${kycMode}`, kyc_mode: kycMode });
      if (r.status !== 201) throw new Error(`POST Subaccount: ${r.status} ${JSON.stringify(r.json)}`);
      return String(r.json.auth_id);
    },
    async newApplication(account) {
      const r = await call('POST', `/api/v1/Account/${account.authId}/Application/`, as(account), { app_name: 'ivr', answer_url: 'https://app.example.test/answer' });
      if (r.status !== 201) throw new Error(`POST Application: ${r.status} ${JSON.stringify(r.json)}`);
      return String(r.json.app_id);
    },
    waitBindings: (e, n, timeoutMs = 5000) => waitCount(e, (c) => c >= n, `${n}`, timeoutMs),
    waitBindingsAtMost: (e, n, timeoutMs = 5000) => waitCount(e, (c) => c <= n, `at most ${n}`, timeoutMs),
    async endpoint(e) {
      const r = await call('GET', `/api/v1/Account/${e.account.authId}/Endpoint/${e.endpointId}/`, as(e.account));
      if (r.status !== 200) throw new Error(`GET Endpoint ${e.endpointId}: ${r.status} ${JSON.stringify(r.json)}`);
      return r.json as unknown as EndpointView;
    },
    async waitForEndpoint(e, until, timeoutMs = 5000) {
      const deadline = Date.now() + timeoutMs;
      for (;;) {
        const v = await edge.endpoint(e);
        if (until(v)) return v;
        if (Date.now() > deadline) throw new Error(`endpoint ${e.username} did not reach the expected state within ${timeoutMs} ms: ${JSON.stringify(v)}`);
        await sleep(50);
      }
    },
    devCertificate() {
      // The server logs where its self-signed development certificate lives (key and certificate in one PEM).
      const line = server.logs.find((l) => typeof l.file === 'string' && String(l.msg).includes('self-signed'));
      if (!line) throw new Error('the server did not log a self-signed development certificate');
      const pem = readFileSync(String(line.file), 'utf8');
      const cert = /-----BEGIN CERTIFICATE-----[\s\S]+?-----END CERTIFICATE-----\n?/.exec(pem);
      if (!cert) throw new Error(`no certificate in ${String(line.file)}`);
      return cert[0];
    },
    api: (account, method, path, body) => call(method, path, as(account), body),
    devCaFile() {
      const dir = mkdtempSync(join(tmpdir(), 'sip-edge-ca-'));
      const file = join(dir, 'dev-ca.pem');
      writeFileSync(file, edge.devCertificate());
      return { file, remove: () => rmSync(dir, { recursive: true, force: true }) };
    },
    async stop() {
      await server.stop();
    },
  };
  return edge;
}

/** Seconds from now until an ISO time. */
export function secondsUntil(iso: string | null | undefined): number {
  if (!iso) return NaN;
  return (Date.parse(iso) - Date.now()) / 1000;
}
