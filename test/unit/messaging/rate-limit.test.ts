/**
 * The messaging rate limiter (src/messaging/rate-limit.ts): three fixed windows at once,
 * a refused request counted in none, the binding window in the headers; the same
 * behaviour from the memory counters and from the Redis script on a real redis-server.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { MemoryRateLimiter, RedisRateLimiter, type RateLimiter, type RateWindow } from '../../../src/messaging/rate-limit.js';
import { startRedis, type RedisServerHandle } from '../../support/redis-server.mjs';

const WINDOWS: RateWindow[] = [
  { name: 'minute', ms: 60_000, limit: 5 },
  { name: 'hour', ms: 3_600_000, limit: 8 },
  { name: 'day', ms: 86_400_000, limit: 10 },
];

let server: RedisServerHandle;
let redis: Redis;
beforeAll(async () => {
  server = await startRedis();
  redis = new Redis(server.url);
});
afterAll(async () => {
  redis.disconnect();
  await server.stop();
});

const kinds: Array<[string, () => RateLimiter]> = [
  ['memory', () => new MemoryRateLimiter(WINDOWS)],
  ['Redis', () => new RedisRateLimiter(redis, WINDOWS, `test:${Math.random()}:`)],
];

describe.each(kinds)('rate limiter on %s', (_name, make) => {
  it('minute, hour and day at once; a refused request counts in none; Retry-After is when the refusing window starts again', async () => {
    const rl = make();
    const t0 = Date.UTC(2026, 0, 1, 10, 0, 0); // the start of a minute, an hour and a day
    for (let i = 0; i < 5; i++) expect((await rl.hit('k', t0 + i)).allowed).toBe(true);
    const v5 = await rl.hit('k', t0 + 10_000);
    expect(v5).toMatchObject({ allowed: false, limit: 5, remaining: 0, resetS: 50, window: { name: 'minute' } });
    // Another key is unaffected.
    expect((await rl.hit('other', t0 + 10_000)).allowed).toBe(true);
    // The next minute: 3 more fit the hour (8), then the hour refuses until 11:00.
    for (let i = 0; i < 3; i++) expect((await rl.hit('k', t0 + 60_000 + i)).allowed).toBe(true);
    const vh = await rl.hit('k', t0 + 61_000);
    expect(vh).toMatchObject({ allowed: false, limit: 8, window: { name: 'hour' }, resetS: 3600 - 61 });
    // The next hour: 2 more fit the day (10); then the day refuses.
    const h1 = t0 + 3_600_000;
    const first = await rl.hit('k', h1);
    expect(first).toMatchObject({ allowed: true, limit: 10, remaining: 1, window: { name: 'day' } });
    expect((await rl.hit('k', h1 + 1)).allowed).toBe(true);
    const vd = await rl.hit('k', h1 + 2);
    expect(vd).toMatchObject({ allowed: false, window: { name: 'day' }, resetS: 13 * 3600 });
  });
});
