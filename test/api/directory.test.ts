/**
 * One contract suite for both directories (MemoryDirectory, RedisDirectory on a
 * real redis-server): the same calls give the same answers.
 */
import { createRedisClient, type RedisClient } from '../../src/store/redis/client.js';
import { startRedisCluster, type RedisClusterHandle } from '../support/redis-topologies.js';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  accountSipDomain,
  compareByCreation,
  hashToken,
  newAuthId,
  newAuthToken,
  newNumericId,
  tokenMatches,
  type AccountRecord,
  type ApplicationRecord,
  type Directory,
  type EndpointRecord,
  type IdempotencyRecord,
  type SubAccountRecord,
} from '../../src/store/directory/directory.js';
import { MemoryDirectory } from '../../src/store/directory/memory.js';
import { RedisDirectory } from '../../src/store/directory/redis.js';
import { StoreUnavailableError } from '../../src/errors.js';
import { redisServer, stopRedisServer } from '../support/api-harness.js';

afterAll(stopRedisServer);

let clock = Date.parse('2030-01-01T00:00:00.000Z');
const tick = (): string => new Date((clock += 1000)).toISOString();

function account(): AccountRecord {
  const authId = newAuthId('MA');
  const t = tick();
  return {
    authId,
    tokenHash: hashToken('token'),
    passwordHash: null,
    name: 'n',
    email: 'e@example.test',
    country: 'IN',
    accountType: 'PREPAID',
    enabled: true,
    cpsLimit: 10,
    concurrentCallsLimit: 100,
    sipDomain: accountSipDomain(authId, 'sip.test'),
    partnerId: null,
    createdAt: t,
    updatedAt: t,
  };
}

function sub(parent: string): SubAccountRecord {
  const t = tick();
  return {
    authId: newAuthId('SA'),
    parentAuthId: parent,
    tokenHash: hashToken('sub-token'),
    name: 's',
    enabled: true,
    kycMode: 'personal_use',
    businessType: '',
    kycCallsBlocked: false,
    createdAt: t,
    updatedAt: t,
  };
}

function endpoint(acct: string, username: string, over: Partial<EndpointRecord> = {}): EndpointRecord {
  const t = tick();
  return {
    endpointId: newNumericId(),
    accountAuthId: acct,
    username,
    alias: username,
    appId: null,
    subAccount: null,
    allowVoice: true,
    allowMessage: true,
    allowVideo: false,
    allowSameDomain: true,
    allowOtherDomains: false,
    allowPhones: true,
    allowApps: true,
    createdAt: t,
    updatedAt: t,
    ...over,
  };
}

function application(acct: string, over: Partial<ApplicationRecord> = {}): ApplicationRecord {
  const t = tick();
  return {
    appId: newNumericId(),
    accountAuthId: acct,
    subAccount: null,
    settings: {
      app_name: 'a',
      application_type: 'XML',
      answer_url: 'https://e.test/',
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
      default_app: false,
      enabled: true,
      log_incoming_message: true,
      public_uri: false,
    },
    defaultEndpointApp: false,
    createdAt: t,
    updatedAt: t,
    ...over,
  };
}

const page = { limit: 100, offset: 0 };

describe('directory helpers', () => {
  it('hashes tokens and compares them in constant time', () => {
    const t = newAuthToken();
    expect(t).toMatch(/^[A-Za-z0-9]{40}$/);
    expect(tokenMatches(t, hashToken(t))).toBe(true);
    expect(tokenMatches(`${t}x`, hashToken(t))).toBe(false);
    expect(tokenMatches(t, 'not-hex')).toBe(false);
  });

  it('makes ids of the documented shapes', () => {
    expect(newAuthId('MA')).toMatch(/^MA[A-Z0-9]{18}$/);
    expect(newAuthId('SA')).toMatch(/^SA[A-Z0-9]{18}$/);
    const id = newNumericId();
    expect(id).toMatch(/^[1-9]\d{14}$/);
    expect(Number.isSafeInteger(Number(id))).toBe(true);
  });
});

