import net from 'node:net';
import tls from 'node:tls';
import type { Logger } from '../logger.js';
import { StreamFramer } from './framer.js';
import { normalizeAddress, type BoundAddress, type Flow, type MessageSink, type Transport } from './types.js';

const PONG = Buffer.from('\r\n');

export interface StreamOptions {
  host: string;
  port: number;
  maxMessageSize: number;
  /** Seconds without any byte before the connection is closed. */
  idleTimeout: number;
  maxConnections: number;
  /** TLS credentials; absent for plain TCP. */
  tls?: { key: Buffer; cert: Buffer };
}

interface Conn {
  socket: net.Socket;
  flow: Flow;
}

let nextConnId = 0;

/** SIP over TCP or TLS (RFC 3261 §18.3): Content-Length framing, CRLF keep-alive. */
export class StreamTransport implements Transport {
  private server: net.Server | null = null;
  private readonly conns = new Map<string, Conn>();
  private local: BoundAddress = { address: '', port: 0 };

  constructor(
    readonly name: 'tcp' | 'tls',
    private readonly opts: StreamOptions,
    private readonly sink: MessageSink,
    private readonly log: Logger,
  ) {}

  start(): Promise<BoundAddress> {
    const onConnection = (socket: net.Socket): void => this.accept(socket);
    const server = this.opts.tls
      ? tls.createServer({ key: this.opts.tls.key, cert: this.opts.tls.cert, minVersion: 'TLSv1.2' }, onConnection)
      : net.createServer(onConnection);
    server.maxConnections = this.opts.maxConnections;
    server.on('error', (err) => this.log.error({ err }, `${this.name} server error`));
    if (this.opts.tls) {
      // Handshake failures (scanners, plain TCP on the TLS port) are routine.
      server.on('tlsClientError', (err) => this.log.debug({ err: err.message }, 'tls handshake failed'));
    }
    this.server = server;
    return new Promise((resolve, reject) => {
      server.once('error', reject);
      server.listen({ port: this.opts.port, host: this.opts.host, ipv6Only: false }, () => {
        server.off('error', reject);
        const a = server.address() as net.AddressInfo;
        this.local = { address: a.address, port: a.port };
        resolve(this.local);
      });
    });
  }

  private accept(socket: net.Socket): void {
    const connId = `${this.name}-${(++nextConnId).toString(36)}`;
    const flow: Flow = {
      transport: this.name,
      remoteAddress: normalizeAddress(socket.remoteAddress ?? ''),
      remotePort: socket.remotePort ?? 0,
      localAddress: this.local.address,
      localPort: this.local.port,
      connId,
    };
    const conn: Conn = { socket, flow };
    this.conns.set(connId, conn);
    const framer = new StreamFramer({ maxMessageSize: this.opts.maxMessageSize });
    socket.setNoDelay(true);
    socket.setKeepAlive(true, 30_000);
    socket.setTimeout(this.opts.idleTimeout * 1000, () => socket.destroy());
    socket.on('data', (chunk: Buffer) => {
      for (const ev of framer.push(chunk)) {
        if (ev.type === 'message') this.sink.onMessage(ev.data, flow);
        else if (ev.type === 'ping') socket.write(PONG);
        else {
          this.log.debug({ connId, reason: ev.reason, remote: flow.remoteAddress }, 'closing unframeable stream');
          socket.destroy();
          return;
        }
      }
    });
    socket.on('error', (err) => this.log.debug({ connId, err: err.message }, 'stream socket error'));
    socket.on('close', () => {
      this.conns.delete(connId);
      this.sink.onFlowClosed(flow);
    });
  }

  send(flow: Flow, data: Buffer): boolean {
    const conn = flow.connId ? this.conns.get(flow.connId) : undefined;
    if (!conn || conn.socket.destroyed) return false;
    conn.socket.write(data);
    return true;
  }

  connectionCount(): number {
    return this.conns.size;
  }

  closeFlow(connId: string): void {
    this.conns.get(connId)?.socket.end();
  }

  /** Replace the certificate for new handshakes; open connections keep theirs. */
  setSecureContext(creds: { key: Buffer; cert: Buffer }): void {
    if (this.server instanceof tls.Server) this.server.setSecureContext({ key: creds.key, cert: creds.cert, minVersion: 'TLSv1.2' });
  }

  stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return Promise.resolve();
    for (const c of this.conns.values()) c.socket.destroy();
    return new Promise((resolve) => server.close(() => resolve()));
  }
}
