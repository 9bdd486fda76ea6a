import { Cluster } from 'ioredis';
import type { Destination, FlowRelay } from '../core/destination.js';
import type { Logger } from '../logger.js';
import type { Flow, SipTransportName } from '../transport/types.js';
import type { RedisClient } from '../store/redis/client.js';
import { DEFAULT_REDIS_PREFIX } from '../store/redis/keys.js';
import { aorKey, type Aor, type Binding, type LocationStore } from '../store/location/location.js';

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
  /** The `host:port` its UDP requests leave from (the workers of a node share it), or null. */
  udp?: string | null;
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
  /** A dead process is being reaped by this one: its calls end from here (calls/). */
  onDead?: (processId: string) => Promise<void>;
  /**
   * Flow bindings of a dead process that sleep instead of being removed (RFC 8599, docs/push.md:
   * a device that can be woken by a push); `sleep` writes them back without their connection.
   */
  sleeps?: (b: Binding) => boolean;
  sleep?: (aor: Aor, bindings: readonly Binding[]) => Promise<void>;
  /** This process's tag (the last part of its id, and the prefix of its branches). */
  processTag: string;
  /** The `host:port` this process's UDP requests leave from (known once bound), or null without UDP. */
  udpAddress?: () => string | null;
  /** Write bytes relayed by another process on a connection of this one (peer-checked); false when gone. */
  deliver?: (flow: Flow, data: Buffer) => boolean;
  /** A response relayed by the process that holds its flow: into this process's router. */
  receive?: (flow: Flow, data: Buffer) => void;
  /** Bytes relayed to a process that nobody heard (it died a moment ago): the sender's transaction fails now, not at its timeout. */
  onUndelivered?: (data: Buffer) => void;
}

/** What travels on a relay channel before the SIP bytes. */
interface RelayHeader {
  /** 's': send these bytes on the flow; 'r': a response that came over the flow. */
  k: 's' | 'r';
  t: SipTransportName;
  c: string;
  a: string;
  p: number;
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
  /** The registry as last read: process id → last beat (ms). */
  #seen = new Map<string, number>();
  /** Process id → its UDP address, for every process ever read (kept after it dies: its node may live on). */
  #udpOf = new Map<string, string>();
  #sub: RedisClient | null = null;
  readonly #prefix: string;

  constructor(o: FleetRegistryOptions) {
    this.#o = o;
    this.#prefix = o.prefix ?? DEFAULT_REDIS_PREFIX;
    this.#procs = `${this.#prefix}{fleet}:procs`;
    (this.relay as { self: string }).self = o.processId;
    (this.relay as { branchTag: string }).branchTag = o.processTag;
  }

  /**
   * The relay of flows held by other processes (docs/fleet.md "Relay"): bytes for
   * a flow go to its owner over Redis pub/sub, one channel per process
   * (`<prefix>relay:<tag>`); a response the owner's client sent goes back to the
   * process whose branch it answers.
   */
  readonly relay: FlowRelay = {
    self: '',
    branchTag: '',
    send: (d: Destination, data: Buffer): boolean => {
      const node = d.node as string;
      const seen = this.#seen.get(node);
      // Known and silent: dead (its bindings are being reaped); unknown: just started.
      if (seen !== undefined && Date.now() - seen > FLEET_DEAD_AFTER_MS) return false;
      this.#publish(tagOf(node), { k: 's', t: d.transport, c: d.connId as string, a: d.address, p: d.port }, data);
      return true;
    },
    sendDatagram: (d: Destination, data: Buffer): boolean => {
      const to = this.#udpOf.get(d.node as string);
      const mine = this.#o.udpAddress?.() ?? null;
      // Same node (the workers share the socket), or a node never heard of: sent from here.
      if (!to || to === mine) return false;
      // The process of that node heard from last (the workers of a node share its socket:
      // any live one will do, a worker restarted since the REGISTER too); the whole node
      // gone: sent from here, best effort.
      let via: string | null = null;
      let latest = Date.now() - FLEET_DEAD_AFTER_MS;
      for (const [id, a] of this.#udpOf) {
        const seen = this.#seen.get(id) ?? 0;
        if (a === to && seen > latest) [via, latest] = [id, seen];
      }
      if (via === null) return false;
      this.#publish(tagOf(via), { k: 's', t: 'udp', c: '', a: d.address, p: d.port }, data);
      return true;
    },
    response: (tag: string, data: Buffer, flow: Flow): void => {
      this.#publish(tag, { k: 'r', t: flow.transport, c: flow.connId ?? '', a: flow.remoteAddress, p: flow.remotePort }, data);
    },
  };

