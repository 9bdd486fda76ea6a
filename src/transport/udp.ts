import cluster from 'node:cluster';
import dgram from 'node:dgram';
import { isIP, isIPv4, isIPv6 } from 'node:net';
import type { UdpEngineSetting } from '../config.js';
import type { Logger } from '../logger.js';
import { loadNativeUdp, NativeUdpTransport } from './udp-native.js';
import { normalizeAddress, type BoundAddress, type Flow, type MessageSink, type Transport } from './types.js';

/**
 * How the workers of a multi-process edge (SIP_WORKERS > 1) receive UDP
 * (README "Operating it", docs/workers.md):
 * - `reuseport`: each worker binds its own socket to the port with SO_REUSEPORT
 *   (dgram `reusePort`, Node ≥ 22.12 / ≥ 23.1 on Linux and FreeBSD); the kernel
 *   hashes the 4-tuple, so every datagram of one source address and port reaches
 *   the same worker (as long as the set of workers does not change) and only that
 *   worker wakes.
 * - `shared`: one socket opened by the primary and handed to every worker
 *   (node:cluster's default; Node 20): every datagram wakes all workers, and a
 *   retransmission may be read by another worker than the original.
 */
export type UdpWorkerMode = 'reuseport' | 'shared';

/** True when this runtime's dgram has `reusePort` (Node 22.12+, 23.1+) and the OS has SO_REUSEPORT for it. */
export function dgramHasReusePort(versions: string = process.versions.node, platform: string = process.platform): boolean {
  const [major, minor] = versions.split('.').map((n) => Number.parseInt(n, 10));
  const version = major > 23 || (major === 23 && minor >= 1) || (major === 22 && minor >= 12);
  return version && (platform === 'linux' || platform === 'freebsd');
}

/**
 * The UDP mode workers use on this runtime with this engine setting: the native
 * engine sets SO_REUSEPORT itself on any Node, so SIP_UDP_ENGINE=native gives
 * `reuseport` on Node 20 too; `auto` keeps node:dgram's choice (on Node 20 the
 * workers then share the primary's dgram socket, see {@link resolveUdpEngine}).
 */
export function udpWorkerMode(engine: UdpEngineSetting = 'auto'): UdpWorkerMode {
  if (dgramHasReusePort()) return 'reuseport';
  return engine === 'native' && 'addon' in loadNativeUdp() ? 'reuseport' : 'shared';
}

export type UdpEngine = 'native' | 'dgram';

/**
 * Which engine this process uses (docs/udp-engine.md) and, when `auto` falls back to
 * node:dgram, why. `native` without the addon throws (a configuration the operator
 * asked for cannot be met).
 */
export function resolveUdpEngine(setting: UdpEngineSetting, isWorker: boolean = cluster.isWorker): { engine: UdpEngine; reason: string | null } {
  if (setting === 'dgram') return { engine: 'dgram', reason: null };
  const native = loadNativeUdp();
  if (setting === 'native') {
    if ('error' in native) throw new Error(`SIP_UDP_ENGINE=native: the native UDP engine is ${native.error}`);
    return { engine: 'native', reason: null };
  }
  if ('error' in native) return { engine: 'dgram', reason: `the native UDP engine is ${native.error}` };
  // `shared` mode: the primary opened one dgram socket for every worker; joining it is dgram's.
  if (isWorker && !dgramHasReusePort()) return { engine: 'dgram', reason: 'the workers share the primary\'s socket on this Node (no dgram reusePort)' };
  return { engine: 'native', reason: null };
}

