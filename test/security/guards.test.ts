/**
 * The security building blocks on their own, with a fake clock: the pike-style
 * rate limiter, connection caps, the password-guessing guard over both counter
 * stores (in process and a real redis-server), the pending-request gate, and
 * the validation of their settings.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { Redis } from 'ioredis';
import { loadConfig } from '../../src/config.js';
import { ConfigError, SipError, StoreUnavailableError } from '../../src/errors.js';
import { createLogger } from '../../src/logger.js';
import { MemoryAuthFailureStore, type AuthFailureStore } from '../../src/security/auth-failure-store.js';
import { AuthGuard, endpointKey } from '../../src/security/auth-guard.js';
import { ConnectionLimiter } from '../../src/security/connection-limiter.js';
import { RedisAuthFailureStore } from '../../src/security/redis-auth-failure-store.js';
import { RequestGate } from '../../src/security/request-gate.js';
import { SourceRateLimiter } from '../../src/security/source-rate-limiter.js';
import { TrustedAddresses } from '../../src/security/trusted-addresses.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { RedisEvents } from '../../src/store/redis/notices.js';

const log = createLogger('silent');

describe('TrustedAddresses', () => {
  it('matches single addresses and CIDR blocks of both families, nothing else', () => {
    const t = new TrustedAddresses(['10.0.0.0/8', '192.0.2.7', '2001:db8::/32', '::1']);
    expect(['10.1.2.3', '192.0.2.7', '2001:db8::5', '::1'].map((a) => t.has(a))).toEqual([true, true, true, true]);
    expect(['11.0.0.1', '192.0.2.8', '2001:db9::1', 'not-an-ip', ''].map((a) => t.has(a))).toEqual([false, false, false, false, false]);
    expect(new TrustedAddresses([]).has('127.0.0.1')).toBe(false);
  });
});

describe('SourceRateLimiter (pike)', () => {
  let now = 1_000_000;
  const make = (o: Partial<ConstructorParameters<typeof SourceRateLimiter>[0]> = {}): SourceRateLimiter =>
    new SourceRateLimiter({ limit: 5, windowMs: 1000, banMs: 10_000, trusted: new TrustedAddresses(['192.0.2.1']), now: () => now, ...o });

  it('admits `limit` messages per window, bans on the next, and drops while banned', () => {
    const l = make();
    const bans: string[] = [];
    const l2 = make({ onBan: (a) => bans.push(a) });
    for (let i = 0; i < 5; i++) expect(l2.admit('198.51.100.1')).toBe(true);
    expect(l2.admit('198.51.100.1')).toBe(false);
    expect(l2.lastDrop).toBe('rate');
    expect(bans).toEqual(['198.51.100.1']);
    expect(l2.isBanned('198.51.100.1')).toBe(true);
    now += 5000;
    expect(l2.admit('198.51.100.1')).toBe(false);
    expect(l2.lastDrop).toBe('banned');
    expect(l2.dropped).toEqual({ rate: 1, banned: 1 });
    expect(l2.bans).toBe(1);
    // Other sources are unaffected.
    expect(l2.admit('198.51.100.2')).toBe(true);
    l.stop();
    l2.stop();
  });

  it('lets a banned source back once the ban ran out, and keeps a source that floods on banned', () => {
    const l = make();
    for (let i = 0; i < 6; i++) l.admit('198.51.100.3');
    now += 10_001;
    expect(l.admit('198.51.100.3')).toBe(true);
    for (let i = 0; i < 6; i++) l.admit('198.51.100.4'); // banned until now + 10 s
    now += 9_000;
    for (let i = 0; i < 6; i++) l.admit('198.51.100.4'); // still flooding: the ban runs on
    now += 2_000;
    expect(l.admit('198.51.100.4')).toBe(false);
    l.stop();
  });

  it('never limits trusted addresses, nor anyone when the limit is off', () => {
    const l = make();
    for (let i = 0; i < 100; i++) expect(l.admit('192.0.2.1')).toBe(true);
    const off = make({ limit: 0 });
    for (let i = 0; i < 100; i++) expect(off.admit('198.51.100.9')).toBe(true);
    l.stop();
    off.stop();
  });

  it('tracks a bounded number of sources, however many spoofed ones arrive', () => {
    const l = make({ maxTracked: 1000 });
    for (let i = 0; i < 50_000; i++) l.admit(`10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`);
    expect(l.tracked).toBeLessThanOrEqual(1000);
    l.stop();
  });
});

describe('ConnectionLimiter', () => {
  it('caps per address (trusted exempt) and in total, refuses banned addresses, and frees slots on release', () => {
    const banned = new Set(['198.51.100.66']);
    const c = new ConnectionLimiter({ maxTotal: 5, maxPerAddress: 2, trusted: new TrustedAddresses(['192.0.2.1']), isBanned: (a) => banned.has(a) });
    expect([c.acquire('198.51.100.1'), c.acquire('198.51.100.1'), c.acquire('198.51.100.1')]).toEqual([null, null, 'per_address']);
    expect(c.acquire('198.51.100.66')).toBe('banned');
    expect([c.acquire('192.0.2.1'), c.acquire('192.0.2.1'), c.acquire('192.0.2.1')]).toEqual([null, null, null]);
    expect(c.acquire('198.51.100.2')).toBe('total');
    expect(c.total).toBe(5);
    c.release('198.51.100.1');
    expect(c.from('198.51.100.1')).toBe(1);
    expect(c.acquire('198.51.100.2')).toBeNull();
    expect(c.refused).toEqual({ banned: 1, per_address: 1, total: 1 });
  });
});

describe.each(['memory', 'redis'] as const)('AuthGuard on the %s counter store', (kind) => {
  let redis: RedisServerHandle | null = null;
  let client: Redis | null = null;
  let now = 1_700_000_000_000;
  let store: AuthFailureStore;

  beforeAll(async () => {
    if (kind === 'redis') {
      redis = await startRedis();
      client = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    }
  });
  afterAll(async () => {
    await client?.quit();
    await redis?.stop();
  });

  /** A fake clock decides blocks; with `realTime` the window is a short real one (Redis TTLs run on real time). */
  const guard = (prefix: string, realTime = false): AuthGuard => {
    store = kind === 'redis' ? new RedisAuthFailureStore(client as Redis, `t${prefix}:`) : new MemoryAuthFailureStore();
    return new AuthGuard({
      store,
      trusted: new TrustedAddresses(['192.0.2.1']),
      windowMs: realTime ? 300 : 60_000,
      maxPerSource: 4,
      maxPerEndpoint: 3,
      cooloffMs: 120_000,
      log,
      now: realTime ? Date.now : () => now,
    });
  };

  it('refuses a source after maxPerSource failures, whatever endpoint it names, until the cooling-off ends', async () => {
    const g = guard('a');
    for (let i = 0; i < 4; i++) {
      expect(await g.check('198.51.100.1', 'd.test', `u${i}`)).toBe('ok');
      await g.failed('198.51.100.1', 'd.test', `u${i}`);
    }
    expect(await g.check('198.51.100.1', 'd.test', 'anyone')).toBe('source');
    expect(await g.check('198.51.100.2', 'd.test', 'anyone')).toBe('ok');
    expect(g.blocks.source).toBe(1);
    now += 120_001;
    expect(await g.check('198.51.100.1', 'd.test', 'anyone')).toBe('ok');
  });

  it('refuses an endpoint after maxPerEndpoint failures to every source except those that authenticated as it', async () => {
    const g = guard('b');
    await g.succeeded('198.51.100.10', 'd.test', 'alice'); // alice's phone
    for (const src of ['198.51.100.20', '198.51.100.21', '198.51.100.22']) await g.failed(src, 'd.test', 'alice');
    expect(g.blocks.endpoint).toBe(1);
    expect(await g.check('198.51.100.23', 'd.test', 'alice')).toBe('endpoint');
    expect(await g.check('198.51.100.10', 'd.test', 'alice')).toBe('ok');
    expect(await g.check('198.51.100.23', 'd.test', 'bob')).toBe('ok');
    expect(g.refused).toEqual({ source: 0, endpoint: 1 });
  });

  it('counts an unknown username exactly like a known one, and forgets failures when the window ends', async () => {
    const g = guard('c', true);
    await g.failed('198.51.100.30', 'd.test', 'ghost');
    await g.failed('198.51.100.31', 'd.test', 'ghost');
    await new Promise((r) => setTimeout(r, 350)); // window over: the count starts again
    await g.failed('198.51.100.32', 'd.test', 'ghost');
    expect(await g.check('198.51.100.33', 'd.test', 'ghost')).toBe('ok');
    await g.failed('198.51.100.34', 'd.test', 'ghost');
    await g.failed('198.51.100.35', 'd.test', 'ghost');
    expect(await g.check('198.51.100.33', 'd.test', 'ghost')).toBe('endpoint');
  });

  it('does not count trusted sources per source', async () => {
    const g = guard('d');
    for (let i = 0; i < 10; i++) await g.failed('192.0.2.1', 'd.test', `t${i}`);
    expect(await g.check('192.0.2.1', 'd.test', 'other')).toBe('ok');
    expect(g.blocks.source).toBe(0);
  });

  it('keys long usernames by hash so a key stays short', () => {
    expect(endpointKey('d.test', 'alice')).toBe('ep:d.test:alice');
    expect(endpointKey('d.test', 'x'.repeat(5000)).length).toBeLessThan(60);
  });
});

