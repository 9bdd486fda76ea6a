/**
 * The API under test over real HTTP: buildApiServer listening on 127.0.0.1:0,
 * on the in-memory stores or on a real redis-server, plus a fetch wrapper and
 * helpers that provision accounts through the partner API.
 */
import { afterAll, beforeAll, beforeEach } from 'vitest';
import { Redis } from 'ioredis';
import type { FastifyInstance } from 'fastify';
import { buildApiServer } from '../../src/api/server.js';
import { DEFAULTS, type Config, type PartnerConfig } from '../../src/config.js';
import { createLogger, type Logger } from '../../src/logger.js';
import type { CredentialStore } from '../../src/store/credentials/credentials.js';
import type { Directory } from '../../src/store/directory/directory.js';
import { MemoryDirectory } from '../../src/store/directory/memory.js';
import { RedisDirectory } from '../../src/store/directory/redis.js';
import type { Aor, BindingWrite, LocationStore } from '../../src/store/location/location.js';
import { MemoryCredentialStore } from '../../src/store/credentials/memory.js';
import { MemoryLocationStore } from '../../src/store/location/memory.js';
import { RedisCredentialStore } from '../../src/store/credentials/redis.js';
import { RedisLocationStore } from '../../src/store/location/redis.js';
import type { CallStore } from '../../src/store/calls/calls.js';
import { MemoryCallStore } from '../../src/store/calls/memory.js';
import { RedisCallStore } from '../../src/store/calls/redis.js';
import { sealSigningSecrets } from '../../src/events/signing-secrets.js';
import { createSecretBox, type SecretBox } from '../../src/security/secret-box.js';
import { startRedis, type RedisServerHandle } from './redis-server.mjs';
import { createTrunks, type TrunksDeps } from '../../src/trunks/index.js';
import type { CallControl } from '../../src/calls/control.js';
import type { Messaging } from '../../src/messaging/index.js';
import type { MessagingCatalog } from '../../src/messaging/catalog/index.js';

export type StoreKind = 'memory' | 'redis';
export const STORE_KINDS: StoreKind[] = ['memory', 'redis'];

export const PARTNER: PartnerConfig = Object.freeze({
  id: 'PT-test',
  authId: 'PATESTPARTNER0000001',
  authToken: 'partner-token-0123456789abcdef',
  name: 'Test Partner',
  email: 'partner@example.test',
  password: 'partner-password-1',
  company: 'Partner Co',
  canCreateAccounts: true,
  canTransferBalance: false,
});

/** A partner that may not create accounts. */
export const LIMITED_PARTNER: PartnerConfig = Object.freeze({
  ...PARTNER,
  id: 'PT-limited',
  authId: 'PATESTPARTNER0000002',
  authToken: 'limited-token-0123456789abcdef',
  email: 'limited@example.test',
  canCreateAccounts: false,
});

export interface Creds {
  id: string;
  token: string;
}

export interface Reply {
  status: number;
  headers: Headers;
  text: string;
  /** Parsed JSON body, or undefined when the body is empty. */
  body: unknown;
  /** The body as an object (throws when it is not one). */
  json: Record<string, unknown>;
}

export interface RequestOptions {
  auth?: Creds | null;
  body?: unknown;
  /** Raw body text (sent as is). */
  raw?: string;
  headers?: Record<string, string>;
}

export interface Harness {
  kind: StoreKind;
  base: string;
  app: FastifyInstance;
  location: LocationStore;
  credentials: CredentialStore;
  directory: Directory;
  /** Calls, CDRs and signing secrets (RedisCallStore on the harness's Redis, else memory), signing secrets sealed as the app does. */
  calls: CallStore;
  /** The same store beneath the sealing: what is really kept (signing secrets as `enc:v1:…`). */
  rawCalls: CallStore;
  /** The box sealing signing secrets (the harness config's DATA_ENCRYPTION_KEY, or extra.secretBox). */
  secretBox: SecretBox;
  /** The harness's own Redis connection (null on memory). */
  redis: Redis | null;
  config: Readonly<Config>;
  /** AORs passed to onEndpointRemoved, in order. */
  removed: Aor[];
  request(method: string, path: string, opts?: RequestOptions): Promise<Reply>;
  /** A new customer account through the partner API. */
  newAccount(): Promise<Creds & { sipDomain: string }>;
  /** A new sub-account of `parent`. */
  newSubAccount(parent: Creds, kycMode?: string): Promise<Creds>;
  close(): Promise<void>;
}

