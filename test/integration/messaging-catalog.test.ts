/**
 * The messaging catalog over real HTTP (docs/messaging-catalog.md): contacts and the
 * multipart CSV import (10,000 rows with 3 bad → 9,997 contacts and a report naming the
 * 3 lines; caps → 413, nothing imported), templates against a local WhatsApp Cloud API
 * stub that checks the Bearer token and the body, canned responses, numbers, calls, and
 * campaigns on a real redis-server: 2,000 contacts at 50 messages/s paused at about
 * half, the runner stopped and a new one started (a restart), resumed — every contact
 * messaged exactly once; two runners on one campaign (also with their leases
 * overlapping) — still once each; a claim left by a crashed runner is not re-sent.
 */
import { createServer, type IncomingMessage, type Server } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { buildApiServer } from '../../src/api/server.js';
import { createLogger, type Logger } from '../../src/logger.js';
import { MemoryCredentialStore } from '../../src/store/credentials/memory.js';
import { MemoryDirectory } from '../../src/store/directory/memory.js';
import { RedisDirectory } from '../../src/store/directory/redis.js';
import type { Directory } from '../../src/store/directory/directory.js';
import { MemoryLocationStore } from '../../src/store/location/memory.js';
import {
  campaignMessageKey,
  createMessagingCatalog,
  type CampaignSendRequest,
  type CampaignSender,
  type CatalogSettings,
  type ChannelAccess,
  type MessagingCatalog,
} from '../../src/messaging/catalog/index.js';
import type { MessagingCatalogStore } from '../../src/store/messaging-catalog/catalog.js';
import { RedisMessagingCatalogStore } from '../../src/store/messaging-catalog/redis.js';
import { PARTNER, testConfig } from '../support/api-harness.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';

const TOKEN = 'EAAG-stub-access-token-0123456789';
const config = testConfig({ apiRateLimit: 100_000 });

interface Creds {
  id: string;
  token: string;
}

interface Reply {
  status: number;
  text: string;
  json: Record<string, unknown>;
}

/** The fake sender: every call recorded, in order. */
class RecordingSender implements CampaignSender {
  readonly calls: Array<{ owner: string; req: CampaignSendRequest; at: number; node: string }> = [];
  constructor(
    readonly node = 'n',
    private readonly fail: (req: CampaignSendRequest) => boolean = () => false,
  ) {}
  async send(owner: string, req: CampaignSendRequest): Promise<{ id: string; status: string }> {
    this.calls.push({ owner, req, at: Date.now(), node: this.node });
    if (this.fail(req)) throw new Error('provider refused: (#131026) message undeliverable');
    return { id: `wamid.${this.calls.length}`, status: 'pending' };
  }
}

/** Channel `ch-wa` of every account: the stub's WABA, with the stub's token. */
const channels: ChannelAccess = {
  async whatsapp(_owner, channelId) {
    return channelId === 'ch-wa' ? { wabaId: 'WABA1', phoneNumberId: 'PN1', accessToken: TOKEN } : null;
  },
};

interface Node {
  base: string;
  catalog: MessagingCatalog;
  close(): Promise<void>;
}

