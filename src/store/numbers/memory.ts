/**
 * The embedded numbers backend (one process, gone at exit): a map of record texts and
 * the index maps. Every compare-and-set runs synchronously, so it is atomic here.
 */
import type { IndexOp, KvBackend } from './numbers.js';
import { NumbersStore } from './numbers.js';

export class MemoryNumbersBackend implements KvBackend {
  readonly #records = new Map<string, string>();
  readonly #zsets = new Map<string, Map<string, number>>();
  readonly #hashes = new Map<string, Map<string, string>>();
  readonly #leases = new Map<string, number>();

  constructor(private readonly now: () => number = Date.now) {}

  async read(e164: string): Promise<string | null> {
    return this.#records.get(e164) ?? null;
  }

  async readMany(e164s: readonly string[]): Promise<Array<string | null>> {
    return e164s.map((e) => this.#records.get(e) ?? null);
  }

  async cas(e164: string, expected: string | null, next: string | null, ops: readonly IndexOp[]): Promise<boolean> {
    if ((this.#records.get(e164) ?? null) !== expected) return false;
    if (next === null) this.#records.delete(e164);
    else this.#records.set(e164, next);
    for (const o of ops) {
      switch (o.op) {
        case 'zadd':
          this.#zset(o.key).set(o.member, o.score);
          break;
        case 'zrem':
          this.#zset(o.key).delete(o.member);
          break;
        case 'hset':
          this.#hash(o.key).set(o.field, o.value);
          break;
        case 'hdel':
          this.#hash(o.key).delete(o.field);
          break;
      }
    }
    return true;
  }

  #zset(k: string): Map<string, number> {
    let z = this.#zsets.get(k);
    if (!z) this.#zsets.set(k, (z = new Map()));
    return z;
  }

  #hash(k: string): Map<string, string> {
    let h = this.#hashes.get(k);
    if (!h) this.#hashes.set(k, (h = new Map()));
    return h;
  }

  async hgetall(key: string): Promise<Record<string, string>> {
    return Object.fromEntries(this.#hashes.get(key) ?? []);
  }

  async zrangeByScore(key: string, max: number, limit?: number): Promise<string[]> {
    const all = [...(this.#zsets.get(key) ?? [])]
      .filter(([, s]) => s <= max)
      .sort((a, b) => a[1] - b[1] || (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0))
      .map(([m]) => m);
    return limit === undefined ? all : all.slice(0, limit);
  }

  async lease(name: string, ttlMs: number): Promise<boolean> {
    const now = this.now();
    const until = this.#leases.get(name);
    if (until !== undefined && until > now) return false;
    this.#leases.set(name, now + ttlMs);
    return true;
  }

  async close(): Promise<void> {}
}

/** The embedded numbers store. */
export function memoryNumbersStore(now?: () => number): NumbersStore {
  return new NumbersStore(new MemoryNumbersBackend(now));
}
