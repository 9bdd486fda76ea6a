import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { newestFirst, type LiveCallRecord, type LiveCallStore } from './live-calls.js';

/**
 * Live calls on Redis (single server, Sentinel master or Cluster):
 *
 *     <p>live:{<domain>}            hash  call_uuid → JSON       (the account's calls)
 *     <p>live-owner:<process id>    set   "<domain>\n<call_uuid>" (the calls a process runs)
 *
 * The account hash is the truth; the owner set is an index the reaper reads (a member whose
 * call is gone is skipped and removed). `remove` is one HDEL: exactly one remover wins.
 */
export class RedisLiveCallStore extends RedisBacked implements LiveCallStore {
  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
  }

  #calls(domain: string): string {
    return `${this.prefix}live:{${domain}}`;
  }

  #owner(owner: string): string {
    return `${this.prefix}live-owner:${owner}`;
  }

  async put(r: LiveCallRecord): Promise<void> {
    await this.guard('live call put', async () => {
      await this.redis.hset(this.#calls(r.domain), r.callUuid, JSON.stringify(r));
      await this.redis.sadd(this.#owner(r.owner), `${r.domain}\n${r.callUuid}`);
    });
  }

  async get(domain: string, callUuid: string): Promise<LiveCallRecord | null> {
    const v = await this.guard('live call get', () => this.redis.hget(this.#calls(domain), callUuid));
    return v ? (JSON.parse(v) as LiveCallRecord) : null;
  }

  async list(domain: string): Promise<LiveCallRecord[]> {
    const all = await this.guard('live call list', () => this.redis.hvals(this.#calls(domain)));
    return all.map((v) => JSON.parse(v) as LiveCallRecord).sort(newestFirst);
  }

  async remove(domain: string, callUuid: string): Promise<boolean> {
    return this.guard('live call remove', async () => {
      const r = await this.get(domain, callUuid);
      const n = await this.redis.hdel(this.#calls(domain), callUuid);
      if (r) await this.redis.srem(this.#owner(r.owner), `${domain}\n${callUuid}`);
      return n === 1;
    });
  }

  async ofOwner(owner: string): Promise<LiveCallRecord[]> {
    return this.guard('live calls of a process', async () => {
      const members = await this.redis.smembers(this.#owner(owner));
      const out: LiveCallRecord[] = [];
      for (const m of members) {
        const [domain, callUuid] = m.split('\n') as [string, string];
        const r = await this.get(domain, callUuid);
        if (r && r.owner === owner) out.push(r);
        else await this.redis.srem(this.#owner(owner), m);
      }
      return out;
    });
  }
}