/** The UDP transport of the configured engine; a fallback from `auto` is logged once. */
export function createUdpTransport(
  host: string,
  port: number,
  sink: MessageSink,
  log: Logger,
  maxMessageSize: number,
  setting: UdpEngineSetting = 'auto',
  /** Native engine: drop datagrams that waited longer than this (ms) unread; 0 = never (SIP_UDP_SHED_AGE_MS). */
  shedAgeMs = 0,
): Transport & { readonly engine: UdpEngine } {
  let { engine, reason } = resolveUdpEngine(setting);
  if (engine === 'native' && isIP(host) === 0) {
    // The addon binds an address literal; node:dgram looks a name up.
    if (setting === 'native') throw new Error(`SIP_UDP_ENGINE=native: SIP_HOST must be an IP address, got "${host}"`);
    engine = 'dgram';
    reason = `SIP_HOST "${host}" is a name (the native UDP engine binds an IP address)`;
  }
  if (engine === 'native') {
    const native = loadNativeUdp();
    if ('addon' in native) return new NativeUdpTransport(host, port, sink, log, maxMessageSize, native.addon, shedAgeMs);
  }
  if (reason) log.info({ udpEngine: 'dgram', reason }, `udp engine: node:dgram; ${reason}`);
  return new UdpTransport(host, port, sink, log, maxMessageSize);
}

/** SIP over UDP: one datagram is one message (RFC 3261 §18.1.1, §18.2.1). */
export class UdpTransport implements Transport {
  readonly name = 'udp' as const;
  readonly engine = 'dgram' as const;
  private socket: dgram.Socket | null = null;
  private local: BoundAddress = { address: '', port: 0 };
  /** A dual-stack udp6 socket reaches IPv4 peers through IPv4-mapped addresses. */
  private readonly dualStack: boolean;

  constructor(
    private readonly host: string,
    private readonly port: number,
    private readonly sink: MessageSink,
    private readonly log: Logger,
    private readonly maxMessageSize: number,
  ) {
    this.dualStack = isIPv6(host);
  }

  start(): Promise<BoundAddress> {
    // Only a cluster worker joins a SO_REUSEPORT group: a single process keeps the
    // port to itself (a second server on the same port fails with EADDRINUSE).
    const mode: UdpWorkerMode | null = cluster.isWorker ? udpWorkerMode() : null;
    const options: dgram.SocketOptions & { reusePort?: boolean } = {
      type: this.dualStack ? 'udp6' : 'udp4',
      ipv6Only: false,
      reuseAddr: false,
      recvBufferSize: 4 * 1024 * 1024,
      sendBufferSize: 4 * 1024 * 1024,
    };
    if (mode === 'reuseport') options.reusePort = true;
    const socket = dgram.createSocket(options);
    this.socket = socket;
    socket.on('message', (data, rinfo) => {
      if (data.length > this.maxMessageSize || data.length === 0) return;
      const flow: Flow = {
        transport: 'udp',
        remoteAddress: normalizeAddress(rinfo.address),
        remotePort: rinfo.port,
        localAddress: this.local.address,
        localPort: this.local.port,
        connId: null,
      };
      this.sink.onMessage(data, flow);
    });
    // A UDP socket error (e.g. ICMP unreachable surfaced on send) must never stop the server.
    socket.on('error', (err) => this.log.warn({ err }, 'udp socket error'));
    return new Promise((resolve, reject) => {
      socket.once('error', reject);
      // `exclusive: true` (also implied by `reusePort`): the worker's own socket, not the primary's.
      socket.bind({ port: this.port, address: this.host, exclusive: mode === 'reuseport' }, () => {
        socket.off('error', reject);
        const a = socket.address();
        this.local = { address: a.address, port: a.port };
        if (mode) this.log.info({ udpMode: mode, port: a.port, pid: process.pid }, `udp socket of this worker: ${mode}`);
        resolve(this.local);
      });
    });
  }

  send(flow: Flow, data: Buffer): boolean {
    if (!this.socket) return false;
    const to = this.dualStack && isIPv4(flow.remoteAddress) ? `::ffff:${flow.remoteAddress}` : flow.remoteAddress;
    this.socket.send(data, flow.remotePort, to, (err) => {
      if (err) this.log.debug({ err, to: `${flow.remoteAddress}:${flow.remotePort}` }, 'udp send failed');
    });
    return true;
  }

  connectionCount(): number {
    return 0;
  }

  closeFlow(): void {}

  stop(): Promise<void> {
    const s = this.socket;
    this.socket = null;
    if (!s) return Promise.resolve();
    return new Promise((resolve) => s.close(() => resolve()));
  }
}