describe('AuthGuard across processes sharing Redis (block notices)', () => {
  let server: RedisServerHandle;
  const conns: Redis[] = [];
  const stops: Array<() => Promise<void>> = [];
  beforeAll(async () => {
    server = await startRedis();
  });
  afterAll(async () => {
    for (const s of stops) await s();
    for (const c of conns) c.disconnect();
    await server?.stop();
  });

  /** One process's guard: its own connection and subscriber; `reads` counts the store reads it makes. */
  const node = (): { guard: AuthGuard; reads: () => number; events: RedisEvents } => {
    const c = new Redis(server.url, { maxRetriesPerRequest: 1 });
    c.on('error', () => {});
    conns.push(c);
    const events = new RedisEvents(c, log, 'n:');
    stops.push(() => events.stop());
    const store = new RedisAuthFailureStore(c, 'n:', events);
    let reads = 0;
    const read = store.read.bind(store);
    store.read = (...a) => {
      reads++;
      return read(...a);
    };
    const guard = new AuthGuard({ store, trusted: new TrustedAddresses([]), windowMs: 60_000, maxPerSource: 3, maxPerEndpoint: 3, cooloffMs: 60_000, log });
    return { guard, reads: () => reads, events };
  };
  const ready = async (...ns: Array<{ guard: AuthGuard; events: RedisEvents }>) => {
    const deadline = Date.now() + 5000;
    // Complete = subscribed and the active blocks loaded.
    while (ns.some((n) => !(n.guard as unknown as { opts: { store: AuthFailureStore } }).opts.store.blocksComplete())) {
      if (Date.now() > deadline) throw new Error('guard never complete');
      await new Promise((r) => setTimeout(r, 10));
    }
  };

  it('lets honest requests through without reading Redis, and refuses a source blocked on another node without reading either', async () => {
    const a = node();
    const b = node();
    await ready(a, b);
    for (let i = 0; i < 50; i++) expect(await b.guard.check(`198.51.100.${i}`, 'd.test', `u${i}`)).toBe('ok');
    expect(b.reads()).toBe(0);
    for (let i = 0; i < 3; i++) await a.guard.failed('203.0.113.9', 'd.test', `x${i}`);
    expect(a.guard.blocks.source).toBe(1);
    await new Promise((r) => setTimeout(r, 50)); // the notice travels on b's subscriber connection
    expect(await b.guard.check('203.0.113.9', 'd.test', 'anyone')).toBe('source');
    expect(b.reads()).toBe(0);
  });

  it('reads Redis only for an endpoint under a block (its own phones stay allowed), and a node started later learns the blocks already active', async () => {
    const a = node();
    await ready(a);
    await a.guard.succeeded('198.51.100.200', 'd.test', 'carol');
    for (const src of ['203.0.113.20', '203.0.113.21', '203.0.113.22']) await a.guard.failed(src, 'd.test', 'carol');
    const late = node();
    await ready(late);
    expect(await late.guard.check('203.0.113.23', 'd.test', 'carol')).toBe('endpoint');
    expect(await late.guard.check('198.51.100.200', 'd.test', 'carol')).toBe('ok');
    expect(late.reads()).toBe(2);
    expect(await late.guard.check('203.0.113.23', 'd.test', 'dave')).toBe('ok');
    expect(late.reads()).toBe(2);
  });
});

