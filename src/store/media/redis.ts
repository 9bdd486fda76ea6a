import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { parseMediaSession, type MediaSession, type MediaSessionStore } from './sessions.js';

/**
 * Media sessions shared by the fleet (docs/media.md "Calls"):
 *
 *   sipedge:media:<Call-ID>  string  JSON MediaSession; PX = the longest call
 *
 * One key per call, so every command is single-key and works on Redis Cluster
 * whatever slot the Call-ID hashes to; the BYE's GETDEL (Redis ≥ 6.2) makes
 * exactly one node see the session.
 */
export class RedisMediaSessionStore extends RedisBacked implements MediaSessionStore {
  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
  }

  private key(callId: string): string {
    return `${this.prefix}media:${callId}`;
  }

  async put(callId: string, session: MediaSession, ttlMs: number): Promise<void> {
    await this.guard('media put', () => this.redis.set(this.key(callId), JSON.stringify(session), 'PX', Math.max(1, Math.round(ttlMs))));
  }

  async get(callId: string): Promise<MediaSession | null> {
    return parseMediaSession(await this.guard('media get', () => this.redis.get(this.key(callId))));
  }

  async take(callId: string): Promise<MediaSession | null> {
    return parseMediaSession(await this.guard('media take', () => this.redis.getdel(this.key(callId))));
  }
}
