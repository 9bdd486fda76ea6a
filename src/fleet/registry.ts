import type { Logger } from '../logger.js';
import type { RedisClient } from '../store/redis/client.js';
import { DEFAULT_REDIS_PREFIX } from '../store/redis/keys.js';
import { aorKey, type Aor, type LocationStore } from '../store/location/location.js';

/** How often a process says it is alive. */
export const FLEET_BEAT_MS = 1_000;
/** A process not heard of for this long is dead: its flow bindings are removed (docs/fleet.md). */
export const FLEET_DEAD_AFTER_MS = 5_000;
/** One reaper at a time per dead process, for at most this long. */
const REAP_LOCK_MS = 10_000;

/** What a process says of itself in the registry. */
export interface ProcessEntry {
  id: string;
  /** The address other nodes reach this one on (SIP_NODE_ADDRESS, else SIP_HOST), or null. */
  node: string | null;
  pid: number;
  startedAt: number;
  /** When it last said so (ms since the epoch). */
  seen: number;
}

export interface FleetRegistryOptions {
  redis: RedisClient;
  location: LocationStore;
  /** This process start's identity (the `nodeId` of the bindings of its flows). */
  processId: string;
  node: string | null;
  log: Logger;
  prefix?: string;
  /** A dead process's bindings were removed (metrics). */
  onReaped?: (count: number) => void;
}

/**
 * The fleet registry (docs/fleet.md): every process of every node that shares the
 * Redis says it is alive once a second, in one hash (`{fleet}` hash tag: one
 * Cluster slot). A process that stops saying so for FLEET_DEAD_AFTER_MS — a
 * SIGKILLed worker, a node that lost power — is dead, and one survivor (the one
 * that wins a short lock) removes the bindings of its TCP/TLS/WS flows: nothing
 * can reach them any more. UDP bindings stay: the phone answers the node's shared
 * address, which any process of that node can send from.
 *
 * @remarks
 * Each process keeps, per process id, the set of AORs it has written flow bindings
 * for (`flows:<id>`). It is written next to the REGISTER (not in its script: another
 * slot), so it may name more AORs than hold such bindings; the reaper checks each
 * binding's owner before removing it.
 */
export class FleetRegistry {
  readonly #o: FleetRegistryOptions;
  readonly #procs: string;
  readonly #startedAt = Date.now();
  #timer: NodeJS.Timeout | null = null;
  #noted = new Set<string>();
  #beating: Promise<void> | null = null;

  constructor(o: FleetRegistryOptions) {
    this.#o = o;
    this.#procs = `${o.prefix ?? DEFAULT_REDIS_PREFIX}{fleet}:procs`;
  }

  start(): void {
    if (this.#timer) return;
    const beat = (): void => {
      this.#beating ??= this.#beat().finally(() => {
        this.#beating = null;
      });
    };
    beat();
    this.#timer = setInterval(beat, FLEET_BEAT_MS);
    this.#timer.unref();
  }

  /** A flow binding of `aor` was written by this process (the reaper's index). */
  noteFlowAor(aor: Aor): void {
    const k = aorKey(aor);
    if (this.#noted.has(k)) return;
    this.#noted.add(k);
    this.#o.redis.sadd(this.#flowsKey(this.#o.processId), `${aor.domain}\n${aor.user}`).catch((err: unknown) => {
      // Not fatal: the bindings still go when their flow closes; only a crash would leave them.
      this.#noted.delete(k);
      this.#o.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'fleet: could not index a flow binding');
    });
  }

  /** Clean stop: this process leaves the registry (its flows closed and took their bindings). */
  async stop(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    await this.#beating;
    try {
      await this.#o.redis.hdel(this.#procs, this.#o.processId);
      await this.#o.redis.del(this.#flowsKey(this.#o.processId));
    } catch {
      // Redis away at shutdown: the survivors reap this process in a few seconds.
    }
  }

  /** The processes the registry lists now (tests, operators). */
  async processes(): Promise<ProcessEntry[]> {
    const all = await this.#o.redis.hgetall(this.#procs);
    return Object.values(all).flatMap((v) => {
      try {
        return [JSON.parse(v) as ProcessEntry];
      } catch {
        return [];
      }
    });
  }

  async #beat(): Promise<void> {
    const { redis, processId, node, log } = this.#o;
    const now = Date.now();
    try {
      const me: ProcessEntry = { id: processId, node, pid: process.pid, startedAt: this.#startedAt, seen: now };
      await redis.hset(this.#procs, processId, JSON.stringify(me));
      for (const p of await this.processes()) {
        if (p.id !== processId && now - p.seen > FLEET_DEAD_AFTER_MS) await this.#reap(p);
      }
    } catch (err) {
      log.debug({ err: err instanceof Error ? err.message : String(err) }, 'fleet: heartbeat failed');
    }
  }

  /** Remove a dead process's flow bindings, if this process wins the job. */
  async #reap(dead: ProcessEntry): Promise<void> {
    const { redis, location, log } = this.#o;
    const lock = `${this.#procs.slice(0, -'procs'.length)}reap:${dead.id}`;
    if ((await redis.set(lock, this.#o.processId, 'PX', REAP_LOCK_MS, 'NX')) !== 'OK') return;
    const flows = this.#flowsKey(dead.id);
    let removed = 0;
    for (const member of await redis.smembers(flows)) {
      const nl = member.indexOf('\n');
      if (nl <= 0) continue;
      const aor: Aor = { domain: member.slice(0, nl), user: member.slice(nl + 1) };
      const keys = (await location.lookup(aor)).filter((b) => b.nodeId === dead.id && b.connId !== null).map((b) => b.key);
      if (keys.length > 0) removed += await location.removeKeys(aor, keys);
    }
    await redis.del(flows);
    await redis.hdel(this.#procs, dead.id);
    this.#o.onReaped?.(removed);
    log.info({ process: dead.id, node: dead.node, silentMs: Date.now() - dead.seen, bindings: removed }, 'fleet: process dead; its flow bindings removed (unregistered)');
  }

  #flowsKey(id: string): string {
    return `${this.#procs.slice(0, -'procs'.length)}flows:${id}`;
  }
}
