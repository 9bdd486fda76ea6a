import { Cluster } from 'ioredis';
import type { RedisClient } from './client.js';
import { StoreUnavailableError } from '../../errors.js';
import type { Logger } from '../../logger.js';

/**
 * Notices between the processes that share one Redis (nodes, and the workers of
 * one node): "this credential changed", "this source is now blocked". One
 * subscriber connection per process, Redis pub/sub.
 *
 * Pub/sub is fire-and-forget: a process that is not subscribed at the moment of
 * a publish never hears of it. So whoever keeps state derived from notices must
 * treat it as complete only while {@link complete} is true, and must drop it
 * whenever the subscription (re)starts (`onReset`): between a lost connection
 * and the new SUBSCRIBE, anything may have changed.
 */
export class RedisEvents {
  readonly #sub: RedisClient;
  readonly #pub: RedisClient;
  readonly #handlers = new Map<string, (message: string) => void>();
  readonly #resets: Array<() => void> = [];
  #subscribed = false;
  #stopped = false;

  constructor(redis: RedisClient, private readonly log: Logger, private readonly prefix = 'sipedge:') {
    this.#pub = redis;
    // Its own connection: a subscribed connection can run no other command.
    // On a Cluster, classic pub/sub is broadcast over the cluster bus: one subscription
    // (on whichever node ioredis picks) hears every publish.
    this.#sub =
      redis instanceof Cluster
        ? redis.duplicate(undefined, { enableAutoPipelining: false, redisOptions: { ...redis.options.redisOptions, connectionName: undefined } })
        : redis.duplicate({ enableAutoPipelining: false, autoResubscribe: false, connectionName: undefined });
    this.#sub.on('error', (err: Error) => this.log.debug({ err: err.message }, 'redis subscriber error'));
    this.#sub.on('message', (channel: string, message: string) => this.#handlers.get(channel)?.(message));
    this.#sub.on('close', () => this.#lost());
    this.#sub.on('ready', () => void this.#subscribe());
  }

  /** True while every notice published since the last reset has been (or will be) delivered. */
  get complete(): boolean {
    return this.#subscribed;
  }

  /** Handle notices on `topic`; call before the connection is ready (at wiring time). */
  on(topic: string, handler: (message: string) => void, onReset?: () => void): void {
    this.#handlers.set(this.prefix + topic, handler);
    if (onReset) this.#resets.push(onReset);
    if (this.#sub.status === 'ready') void this.#subscribe();
  }

  /** Publish a notice; resolves once Redis has taken it (and delivered it to the subscribers). */
  async publish(topic: string, message: string): Promise<void> {
    try {
      await this.#pub.publish(this.prefix + topic, message);
    } catch (err) {
      throw new StoreUnavailableError(`redis publish failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }

  async #subscribe(): Promise<void> {
    if (this.#stopped || this.#handlers.size === 0) return;
    try {
      await this.#sub.subscribe(...this.#handlers.keys());
    } catch (err) {
      this.log.debug({ err: err instanceof Error ? err.message : String(err) }, 'redis subscribe failed');
      return;
    }
    // Whatever was derived before this point may have missed notices.
    for (const r of this.#resets) r();
    this.#subscribed = true;
  }

  #lost(): void {
    if (!this.#subscribed) return;
    this.#subscribed = false;
    for (const r of this.#resets) r();
  }

  async stop(): Promise<void> {
    this.#stopped = true;
    this.#subscribed = false;
    this.#sub.disconnect();
  }
}
