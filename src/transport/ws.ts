import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type net from 'node:net';
import { WebSocketServer, type WebSocket, type RawData } from 'ws';
import type { Logger } from '../logger.js';
import { normalizeAddress, type BoundAddress, type Flow, type MessageSink, type Transport } from './types.js';

export interface WsOptions {
  host: string;
  port: number;
  maxMessageSize: number;
  idleTimeout: number;
  maxConnections: number;
  /** Allowed Origin values; empty = any. */
  allowedOrigins: readonly string[];
  tls?: { key: Buffer; cert: Buffer };
}

let nextConnId = 0;

/**
 * SIP over WebSocket (RFC 7118): the `sip` subprotocol is required, one SIP
 * message per frame, CRLF keep-alives inside frames are answered.
 */
export class WsTransport implements Transport {
  private server: http.Server | https.Server | null = null;
  private wss: WebSocketServer | null = null;
  private readonly conns = new Map<string, { ws: WebSocket; flow: Flow; idle: NodeJS.Timeout }>();
  private local: BoundAddress = { address: '', port: 0 };

  constructor(
    readonly name: 'ws' | 'wss',
    private readonly opts: WsOptions,
    private readonly sink: MessageSink,
    private readonly log: Logger,
  ) {}

  start(): Promise<BoundAddress> {
    const wss = new WebSocketServer({
      noServer: true,
      maxPayload: this.opts.maxMessageSize,
      perMessageDeflate: false,
      clientTracking: false,
      handleProtocols: (protocols) => (protocols.has('sip') ? 'sip' : false),
    });
    this.wss = wss;
    const reject = (res: http.ServerResponse): void => {
      res.writeHead(426, { 'Content-Type': 'text/plain', Connection: 'close' });
      res.end('SIP over WebSocket (RFC 7118): upgrade with Sec-WebSocket-Protocol: sip\n');
    };
    const server = this.opts.tls
      ? https.createServer({ key: this.opts.tls.key, cert: this.opts.tls.cert, minVersion: 'TLSv1.2' }, (_req, res) => reject(res))
      : http.createServer((_req, res) => reject(res));
    server.on('upgrade', (req, socket, head) => this.upgrade(req, socket, head));
    server.on('clientError', (_err, socket) => socket.destroy());
    server.on('error', (err) => this.log.error({ err }, `${this.name} server error`));
    server.headersTimeout = 10_000;
    server.requestTimeout = 10_000;
    this.server = server;
    return new Promise((resolve, reject2) => {
      server.once('error', reject2);
      server.listen({ port: this.opts.port, host: this.opts.host, ipv6Only: false }, () => {
        server.off('error', reject2);
        const a = server.address() as net.AddressInfo;
        this.local = { address: a.address, port: a.port };
        resolve(this.local);
      });
    });
  }

  private upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    const refuse = (status: number, text: string): void => {
      socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    socket.on('error', () => socket.destroy());
    const protocols = (req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim().toLowerCase());
    if (!protocols.includes('sip')) return refuse(400, 'Bad Request');
    const origin = req.headers.origin;
    if (this.opts.allowedOrigins.length > 0 && (!origin || !this.opts.allowedOrigins.includes(origin))) {
      return refuse(403, 'Forbidden');
    }
    if (this.conns.size >= this.opts.maxConnections) return refuse(503, 'Service Unavailable');
    this.wss?.handleUpgrade(req, socket, head, (ws) => this.accept(ws, req));
  }

  private accept(ws: WebSocket, req: http.IncomingMessage): void {
    const connId = `${this.name}-${(++nextConnId).toString(36)}`;
    const sock = req.socket;
    const flow: Flow = {
      transport: this.name,
      remoteAddress: normalizeAddress(sock.remoteAddress ?? ''),
      remotePort: sock.remotePort ?? 0,
      localAddress: this.local.address,
      localPort: this.local.port,
      connId,
    };
    const idleMs = this.opts.idleTimeout * 1000;
    const entry = { ws, flow, idle: setTimeout(() => ws.terminate(), idleMs).unref() };
    this.conns.set(connId, entry);
    ws.on('message', (data: RawData) => {
      entry.idle.refresh();
      const buf = Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data);
      // RFC 7118 has no keep-alive of its own; clients send CRLF(CRLF) in a frame (RFC 5626 style).
      if (isCrlfOnly(buf)) {
        if (buf.length >= 4) ws.send('\r\n');
        return;
      }
      this.sink.onMessage(buf, flow);
    });
    ws.on('pong', () => entry.idle.refresh());
    ws.on('error', (err) => this.log.debug({ connId, err: err.message }, 'websocket error'));
    ws.on('close', () => {
      clearTimeout(entry.idle);
      this.conns.delete(connId);
      this.sink.onFlowClosed(flow);
    });
  }

  send(flow: Flow, data: Buffer): boolean {
    const c = flow.connId ? this.conns.get(flow.connId) : undefined;
    if (!c || c.ws.readyState !== c.ws.OPEN) return false;
    // Text frames: SIP messages are UTF-8 and browsers' SIP stacks expect text (RFC 7118 §5.1).
    c.ws.send(data, { binary: false });
    return true;
  }

  connectionCount(): number {
    return this.conns.size;
  }

  closeFlow(connId: string): void {
    this.conns.get(connId)?.ws.close(1000, 'flow closed');
  }

  setSecureContext(creds: { key: Buffer; cert: Buffer }): void {
    if (this.server instanceof https.Server) this.server.setSecureContext({ key: creds.key, cert: creds.cert, minVersion: 'TLSv1.2' });
  }

  /** Close every WebSocket with 1001 "going away" (RFC 6455 §7.4.1), then the listener. */
  stop(): Promise<void> {
    const server = this.server;
    this.server = null;
    if (!server) return Promise.resolve();
    for (const c of this.conns.values()) c.ws.close(1001, 'server shutting down');
    return new Promise((resolve) => {
      // Give clients a moment to answer the close handshake, then cut what is left.
      const t = setTimeout(() => {
        for (const c of this.conns.values()) c.ws.terminate();
      }, 500).unref();
      server.close(() => {
        clearTimeout(t);
        resolve();
      });
      server.closeIdleConnections();
    });
  }
}

function isCrlfOnly(buf: Buffer): boolean {
  if (buf.length === 0) return true;
  for (let i = 0; i < buf.length; i++) if (buf[i] !== 0x0d && buf[i] !== 0x0a) return false;
  return true;
}
