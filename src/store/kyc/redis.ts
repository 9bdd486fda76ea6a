import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { jsonObject } from '../redis/json.js';
import { byCreation, VERIFICATION_TYPES, type KycStore, type VerificationRow, type VerificationType } from './kyc.js';

/**
 * KYC rows on Redis (single server, Sentinel master or Cluster). Everything of one
 * sub-account is one hash under its own hash tag, so a write (the row and the
 * "latest of its type" pointer) is one HSET in one slot:
 *
 *     <p>kyc:{<sub_auth_id>}    hash  row:<id> → JSON, latest:<type> → row id
 */
export class RedisKycStore extends RedisBacked implements KycStore {
  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
  }

  #key(sub: string): string {
    return `${this.prefix}kyc:{${sub}}`;
  }

  async put(row: VerificationRow): Promise<void> {
    await this.guard('kyc put', () => this.redis.hset(this.#key(row.subAuthId), `row:${row.id}`, JSON.stringify(row), `latest:${row.type}`, row.id));
  }

  async latest(subAuthId: string): Promise<Partial<Record<VerificationType, VerificationRow>>> {
    const key = this.#key(subAuthId);
    const ids = await this.guard('kyc latest', () => this.redis.hmget(key, ...VERIFICATION_TYPES.map((t) => `latest:${t}`)));
    const wanted = VERIFICATION_TYPES.map((t, i) => [t, ids[i]] as const).filter((p): p is readonly [VerificationType, string] => typeof p[1] === 'string');
    if (wanted.length === 0) return {};
    const jsons = await this.guard('kyc latest', () => this.redis.hmget(key, ...wanted.map(([, id]) => `row:${id}`)));
    const out: Partial<Record<VerificationType, VerificationRow>> = {};
    wanted.forEach(([t], i) => {
      const r = parseRow(jsons[i]);
      if (r) out[t] = r;
    });
    return out;
  }

  async rows(subAuthId: string): Promise<VerificationRow[]> {
    const all = await this.guard('kyc rows', () => this.redis.hgetall(this.#key(subAuthId)));
    const out: VerificationRow[] = [];
    for (const [f, v] of Object.entries(all)) {
      if (!f.startsWith('row:')) continue;
      const r = parseRow(v);
      if (r) out.push(r);
    }
    return out.sort(byCreation);
  }

  async clear(subAuthId: string): Promise<void> {
    await this.guard('kyc clear', () => this.redis.del(this.#key(subAuthId)));
  }
}

function parseRow(text: unknown): VerificationRow | null {
  const o = jsonObject(text);
  if (!o || typeof o.id !== 'string' || typeof o.subAuthId !== 'string' || typeof o.type !== 'string') return null;
  return o as unknown as VerificationRow;
}
