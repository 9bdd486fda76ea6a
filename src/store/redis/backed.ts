import { StoreUnavailableError } from '../../errors.js';
import type { RedisClient } from './client.js';
import { DEFAULT_REDIS_PREFIX } from './keys.js';
import { evalScript, type LuaScript } from './script.js';

/** Options of the Redis stores (location, credentials). */
export interface RedisStoreOptions {
  /** Prefix of every key. Use this, not ioredis `keyPrefix` (which SCAN ignores). @default 'sipedge:' */
  prefix?: string;
  /**
   * Extra lifetime of a binding hash beyond its latest binding expiry, ms. Liveness
   * is always decided against the node clock on read; the TTL only lets Redis drop
   * dead data. The margin absorbs clock skew and in-flight requests.
   * @default 10000
   */
  ttlMarginMs?: number;
  /** How long {@link RedisLocationStore.ping} waits for PONG. @default 1000 */
  pingTimeoutMs?: number;
  /**
   * Whether close() also closes the Redis connection. Off by default: whoever
   * created the connection (app.ts) closes it, and one connection is usually
   * shared by both stores. When on, closing is idempotent and tolerates a
   * connection that is already closed.
   * @default false
   */
  closeConnection?: boolean;
}

/** A Redis failure as the stores report it (→ 503). */
export function unavailable(what: string, err: unknown): StoreUnavailableError {
  const msg = err instanceof Error ? err.message : String(err);
  return new StoreUnavailableError(`redis ${what} failed: ${msg}`, { cause: err });
}

/** Shared connection handling of the Redis stores. */
export abstract class RedisBacked {
  protected readonly redis: RedisClient;
  protected readonly prefix: string;
  readonly #closeConnection: boolean;

  constructor(redis: RedisClient, opts: RedisStoreOptions) {
    if (redis.options.keyPrefix) {
      // SCAN MATCH and our key helpers would disagree with a client-side prefix.
      throw new Error('RedisClient stores: do not set the ioredis `keyPrefix` option; pass `prefix` in the store options');
    }
    this.redis = redis;
    this.prefix = opts.prefix ?? DEFAULT_REDIS_PREFIX;
    this.#closeConnection = opts.closeConnection ?? false;
  }

  /** Run one Redis call; any failure becomes StoreUnavailableError (→ 503). */
  protected async guard<T>(what: string, f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      throw unavailable(what, err);
    }
  }

  /** Run a script of this store (one helper for all: {@link evalScript}). */
  protected evalScript(s: LuaScript, keys: string[], args: Array<string | number>): Promise<unknown> {
    return evalScript(this.redis, s, keys, args);
  }

  async close(): Promise<void> {
    if (!this.#closeConnection) return;
    const st = this.redis.status;
    if (st === 'end' || st === 'close') return;
    if (st === 'ready') {
      try {
        await this.redis.quit();
        return;
      } catch {
        // Fall through: the connection broke under us; drop it.
      }
    }
    // Not connected: QUIT would wait in the offline queue, so cut it instead.
    this.redis.disconnect();
  }
}
