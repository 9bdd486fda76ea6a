import type { CredentialStore, EndpointCredential } from './credentials.js';
import type { RedisEvents } from '../redis/notices.js';

/** Notice topic: `<domain>\0<user>` of a credential that was written or deleted. */
const TOPIC = 'cred-changed';

/** Options of {@link CachedCredentialStore}. */
export interface CredentialCacheOptions {
  /** Most entries kept; past it the cache starts over. @default 200_000 */
  maxEntries?: number;
  /** Longest an entry is trusted, ms (a safety net; notices do the real work). @default 60_000 */
  ttlMs?: number;
  now?: () => number;
}

interface Entry {
  value: EndpointCredential | null;
  at: number;
}

/**
 * The credential store with a per-process cache in front: a registration reads
 * its HA1 from memory instead of Redis (one round trip and one command fewer per
 * authenticated REGISTER).
 *
 * Correctness rests on change notices (RedisEvents): every put/delete — made
 * through this class on any node — publishes the changed key before it returns,
 * and every process drops that entry when it hears it. The cache serves only
 * while its subscription is complete; it is emptied whenever the subscription
 * restarts. A read racing with a change is not cached (generation check), so a
 * process never keeps a value older than a notice it has seen. Unknown users are
 * cached too (null), bounded by `maxEntries`.
 */
export class CachedCredentialStore implements CredentialStore {
  readonly #inner: CredentialStore;
  readonly #events: RedisEvents;
  readonly #cache = new Map<string, Entry>();
  readonly #maxEntries: number;
  readonly #ttlMs: number;
  readonly #now: () => number;
  /** Bumped by every notice and reset: a read that saw another generation is not cached. */
  #generation = 0;
  hits = 0;
  misses = 0;

  constructor(inner: CredentialStore, events: RedisEvents, opts: CredentialCacheOptions = {}) {
    this.#inner = inner;
    this.#events = events;
    this.#maxEntries = opts.maxEntries ?? 200_000;
    this.#ttlMs = opts.ttlMs ?? 60_000;
    this.#now = opts.now ?? Date.now;
    events.on(
      TOPIC,
      (message) => {
        this.#generation++;
        this.#cache.delete(message);
      },
      () => {
        this.#generation++;
        this.#cache.clear();
      },
    );
  }

  async get(domain: string, user: string): Promise<EndpointCredential | null> {
    const key = `${domain}\u0000${user}`;
    const now = this.#now();
    if (this.#events.complete) {
      const e = this.#cache.get(key);
      if (e !== undefined && now - e.at < this.#ttlMs) {
        this.hits++;
        // A copy, as from the store: a caller mutating it must not change the cache.
        return e.value === null ? null : { ...e.value };
      }
    }
    this.misses++;
    const generation = this.#generation;
    const value = await this.#inner.get(domain, user);
    if (this.#events.complete && generation === this.#generation) {
      if (this.#cache.size >= this.#maxEntries) this.#cache.clear();
      this.#cache.set(key, { value: value === null ? null : { ...value }, at: now });
    }
    return value;
  }

  async put(domain: string, user: string, cred: EndpointCredential): Promise<void> {
    await this.#inner.put(domain, user, cred);
    await this.#changed(domain, user);
  }

  async delete(domain: string, user: string): Promise<void> {
    await this.#inner.delete(domain, user);
    await this.#changed(domain, user);
  }

  /** Forget locally at once, then tell every other process (before the caller's answer goes out). */
  async #changed(domain: string, user: string): Promise<void> {
    const key = `${domain}\u0000${user}`;
    this.#generation++;
    this.#cache.delete(key);
    await this.#events.publish(TOPIC, key);
  }

  get size(): number {
    return this.#cache.size;
  }

  close(): Promise<void> {
    this.#cache.clear();
    return this.#inner.close();
  }
}
