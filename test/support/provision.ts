import { Redis } from 'ioredis';
import { deriveCredential } from '../../src/provisioning/endpoints.js';
import { RedisCredentialStore } from '../../src/store/credentials/redis.js';
import { RedisLocationStore } from '../../src/store/location/redis.js';
import type { CredentialStore } from '../../src/store/credentials/credentials.js';

export interface TestEndpoint {
  user: string;
  domain: string;
  password: string;
}

/** Writes endpoint credentials (HA1 values only) the way the HTTP API does. */
export async function provision(store: CredentialStore, endpoints: TestEndpoint[]): Promise<void> {
  for (const e of endpoints) {
    await store.put(e.domain, e.user, deriveCredential(`ep-${e.user}`, e.user, e.domain, e.password));
  }
}

/** Stores over a fresh ioredis connection to a test Redis; close() quits it. */
export function redisStores(url: string): {
  redis: Redis;
  credentials: RedisCredentialStore;
  location: RedisLocationStore;
  close(): Promise<void>;
} {
  const redis = new Redis(url, { maxRetriesPerRequest: 1 });
  redis.on('error', () => {});
  return {
    redis,
    credentials: new RedisCredentialStore(redis),
    location: new RedisLocationStore(redis),
    async close() {
      await redis.quit().catch(() => redis.disconnect());
    },
  };
}

/** `count` endpoints user0001… in one account domain. */
export function endpoints(count: number, domain = 'acme.sip.localhost', prefix = 'user'): TestEndpoint[] {
  return Array.from({ length: count }, (_, i) => ({
    user: `${prefix}${String(i + 1).padStart(4, '0')}`,
    domain,
    password: `pw-${prefix}-${i + 1}-secret`,
  }));
}
