/**
 * One contract, three backends: the call → rtpengine mapping of relayed calls
 * (docs/media.md "Calls") on the embedded store, a real redis-server and a
 * 3-master Redis Cluster. In-dialog requests on any node read it; the BYE takes
 * it, and only one taker gets it.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { MediaSession, MediaSessionStore } from '../../src/store/media/sessions.js';
import { MemoryMediaSessionStore } from '../../src/store/media/memory.js';
import { RedisMediaSessionStore } from '../../src/store/media/redis.js';
import { redisBackends } from '../support/redis-backends.js';

const rb = redisBackends();

const kinds: Array<{ name: string; create(): MediaSessionStore; reset(): Promise<void> }> = [
  { name: 'MemoryMediaSessionStore', create: () => new MemoryMediaSessionStore(), reset: async () => {} },
  { name: 'RedisMediaSessionStore', create: () => new RedisMediaSessionStore(rb.connect(rb.server.url), { closeConnection: true }), reset: async () => void (await rb.admin.flushdb()) },
  {
    name: 'RedisMediaSessionStore on a 3-master Redis Cluster',
    create: () => new RedisMediaSessionStore(rb.connectCluster(), { closeConnection: true }),
    reset: () => rb.flushCluster(),
  },
];

const S: MediaSession = { engine: '127.0.0.1:22222', fromTag: 'caller-tag', callerWebrtc: true, calleeWebrtc: false };

describe.each(kinds)('$name (MediaSessionStore contract)', (kind) => {
  let store: MediaSessionStore;
  beforeEach(async () => {
    await kind.reset();
    store = kind.create();
  });
  afterEach(async () => {
    await store.close();
  });

  it('returns what was put, for that Call-ID only', async () => {
    await store.put('call-1@host', S, 60_000);
    expect(await store.get('call-1@host')).toEqual(S);
    expect(await store.get('call-2@host')).toBeNull();
  });

  it('a later put replaces the session (a re-answer moves nothing else)', async () => {
    await store.put('c', S, 60_000);
    await store.put('c', { ...S, engine: '127.0.0.2:22222', calleeWebrtc: true }, 60_000);
    expect(await store.get('c')).toEqual({ ...S, engine: '127.0.0.2:22222', calleeWebrtc: true });
  });

  it('take returns the session once and removes it', async () => {
    await store.put('c', S, 60_000);
    expect(await store.take('c')).toEqual(S);
    expect(await store.take('c')).toBeNull();
    expect(await store.get('c')).toBeNull();
  });

  it('two concurrent takers: exactly one gets the session', async () => {
    await store.put('race', S, 60_000);
    const got = await Promise.all([store.take('race'), store.take('race'), store.take('race')]);
    expect(got.filter((g) => g !== null)).toHaveLength(1);
  });

  it('a session lapses after its TTL', async () => {
    await store.put('short', S, 150);
    expect(await store.get('short')).toEqual(S);
    await new Promise((r) => setTimeout(r, 400));
    expect(await store.get('short')).toBeNull();
    expect(await store.take('short')).toBeNull();
  });

  it('Call-IDs with braces, colons and spaces-free odd characters are distinct keys', async () => {
    const ids = ['a{b}c@x', '{tag}@h', 'x:y:z', "q'~`!%*+()<>/[]?"];
    for (const [i, id] of ids.entries()) await store.put(id, { ...S, fromTag: `t${i}` }, 60_000);
    for (const [i, id] of ids.entries()) expect((await store.get(id))?.fromTag).toBe(`t${i}`);
  });
});