  #publish(tag: string, h: RelayHeader, data: Buffer): void {
    const msg = Buffer.concat([Buffer.from(JSON.stringify(h) + '\n'), data]);
    const { redis, log, onUndelivered } = this.#o;
    redis.publish(`${this.#prefix}relay:${tag}`, msg).then(
      // PUBLISH counts the subscribers that got it: 0 = the process is gone. (On a
      // Cluster it counts one node's subscribers only, so there the silence check decides.)
      (n) => {
        if (n === 0 && h.k === 's' && !(redis instanceof Cluster)) onUndelivered?.(data);
      },
      (err: unknown) => {
        log.warn({ err: err instanceof Error ? err.message : String(err) }, 'fleet: relay publish failed');
        if (h.k === 's') onUndelivered?.(data);
      },
    );
  }

  #onRelay(buf: Buffer): void {
    const nl = buf.indexOf(10);
    if (nl <= 0) return;
    let h: RelayHeader;
    try {
      h = JSON.parse(buf.subarray(0, nl).toString()) as RelayHeader;
    } catch {
      return;
    }
    const flow: Flow = { transport: h.t, remoteAddress: h.a, remotePort: h.p, localAddress: '', localPort: 0, connId: h.c || null };
    const data = buf.subarray(nl + 1);
    if (h.k === 's') {
      if (!this.#o.deliver?.(flow, data)) this.#o.log.debug({ connId: h.c }, 'fleet: relayed message for a gone flow dropped');
    } else if (h.k === 'r') {
      this.#o.receive?.(flow, data);
    }
  }

  start(): void {
    if (this.#timer) return;
    const r = this.#o.redis;
    const sub = r instanceof Cluster ? r.duplicate() : r.duplicate({ enableAutoPipelining: false, autoResubscribe: false, connectionName: undefined });
    sub.on('error', (err: Error) => this.#o.log.debug({ err: err.message }, 'fleet: relay subscriber error'));
    sub.on('messageBuffer', (_channel: Buffer, message: Buffer) => this.#onRelay(message));
    // On every (re)connection: commands are refused until then (no offline queue).
    sub.on('ready', () => {
      sub.subscribe(`${this.#prefix}relay:${this.#o.processTag}`).catch((err: unknown) => {
        this.#o.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'fleet: relay subscribe failed');
      });
    });
    this.#sub = sub;
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
    this.#sub?.disconnect();
    this.#sub = null;
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
      const me: ProcessEntry = { id: processId, node, pid: process.pid, startedAt: this.#startedAt, seen: now, udp: this.#o.udpAddress?.() ?? null };
      await redis.hset(this.#procs, processId, JSON.stringify(me));
      const all = await this.processes();
      this.#seen = new Map(all.map((p) => [p.id, p.seen]));
      for (const p of all) if (p.udp) this.#udpOf.set(p.id, p.udp);
      for (const p of all) {
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
      const held = (await location.lookup(aor)).filter((b) => b.nodeId === dead.id && b.connId !== null);
      const sleeping = this.#o.sleep && this.#o.sleeps ? held.filter(this.#o.sleeps) : [];
      const keys = held.filter((b) => !sleeping.includes(b)).map((b) => b.key);
      if (keys.length > 0) removed += await location.removeKeys(aor, keys);
      if (sleeping.length > 0) await this.#o.sleep?.(aor, sleeping);
    }
    await redis.del(flows);
    this.#o.onReaped?.(removed);
    log.info({ process: dead.id, node: dead.node, silentMs: Date.now() - dead.seen, bindings: removed }, 'fleet: process dead; its flow bindings removed (unregistered)');
    try {
      await this.#o.onDead?.(dead.id);
    } catch (err) {
      log.warn({ process: dead.id, err: err instanceof Error ? err.message : String(err) }, 'fleet: calls of a dead process not all ended');
    }
    await redis.hdel(this.#procs, dead.id);
  }

  #flowsKey(id: string): string {
    return `${this.#procs.slice(0, -'procs'.length)}flows:${id}`;
  }
}

/** The tag of a process id (`<NODE_ID>.<tag>`): its relay channel and branch prefix. */
function tagOf(processId: string): string {
  return processId.slice(processId.lastIndexOf('.') + 1);
}
