import { createHash } from 'node:crypto';
import { coalesceWrites, type RedisClient } from './client.js';

/** A Lua script and its SHA-1, computed once at load. */
export class LuaScript {
  readonly sha: string;
  constructor(readonly lua: string) {
    this.sha = createHash('sha1').update(lua).digest('hex');
  }
}

/**
 * The one way sip-edge runs a script: EVALSHA, falling back to EVAL once when the
 * server has lost its script cache (restart, failover, SCRIPT FLUSH). Steady
 * state: one round trip, its write shared with the other commands of this turn
 * of the event loop ({@link coalesceWrites}). On a Cluster every key must share
 * one hash slot.
 */
export async function evalScript(redis: RedisClient, s: LuaScript, keys: readonly string[], args: ReadonlyArray<string | number>): Promise<unknown> {
  coalesceWrites(redis);
  try {
    return await redis.evalsha(s.sha, keys.length, ...keys, ...args);
  } catch (err) {
    if (err instanceof Error && err.message.includes('NOSCRIPT')) return await redis.eval(s.lua, keys.length, ...keys, ...args);
    throw err;
  }
}
