import { matches, newestFirst, type RecordingFilter, type RecordingRecord, type RecordingStore } from './recordings.js';

/** Recordings in this process (the embedded store: one process, nothing to share). */
export class MemoryRecordingStore implements RecordingStore {
  readonly #items = new Map<string, { r: RecordingRecord; audio: Buffer }>();

  async put(r: RecordingRecord, audio: Buffer): Promise<void> {
    this.#items.set(`${r.domain}\n${r.recordingId}`, { r: structuredClone(r), audio: Buffer.from(audio) });
  }

  async get(domain: string, recordingId: string): Promise<RecordingRecord | null> {
    const x = this.#items.get(`${domain}\n${recordingId}`);
    return x ? structuredClone(x.r) : null;
  }

  async audio(domain: string, recordingId: string): Promise<Buffer | null> {
    const x = this.#items.get(`${domain}\n${recordingId}`);
    return x ? Buffer.from(x.audio) : null;
  }

  async list(domain: string, f: RecordingFilter): Promise<{ total: number; items: RecordingRecord[] }> {
    const all = [...this.#items.values()].map((x) => x.r).filter((r) => r.domain === domain && matches(r, f)).sort(newestFirst);
    return { total: all.length, items: all.slice(f.offset, f.offset + f.limit).map((r) => structuredClone(r)) };
  }

  async delete(domain: string, recordingId: string): Promise<boolean> {
    return this.#items.delete(`${domain}\n${recordingId}`);
  }

  async close(): Promise<void> {}
}
