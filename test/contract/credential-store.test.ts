/**
 * One contract, two stores: MemoryCredentialStore and RedisCredentialStore (on a
 * real redis-server) keep endpoint HA1 credentials identically.
 */
import { Cluster, Redis } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import type { CredentialStore, EndpointCredential } from '../../src/store/credentials/credentials.js';
import { MemoryCredentialStore } from '../../src/store/credentials/memory.js';
import { REDIS_STORE_CLIENT_OPTIONS } from '../../src/store/redis/client.js';
import { RedisCredentialStore, redisCredentialKey } from '../../src/store/credentials/redis.js';
import { startRedis } from '../support/redis-server.mjs';
import { redisBackends } from '../support/redis-backends.js';
import { CachedCredentialStore } from '../../src/store/credentials/cache.js';
import { RedisEvents } from '../../src/store/redis/notices.js';
import { createLogger } from '../../src/logger.js';

const silent = createLogger('silent');

/** A cached store as app.ts builds it on Redis: its own connection and subscriber; close() ends both. */
function cachedStore(url: string): CachedCredentialStore & { events: RedisEvents } {
  const redis = rb.connect(url);
  const events = new RedisEvents(redis, silent);
  const store = new CachedCredentialStore(new RedisCredentialStore(redis, { closeConnection: true }), events);
  const close = store.close.bind(store);
  return Object.assign(store, {
    events,
    close: async () => {
      await events.stop();
      await close();
    },
  });
}

const D1 = 'acme.sip.localhost';
const D2 = 'other.sip.localhost';

const cred = (id: string): EndpointCredential => ({
  endpointId: id,
  ha1Md5: `${id}`.padEnd(32, '0'),
  ha1Sha256: `${id}`.padEnd(64, 'f'),
});

const rb = redisBackends();

interface Kind {
  name: string;
  create(): CredentialStore;
  reset(): Promise<void>;
}

const kinds: Kind[] = [
  { name: 'MemoryCredentialStore', create: () => new MemoryCredentialStore(), reset: async () => {} },
  {
    name: 'RedisCredentialStore',
    create: () => new RedisCredentialStore(rb.connect(rb.server.url), { closeConnection: true }),
    reset: async () => {
      await rb.admin.flushdb();
    },
  },
  {
    name: 'RedisCredentialStore on a 3-master Redis Cluster',
    create: () => new RedisCredentialStore(rb.connectCluster(), { closeConnection: true }),
    reset: async () => {
      await rb.flushCluster();
    },
  },
  {
    name: 'CachedCredentialStore over Redis',
    create: () => cachedStore(rb.server.url),
    reset: async () => {
      await rb.admin.flushdb();
    },
  },
];

describe.each(kinds)('$name (CredentialStore contract)', (kind) => {
  let store: CredentialStore;
  beforeEach(async () => {
    await kind.reset();
    store = kind.create();
  });
  afterEach(async () => {
    await store.close();
  });

  it('returns null for an unknown user', async () => {
    expect(await store.get(D1, 'alice')).toBeNull();
  });

  it('returns what was put', async () => {
    await store.put(D1, 'alice', cred('ep-1'));
    expect(await store.get(D1, 'alice')).toEqual(cred('ep-1'));
  });

  it('put replaces the credential (password change)', async () => {
    await store.put(D1, 'alice', cred('ep-1'));
    const changed = { endpointId: 'ep-1', ha1Md5: 'a'.repeat(32), ha1Sha256: 'b'.repeat(64) };
    await store.put(D1, 'alice', changed);
    expect(await store.get(D1, 'alice')).toEqual(changed);
  });

  it('keeps domains and users apart', async () => {
    await store.put(D1, 'alice', cred('ep-1'));
    await store.put(D2, 'alice', cred('ep-2'));
    await store.put(D1, 'bob', cred('ep-3'));
    expect(await store.get(D1, 'alice')).toEqual(cred('ep-1'));
    expect(await store.get(D2, 'alice')).toEqual(cred('ep-2'));
    expect(await store.get(D1, 'bob')).toEqual(cred('ep-3'));
    expect(await store.get(D2, 'bob')).toBeNull();
  });

  it('delete removes only that user; deleting an unknown user is a no-op', async () => {
    await store.put(D1, 'alice', cred('ep-1'));
    await store.put(D1, 'bob', cred('ep-3'));
    await store.delete(D1, 'alice');
    await store.delete(D1, 'nobody');
    await store.delete('nowhere.sip.localhost', 'alice');
    expect(await store.get(D1, 'alice')).toBeNull();
    expect(await store.get(D1, 'bob')).toEqual(cred('ep-3'));
  });

  it('keeps only the three credential fields, never extra properties such as a password', async () => {
    await store.put(D1, 'alice', { ...cred('ep-1'), password: 'hunter2' } as EndpointCredential);
    const got = await store.get(D1, 'alice');
    expect(got).toEqual(cred('ep-1'));
    expect(got).not.toHaveProperty('password');
  });

  it('returns copies: mutating a result does not change the store', async () => {
    await store.put(D1, 'alice', cred('ep-1'));
    const got = await store.get(D1, 'alice');
    got!.ha1Md5 = 'x';
    expect(await store.get(D1, 'alice')).toEqual(cred('ep-1'));
  });
});

