import cluster from 'node:cluster';
import { lookup } from 'node:dns';
import { createRequire } from 'node:module';
import { isIP } from 'node:net';
import type { Logger } from '../logger.js';
import type { BoundAddress, Flow, MessageSink, Transport } from './types.js';

/**
 * The batched UDP engine (issue 27, docs/udp-engine.md): the native addon of
 * `native/udp_batch.c` (this folder's) owns the socket, drains it with recvmmsg into one slab per
 * wake-up and calls {@link NativeUdpTransport} once per batch; replies written during
 * a tick leave together with one sendmmsg.
 */
interface UdpBatchAddon {
  open(
    host: string,
    port: number,
    reusePort: boolean,
    recvBufferSize: number,
    sendBufferSize: number,
    slots: number,
    slotSize: number,
    sendSlots: number,
    sendBytes: number,
    onBatch: (count: number) => void,
  ): [unknown, number, ArrayBuffer, ArrayBuffer, ArrayBuffer, ArrayBuffer, ArrayBuffer];
  flush(engine: unknown, count: number): void;
  pton(address: string): [number, number, number, number, number] | null;
  close(engine: unknown): void;
  failSends(engine: unknown, n: number): void;
  RMETA_WORDS: number;
  SMETA_WORDS: number;
  ABI: number;
}

/** Where the addon is built (src/transport/native/build.mjs), reached from src/transport or dist/transport. */
export const NATIVE_UDP_PATH = new URL('../../src/transport/native/build/udp_batch.node', import.meta.url);

let loaded: { addon: UdpBatchAddon } | { error: string } | null = null;

/** The addon, or why it is not available (not built, not Linux, fails to load). Cached. */
export function loadNativeUdp(): { addon: UdpBatchAddon } | { error: string } {
  if (loaded) return loaded;
  if (process.platform !== 'linux') return (loaded = { error: `not on Linux (${process.platform})` });
  if (process.env.SIP_EDGE_NATIVE === '0') return (loaded = { error: 'switched off (SIP_EDGE_NATIVE=0)' });
  try {
    const addon = createRequire(import.meta.url)(NATIVE_UDP_PATH.pathname) as UdpBatchAddon;
    if (typeof addon.open !== 'function' || addon.ABI !== 2) return (loaded = { error: 'the built addon is of another version (run npm run build)' });
    loaded = { addon };
  } catch (err) {
    const e = err as NodeJS.ErrnoException;
    loaded = {
      error:
        e.code === 'MODULE_NOT_FOUND'
          ? 'not built (no C compiler or Node-API headers at install; src/transport/native/build.mjs says why)'
          : `does not load: ${e.message.split('\n')[0]}`,
    };
  }
  return loaded;
}

/** Counters of the engine (docs/udp-engine.md "Counters"). */
export interface NativeUdpStats {
  /** Datagrams handed to the sink's batches. */
  received: number;
  /** Datagrams larger than a slot (SIP_MAX_MESSAGE_SIZE), dropped. */
  truncated: number;
  recvErrors: number;
  /** Readable / writable wake-ups of the socket. */
  wakeups: number;
  /** Calls into JS (one per wake-up that read anything). */
  batches: number;
  sent: number;
  /** Datagrams the kernel refused (bad address, too large); not retried. */
  sendErrors: number;
  /** Datagrams that met a full socket buffer (EAGAIN) and waited in the backlog. */
  queued: number;
  /** Datagrams dropped: backlog over 16 MiB, or still queued at stop. */
  dropped: number;
  /** Datagrams waiting in the backlog now. */
  backlog: number;
  sendmmsgCalls: number;
  /** Datagrams dropped unread because they waited longer than SIP_UDP_SHED_AGE_MS in the socket. */
  shed: number;
}

const STAT_NAMES: Array<keyof NativeUdpStats> = [
  'received',
  'truncated',
  'recvErrors',
  'wakeups',
  'batches',
  'sent',
  'sendErrors',
  'queued',
  'dropped',
  'backlog',
  'sendmmsgCalls',
];

/** Receive slots per wake-up (one recvmmsg). */
const SLOTS = 64;
/** Datagrams and bytes that can wait for one sendmmsg. */
const SEND_SLOTS = 256;
const SEND_BYTES = 512 * 1024;
/** Address caches are cleared when they grow past this (many distinct peers). */
const CACHE_MAX = 8192;

type Dest = [number, number, number, number, number];

