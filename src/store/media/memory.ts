import type { MediaSession, MediaSessionStore } from './sessions.js';

/** The embedded store's media sessions: one process, a Map with expiry. */
export class MemoryMediaSessionStore implements MediaSessionStore {
  readonly #sessions = new Map<string, { session: MediaSession; expiresAt: number }>();
  #puts = 0;

  async put(callId: string, session: MediaSession, ttlMs: number): Promise<void> {
    const now = Date.now();
    // Calls whose BYE never came are dropped as they lapse (checked every 1,024 writes).
    if (++this.#puts % 1024 === 0) for (const [k, v] of this.#sessions) if (v.expiresAt <= now) this.#sessions.delete(k);
    this.#sessions.set(callId, { session: { ...session }, expiresAt: now + ttlMs });
  }

  async get(callId: string): Promise<MediaSession | null> {
    return this.#read(callId);
  }

  async take(callId: string): Promise<MediaSession | null> {
    // Read and delete in one synchronous step: a second taker finds nothing.
    const s = this.#read(callId);
    this.#sessions.delete(callId);
    return s;
  }

  #read(callId: string): MediaSession | null {
    const v = this.#sessions.get(callId);
    if (!v) return null;
    if (v.expiresAt <= Date.now()) {
      this.#sessions.delete(callId);
      return null;
    }
    return { ...v.session };
  }

  async close(): Promise<void> {
    this.#sessions.clear();
  }
}
