import { newestFirst, type LiveCallRecord, type LiveCallStore } from './live-calls.js';

/** Live calls in this process (the embedded store: one process, nothing to share). */
export class MemoryLiveCallStore implements LiveCallStore {
  readonly #calls = new Map<string, LiveCallRecord>();

  async put(r: LiveCallRecord): Promise<void> {
    this.#calls.set(`${r.domain}\n${r.callUuid}`, structuredClone(r));
  }

  async get(domain: string, callUuid: string): Promise<LiveCallRecord | null> {
    const r = this.#calls.get(`${domain}\n${callUuid}`);
    return r ? structuredClone(r) : null;
  }

  async list(domain: string): Promise<LiveCallRecord[]> {
    return [...this.#calls.values()].filter((r) => r.domain === domain).map((r) => structuredClone(r)).sort(newestFirst);
  }

  async remove(domain: string, callUuid: string): Promise<boolean> {
    return this.#calls.delete(`${domain}\n${callUuid}`);
  }

  async ofOwner(owner: string): Promise<LiveCallRecord[]> {
    return [...this.#calls.values()].filter((r) => r.owner === owner).map((r) => structuredClone(r));
  }

  async close(): Promise<void> {}
}