export class NativeUdpTransport implements Transport {
  readonly name = 'udp' as const;
  readonly engine = 'native' as const;
  private handle: unknown = null;
  private local: BoundAddress = { address: '', port: 0 };
  private slab: Buffer = Buffer.alloc(0);
  private rmeta = new Uint32Array(0);
  private sslab: Buffer = Buffer.alloc(0);
  private smeta = new Uint32Array(0);
  private statsView = new Float64Array(0);
  private slotSize: number;
  private sendCount = 0;
  private sendOff = 0;
  private flushScheduled = false;
  private shed = 0;
  /** Inside onBatch: a stop() there closes the socket after the batch, not under the addon's feet. */
  private inBatch = false;
  private readonly v4Names = new Map<number, string>();
  private readonly dests = new Map<string, Dest | null>();
  private readonly rw: number;
  private readonly sw: number;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly sink: MessageSink,
    private readonly log: Logger,
    private readonly maxMessageSize: number,
    private readonly addon: UdpBatchAddon,
    /**
     * SIP_UDP_SHED_AGE_MS (docs/udp-engine.md "Overload"): a datagram that waited longer
     * than this in the socket's receive queue is dropped before it is parsed; 0 = never.
     */
    private readonly shedAgeMs: number = 0,
  ) {
    // A slot holds the largest datagram accepted; a larger one is truncated by the kernel,
    // counted and dropped (as node:dgram's path drops it after reading).
    this.slotSize = Math.min(maxMessageSize, 65535);
    this.rw = addon.RMETA_WORDS;
    this.sw = addon.SMETA_WORDS;
  }

  start(): Promise<BoundAddress> {
    try {
      const [handle, port, slab, rmeta, sslab, smeta, stats] = this.addon.open(
        this.host,
        this.port,
        // Only a cluster worker joins a SO_REUSEPORT group (docs/workers.md).
        cluster.isWorker,
        4 * 1024 * 1024,
        4 * 1024 * 1024,
        SLOTS,
        this.slotSize,
        SEND_SLOTS,
        SEND_BYTES,
        this.onBatch,
      );
      this.handle = handle;
      this.slab = Buffer.from(slab);
      this.rmeta = new Uint32Array(rmeta);
      this.sslab = Buffer.from(sslab);
      this.smeta = new Uint32Array(smeta);
      this.statsView = new Float64Array(stats);
      this.local = { address: this.host, port };
      if (cluster.isWorker) this.log.info({ udpMode: 'reuseport', udpEngine: 'native', port, pid: process.pid }, 'udp socket of this worker: reuseport');
      else this.log.info({ udpEngine: 'native', port }, 'udp engine: native (recvmmsg/sendmmsg batches)');
      return Promise.resolve(this.local);
    } catch (err) {
      return Promise.reject(err instanceof Error ? err : new Error(String(err)));
    }
  }

  /** One wake-up's datagrams: `count` slots of the slab (a slot of length 0 was dropped). */
  private readonly onBatch = (count: number): void => {
    const meta = this.rmeta;
    const slab = this.slab;
    const size = this.slotSize;
    const rw = this.rw;
    const localAddress = this.local.address;
    const localPort = this.local.port;
    const shedUs = this.shedAgeMs * 1000;
    let failed = false;
    let failure: unknown;
    this.inBatch = true;
    for (let i = 0; i < count && this.handle !== null; i++) {
      const m = i * rw;
      const len = meta[m];
      if (len === 0 || len > this.maxMessageSize) continue;
      if (shedUs > 0 && meta[m + 16] > shedUs) {
        // Overload: its sender has retransmitted by now (or will); parsing this stale copy
        // would only lengthen the queue the fresh ones wait in.
        this.shed++;
        continue;
      }
      // A copy: the sink may keep the message (a body is a view of it) past this batch,
      // and the slot is overwritten by the next one.
      const start = i * size;
      const data = Buffer.allocUnsafe(len);
      slab.copy(data, 0, start, start + len);
      const flow: Flow = {
        transport: 'udp',
        remoteAddress: meta[m + 2] === 4 ? this.v4Name(meta[m + 3]) : this.v6Name(m),
        remotePort: meta[m + 1],
        localAddress,
        localPort,
        connId: null,
      };
      try {
        this.sink.onMessage(data, flow);
      } catch (err) {
        // The rest of the batch is still delivered; the first error then surfaces as
        // node:dgram's 'message' listener would have thrown it.
        if (!failed) failure = err;
        failed = true;
      }
    }
    this.inBatch = false;
    if (failed) throw failure;
  };

  private v4Name(a: number): string {
    let s = this.v4Names.get(a);
    if (s === undefined) {
      s = `${a >>> 24}.${(a >>> 16) & 255}.${(a >>> 8) & 255}.${a & 255}`;
      if (this.v4Names.size >= CACHE_MAX) this.v4Names.clear();
      this.v4Names.set(a, s);
    }
    return s;
  }

  private v6Name(m: number): string {
    const off = (m + 4) * 4;
    const bytes = new Uint8Array(this.rmeta.buffer, off, 48);
    let end = bytes.indexOf(0);
    if (end < 0) end = 48;
    return Buffer.from(this.rmeta.buffer, off, end).toString('latin1');
  }

  send(flow: Flow, data: Buffer): boolean {
    if (this.handle === null) return false;
    let dest = this.dests.get(flow.remoteAddress);
    if (dest === undefined) {
      if (isIP(flow.remoteAddress) === 0) {
        this.sendByName(flow, data);
        return true;
      }
      dest = this.addon.pton(flow.remoteAddress);
      if (this.dests.size >= CACHE_MAX) this.dests.clear();
      this.dests.set(flow.remoteAddress, dest);
    }
    if (dest === null) {
      this.log.debug({ to: `${flow.remoteAddress}:${flow.remotePort}` }, 'udp send failed: not an address');
      return true;
    }
    this.enqueue(dest, flow.remotePort, data);
    return true;
  }

  /** node:dgram looks a host name up for every send; so does this (rare: configured gateways). */
  private sendByName(flow: Flow, data: Buffer): void {
    lookup(flow.remoteAddress, { family: this.host.includes(':') ? 0 : 4 }, (err, address) => {
      if (err) {
        this.log.debug({ err, to: `${flow.remoteAddress}:${flow.remotePort}` }, 'udp send failed');
        return;
      }
      if (this.handle !== null) this.send({ ...flow, remoteAddress: address }, data);
    });
  }

  private enqueue(dest: Dest, port: number, data: Buffer): void {
    const len = data.length;
    if (len > this.sslab.length) {
      this.statsView[6] += 1; // sendErrors: larger than any datagram
      return;
    }
    if (this.sendCount === SEND_SLOTS || this.sendOff + len > this.sslab.length) this.flush();
    const m = this.sendCount * this.sw;
    const meta = this.smeta;
    meta[m] = this.sendOff;
    meta[m + 1] = len;
    meta[m + 2] = port;
    meta[m + 3] = dest[0];
    meta[m + 4] = dest[1];
    meta[m + 5] = dest[2];
    meta[m + 6] = dest[3];
    meta[m + 7] = dest[4];
    data.copy(this.sslab, this.sendOff);
    this.sendOff += len;
    this.sendCount++;
    if (!this.flushScheduled) {
      this.flushScheduled = true;
      // After the current batch (the addon's callback scope runs ticks before it
      // returns) or the current macrotask: what it answered leaves in one sendmmsg.
      process.nextTick(this.flushTick);
    }
  }

  private readonly flushTick = (): void => {
    this.flushScheduled = false;
    this.flush();
  };

  /** Hands every queued datagram to the kernel (one sendmmsg per 256). */
  flush(): void {
    const n = this.sendCount;
    if (n === 0 || this.handle === null) return;
    this.sendCount = 0;
    this.sendOff = 0;
    this.addon.flush(this.handle, n);
  }

  /** The engine's counters (docs/udp-engine.md). */
  stats(): NativeUdpStats {
    const out = {} as NativeUdpStats;
    STAT_NAMES.forEach((k, i) => (out[k] = this.statsView[i] ?? 0));
    out.shed = this.shed;
    return out;
  }

  /** Tests: the next `n` sendmmsg calls meet a full socket buffer (EAGAIN). */
  failNextSends(n: number): void {
    if (this.handle !== null) this.addon.failSends(this.handle, n);
  }

  connectionCount(): number {
    return 0;
  }

  closeFlow(): void {}

  stop(): Promise<void> {
    const h = this.handle;
    if (h === null) return Promise.resolve();
    this.flush();
    this.handle = null;
    if (!this.inBatch) {
      this.addon.close(h);
      return Promise.resolve();
    }
    return new Promise((resolve) =>
      setImmediate(() => {
        this.addon.close(h);
        resolve();
      }),
    );
  }
}