describe('RedisCredentialStore on a real Redis', () => {
  let store: RedisCredentialStore;
  beforeEach(async () => {
    await rb.admin.flushdb();
    store = new RedisCredentialStore(rb.connect(rb.server.url), { closeConnection: true });
  });
  afterEach(async () => {
    await store.close();
  });

  it('keeps one hash per endpoint, tagged with the account domain, with no TTL', async () => {
    await store.put(D1, 'alice', cred('ep-1'));
    const key = redisCredentialKey(D1, 'alice');
    expect(key).toBe('sipedge:cred:{acme.sip.localhost}:alice');
    expect(await rb.admin.hgetall(key)).toEqual(cred('ep-1'));
    expect(await rb.admin.pttl(key)).toBe(-1);
  });

  it('treats a partial hash as no credential', async () => {
    await rb.admin.hset(redisCredentialKey(D1, 'alice'), 'endpointId', 'ep-1', 'ha1Md5', 'a'.repeat(32));
    expect(await store.get(D1, 'alice')).toBeNull();
  });

  it('honours a custom prefix', async () => {
    const other = new RedisCredentialStore(rb.connect(rb.server.url), { prefix: 'blue:', closeConnection: true });
    try {
      await other.put(D1, 'alice', cred('ep-9'));
      expect(await store.get(D1, 'alice')).toBeNull();
      expect(await other.get(D1, 'alice')).toEqual(cred('ep-9'));
      expect(await rb.admin.exists('blue:cred:{acme.sip.localhost}:alice')).toBe(1);
    } finally {
      await other.close();
    }
  });

  it('rejects with StoreUnavailableError when Redis is down, without crashing', async () => {
    const own = await startRedis();
    const r = new Redis(own.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    r.on('error', () => {});
    const s = new RedisCredentialStore(r, { closeConnection: true });
    try {
      await waitUntil(() => r.status === 'ready'); // no offline queue: wait for the connection
      await s.put(D1, 'alice', cred('ep-1'));
      expect(await s.get(D1, 'alice')).toEqual(cred('ep-1'));
      await own.kill9();
      await waitUntil(() => r.status !== 'ready');
      await expect(s.get(D1, 'alice')).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(s.put(D1, 'alice', cred('ep-1'))).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(s.delete(D1, 'alice')).rejects.toBeInstanceOf(StoreUnavailableError);
    } finally {
      await s.close();
      await own.stop();
    }
  });
});

describe('CachedCredentialStore: two processes, one Redis', () => {
  let a: ReturnType<typeof cachedStore>;
  let b: ReturnType<typeof cachedStore>;
  beforeEach(async () => {
    await rb.admin.flushdb();
    a = cachedStore(rb.server.url);
    b = cachedStore(rb.server.url);
    await waitUntil(() => a.events.complete && b.events.complete);
  });
  afterEach(async () => {
    await a.close();
    await b.close();
  });

  /** Lets b's subscriber deliver the notices of a's writes (they travel on another connection). */
  const settle = () => new Promise((r) => setTimeout(r, 50));

  it('serves repeated reads from memory, and a change made through the other process is seen at once', async () => {
    await a.put(D1, 'alice', cred('ep-1'));
    await settle();
    expect(await b.get(D1, 'alice')).toEqual(cred('ep-1'));
    const misses = b.misses;
    for (let i = 0; i < 5; i++) expect(await b.get(D1, 'alice')).toEqual(cred('ep-1'));
    expect(b.misses).toBe(misses);
    expect(b.hits).toBeGreaterThanOrEqual(5);

    const changed = { endpointId: 'ep-1', ha1Md5: 'c'.repeat(32), ha1Sha256: 'd'.repeat(64) };
    await a.put(D1, 'alice', changed); // the password change: resolves after the notice is published
    await waitUntil(() => b.size === 0);
    expect(await b.get(D1, 'alice')).toEqual(changed);
    await a.delete(D1, 'alice');
    await waitUntil(() => b.size === 0);
    expect(await b.get(D1, 'alice')).toBeNull();
  });

  it('caches an unknown user and forgets it when the endpoint is created elsewhere', async () => {
    expect(await b.get(D1, 'carol')).toBeNull();
    expect(b.size).toBe(1);
    await a.put(D1, 'carol', cred('ep-7'));
    await waitUntil(() => b.size === 0);
    expect(await b.get(D1, 'carol')).toEqual(cred('ep-7'));
  });

  it('does not serve from memory while its subscription is down, and starts empty when it is back', async () => {
    await a.put(D1, 'alice', cred('ep-1'));
    await settle();
    expect(await b.get(D1, 'alice')).toEqual(cred('ep-1'));
    expect(b.size).toBe(1);
    // Cut b's subscriber connection: notices published meanwhile would be lost.
    await rb.admin.client('KILL', 'TYPE', 'pubsub');
    await waitUntil(() => !b.events.complete || b.size === 0);
    // A write by someone who bypasses notices (the worst case) is still read while incomplete.
    await rb.admin.hset(redisCredentialKey(D1, 'alice'), 'ha1Md5', 'e'.repeat(32));
    if (!b.events.complete) expect((await b.get(D1, 'alice'))?.ha1Md5).toBe('e'.repeat(32));
    await waitUntil(() => b.events.complete);
    expect(b.size).toBe(0);
    expect((await b.get(D1, 'alice'))?.ha1Md5).toBe('e'.repeat(32));
  });
});

async function waitUntil(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await new Promise((r) => setTimeout(r, 20));
  }
}