export function testConfig(over: Partial<Config> = {}): Readonly<Config> {
  return Object.freeze({
    ...DEFAULTS,
    digestAlgorithms: [...DEFAULTS.digestAlgorithms],
    wsAllowedOrigins: [],
    nodeId: 'test-node',
    partners: [PARTNER, LIMITED_PARTNER],
    production: false,
    sipDomain: 'sip.test',
    nonceSecret: 'test-nonce-secret-0123456789',
    // A fixed test key (kid `test`): 32 bytes, base64.
    dataEncryptionKeys: [{ kid: 'test', key: Buffer.alloc(32, 7).toString('base64') }],
    dataKeySource: 'configured',
    ...over,
  });
}

/** A Redis server shared by the suites of one test file, started on first use. */
let sharedRedis: RedisServerHandle | null = null;
export async function redisServer(): Promise<RedisServerHandle> {
  sharedRedis ??= await startRedis();
  return sharedRedis;
}
export async function stopRedisServer(): Promise<void> {
  const r = sharedRedis;
  sharedRedis = null;
  await r?.stop();
}

/**
 * @param extra.redisUrl a Redis of the test's own (kind `redis`) instead of the shared one.
 * @param extra.calls the call store the API reads CDRs from, instead of the harness's own.
 * @param extra.secretBox the box sealing signing secrets (else one from the config's DATA_ENCRYPTION_KEY).
 * @param extra.trunkDeps the trunks capability's optional dependencies (calls up on a trunk, numbers routed to it).
 * @param extra.callControl the B2BUA behind the Calls API (a test's fake); none: the Calls routes answer 503.
 * @param extra.messaging builds the messaging capability from the harness's stores (else the server builds its own).
 * @param extra.messagingCatalog the messaging catalog whose routes the server registers (none without it).
 */
