import { Cluster, Redis, type ClusterNode, type RedisOptions } from 'ioredis';

/**
 * Client options the Redis stores are meant to run with; merge them into the
 * options of the `Redis` instance passed in. ioredis by default queues commands
 * while disconnected and retries each up to 20 times, which would hold a REGISTER
 * for many seconds instead of answering 503 at once.
 */
export const REDIS_STORE_CLIENT_OPTIONS: Readonly<RedisOptions> = Object.freeze({
  /** Fail a command after one reconnect attempt rather than twenty. */
  maxRetriesPerRequest: 1,
  /** Bound every command, so a hung server turns into a rejection (→ 503). */
  commandTimeout: 2_000,
  connectTimeout: 2_000,
});


/**
 * What every Redis-backed part takes: one Redis (single server or a Sentinel
 * master) or a Redis Cluster. Both speak the same commands; the differences the
 * code cares about are a SCAN (per master on a cluster: {@link redisMasters}) and
 * that every script's keys share one hash slot (hash tags, README "Storage").
 */
export type RedisClient = Redis | Cluster;

/** Where the Redis of a deployment is: exactly one of the three ways. */
export type RedisTarget =
  | { kind: 'url'; url: string }
  /** Seed nodes of a Redis Cluster (`REDIS_CLUSTER_NODES=redis://h:p,…`); the rest is discovered. */
  | { kind: 'cluster'; nodes: string[] }
  /** Sentinels (`REDIS_SENTINELS=h:p,…`) and the master name they watch (`REDIS_SENTINEL_NAME`). */
  | { kind: 'sentinel'; sentinels: Array<{ host: string; port: number }>; name: string }
  /** A Redis on a Unix socket (`REDIS_SOCKET`; the node's own store process, docs/workers.md). */
  | { kind: 'socket'; path: string };

/**
 * The client for a target. `options` are per-connection options (timeouts,
 * offline queue, pipelining, name); on a cluster they apply to every node
 * connection, with the same fail-fast behaviour as a single server.
 */
export function createRedisClient(target: RedisTarget, options: RedisOptions): RedisClient {
  switch (target.kind) {
    case 'url':
      return new Redis(target.url, options);
    case 'socket':
      return new Redis({ ...options, path: target.path });
    case 'sentinel':
      return new Redis({
        ...options,
        sentinels: target.sentinels,
        name: target.name,
        // Reconnect to the new master as soon as a sentinel announces a switch (+switch-master).
        failoverDetector: true,
        // Sentinel reconnects are bounded like the server's: keep retrying, at most once a second.
        sentinelRetryStrategy: (times: number) => Math.min(200 + times * 100, 1000),
      });
    case 'cluster': {
      const seeds: ClusterNode[] = target.nodes.map((u) => {
        const p = new URL(u);
        return { host: p.hostname, port: Number(p.port || 6379) };
      });
      const first = new URL(target.nodes[0] as string);
      const auth = first.password ? { username: decodeURIComponent(first.username) || undefined, password: decodeURIComponent(first.password) } : {};
      return new Cluster(seeds, {
        redisOptions: { ...options, ...auth, ...(first.protocol === 'rediss:' ? { tls: {} } : {}) },
        enableOfflineQueue: options.enableOfflineQueue,
        enableAutoPipelining: options.enableAutoPipelining,
        // Fail a command once the slot map cannot be refreshed, rather than queueing it.
        clusterRetryStrategy: (times: number) => Math.min(200 + times * 100, 1000),
        scaleReads: 'master',
      });
    }
  }
}

/**
 * The servers a whole-keyspace SCAN must visit: every master of a cluster (a
 * SCAN sent to a Cluster client reaches one node only), else the one server.
 */
export function redisMasters(client: RedisClient): Redis[] {
  return client instanceof Cluster ? client.nodes('master') : [client];
}

/**
 * The commands a single-server (or Sentinel) client sends until the event loop's
 * check phase leave in one socket write: the connection is corked now and uncorked
 * by a setImmediate, so every REGISTER taken from one batch of datagrams (libuv
 * reads up to 32 per wake-up) shares a write. This replaces ioredis auto-pipelining
 * there, which did the same through a Pipeline object, its promise and a
 * nextTick per reply, and held new commands while a batch was in flight: at one
 * command per wake-up (low rates) that machinery cost more than the write it
 * saved (bench/results/2026-11-25-hotpath-cpu.md). A Cluster keeps auto-pipelining
 * (commands go to several node connections).
 */
export function coalesceWrites(client: RedisClient): void {
  if (!(client instanceof Redis) || client.status !== 'ready') return;
  const stream = client.stream;
  if (!stream || stream.writableCorked > 0) return;
  stream.cork();
  setImmediate(() => stream.uncork());
}

/** Whether the client can take commands now (readiness, fail-fast paths). */
export function redisReady(client: RedisClient): boolean {
  return client.status === 'ready';
}