describe('AuthGuard when its store fails', () => {
  it('fails open (the password is checked) and counts the error', async () => {
    const broken: AuthFailureStore = {
      read: () => Promise.reject(new Error('down')),
      fail: () => Promise.reject(new Error('down')),
      markGood: () => Promise.reject(new Error('down')),
      // Not known to be complete: every check reads the (broken) store.
      blocksComplete: () => false,
      stop: () => {},
    };
    const g = new AuthGuard({ store: broken, trusted: new TrustedAddresses([]), windowMs: 1000, maxPerSource: 1, maxPerEndpoint: 1, cooloffMs: 1000, log });
    expect(await g.check('198.51.100.1', 'd.test', 'a')).toBe('ok');
    await g.failed('198.51.100.1', 'd.test', 'a');
    await g.succeeded('198.51.100.1', 'd.test', 'a');
    expect(g.storeErrors).toBe(3);
  });
});

describe('RequestGate', () => {
  it('bounds requests in flight with 503 + Retry-After, refuses store-bound work while the store is down, and reports idle', async () => {
    let storeUp = true;
    const gate = new RequestGate({ maxPending: 2, storeReady: () => storeUp });
    const releases: Array<() => void> = [];
    const slow = gate.wrap(() => new Promise<string>((r) => releases.push(() => r('done'))), true);
    const a = slow(undefined);
    const b = slow(undefined);
    await expect(slow(undefined)).rejects.toMatchObject({ status: 503, headers: [['Retry-After', '2']] });
    await expect(slow(undefined)).rejects.toBeInstanceOf(SipError);
    expect(gate.pending).toBe(2);
    const idle = gate.idle(1000);
    for (const r of releases) r();
    expect(await Promise.all([a, b])).toEqual(['done', 'done']);
    expect(await idle).toBe(true);
    storeUp = false;
    await expect(slow(undefined)).rejects.toBeInstanceOf(StoreUnavailableError);
    const options = gate.wrap(async () => 'ok', false);
    expect(await options(undefined)).toBe('ok');
    expect(gate.refused).toEqual({ overload: 2, store: 1 });
    expect(await gate.idle(10)).toBe(true);
  });
});