export async function startHarness(
  kind: StoreKind,
  over: Partial<Config> = {},
  extra: {
    logger?: Logger;
    secretBox?: SecretBox;
    redisUrl?: string;
    calls?: CallStore;
    trunkDeps?: Pick<TrunksDeps, 'activeCalls' | 'numbersUsing'>;
    callControl?: CallControl | null;
    messaging?: (d: { config: Readonly<Config>; redis: Redis | null; calls: CallStore; secretBox: SecretBox }) => Messaging;
    messagingCatalog?: MessagingCatalog;
  } = {},
): Promise<Harness> {
  const config = testConfig(over);
  let location: LocationStore;
  let credentials: CredentialStore;
  let directory: Directory;
  let calls: CallStore;
  let redis: Redis | null = null;
  if (kind === 'memory') {
    location = new MemoryLocationStore({ sweepIntervalMs: 0 });
    credentials = new MemoryCredentialStore();
    directory = new MemoryDirectory();
    calls = new MemoryCallStore();
  } else {
    const url = extra.redisUrl ?? (await redisServer()).url;
    redis = new Redis(url, { maxRetriesPerRequest: 1, lazyConnect: false });
    // A test that stops its Redis must not meet an unhandled 'error' event.
    redis.on('error', () => undefined);
    location = new RedisLocationStore(redis, { closeConnection: false });
    credentials = new RedisCredentialStore(redis, { closeConnection: false });
    directory = new RedisDirectory(redis, { closeConnection: false });
    calls = new RedisCallStore(redis, { closeConnection: false });
  }
  const rawCalls = calls;
  const secretBox = extra.secretBox ?? createSecretBox(config.dataEncryptionKeys.map((k) => ({ kid: k.kid, key: Buffer.from(k.key, 'base64') })));
  calls = sealSigningSecrets(rawCalls, secretBox);
  const removed: Aor[] = [];
  const app = await buildApiServer({
    config,
    logger: extra.logger ?? createLogger('silent'),
    location,
    credentials,
    directory,
    calls,
    redis,
    onEndpointRemoved: (aor) => removed.push(aor),
    ...(extra.calls ? { calls: extra.calls } : {}),
    trunks: createTrunks({ config, redis, secretBox, ...extra.trunkDeps }),
    callControl: extra.callControl ?? null,
    ...(extra.messaging ? { messaging: extra.messaging({ config, redis, calls, secretBox }) } : {}),
    ...(extra.messagingCatalog ? { messagingCatalog: extra.messagingCatalog } : {}),
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const addr = app.server.address();
  if (addr === null || typeof addr === 'string') throw new Error('no address');
  const base = `http://127.0.0.1:${addr.port}`;

  const request = async (method: string, path: string, opts: RequestOptions = {}): Promise<Reply> => {
    const headers: Record<string, string> = { accept: 'application/json', ...opts.headers };
    if (opts.auth) {
      headers['x-auth-id'] = opts.auth.id;
      headers['x-auth-token'] = opts.auth.token;
    }
    let body: string | undefined;
    if (opts.raw !== undefined) body = opts.raw;
    else if (opts.body !== undefined) {
      body = JSON.stringify(opts.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(base + path, { method, headers, body });
    const text = await res.text();
    let parsed: unknown;
    if (text !== '') {
      try {
        parsed = JSON.parse(text);
      } catch {
        parsed = undefined;
      }
    }
    return {
      status: res.status,
      headers: res.headers,
      text,
      body: parsed,
      get json(): Record<string, unknown> {
        if (typeof parsed !== 'object' || parsed === null || Array.isArray(parsed)) {
          throw new Error(`expected a JSON object, got ${res.status} ${JSON.stringify(text)}`);
        }
        return parsed as Record<string, unknown>;
      },
    };
  };

  const partnerCreds: Creds = { id: PARTNER.authId, token: PARTNER.authToken };
  let n = 0;
  const h: Harness = {
    kind,
    base,
    app,
    location,
    credentials,
    directory,
    calls,
    rawCalls,
    secretBox,
    redis,
    config,
    removed,
    request,
    async newAccount() {
      n++;
      const r = await request('POST', '/api/v1/partner/accounts', {
        auth: partnerCreds,
        body: { name: `Customer ${n}`, email: `c${n}@example.test`, password: 'console-password', country: 'in' },
      });
      if (r.status !== 201) throw new Error(`account create: ${r.status} ${r.text}`);
      return { id: String(r.json.auth_id), token: String(r.json.auth_token), sipDomain: String(r.json.sip_domain) };
    },
    async newSubAccount(parent, kycMode = 'personal_use') {
      const r = await request('POST', `/api/v1/Account/${parent.id}/Subaccount/`, {
        auth: parent,
        body: { name: 'Sub', kyc_mode: kycMode },
      });
      if (r.status !== 201) throw new Error(`sub-account create: ${r.status} ${r.text}`);
      return { id: String(r.json.auth_id), token: String(r.json.auth_token) };
    },
    async close() {
      await app.close();
      await location.close();
      await credentials.close();
      await directory.close();
      await calls.close();
      if (redis) {
        redis.disconnect();
      }
    },
  };
  return h;
}

/** A binding as the registrar would write it, for `LocationStore.register`. */
export function bindingWrite(over: Partial<BindingWrite> & { uri: string; expiresAt: number }): BindingWrite {
  return {
    key: over.uri,
    contact: `<${over.uri}>`,
    callId: `call-${Math.random().toString(36).slice(2)}`,
    cseq: 1,
    userAgent: 'TestPhone/1.0',
    received: 'sip:192.0.2.10:5060;transport=udp',
    transport: 'udp',
    path: null,
    q: null,
    instanceId: null,
    regId: null,
    nodeId: null,
    connId: null,
    ...over,
  };
}

/** Register bindings for an AOR straight into the location store. */
export async function registerBindings(location: LocationStore, aor: Aor, writes: BindingWrite[], now = Date.now()): Promise<void> {
  const r = await location.register(aor, {
    callId: writes[0]?.callId ?? 'c',
    cseq: writes[0]?.cseq ?? 1,
    now,
    removeAll: false,
    writes,
    removes: [],
    maxContacts: 10,
  });
  if (!r.ok) throw new Error(`register failed: ${r.code}`);
}

/** What an API suite on one store works with: the harness, a fresh account per test, the resource's path on it. */
export interface ApiSuite {
  readonly h: Harness;
  readonly acct: Creds & { sipDomain: string };
  /** `/api/v1/Account/<acct>/<resource>/` */
  readonly base: string;
}

/**
 * The hooks every API suite starts with (call inside its `describe`): a harness on
 * `kind` for the suite, a new account before each test (and the removed-AOR log
 * cleared), the harness closed after.
 */
export function apiSuite(kind: StoreKind, resource: 'Endpoint' | 'Application' | 'Subaccount'): ApiSuite {
  let h: Harness;
  let acct: Creds & { sipDomain: string };
  beforeAll(async () => {
    h = await startHarness(kind);
  });
  afterAll(async () => {
    await h.close();
  });
  beforeEach(async () => {
    acct = await h.newAccount();
    h.removed.length = 0;
  });
  return {
    get h() {
      return h;
    },
    get acct() {
      return acct;
    },
    get base() {
      return `/api/v1/Account/${acct.id}/${resource}/`;
    },
  };
}
