import dgram from 'node:dgram';
import { isIPv4, isIPv6 } from 'node:net';
import type { Logger } from '../logger.js';
import { normalizeAddress, type BoundAddress, type Flow, type MessageSink, type Transport } from './types.js';

/** SIP over UDP: one datagram is one message (RFC 3261 §18.1.1, §18.2.1). */
export class UdpTransport implements Transport {
  readonly name = 'udp' as const;
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
    const socket = dgram.createSocket({
      type: this.dualStack ? 'udp6' : 'udp4',
      ipv6Only: false,
      reuseAddr: false,
      recvBufferSize: 4 * 1024 * 1024,
      sendBufferSize: 4 * 1024 * 1024,
    });
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
      socket.bind(this.port, this.host, () => {
        socket.off('error', reject);
        const a = socket.address();
        this.local = { address: a.address, port: a.port };
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
