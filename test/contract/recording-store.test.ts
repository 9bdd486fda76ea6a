/**
 * One contract, three backends: finished call recordings (docs/calls.md "Recording") —
 * their figures and WAV bytes, per account — on the embedded store, a real redis-server
 * and a 3-master Redis Cluster (every key of an account in one slot). Any node serves a
 * recording: what one put, another reads byte for byte.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RecordingRecord, RecordingStore } from '../../src/store/recordings/recordings.js';
import { MemoryRecordingStore } from '../../src/store/recordings/memory.js';
import { RedisRecordingStore } from '../../src/store/recordings/redis.js';
import { redisBackends } from '../support/redis-backends.js';

const rb = redisBackends();

const kinds: Array<{ name: string; create(): RecordingStore; reset(): Promise<void> }> = [
  { name: 'MemoryRecordingStore', create: () => new MemoryRecordingStore(), reset: async () => {} },
  { name: 'RedisRecordingStore', create: () => new RedisRecordingStore(rb.connect(rb.server.url), { closeConnection: true }), reset: async () => void (await rb.admin.flushdb()) },
  { name: 'RedisRecordingStore on a 3-master Redis Cluster', create: () => new RedisRecordingStore(rb.connectCluster(), { closeConnection: true }), reset: () => rb.flushCluster() },
];

const D = 'acme.sip.example';
const rec = (id: string, over: Partial<RecordingRecord> = {}): RecordingRecord => ({
  recordingId: id,
  domain: D,
  authId: 'MAACME',
  subAccount: null,
  callUuid: 'call-1',
  source: 'xml',
  durationMs: 3000,
  format: 'wav',
  size: 48044,
  from: '+15550001111',
  to: 'sip:bob@acme.sip.example',
  createdAt: 1_700_000_000_000,
  ...over,
});
/** Bytes no text encoding would keep: every byte value. */
const BYTES = Buffer.from(Array.from({ length: 1024 }, (_, i) => i % 256));

describe.each(kinds)('$name (RecordingStore contract)', (kind) => {
  let store: RecordingStore;
  beforeEach(async () => {
    await kind.reset();
    store = kind.create();
  });
  afterEach(async () => {
    await store.close();
  });

  it('returns what was put, the audio byte for byte; another account does not see it', async () => {
    await store.put(rec('r1'), BYTES);
    expect(await store.get(D, 'r1')).toEqual(rec('r1'));
    expect(Buffer.compare((await store.audio(D, 'r1')) as Buffer, BYTES)).toBe(0);
    expect(await store.get('other.sip.example', 'r1')).toBeNull();
    expect(await store.audio('other.sip.example', 'r1')).toBeNull();
    expect(await store.get(D, 'nope')).toBeNull();
  });

  it('a second store on the same backend reads it (any node serves a recording)', async () => {
    await store.put(rec('shared'), BYTES);
    const other = kind.name.startsWith('Memory') ? store : kind.create();
    try {
      expect((await other.get(D, 'shared'))?.durationMs).toBe(3000);
      expect((await other.audio(D, 'shared'))?.length).toBe(BYTES.length);
    } finally {
      if (other !== store) await other.close();
    }
  });

  it('lists newest first with limit/offset and the total', async () => {
    for (let i = 0; i < 5; i++) await store.put(rec(`r${i}`, { createdAt: 1_700_000_000_000 + i * 1000 }), BYTES);
    const all = await store.list(D, { limit: 10, offset: 0 });
    expect(all.total).toBe(5);
    expect(all.items.map((r) => r.recordingId)).toEqual(['r4', 'r3', 'r2', 'r1', 'r0']);
    const page = await store.list(D, { limit: 2, offset: 1 });
    expect(page.total).toBe(5);
    expect(page.items.map((r) => r.recordingId)).toEqual(['r3', 'r2']);
    expect((await store.list(D, { limit: 2, offset: 10 })).items).toEqual([]);
    expect(await store.list('other.sip.example', { limit: 10, offset: 0 })).toEqual({ total: 0, items: [] });
  });

  it('filters by call_uuid and by sub-account', async () => {
    await store.put(rec('a', { callUuid: 'c1', createdAt: 1 }), BYTES);
    await store.put(rec('b', { callUuid: 'c2', createdAt: 2, subAccount: 'SA1' }), BYTES);
    await store.put(rec('c', { callUuid: 'c1', createdAt: 3, subAccount: 'SA1' }), BYTES);
    const c1 = await store.list(D, { callUuid: 'c1', limit: 10, offset: 0 });
    expect(c1.total).toBe(2);
    expect(c1.items.map((r) => r.recordingId)).toEqual(['c', 'a']);
    const sub = await store.list(D, { subAccount: 'SA1', limit: 1, offset: 0 });
    expect(sub.total).toBe(2);
    expect(sub.items.map((r) => r.recordingId)).toEqual(['c']);
    expect((await store.list(D, { subAccount: 'SA1', callUuid: 'c2', limit: 10, offset: 0 })).items.map((r) => r.recordingId)).toEqual(['b']);
  });

  it('delete removes the figures, the audio and the listing entry; once', async () => {
    await store.put(rec('gone'), BYTES);
    await store.put(rec('kept', { createdAt: 5 }), BYTES);
    expect(await store.delete(D, 'gone')).toBe(true);
    expect(await store.delete(D, 'gone')).toBe(false);
    expect(await store.get(D, 'gone')).toBeNull();
    expect(await store.audio(D, 'gone')).toBeNull();
    expect(await store.list(D, { limit: 10, offset: 0 })).toEqual({ total: 1, items: [rec('kept', { createdAt: 5 })] });
  });

  it('a recording of the 10 MiB cap round-trips', async () => {
    const big = Buffer.alloc(10 * 1024 * 1024, 0x5a);
    big[big.length - 1] = 0x01;
    await store.put(rec('big', { size: big.length }), big);
    const got = (await store.audio(D, 'big')) as Buffer;
    expect(got.length).toBe(big.length);
    expect(got[got.length - 1]).toBe(0x01);
  });
});
