import { describe, expect, it } from 'vitest';
import { loadConfig, redisTarget } from '../../src/config.js';
import { ConfigError } from '../../src/errors.js';

const load = (env: Record<string, string>) => loadConfig(env, { configFile: null });

describe('Redis topology and fleet settings', () => {
  it('REDIS_URL, REDIS_CLUSTER_NODES and REDIS_SENTINELS + REDIS_SENTINEL_NAME each name one target', () => {
    expect(redisTarget(load({}))).toBeNull();
    expect(redisTarget(load({ REDIS_URL: 'redis://10.0.0.5:6379' }))).toEqual({ kind: 'url', url: 'redis://10.0.0.5:6379' });
    expect(redisTarget(load({ REDIS_CLUSTER_NODES: 'redis://10.0.0.1:7000, redis://10.0.0.2:7001' }))).toEqual({
      kind: 'cluster',
      nodes: ['redis://10.0.0.1:7000', 'redis://10.0.0.2:7001'],
    });
    expect(redisTarget(load({ REDIS_SENTINELS: '10.0.0.1:26379,[::1]:26380', REDIS_SENTINEL_NAME: 'edge' }))).toEqual({
      kind: 'sentinel',
      sentinels: [
        { host: '10.0.0.1', port: 26379 },
        { host: '::1', port: 26380 },
      ],
      name: 'edge',
    });
  });

  it.each([
    [{ REDIS_URL: 'redis://a:1', REDIS_CLUSTER_NODES: 'redis://b:2' }, /one of REDIS_URL, REDIS_CLUSTER_NODES, REDIS_SENTINELS and REDIS_SOCKET/],
    [{ REDIS_URL: 'redis://a:1', REDIS_SOCKET: '/run/redis.sock' }, /not several/],
    [{ REDIS_SOCKET: 'run/redis.sock' }, /REDIS_SOCKET must be an absolute path/],
    [{ REDIS_SENTINELS: 'a:1' }, /REDIS_SENTINELS needs REDIS_SENTINEL_NAME/],
    [{ REDIS_CLUSTER_NODES: 'redis://a' }, /REDIS_CLUSTER_NODES: each node must be redis:\/\/host:port/],
    [{ REDIS_SENTINELS: 'a:99999', REDIS_SENTINEL_NAME: 'x' }, /REDIS_SENTINELS: each sentinel must be host:port/],
  ])('refuses %j with a clear error', (env, re) => {
    expect(() => load(env)).toThrowError(ConfigError);
    expect(() => load(env)).toThrowError(re);
  });

  it('REDIS_SOCKET names a Redis on a Unix socket; SIP_WORKERS > 1 with no Redis asks for the store process', () => {
    expect(redisTarget(load({ REDIS_SOCKET: '/run/redis/redis.sock' }))).toEqual({ kind: 'socket', path: '/run/redis/redis.sock' });
    expect(load({ SIP_WORKERS: '2' }).storeProcess).toBe(true);
    expect(load({ SIP_WORKERS: '2' }).redisServerBin).toBe('redis-server');
    expect(load({ SIP_WORKERS: '2', REDIS_SERVER_BIN: '/opt/redis/bin/redis-server' }).redisServerBin).toBe('/opt/redis/bin/redis-server');
    expect(load({ SIP_WORKERS: '2', REDIS_URL: 'redis://h:6379' }).storeProcess).toBe(false);
    expect(load({ SIP_WORKERS: '2', REDIS_SOCKET: '/run/redis.sock' }).storeProcess).toBe(false);
    expect(load({}).storeProcess).toBe(false);
  });

  it('a password in a cluster node URL never appears in the error', () => {
    expect(() => load({ REDIS_CLUSTER_NODES: 'redis://user:s3cret@host' })).toThrowError(/\/\/…@host/);
    try {
      load({ REDIS_CLUSTER_NODES: 'redis://user:s3cret@host' });
    } catch (e) {
      expect(String(e)).not.toContain('s3cret');
    }
  });

  it('SIP_WORKERS > 1 works with a cluster or sentinels; SIP_NODE_ADDRESS is read', () => {
    expect(load({ SIP_WORKERS: '2', REDIS_CLUSTER_NODES: 'redis://h:7000' }).workers).toBe(2);
    expect(load({ SIP_WORKERS: '2', REDIS_SENTINELS: 'h:26379', REDIS_SENTINEL_NAME: 'm' }).workers).toBe(2);
    expect(load({ SIP_NODE_ADDRESS: '10.1.2.3' }).nodeAddress).toBe('10.1.2.3');
    expect(load({}).nodeAddress).toBeNull();
  });
});