describe('hardening settings', () => {
  const load = (env: Record<string, string>) => loadConfig(env, { configFile: null });

  it('has the documented defaults', () => {
    const c = load({});
    expect([c.rateLimit, c.rateWindow, c.banTime]).toEqual([100, 2, 300]);
    expect(c.trustedAddresses).toEqual(['127.0.0.0/8', '::1']);
    expect([c.authMaxFailuresPerSource, c.authMaxFailuresPerEndpoint, c.authFailureWindow, c.authCooloff]).toEqual([20, 10, 300, 900]);
    expect([c.maxConnectionsPerAddress, c.headerTimeout, c.maxPendingRequests, c.maxTransactions]).toEqual([200, 10, 5000, 200_000]);
    expect([c.tlsCiphers, c.tlsMinVersion]).toEqual([null, 'TLSv1.2']);
  });

  it('reads off, none, CIDR lists, cipher lists and TLS versions', () => {
    const c = load({ SIP_RATE_LIMIT: 'off', SIP_TRUSTED_ADDRESSES: '10.0.0.0/8, 2001:db8::1', TLS_CIPHERS: 'ECDHE-ECDSA-AES128-GCM-SHA256', TLS_MIN_VERSION: 'TLSv1.3' });
    expect(c.rateLimit).toBe(0);
    expect(c.trustedAddresses).toEqual(['10.0.0.0/8', '2001:db8::1']);
    expect(c.tlsCiphers).toBe('ECDHE-ECDSA-AES128-GCM-SHA256');
    expect(c.tlsMinVersion).toBe('TLSv1.3');
    expect(load({ SIP_TRUSTED_ADDRESSES: 'none' }).trustedAddresses).toEqual([]);
  });

  it.each([
    [{ SIP_RATE_LIMIT: 'lots' }, /SIP_RATE_LIMIT/],
    [{ SIP_TRUSTED_ADDRESSES: '10.0.0.0/33' }, /SIP_TRUSTED_ADDRESSES/],
    [{ SIP_TRUSTED_ADDRESSES: 'example.com' }, /SIP_TRUSTED_ADDRESSES/],
    [{ TLS_CIPHERS: 'NO-SUCH-CIPHER' }, /TLS_CIPHERS/],
    [{ TLS_MIN_VERSION: 'TLSv1.1' }, /TLS_MIN_VERSION/],
    [{ SIP_HEADER_TIMEOUT: '0' }, /SIP_HEADER_TIMEOUT/],
    [{ SIP_MAX_TRANSACTIONS: '10' }, /SIP_MAX_TRANSACTIONS/],
  ])('refuses %o with a ConfigError naming it', (env, re) => {
    expect(() => load(env)).toThrowError(ConfigError);
    expect(() => load(env)).toThrowError(re);
  });
});