/** A server (API + catalog with its runner started) on memory or on `redisUrl`; with Redis, nodes share accounts and campaigns. */
async function startNode(opts: {
  redisUrl: string | null;
  sender: CampaignSender;
  settings?: Partial<CatalogSettings>;
  logger?: Logger;
  directory?: Directory;
  wrapStore?: (s: MessagingCatalogStore) => MessagingCatalogStore;
}): Promise<Node> {
  const redis = opts.redisUrl ? new Redis(opts.redisUrl, { maxRetriesPerRequest: 1 }) : null;
  redis?.on('error', () => undefined);
  const log = opts.logger ?? createLogger('silent');
  const store = redis && opts.wrapStore ? opts.wrapStore(new RedisMessagingCatalogStore(redis)) : undefined;
  const catalog = createMessagingCatalog({ config, redis, log, channels, sender: opts.sender, settings: { runnerPollMs: 100, ...opts.settings }, ...(store ? { store } : {}) });
  const directory = opts.directory ?? (redis ? new RedisDirectory(redis) : new MemoryDirectory());
  const app = await buildApiServer({
    config,
    logger: log,
    location: new MemoryLocationStore({ sweepIntervalMs: 0 }),
    credentials: new MemoryCredentialStore(),
    directory,
    redis,
    messagingCatalog: catalog,
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  await catalog.start();
  const addr = app.server.address();
  if (addr === null || typeof addr === 'string') throw new Error('no address');
  return {
    base: `http://127.0.0.1:${addr.port}`,
    catalog,
    async close() {
      await catalog.stop();
      await app.close();
      redis?.disconnect();
    },
  };
}

async function request(node: Node, method: string, path: string, auth: Creds | null, body?: unknown, headers: Record<string, string> = {}): Promise<Reply> {
  const h: Record<string, string> = { accept: 'application/json', ...headers };
  if (auth) {
    h['x-auth-id'] = auth.id;
    h['x-auth-token'] = auth.token;
  }
  if (body !== undefined) h['content-type'] = 'application/json';
  const res = await fetch(node.base + path, { method, headers: h, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await res.text();
  let json: Record<string, unknown> = {};
  try {
    json = text === '' ? {} : (JSON.parse(text) as Record<string, unknown>);
  } catch {
    json = {};
  }
  return { status: res.status, text, json };
}

async function upload(node: Node, auth: Creds, csv: string): Promise<Reply> {
  const fd = new FormData();
  fd.append('file', new Blob([csv], { type: 'text/csv' }), 'contacts.csv');
  const res = await fetch(`${node.base}/v1/messaging/contacts/import`, { method: 'POST', headers: { accept: 'application/json', 'x-auth-id': auth.id, 'x-auth-token': auth.token }, body: fd });
  const text = await res.text();
  return { status: res.status, text, json: text === '' ? {} : (JSON.parse(text) as Record<string, unknown>) };
}

let accounts = 0;
async function newAccount(node: Node): Promise<Creds> {
  accounts++;
  const r = await request(node, 'POST', '/api/v1/partner/accounts', { id: PARTNER.authId, token: PARTNER.authToken }, {
    name: `Customer ${accounts}`,
    email: `m${accounts}@example.test`,
    password: 'console-password',
    country: 'us',
  });
  if (r.status !== 201) throw new Error(`account create: ${r.status} ${r.text}`);
  return { id: String(r.json.auth_id), token: String(r.json.auth_token) };
}

/** A valid US number, distinct per `i` (NANP 415-555-01xx is not valid: use real-looking exchanges). */
const phone = (i: number): string => `+1212${String(2000000 + i).padStart(7, '0')}`;

/** `n` CSV data rows (phone, name, tags, city); `bad` maps a 0-based row to its replacement text. */
function csvOf(n: number, bad: Map<number, string> = new Map(), tag = 'spring'): string {
  const lines = ['phone,name,tags,city'];
  for (let i = 0; i < n; i++) lines.push(bad.get(i) ?? `${phone(i)},Person ${i},${tag};all,City${i % 7}`);
  return `${lines.join('\n')}\n`;
}

async function until<T>(what: string, f: () => Promise<T | null | undefined | false>, ms: number, step = 50): Promise<T> {
  const start = Date.now();
  for (;;) {
    const v = await f();
    if (v) return v;
    if (Date.now() - start > ms) throw new Error(`${what}: not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, step));
  }
}

let redisServer: RedisServerHandle;
beforeAll(async () => {
  redisServer = await startRedis();
});
afterAll(async () => {
  await redisServer?.stop();
});

describe.each(['memory', 'redis'] as const)('messaging catalog API on %s', (kind) => {
  let node: Node;
  let a: Creds;
  const sender = new RecordingSender();
  let logs = '';
  beforeAll(async () => {
    const logger = createLogger('debug', { write: (line: string) => void (logs += line) });
    node = await startNode({ redisUrl: kind === 'redis' ? redisServer.url : null, sender, logger });
    a = await newAccount(node);
  });
  afterAll(async () => {
    await node.close();
  });

  it('authenticates with X-Auth-ID/X-Auth-Token: none → 401, a partner → 403, another account sees nothing', async () => {
    expect((await request(node, 'GET', '/v1/messaging/contacts', null)).status).toBe(401);
    expect((await request(node, 'GET', '/v1/messaging/contacts', { id: a.id, token: 'wrong-token-000000' })).status).toBe(401);
    expect((await request(node, 'GET', '/v1/messaging/contacts', { id: PARTNER.authId, token: PARTNER.authToken })).status).toBe(403);
    expect((await upload(node, { id: a.id, token: 'wrong-token-000000' }, 'phone\n+12125550100\n')).status).toBe(401);
    expect((await request(node, 'GET', '/v1/messaging/campaigns', null)).status).toBe(401);
    const c = await request(node, 'POST', '/v1/messaging/contacts', a, { phone: phone(900_001), name: 'Zed' });
    expect(c.status, c.text).toBe(201);
    const b = await newAccount(node);
    expect((await request(node, 'GET', `/v1/messaging/contacts/${String(c.json.id)}`, b)).status).toBe(404);
    expect((await request(node, 'GET', '/v1/messaging/contacts', b)).json.objects).toEqual([]);
  });

  it('contacts CRUD: E.164 normalised, duplicate phone 409, filter by tag, search, update, delete', async () => {
    const c = await request(node, 'POST', '/v1/messaging/contacts', a, { phone: '+1 (212) 555-0142', name: 'Ann Lee', tags: ['vip'], attributes: { city: 'NYC' } });
    expect(c.status, c.text).toBe(201);
    expect(c.json).toMatchObject({ phone: '+12125550142', name: 'Ann Lee', tags: ['vip'], attributes: { city: 'NYC' } });
    const id = String(c.json.id);
    const dup = await request(node, 'POST', '/v1/messaging/contacts', a, { phone: '+12125550142' });
    expect(dup.status).toBe(409);
    expect(dup.json.error).toBe('phone_taken');
    const bad = await request(node, 'POST', '/v1/messaging/contacts', a, { phone: '12345', extra: 1 });
    expect(bad.status).toBe(400);
    expect(bad.json.details).toMatchObject({ phone: expect.stringContaining('E.164'), extra: 'is not a recognised field' });
    await request(node, 'POST', '/v1/messaging/contacts', a, { phone: '+12125550143', name: 'Bob Stone' });

    const vip = await request(node, 'GET', '/v1/messaging/contacts?tag=vip', a);
    expect((vip.json.objects as Array<{ id: string }>).map((x) => x.id)).toEqual([id]);
    const search = await request(node, 'GET', '/v1/messaging/contacts?search=stone', a);
    expect((search.json.objects as Array<{ name: string }>).map((x) => x.name)).toEqual(['Bob Stone']);
    const byDigits = await request(node, 'GET', '/v1/messaging/contacts?search=5550142', a);
    expect((byDigits.json.objects as Array<{ id: string }>).map((x) => x.id)).toEqual([id]);
    const paged = await request(node, 'GET', '/v1/messaging/contacts?limit=1&offset=1', a);
    expect(paged.json.meta).toMatchObject({ limit: 1, offset: 1 });
    expect(paged.json.objects).toHaveLength(1);

    const up = await request(node, 'PUT', `/v1/messaging/contacts/${id}`, a, { name: 'Ann L.', tags: ['vip', 'gold'] });
    expect(up.status, up.text).toBe(200);
    expect(up.json).toMatchObject({ name: 'Ann L.', tags: ['vip', 'gold'], phone: '+12125550142' });
    expect((await request(node, 'PUT', `/v1/messaging/contacts/${id}`, a, { phone: '+12125550143' })).status).toBe(409);
    expect((await request(node, 'GET', `/v1/messaging/contacts/${id}`, a)).json).toMatchObject({ name: 'Ann L.' });
    expect((await request(node, 'DELETE', `/v1/messaging/contacts/${id}`, a)).status).toBe(204);
    expect((await request(node, 'GET', `/v1/messaging/contacts/${id}`, a)).status).toBe(404);
    expect((await request(node, 'DELETE', `/v1/messaging/contacts/${id}`, a)).status).toBe(404);
  });

  it('imports 10,000 CSV rows of which 3 are bad: 9,997 contacts and a report naming the 3 lines; a second import updates by phone', async () => {
    const acct = await newAccount(node);
    // Rows 100, 5000 and 9999 (0-based) → file lines 102, 5002 and 10001 (the header is line 1).
    const bad = new Map([
      [100, '12345,Short Number,spring,X'],
      [5000, ',No Phone,spring,X'],
      [9999, 'not-a-phone,Words,spring,X'],
    ]);
    const started = Date.now();
    const r = await upload(node, acct, csvOf(10_000, bad));
    expect(r.status, r.text).toBe(200);
    expect(r.json.imported).toBe(9_997);
    expect(r.json.updated).toBe(0);
    expect(r.json.failed).toEqual([
      { line: 102, error: expect.stringContaining('E.164') },
      { line: 5002, error: 'phone is required' },
      { line: 10001, error: expect.stringContaining('E.164') },
    ]);
    expect(Date.now() - started).toBeLessThan(15_000);
    const list = await request(node, 'GET', '/v1/messaging/contacts?tag=spring&limit=1', acct);
    expect(list.json.meta).toMatchObject({ total_count: 9_997 });
    const one = (list.json.objects as Array<Record<string, unknown>>)[0];
    expect(one).toMatchObject({ phone: phone(0), name: 'Person 0', tags: ['spring', 'all'], attributes: { city: 'City0' } });

    // Existing phones update (tags merged), a phone twice in one file is one contact.
    const again = `phone,name,tags\n${phone(0)},Renamed,autumn\n${phone(1)},,\n+12129990001,New One,\n+1 212 999 0001,New One Again,x\n`;
    const r2 = await upload(node, acct, again);
    expect(r2.status, r2.text).toBe(200);
    expect(r2.json).toMatchObject({ imported: 1, updated: 3, failed: [] });
    const all = await request(node, 'GET', '/v1/messaging/contacts?limit=1&search=Renamed', acct);
    expect((all.json.objects as Array<Record<string, unknown>>)[0]).toMatchObject({ phone: phone(0), tags: ['spring', 'all', 'autumn'], attributes: { city: 'City0' } });
    expect((await request(node, 'GET', '/v1/messaging/contacts?limit=1', acct)).json.meta).toMatchObject({ total_count: 9_998 });
  });

  it('refuses an import without a phone column (400), without a file (400), as JSON (415)', async () => {
    const noPhone = await upload(node, a, 'name,tags\nAnn,x\n');
    expect(noPhone.status).toBe(400);
    expect(noPhone.json.details).toEqual({ file: 'the header row must name a phone column' });
    const fd = new FormData();
    fd.append('note', 'no file here');
    const res = await fetch(`${node.base}/v1/messaging/contacts/import`, { method: 'POST', headers: { accept: 'application/json', 'x-auth-id': a.id, 'x-auth-token': a.token }, body: fd });
    expect(res.status).toBe(400);
    const json = await request(node, 'POST', '/v1/messaging/contacts/import', a, { file: 'phone\n+12125550100' });
    expect(json.status).toBe(415);
  });

  it('canned responses, numbers and calls: create, list, get, delete, with their 404s and 409s', async () => {
    const k = await request(node, 'POST', '/v1/messaging/canned-responses', a, { shortcut: '/hello', text: 'Hello! How can we help?' });
    expect(k.status, k.text).toBe(201);
    expect((await request(node, 'POST', '/v1/messaging/canned-responses', a, { shortcut: '/hello', text: 'dup' })).status).toBe(409);
    expect(((await request(node, 'GET', '/v1/messaging/canned-responses', a)).json.objects as unknown[]).length).toBe(1);
    expect((await request(node, 'DELETE', `/v1/messaging/canned-responses/${String(k.json.id)}`, a)).status).toBe(204);
    expect((await request(node, 'DELETE', `/v1/messaging/canned-responses/${String(k.json.id)}`, a)).status).toBe(404);

    const n = await request(node, 'POST', '/v1/messaging/numbers', a, { channel_id: 'ch-wa', phone_number: '+12125550199', display_name: 'Shop' });
    expect(n.status, n.text).toBe(201);
    expect(n.json).toMatchObject({ channel_id: 'ch-wa', phone_number: '+12125550199', phone_number_id: 'PN1', display_name: 'Shop' });
    expect((await request(node, 'POST', '/v1/messaging/numbers', a, { channel_id: 'ch-wa', phone_number: '+12125550199' })).status).toBe(409);
    const unknownChannel = await request(node, 'POST', '/v1/messaging/numbers', a, { channel_id: 'nope', phone_number: '+12125550198' });
    expect(unknownChannel.status).toBe(404);
    expect(unknownChannel.json.error).toBe('channel_not_found');
    expect((await request(node, 'GET', `/v1/messaging/numbers/${String(n.json.id)}`, a)).json.phone_number).toBe('+12125550199');
    expect((await request(node, 'DELETE', `/v1/messaging/numbers/${String(n.json.id)}`, a)).status).toBe(204);
    expect((await request(node, 'GET', `/v1/messaging/numbers/${String(n.json.id)}`, a)).status).toBe(404);

    const call = await request(node, 'POST', '/v1/messaging/calls', a, { channel_id: 'ch-wa', to: '+12125550100' });
    expect(call.status, call.text).toBe(201);
    expect(call.json).toMatchObject({ action: 'permission_request', status: 'recorded', to: '+12125550100' });
    expect((await request(node, 'GET', `/v1/messaging/calls/${String(call.json.id)}`, a)).json.id).toBe(call.json.id);
    expect(((await request(node, 'GET', '/v1/messaging/calls', a)).json.objects as unknown[]).length).toBe(1);
    expect((await request(node, 'POST', '/v1/messaging/calls', a, { channel_id: 'ch-wa', to: 'abc' })).status).toBe(400);
  });

  it('honours Idempotency-Key on creating POSTs (one contact for two tries)', async () => {
    const acct = await newAccount(node);
    const body = { phone: '+12125550177', name: 'Idem' };
    const r1 = await request(node, 'POST', '/v1/messaging/contacts', acct, body, { 'idempotency-key': 'k-contact-1' });
    const r2 = await request(node, 'POST', '/v1/messaging/contacts', acct, body, { 'idempotency-key': 'k-contact-1' });
    expect([r1.status, r2.status]).toEqual([201, 201]);
    expect(r2.json.id).toBe(r1.json.id);
    expect(((await request(node, 'GET', '/v1/messaging/contacts', acct)).json.objects as unknown[]).length).toBe(1);
  });

  it('never logs the channel access token', () => {
    expect(logs.length).toBeGreaterThan(0);
    expect(logs).not.toContain(TOKEN);
  });
});

describe('contacts import caps', () => {
  let node: Node;
  let a: Creds;
  beforeAll(async () => {
    node = await startNode({ redisUrl: null, sender: new RecordingSender(), settings: { importMaxRows: 100, importMaxBytes: 4_096 } });
    a = await newAccount(node);
  });
  afterAll(() => node.close());

  it('answers 413 past the row cap and past the byte cap, and imports nothing', async () => {
    const rows = await upload(node, a, csvOf(101));
    expect(rows.status, rows.text).toBe(413);
    expect(rows.json).toMatchObject({ error: 'import_too_large', message: expect.stringContaining('100 rows') });
    // 90 rows of about 50 bytes: under the row cap, over 4,096 bytes.
    const big = csvOf(90).replace(/City/g, 'A-long-attribute-value-to-pass-the-byte-cap-');
    expect(big.length).toBeGreaterThan(4_096);
    const bytes = await upload(node, a, big);
    expect(bytes.status, bytes.text).toBe(413);
    expect(bytes.json.message).toContain('4096 bytes');
    expect((await request(node, 'GET', '/v1/messaging/contacts', a)).json.meta).toMatchObject({ total_count: 0 });
    const ok = await upload(node, a, csvOf(100));
    expect(ok.json).toMatchObject({ imported: 100, failed: [] });
  });
});

describe('templates against a WhatsApp Cloud API stub', () => {
  interface Seen {
    method: string;
    url: string;
    authorization: string | undefined;
    body: unknown;
  }
  const seen: Seen[] = [];
  const statuses = new Map<string, string>();
  let stub: Server;
  let node: Node;
  let a: Creds;
  let logs = '';

  const readBody = (req: IncomingMessage): Promise<string> =>
    new Promise((resolve) => {
      let s = '';
      req.on('data', (c: Buffer) => (s += c.toString()));
      req.on('end', () => resolve(s));
    });

  beforeAll(async () => {
    stub = createServer(async (req, res) => {
      const text = await readBody(req);
      seen.push({ method: req.method ?? '', url: req.url ?? '', authorization: req.headers.authorization, body: text === '' ? null : JSON.parse(text) });
      const send = (status: number, body: unknown): void => {
        res.writeHead(status, { 'content-type': 'application/json' });
        res.end(JSON.stringify(body));
      };
      if (req.headers.authorization !== `Bearer ${TOKEN}`) return send(401, { error: { message: 'Invalid OAuth access token.', type: 'OAuthException', code: 190 } });
      const u = new URL(req.url ?? '/', 'http://stub');
      if (u.pathname !== '/v99.0/WABA1/message_templates') return send(404, { error: { message: 'Unknown path', code: 803 } });
      if (req.method === 'POST') {
        const b = JSON.parse(text) as { name: string; category: string };
        if (b.name === 'bad_one') return send(400, { error: { message: 'Invalid parameter', type: 'OAuthException', code: 100, error_subcode: 2388042 } });
        statuses.set(b.name, 'PENDING');
        return send(200, { id: `tpl-${b.name}`, status: 'PENDING', category: b.category });
      }
      if (req.method === 'GET') {
        return send(200, {
          data: [...statuses].map(([name, status]) => ({ id: `tpl-${name}`, name, language: 'en_US', status, category: 'MARKETING', ...(status === 'REJECTED' ? { rejected_reason: 'PROMOTIONAL' } : {}) })),
          paging: { cursors: { before: 'b', after: 'a' } },
        });
      }
      if (req.method === 'DELETE') {
        statuses.delete(u.searchParams.get('name') ?? '');
        return send(200, { success: true });
      }
      return send(405, { error: { message: 'method' } });
    });
    await new Promise<void>((r) => stub.listen(0, '127.0.0.1', r));
    const addr = stub.address();
    if (addr === null || typeof addr === 'string') throw new Error('no stub address');
    const logger = createLogger('debug', { write: (line: string) => void (logs += line) });
    node = await startNode({ redisUrl: redisServer.url, sender: new RecordingSender(), settings: { whatsappApiBaseUrl: `http://127.0.0.1:${addr.port}/v99.0` }, logger });
    a = await newAccount(node);
  });
  afterAll(async () => {
    await node.close();
    await new Promise((r) => stub.close(r));
  });

  const components = [
    { type: 'BODY', text: 'Hello {{1}}, our spring sale starts today.', example: { body_text: [['Ann']] } },
    { type: 'FOOTER', text: 'Reply STOP to opt out' },
  ];

  it('submits a template with the Bearer token and the body, PENDING until a refresh reads APPROVED/REJECTED', async () => {
    const r = await request(node, 'POST', '/v1/messaging/templates', a, { channel_id: 'ch-wa', name: 'spring_sale', language: 'en_US', category: 'MARKETING', components });
    expect(r.status, r.text).toBe(201);
    expect(r.json).toMatchObject({ name: 'spring_sale', language: 'en_US', category: 'MARKETING', status: 'PENDING', provider_template_id: 'tpl-spring_sale', channel_id: 'ch-wa' });
    const post = seen.find((s) => s.method === 'POST');
    expect(post).toEqual({
      method: 'POST',
      url: '/v99.0/WABA1/message_templates',
      authorization: `Bearer ${TOKEN}`,
      body: { name: 'spring_sale', language: 'en_US', category: 'MARKETING', components },
    });
    await request(node, 'POST', '/v1/messaging/templates', a, { channel_id: 'ch-wa', name: 'winter_sale', language: 'en_US', category: 'MARKETING', components });

    seen.length = 0;
    const cached = await request(node, 'GET', '/v1/messaging/templates', a);
    expect((cached.json.objects as Array<Record<string, unknown>>).map((t) => t.status)).toEqual(['PENDING', 'PENDING']);
    expect(seen).toEqual([]);

    statuses.set('spring_sale', 'APPROVED');
    statuses.set('winter_sale', 'REJECTED');
    const fresh = await request(node, 'GET', '/v1/messaging/templates?refresh=true', a);
    expect(fresh.status, fresh.text).toBe(200);
    expect((fresh.json.objects as Array<Record<string, unknown>>).map((t) => [t.name, t.status, t.rejected_reason])).toEqual([
      ['spring_sale', 'APPROVED', null],
      ['winter_sale', 'REJECTED', 'PROMOTIONAL'],
    ]);
    expect(seen).toHaveLength(1);
    expect(seen[0]?.method).toBe('GET');
    expect(seen[0]?.authorization).toBe(`Bearer ${TOKEN}`);
    // The token travels in the header only.
    expect(seen[0]?.url).not.toContain(TOKEN);
    expect((await request(node, 'GET', '/v1/messaging/templates', a)).json.objects).toEqual(fresh.json.objects);
  });

  it('keeps the provider’s refusal and error code (400), refuses an unknown channel (404) and a duplicate (409)', async () => {
    const bad = await request(node, 'POST', '/v1/messaging/templates', a, { channel_id: 'ch-wa', name: 'bad_one', language: 'en_US', category: 'MARKETING', components });
    expect(bad.status).toBe(400);
    expect(bad.json).toMatchObject({ error: 'provider_rejected', provider_status: 400, provider_error_code: 100, message: expect.stringContaining('Invalid parameter') });
    expect(bad.text).not.toContain(TOKEN);
    const none = await request(node, 'POST', '/v1/messaging/templates', a, { channel_id: 'ch-x', name: 'x1', language: 'en_US', category: 'UTILITY', components: [] });
    expect(none.status).toBe(404);
    const dup = await request(node, 'POST', '/v1/messaging/templates', a, { channel_id: 'ch-wa', name: 'spring_sale', language: 'en_US', category: 'MARKETING', components });
    expect(dup.status).toBe(409);
    const invalid = await request(node, 'POST', '/v1/messaging/templates', a, { channel_id: 'ch-wa', name: 'Spring Sale!', language: 'english', category: 'ADS', components: [] });
    expect(invalid.status).toBe(400);
    expect(Object.keys(invalid.json.details as object).sort()).toEqual(['category', 'language', 'name']);
  });

  it('deletes a template at the provider by name (Bearer, name in the query), then locally', async () => {
    seen.length = 0;
    const d = await request(node, 'DELETE', '/v1/messaging/templates/winter_sale', a);
    expect(d.status, d.text).toBe(204);
    expect(seen).toEqual([{ method: 'DELETE', url: '/v99.0/WABA1/message_templates?name=winter_sale', authorization: `Bearer ${TOKEN}`, body: null }]);
    expect((await request(node, 'GET', '/v1/messaging/templates', a)).json.objects).toEqual([expect.objectContaining({ name: 'spring_sale' })]);
    expect((await request(node, 'DELETE', '/v1/messaging/templates/winter_sale', a)).status).toBe(404);
    expect(logs).not.toContain(TOKEN);
  });
});

describe('campaigns on a real redis-server', () => {
  const CAMPAIGN_TEMPLATE = {
    name: 'spring_sale',
    language: 'en_US',
    components: [{ type: 'body', parameters: [{ type: 'text', text: '{{name}}' }, { type: 'text', text: '{{city}}' }] }],
  };

  /** Per contact phone: how many sends. */
  const perPhone = (s: RecordingSender): Map<string, number> => {
    const m = new Map<string, number>();
    for (const c of s.calls) m.set(c.req.to, (m.get(c.req.to) ?? 0) + 1);
    return m;
  };

  async function setup(node: Node, n: number, tag: string, rate: number): Promise<{ acct: Creds; id: string }> {
    const acct = await newAccount(node);
    const imp = await upload(node, acct, csvOf(n, new Map(), tag));
    expect(imp.json).toMatchObject({ imported: n, failed: [] });
    const c = await request(node, 'POST', '/v1/messaging/campaigns', acct, { name: `${tag} promo`, channel_id: 'ch-wa', template: CAMPAIGN_TEMPLATE, audience: { tag }, rate });
    expect(c.status, c.text).toBe(201);
    expect(c.json).toMatchObject({ status: 'draft', rate, progress: { total: 0, sent: 0, failed: 0, pending: 0 } });
    return { acct, id: String(c.json.id) };
  }

  const progressOf = async (node: Node, acct: Creds, id: string): Promise<Record<string, unknown>> => {
    const r = await request(node, 'GET', `/v1/messaging/campaigns/${id}`, acct);
    expect(r.status, r.text).toBe(200);
    return r.json;
  };

  /** Messages per second of the restart test (a fake sender: the pacing, not the network, is under test). */
  const RATE = 200;
  it(
    '2,000 contacts at 200 messages/s, paused at about half, the runner restarted, resumed: every contact messaged exactly once (the 50/s run through a real server: messaging-campaign-server.test.ts)',
    async () => {
      const senderA = new RecordingSender('A');
      const nodeA = await startNode({ redisUrl: redisServer.url, sender: senderA });
      const { acct, id } = await setup(nodeA, 2_000, 'spring', RATE);

      const started = await request(nodeA, 'POST', `/v1/messaging/campaigns/${id}/start`, acct);
      expect(started.status, started.text).toBe(200);
      expect(started.json).toMatchObject({ status: 'running', progress: { total: 2_000 } });
      expect((await request(nodeA, 'PUT', `/v1/messaging/campaigns/${id}`, acct, { rate: 60 })).status).toBe(409);
      expect((await request(nodeA, 'DELETE', `/v1/messaging/campaigns/${id}`, acct)).status).toBe(409);

      await until('half sent', async () => senderA.calls.length >= 1_000, 40_000, 20);
      const paused = await request(nodeA, 'POST', `/v1/messaging/campaigns/${id}/pause`, acct);
      expect(paused.status, paused.text).toBe(200);
      expect(paused.json.status).toBe('paused');
      // The runner notices within its status check (200 ms) and lets its sends in flight finish.
      const atPause = await until(
        'runner idle after the pause',
        async () => {
          const p = (await progressOf(nodeA, acct, id)).progress as Record<string, number>;
          const n = senderA.calls.length;
          await new Promise((r) => setTimeout(r, 400));
          return senderA.calls.length === n && p.sent === n ? p : null;
        },
        5_000,
      );
      expect(atPause.sent).toBeGreaterThanOrEqual(1_000);
      expect(atPause.sent).toBeLessThan(1_200);
      expect(atPause).toMatchObject({ total: 2_000, failed: 0, unconfirmed: 0, pending: 2_000 - (atPause.sent as number) });
      // Pacing: the first half took at least (n - 1) / RATE s.
      const first = senderA.calls[0]?.at ?? 0;
      const last = senderA.calls[senderA.calls.length - 1]?.at ?? 0;
      expect(last - first).toBeGreaterThanOrEqual(((senderA.calls.length - 1) / RATE) * 1000 * 0.95);

      // The restart: this node's runner and server stop; a new node (new runner, new connection) on the same Redis.
      await nodeA.close();
      const senderB = new RecordingSender('B');
      const nodeB = await startNode({ redisUrl: redisServer.url, sender: senderB });
      try {
        const resumed = await request(nodeB, 'POST', `/v1/messaging/campaigns/${id}/start`, acct);
        expect(resumed.status, resumed.text).toBe(200);
        const done = await until(
          'campaign completed',
          async () => {
            const c = await progressOf(nodeB, acct, id);
            return c.status === 'completed' ? c : null;
          },
          40_000,
          200,
        );
        expect(done.progress).toEqual({ total: 2_000, sent: 2_000, failed: 0, unconfirmed: 0, pending: 0 });
        expect(done.completed_at).toEqual(expect.any(String));

        const all = new RecordingSender();
        all.calls.push(...senderA.calls, ...senderB.calls);
        const counts = perPhone(all);
        expect(all.calls).toHaveLength(2_000);
        expect(counts.size).toBe(2_000);
        expect([...counts.values()].every((n) => n === 1)).toBe(true);
        expect(senderB.calls.length).toBe(2_000 - senderA.calls.length);
        // Per-contact substitution, the stable idempotency key, the owner.
        const sample = senderB.calls[0];
        const i = Number(sample?.req.to.slice(-4)) ;
        expect(sample?.owner).toBe(acct.id);
        expect(sample?.req).toMatchObject({
          channelId: 'ch-wa',
          type: 'template',
          campaignId: id,
          template: { name: 'spring_sale', language: 'en_US', components: [{ type: 'body', parameters: [{ type: 'text', text: `Person ${i}` }, { type: 'text', text: `City${i % 7}` }] }] },
        });
        expect(new Set(all.calls.map((c) => c.req.idempotencyKey)).size).toBe(2_000);
        expect(sample?.req.idempotencyKey.startsWith(campaignMessageKey(id, ''))).toBe(true);
        // A completed campaign cannot be started again.
        expect((await request(nodeB, 'POST', `/v1/messaging/campaigns/${id}/start`, acct)).status).toBe(409);
      } finally {
        await nodeB.close();
      }
    },
    120_000,
  );

  it('two runners on one campaign (200 messages/s): each contact messaged once, one runner at a time', async () => {
    const s1 = new RecordingSender('1');
    const s2 = new RecordingSender('2');
    const n1 = await startNode({ redisUrl: redisServer.url, sender: s1 });
    const n2 = await startNode({ redisUrl: redisServer.url, sender: s2 });
    try {
      const { acct, id } = await setup(n1, 600, 'race', 200);
      // Started through both nodes at once: one wins the transition, the other is refused.
      const starts = await Promise.all([n1, n2].map((n) => request(n, 'POST', `/v1/messaging/campaigns/${id}/start`, acct)));
      expect(starts.map((r) => r.status).sort()).toEqual([200, 409]);
      const done = await until('completed', async () => ((await progressOf(n2, acct, id)).status === 'completed' ? true : null), 20_000, 100);
      expect(done).toBe(true);
      const all = new RecordingSender();
      all.calls.push(...s1.calls, ...s2.calls);
      const counts = perPhone(all);
      expect(all.calls).toHaveLength(600);
      expect(counts.size).toBe(600);
      expect(Math.min(s1.calls.length, s2.calls.length)).toBe(0);
    } finally {
      await Promise.all([n1.close(), n2.close()]);
    }
  }, 60_000);

  it('two runners whose leases overlap (a lease that never holds anyone off): the per-contact claims still message each contact once', async () => {
    const leaky = (s: MessagingCatalogStore): MessagingCatalogStore =>
      new Proxy(s, {
        get(t, k) {
          if (k === 'acquireLease' || k === 'renewLease') return async () => true;
          const v = Reflect.get(t, k, t) as unknown;
          return typeof v === 'function' ? (v as (...args: unknown[]) => unknown).bind(t) : v;
        },
      });
    const s1 = new RecordingSender('1');
    const s2 = new RecordingSender('2');
    const n1 = await startNode({ redisUrl: redisServer.url, sender: s1, wrapStore: leaky });
    const n2 = await startNode({ redisUrl: redisServer.url, sender: s2, wrapStore: leaky });
    try {
      const { acct, id } = await setup(n1, 600, 'overlap', 200);
      expect((await request(n1, 'POST', `/v1/messaging/campaigns/${id}/start`, acct)).status).toBe(200);
      n2.catalog.runner.kick();
      await until('completed', async () => ((await progressOf(n1, acct, id)).status === 'completed' ? true : null), 20_000, 100);
      const all = new RecordingSender();
      all.calls.push(...s1.calls, ...s2.calls);
      const counts = perPhone(all);
      expect(all.calls).toHaveLength(600);
      expect(counts.size).toBe(600);
      // Both runners really ran side by side.
      expect(s1.calls.length).toBeGreaterThan(0);
      expect(s2.calls.length).toBeGreaterThan(0);
      expect((await progressOf(n1, acct, id)).progress).toEqual({ total: 600, sent: 600, failed: 0, unconfirmed: 0, pending: 0 });
    } finally {
      await Promise.all([n1.close(), n2.close()]);
    }
  }, 60_000);

  it('does not re-send a contact a crashed runner claimed without confirming; a refused send is counted failed, not retried', async () => {
    const failing = phone(7);
    const sender = new RecordingSender('C', (req) => req.to === failing);
    const node = await startNode({ redisUrl: redisServer.url, sender });
    try {
      const { acct, id } = await setup(node, 20, 'crash', 200);
      // A runner on another node claimed contact #4 and died before it learnt the outcome.
      const contacts = (await request(node, 'GET', '/v1/messaging/contacts?tag=crash&limit=100', acct)).json.objects as Array<{ id: string; phone: string }>;
      const store = node.catalog.store;
      await store.setRecipients(id, contacts.map((c) => c.id));
      const orphan = contacts[4] as { id: string; phone: string };
      expect(await store.claim(id, 4, orphan.id, campaignMessageKey(id, orphan.id), 'dead-node')).toBe(true);

      expect((await request(node, 'POST', `/v1/messaging/campaigns/${id}/start`, acct)).status).toBe(200);
      const done = await until('completed', async () => {
        const c = await progressOf(node, acct, id);
        return c.status === 'completed' ? c : null;
      }, 10_000, 100);
      expect(done.progress).toEqual({ total: 20, sent: 18, failed: 1, unconfirmed: 1, pending: 0 });
      expect(sender.calls.map((c) => c.req.to)).not.toContain(orphan.phone);
      expect(sender.calls.filter((c) => c.req.to === failing)).toHaveLength(1);
      expect(sender.calls).toHaveLength(19);
      expect(await store.getClaim(id, orphan.id)).toMatchObject({ state: 'unconfirmed', holder: 'dead-node' });
    } finally {
      await node.close();
    }
  }, 30_000);

  it('campaign rules: bad rate and audience 400, unknown channel 404, pause of a draft 409, cancel through PUT, delete', async () => {
    const node = await startNode({ redisUrl: redisServer.url, sender: new RecordingSender() });
    try {
      const acct = await newAccount(node);
      const base = { name: 'x', channel_id: 'ch-wa', template: CAMPAIGN_TEMPLATE };
      const rate = await request(node, 'POST', '/v1/messaging/campaigns', acct, { ...base, audience: { tag: 't' }, rate: 100_000 });
      expect(rate.status).toBe(400);
      expect(rate.json.details).toMatchObject({ rate: expect.stringContaining('500') });
      const both = await request(node, 'POST', '/v1/messaging/campaigns', acct, { ...base, audience: { tag: 't', contact_ids: ['a'] } });
      expect(both.status).toBe(400);
      const unknownIds = await request(node, 'POST', '/v1/messaging/campaigns', acct, { ...base, audience: { contact_ids: ['nope'] } });
      expect(unknownIds.status).toBe(400);
      expect((await request(node, 'POST', '/v1/messaging/campaigns', acct, { ...base, channel_id: 'zz', audience: { tag: 't' } })).status).toBe(404);
      const c = await request(node, 'POST', '/v1/messaging/campaigns', acct, { ...base, audience: { tag: 't' } });
      expect(c.status, c.text).toBe(201);
      expect(c.json.rate).toBe(20);
      const id = String(c.json.id);
      expect((await request(node, 'POST', `/v1/messaging/campaigns/${id}/pause`, acct)).status).toBe(409);
      const renamed = await request(node, 'PUT', `/v1/messaging/campaigns/${id}`, acct, { name: 'renamed', rate: 5 });
      expect(renamed.json).toMatchObject({ name: 'renamed', rate: 5, status: 'draft' });
      const cancelled = await request(node, 'PUT', `/v1/messaging/campaigns/${id}`, acct, { status: 'cancelled' });
      expect(cancelled.json.status).toBe('cancelled');
      expect((await request(node, 'POST', `/v1/messaging/campaigns/${id}/start`, acct)).status).toBe(409);
      expect(((await request(node, 'GET', '/v1/messaging/campaigns', acct)).json.objects as unknown[]).length).toBe(1);
      expect((await request(node, 'DELETE', `/v1/messaging/campaigns/${id}`, acct)).status).toBe(204);
      expect((await request(node, 'GET', `/v1/messaging/campaigns/${id}`, acct)).status).toBe(404);
    } finally {
      await node.close();
    }
  });
});