describe.each(['memory', 'redis', 'redis-cluster'] as const)('Directory contract (%s)', (kind) => {
  let dir: Directory;
  let redis: RedisClient | null = null;
  let cluster: RedisClusterHandle | null = null;
  let acct: AccountRecord;

  beforeAll(async () => {
    if (kind === 'redis') {
      redis = new Redis((await redisServer()).url);
      dir = new RedisDirectory(redis);
    } else if (kind === 'redis-cluster') {
      // A real 3-master cluster: every key of an account shares its hash tag.
      cluster = await startRedisCluster();
      redis = createRedisClient({ kind: 'cluster', nodes: cluster.urls }, {});
      dir = new RedisDirectory(redis);
    } else {
      dir = new MemoryDirectory();
    }
  });
  afterAll(async () => {
    await dir.close();
    redis?.disconnect();
    await cluster?.stop();
  });
  beforeEach(async () => {
    acct = account();
    expect(await dir.createAccount(acct)).toBe(true);
  });

  it('stores accounts once per Auth ID and finds them as principals', async () => {
    expect(await dir.createAccount(acct)).toBe(false);
    expect(await dir.getAccount(acct.authId)).toEqual(acct);
    expect(await dir.findPrincipal(acct.authId)).toEqual({ kind: 'account', account: acct });
    expect(await dir.findPrincipal('MANOSUCHACCOUNT00000')).toBeNull();
  });

  it('finds a sub-account as a principal with its parent; its Auth ID cannot become an account', async () => {
    const s = sub(acct.authId);
    expect(await dir.createSubAccount(s)).toBe(true);
    expect(await dir.createSubAccount(s)).toBe(false);
    expect(await dir.findPrincipal(s.authId)).toEqual({ kind: 'subaccount', account: acct, subAccount: s });
    expect(await dir.createAccount({ ...account(), authId: s.authId })).toBe(false);
    const updated = await dir.updateSubAccount(acct.authId, s.authId, { enabled: false, updatedAt: tick() });
    expect(updated?.enabled).toBe(false);
    expect((await dir.listSubAccounts(acct.authId, page)).items.map((x) => x.authId)).toEqual([s.authId]);
    expect(await dir.deleteSubAccount(acct.authId, s.authId)).toBe('ok');
    expect(await dir.findPrincipal(s.authId)).toBeNull();
    expect(await dir.deleteSubAccount(acct.authId, s.authId)).toBe('not_found');
  });

  it('keeps usernames unique per account ignoring case, and other accounts independent', async () => {
    expect(await dir.createEndpoint(endpoint(acct.authId, 'alice'))).toBe('ok');
    expect(await dir.createEndpoint(endpoint(acct.authId, 'Alice'))).toBe('username_taken');
    const other = account();
    await dir.createAccount(other);
    expect(await dir.createEndpoint(endpoint(other.authId, 'alice'))).toBe('ok');
  });

  it('retires the username of a deleted endpoint; an undone create frees it', async () => {
    const a = endpoint(acct.authId, 'alice');
    await dir.createEndpoint(a);
    expect(await dir.deleteEndpoint(acct.authId, a.endpointId, { retire: true })).toEqual(a);
    expect(await dir.getEndpoint(acct.authId, a.endpointId)).toBeNull();
    expect(await dir.createEndpoint(endpoint(acct.authId, 'ALICE'))).toBe('username_retired');
    const b = endpoint(acct.authId, 'bob');
    await dir.createEndpoint(b);
    await dir.deleteEndpoint(acct.authId, b.endpointId, { retire: false });
    expect(await dir.createEndpoint(endpoint(acct.authId, 'bob'))).toBe('ok');
    expect(await dir.deleteEndpoint(acct.authId, a.endpointId, { retire: true })).toBeNull();
  });

  it('checks the sub-account and application of a new endpoint atomically', async () => {
    expect(await dir.createEndpoint(endpoint(acct.authId, 'x', { subAccount: 'SANOSUCH' }))).toBe('no_subaccount');
    expect(await dir.createEndpoint(endpoint(acct.authId, 'y', { appId: '999' }))).toBe('no_application');
    const e = endpoint(acct.authId, 'z');
    await dir.createEndpoint(e);
    expect(await dir.createEndpoint({ ...endpoint(acct.authId, 'w'), endpointId: e.endpointId })).toBe('id_taken');
  });

  it('lists in creation order with every filter, paging after filtering', async () => {
    const s = sub(acct.authId);
    await dir.createSubAccount(s);
    const app = application(acct.authId);
    await dir.createApplication(app);
    const eps = [
      endpoint(acct.authId, 'alice', { alias: 'front-desk' }),
      endpoint(acct.authId, 'alicia', { alias: 'back_office' }),
      endpoint(acct.authId, 'bob', { appId: app.appId }),
      endpoint(acct.authId, 'carol', { subAccount: s.authId }),
    ];
    for (const e of eps) expect(await dir.createEndpoint(e)).toBe('ok');
    const names = async (q: Parameters<Directory['listEndpoints']>[1], p = page) => {
      const r = await dir.listEndpoints(acct.authId, q, p);
      return [r.total, r.items.map((e) => e.username)];
    };
    expect(await names({})).toEqual([4, ['alice', 'alicia', 'bob', 'carol']]);
    expect(await names({}, { limit: 2, offset: 1 })).toEqual([4, ['alicia', 'bob']]);
    expect(await names({ usernameContains: 'lic' })).toEqual([2, ['alice', 'alicia']]);
    expect(await names({ usernameContains: 'lic' }, { limit: 1, offset: 1 })).toEqual([2, ['alicia']]);
    expect(await names({ usernameExact: 'alice' })).toEqual([1, ['alice']]);
    expect(await names({ usernameExact: 'ALICE' })).toEqual([1, ['alice']]); // as usernames are unique: ignoring case
    expect(await names({ usernameStartswith: 'ali' })).toEqual([2, ['alice', 'alicia']]);
    expect(await names({ aliasContains: 'desk' })).toEqual([1, ['alice']]);
    expect(await names({ aliasExact: 'back_office' })).toEqual([1, ['alicia']]);
    expect(await names({ appIdExact: app.appId })).toEqual([1, ['bob']]);
    expect(await names({ appIdExact: app.appId, usernameStartswith: 'x' })).toEqual([0, []]);
    expect(await names({ appIdIsNull: true })).toEqual([3, ['alice', 'alicia', 'carol']]);
    expect(await names({ appIdIsNull: false })).toEqual([1, ['bob']]);
    expect(await names({ subAccount: s.authId })).toEqual([1, ['carol']]);
    expect(await names({ subAccount: s.authId, usernameContains: 'car' })).toEqual([1, ['carol']]);
  });

  it('scans accounts larger than one batch for substring filters', async () => {
    if (redis) dir = new RedisDirectory(redis, { scanBatch: 3 });
    for (let i = 0; i < 10; i++) await dir.createEndpoint(endpoint(acct.authId, `user${i}`, { alias: i % 2 ? 'odd' : 'even' }));
    const r = await dir.listEndpoints(acct.authId, { aliasExact: 'odd' }, { limit: 2, offset: 1 });
    expect(r.total).toBe(5);
    expect(r.items.map((e) => e.username)).toEqual(['user3', 'user5']);
  });

  it('keeps list order and pages right through creates out of order, equal times, updates and deletes', async () => {
    const s = sub(acct.authId);
    await dir.createSubAccount(s);
    const app = application(acct.authId);
    await dir.createApplication(app);
    // Creation times from a small set (ties broken by endpoint_id), created in a
    // scrambled order, so the index must insert in the middle, not only append.
    const base = clock + 1_000_000;
    const live = new Map<string, EndpointRecord>();
    for (let i = 0; i < 40; i++) {
      const at = new Date(base + ((i * 7) % 5) * 1000).toISOString();
      const e = endpoint(acct.authId, `user${i}`, {
        createdAt: at,
        updatedAt: at,
        alias: i % 3 === 0 ? `three${i}` : `other${i}`,
        subAccount: i % 4 === 0 ? s.authId : null,
      });
      expect(await dir.createEndpoint(e)).toBe('ok');
      live.set(e.endpointId, e);
    }
    // Updates keep an endpoint where it was; deletes take it out of every index.
    const ids = [...live.keys()];
    for (const id of ids.slice(0, 10)) {
      const r = await dir.updateEndpoint(acct.authId, id, { alias: `upd${id}`, appId: app.appId, updatedAt: tick() });
      expect(r.ok).toBe(true);
      if (r.ok) live.set(id, r.endpoint);
    }
    for (const id of ids.filter((_, i) => i % 5 === 2)) {
      expect(await dir.deleteEndpoint(acct.authId, id, { retire: true })).not.toBeNull();
      live.delete(id);
    }
    // One more at the earliest time: it goes to the front.
    const first = endpoint(acct.authId, 'early', { createdAt: new Date(base - 1000).toISOString(), subAccount: s.authId });
    expect(await dir.createEndpoint(first)).toBe('ok');
    live.set(first.endpointId, first);

    const order = (xs: EndpointRecord[]) =>
      [...xs].sort((a, b) => compareByCreation({ createdAt: a.createdAt, id: a.endpointId }, { createdAt: b.createdAt, id: b.endpointId }));
    const check = async (q: Parameters<Directory['listEndpoints']>[1], pred: (e: EndpointRecord) => boolean) => {
      const want = order([...live.values()].filter(pred));
      for (const limit of [1, 7, 100, 2000]) {
        for (let offset = 0; offset <= want.length + limit; offset += limit) {
          const r = await dir.listEndpoints(acct.authId, q, { limit, offset });
          expect(r.total).toBe(want.length);
          expect(r.items).toEqual(want.slice(offset, offset + limit));
        }
      }
    };
    await check({}, () => true);
    await check({ subAccount: s.authId }, (e) => e.subAccount === s.authId);
    await check({ aliasContains: 'three' }, (e) => e.alias.includes('three'));
    await check({ appIdExact: app.appId }, (e) => e.appId === app.appId);
    await check({ subAccount: s.authId, appIdIsNull: true }, (e) => e.subAccount === s.authId && e.appId === null);

    // Emptying a sub-account lets it be deleted.
    for (const e of [...live.values()].filter((x) => x.subAccount === s.authId)) {
      await dir.deleteEndpoint(acct.authId, e.endpointId, { retire: true });
      live.delete(e.endpointId);
    }
    await check({ subAccount: s.authId }, () => false);
    await check({}, () => true);
    expect(await dir.deleteSubAccount(acct.authId, s.authId)).toBe('ok');
  });

  it('updates only the patched fields and refuses a missing application', async () => {
    const e = endpoint(acct.authId, 'alice');
    await dir.createEndpoint(e);
    const t = tick();
    const r = await dir.updateEndpoint(acct.authId, e.endpointId, { alias: 'new', allowVideo: true, updatedAt: t });
    expect(r).toEqual({ ok: true, endpoint: { ...e, alias: 'new', allowVideo: true, updatedAt: t } });
    expect(await dir.getEndpoint(acct.authId, e.endpointId)).toEqual({ ...e, alias: 'new', allowVideo: true, updatedAt: t });
    expect(await dir.updateEndpoint(acct.authId, e.endpointId, { appId: '1', updatedAt: t })).toEqual({ ok: false, reason: 'no_application' });
    expect(await dir.updateEndpoint(acct.authId, '1', { alias: 'x', updatedAt: t })).toEqual({ ok: false, reason: 'not_found' });
  });

  it('concurrent updates of one endpoint all land (no lost update)', async () => {
    const e = endpoint(acct.authId, 'alice');
    await dir.createEndpoint(e);
    await Promise.all([
      dir.updateEndpoint(acct.authId, e.endpointId, { alias: 'a1', updatedAt: tick() }),
      dir.updateEndpoint(acct.authId, e.endpointId, { allowVideo: true, updatedAt: tick() }),
      dir.updateEndpoint(acct.authId, e.endpointId, { allowVoice: false, updatedAt: tick() }),
    ]);
    expect(await dir.getEndpoint(acct.authId, e.endpointId)).toMatchObject({ alias: 'a1', allowVideo: true, allowVoice: false });
  });

  it('keeps one default endpoint application per owner and detaches a deleted application', async () => {
    const s = sub(acct.authId);
    await dir.createSubAccount(s);
    const a1 = application(acct.authId, { defaultEndpointApp: true });
    const a2 = application(acct.authId);
    const a3 = application(acct.authId, { subAccount: s.authId, defaultEndpointApp: true });
    for (const a of [a1, a2, a3]) expect(await dir.createApplication(a)).toBe('ok');
    expect(await dir.createApplication(application(acct.authId, { subAccount: 'SANOSUCH' }))).toBe('no_subaccount');
    expect((await dir.getDefaultEndpointApp(acct.authId, null))?.appId).toBe(a1.appId);
    expect((await dir.getDefaultEndpointApp(acct.authId, s.authId))?.appId).toBe(a3.appId);
    await dir.updateApplication(acct.authId, a2.appId, { defaultEndpointApp: true, settings: { app_name: 'two' }, updatedAt: tick() });
    expect((await dir.getApplication(acct.authId, a1.appId))?.defaultEndpointApp).toBe(false);
    const got = await dir.getApplication(acct.authId, a2.appId);
    expect(got?.defaultEndpointApp).toBe(true);
    expect(got?.settings.app_name).toBe('two');
    expect((await dir.listApplications(acct.authId, { subAccount: s.authId }, page)).items.map((a) => a.appId)).toEqual([a3.appId]);
    expect((await dir.listApplications(acct.authId, {}, page)).total).toBe(3);
    expect([...(await dir.getApplications(acct.authId, [a1.appId, '1', a3.appId])).keys()]).toEqual([a1.appId, a3.appId]);

    const e = endpoint(acct.authId, 'alice', { appId: a2.appId });
    await dir.createEndpoint(e);
    expect(await dir.deleteApplication(acct.authId, a2.appId)).toBe(true);
    expect(await dir.deleteApplication(acct.authId, a2.appId)).toBe(false);
    expect((await dir.getEndpoint(acct.authId, e.endpointId))?.appId).toBeNull();
    expect(await dir.getDefaultEndpointApp(acct.authId, null)).toBeNull();
    expect((await dir.listEndpoints(acct.authId, { appIdExact: a2.appId }, page)).total).toBe(0);
  });

  it('refuses to delete a sub-account that still owns endpoints or applications', async () => {
    const s = sub(acct.authId);
    await dir.createSubAccount(s);
    const e = endpoint(acct.authId, 'alice', { subAccount: s.authId });
    await dir.createEndpoint(e);
    expect(await dir.deleteSubAccount(acct.authId, s.authId)).toBe('not_empty');
    await dir.deleteEndpoint(acct.authId, e.endpointId, { retire: true });
    const a = application(acct.authId, { subAccount: s.authId });
    await dir.createApplication(a);
    expect(await dir.deleteSubAccount(acct.authId, s.authId)).toBe('not_empty');
    await dir.deleteApplication(acct.authId, a.appId);
    expect(await dir.deleteSubAccount(acct.authId, s.authId)).toBe('ok');
  });

  it('reserves an idempotency key once, replaces it with the response, frees it on abandon, forgets it after the TTL', async () => {
    const pending: IdempotencyRecord = { state: 'pending', fingerprint: 'f', status: 0, body: '', createdAt: 1 };
    const done: IdempotencyRecord = { ...pending, state: 'done', status: 201, body: 'sealed' };
    expect(await dir.beginIdempotent(acct.authId, 'k1', pending, 60_000)).toBeNull();
    expect(await dir.beginIdempotent(acct.authId, 'k1', pending, 60_000)).toEqual(pending);
    await dir.completeIdempotent(acct.authId, 'k1', done, 60_000);
    expect(await dir.beginIdempotent(acct.authId, 'k1', pending, 60_000)).toEqual(done);
    expect(await dir.beginIdempotent('OTHER', 'k1', pending, 60_000)).toBeNull();
    expect(await dir.beginIdempotent(acct.authId, 'k2', pending, 60_000)).toBeNull();
    await dir.abandonIdempotent(acct.authId, 'k2');
    expect(await dir.beginIdempotent(acct.authId, 'k2', pending, 60_000)).toBeNull();
    expect(await dir.beginIdempotent(acct.authId, 'k3', pending, 50)).toBeNull();
    await new Promise((r) => setTimeout(r, 120));
    expect(await dir.beginIdempotent(acct.authId, 'k3', pending, 60_000)).toBeNull();
  });

  it('answers ping', async () => {
    expect(await dir.ping()).toBe(true);
  });
});

describe('RedisDirectory without a server', () => {
  it('rejects with StoreUnavailableError and ping answers false', async () => {
    const redis = new Redis({ port: 1, lazyConnect: true, maxRetriesPerRequest: 0, enableOfflineQueue: false, retryStrategy: () => null });
    const dir = new RedisDirectory(redis);
    try {
      await expect(dir.getAccount('MA1')).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(await dir.ping()).toBe(false);
    } finally {
      redis.disconnect();
    }
  });
});
