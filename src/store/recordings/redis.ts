import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { matches, newestFirst, type RecordingFilter, type RecordingRecord, type RecordingStore } from './recordings.js';

/**
 * Recordings on Redis (single server, Sentinel master or Cluster). Every key of an account
 * shares its `{domain}` hash tag (one Cluster slot):
 *
 *     <p>rec:{<domain>}              zset  recording_id by createdAt (the account's index)
 *     <p>rec-meta:{<domain>}         hash  recording_id → JSON (RecordingRecord)
 *     <p>rec-audio:{<domain>}:<id>   string  the WAV bytes (at most 10 MiB: calls/recording.ts)
 *
 * The meta hash is the truth; `list` of a whole account reads one page of the index, a
 * filtered list (sub-account, call_uuid) reads the hash.
 */
export class RedisRecordingStore extends RedisBacked implements RecordingStore {
  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
  }

  #index(domain: string): string {
    return `${this.prefix}rec:{${domain}}`;
  }

  #meta(domain: string): string {
    return `${this.prefix}rec-meta:{${domain}}`;
  }

  #audio(domain: string, id: string): string {
    return `${this.prefix}rec-audio:{${domain}}:${id}`;
  }

  async put(r: RecordingRecord, audio: Buffer): Promise<void> {
    await this.guard('recording put', async () => {
      // The audio first: a listed recording always has its bytes.
      await this.redis.set(this.#audio(r.domain, r.recordingId), audio);
      await this.redis.multi().hset(this.#meta(r.domain), r.recordingId, JSON.stringify(r)).zadd(this.#index(r.domain), r.createdAt, r.recordingId).exec();
    });
  }

  async get(domain: string, recordingId: string): Promise<RecordingRecord | null> {
    const v = await this.guard('recording get', () => this.redis.hget(this.#meta(domain), recordingId));
    return v ? (JSON.parse(v) as RecordingRecord) : null;
  }

  async audio(domain: string, recordingId: string): Promise<Buffer | null> {
    return this.guard('recording audio', async () => {
      if (!(await this.redis.hexists(this.#meta(domain), recordingId))) return null;
      return this.redis.getBuffer(this.#audio(domain, recordingId));
    });
  }

  async list(domain: string, f: RecordingFilter): Promise<{ total: number; items: RecordingRecord[] }> {
    return this.guard('recording list', async () => {
      if (!f.subAccount && f.callUuid === undefined) {
        // The whole account: one page of the index.
        const total = await this.redis.zcard(this.#index(domain));
        const ids = f.limit > 0 ? await this.redis.zrevrange(this.#index(domain), f.offset, f.offset + f.limit - 1) : [];
        const metas = ids.length > 0 ? await this.redis.hmget(this.#meta(domain), ...ids) : [];
        return { total, items: metas.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as RecordingRecord) };
      }
      const all = (await this.redis.hvals(this.#meta(domain))).map((v) => JSON.parse(v) as RecordingRecord);
      const hit = all.filter((r) => matches(r, f)).sort(newestFirst);
      return { total: hit.length, items: hit.slice(f.offset, f.offset + f.limit) };
    });
  }

  async delete(domain: string, recordingId: string): Promise<boolean> {
    return this.guard('recording delete', async () => {
      const r = await this.redis.multi().hdel(this.#meta(domain), recordingId).zrem(this.#index(domain), recordingId).del(this.#audio(domain, recordingId)).exec();
      return r?.[0]?.[1] === 1;
    });
  }
}
