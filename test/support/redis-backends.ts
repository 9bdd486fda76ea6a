/**
 * The Redis side of the store contract suites: one redis-server and one real
 * 3-master Redis Cluster per test file (started in beforeAll, stopped in
 * afterAll), clients that are closed with them, and an admin connection to each.
 * Call at module level of a test file.
 */
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { afterAll, beforeAll } from 'vitest';
import { createRedisClient, REDIS_STORE_CLIENT_OPTIONS } from '../../src/store/redis/client.js';
import { startRedisCluster, type RedisClusterHandle } from './redis-topologies.js';
import { startRedis, type RedisServerHandle } from './redis-server.mjs';

export interface RedisBackends {
  readonly server: RedisServerHandle;
  /** A connection to the single server for assertions on keys. */
  readonly admin: Redis;
  /** A connection to the cluster for assertions and resets. */
  readonly clusterAdmin: Cluster;
  /** Connection errors seen by the clients made here. */
  readonly clientErrors: Error[];
  /** A store client of the single server (the options a server uses, plus `opts`). */
  connect(url: string, opts?: RedisOptions): Redis;
  /** A store client of the cluster, as the server builds it from REDIS_CLUSTER_NODES. */
  connectCluster(): Cluster;
  /** Empty every master of the cluster. */
  flushCluster(): Promise<void>;
}

export function redisBackends(): RedisBackends {
  let server: RedisServerHandle;
  let cluster: RedisClusterHandle;
  let admin: Redis;
  let clusterAdmin: Cluster;
  const clients: Array<Redis | Cluster> = [];
  const clientErrors: Error[] = [];
  const connect = (url: string, opts: RedisOptions = {}): Redis => {
    const r = new Redis(url, { ...REDIS_STORE_CLIENT_OPTIONS, ...opts });
    // A listener, so connection errors are never unhandled 'error' events.
    r.on('error', (e: Error) => clientErrors.push(e));
    clients.push(r);
    return r;
  };
  const connectCluster = (): Cluster => {
    const c = createRedisClient({ kind: 'cluster', nodes: cluster.urls }, { ...REDIS_STORE_CLIENT_OPTIONS }) as Cluster;
    c.on('error', (e: Error) => clientErrors.push(e));
    clients.push(c);
    return c;
  };
  beforeAll(async () => {
    [server, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
    admin = connect(server.url);
    clusterAdmin = connectCluster();
  }, 60_000);
  afterAll(async () => {
    for (const c of clients) c.disconnect();
    await Promise.all([server?.stop(), cluster?.stop()]);
  });
  return {
    get server() {
      return server;
    },
    get admin() {
      return admin;
    },
    get clusterAdmin() {
      return clusterAdmin;
    },
    clientErrors,
    connect,
    connectCluster,
    async flushCluster() {
      await Promise.all(clusterAdmin.nodes('master').map((n) => n.flushdb()));
    },
  };
}
