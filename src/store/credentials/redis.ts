import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { DEFAULT_REDIS_PREFIX } from '../redis/keys.js';
import type { CredentialStore, EndpointCredential } from './credentials.js';

/** The Redis key of one endpoint's credential hash. */
export function redisCredentialKey(domain: string, user: string, prefix: string = DEFAULT_REDIS_PREFIX): string {
  return `${prefix}cred:{${domain}}:${user}`;
}

/**
 * Endpoint digest credentials on Redis: one hash per endpoint,
 * `<prefix>cred:{<domain>}:<user>` with fields `endpointId`, `ha1Md5`, `ha1Sha256`, and `disabled` = `1` while the endpoint's owner is disabled.
 * Every Redis failure rejects with {@link StoreUnavailableError}.
 */
export class RedisCredentialStore extends RedisBacked implements CredentialStore {
  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
  }

  async get(domain: string, user: string): Promise<EndpointCredential | null> {
    const key = redisCredentialKey(domain, user, this.prefix);
    const h = await this.guard('credential get', () => this.redis.hgetall(key));
    const { endpointId, ha1Md5, ha1Sha256, disabled } = h;
    // A missing or partial hash is no credential: the caller answers as for an
    // unknown user, which never lets anyone in.
    if (typeof endpointId !== 'string' || typeof ha1Md5 !== 'string' || typeof ha1Sha256 !== 'string') return null;
    return disabled === '1' ? { endpointId, ha1Md5, ha1Sha256, disabled: true } : { endpointId, ha1Md5, ha1Sha256 };
  }

  async put(domain: string, user: string, cred: EndpointCredential): Promise<void> {
    const key = redisCredentialKey(domain, user, this.prefix);
    // One HSET sets every field atomically: a reader never sees the new MD5
    // HA1 next to the old SHA-256 one.
    // `disabled` is present only while set; MULTI keeps the HSET and HDEL one step.
    await this.guard('credential put', async () => {
      if (cred.disabled) {
        await this.redis.hset(key, 'endpointId', cred.endpointId, 'ha1Md5', cred.ha1Md5, 'ha1Sha256', cred.ha1Sha256, 'disabled', '1');
        return;
      }
      const r = await this.redis.multi().hset(key, 'endpointId', cred.endpointId, 'ha1Md5', cred.ha1Md5, 'ha1Sha256', cred.ha1Sha256).hdel(key, 'disabled').exec();
      const failed = r?.find(([err]) => err !== null);
      if (failed) throw failed[0] as Error;
    });
  }

  async delete(domain: string, user: string): Promise<void> {
    const key = redisCredentialKey(domain, user, this.prefix);
    await this.guard('credential delete', () => this.redis.del(key));
  }
}
