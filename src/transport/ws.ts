import http from 'node:http';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type net from 'node:net';
import { WebSocketServer, type WebSocket, type RawData } from 'ws';
import type { Logger } from '../logger.js';
import { FairQueue } from './fair-queue.js';
import {
  normalizeAddress,
  secureContextOptions,
  type BoundAddress,
  type Flow,
  type ListenerOptions,
  type MessageSink,
  type TlsSettings,
  type Transport,
} from './types.js';

export interface WsOptions extends ListenerOptions {
  /** Allowed Origin values; empty = any. */
  allowedOrigins: readonly string[];
}

/** Messages of one connection handled per turn of the event loop (fairness, bounded stalls). */

/** Time clients get to answer our close frame before the socket is cut. */
const CLOSE_GRACE_MS = 500;

let nextConnId = 0;

/**
 * SIP over WebSocket (RFC 7118): the `sip` subprotocol is required, one SIP
 * message per frame, CRLF keep-alives inside frames are answered.
 */
export class WsTransport implements Transport {
  private server: http.Server | https.Server | null = null;
  private wss: WebSocketServer | null = null;
  private readonly conns = new Map<string, { ws: WebSocket; flow: Flow; idle: NodeJS.Timeout; frame: NodeJS.Timeout | null }>();
  private local: BoundAddress = { address: '', port: 0 };
  private closed: Promise<void> | null = null;

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
      // Not allowSynchronousEvents: false — with it, ws 8.23 crashed on fuzzed frames
      // (TypeError in Receiver.getData). Fairness is done below instead.
      handleProtocols: (protocols) => (protocols.has('sip') ? 'sip' : false),
    });
    this.wss = wss;
    const reject = (res: http.ServerResponse): void => {
      res.writeHead(426, { 'Content-Type': 'text/plain', Connection: 'close' });
      res.end('SIP over WebSocket (RFC 7118): upgrade with Sec-WebSocket-Protocol: sip\n');
    };
    const headerMs = (this.opts.headerTimeout ?? 10) * 1000;
    // Upgrade requests must arrive whole within headerMs; node checks every second.
    const httpOptions = { headersTimeout: headerMs, requestTimeout: headerMs, connectionsCheckingInterval: 1000, keepAliveTimeout: headerMs };
    const server = this.opts.tls
      ? https.createServer(
          { ...secureContextOptions(this.opts.tls), honorCipherOrder: true, handshakeTimeout: headerMs, ...httpOptions },
          (_req, res) => reject(res),
        )
      : http.createServer(httpOptions, (_req, res) => reject(res));
    const gate = this.opts.gate;
    if (gate) {
      // Admission first, on the raw socket: a refused peer costs no handshake and no HTTP parsing.
      server.prependListener('connection', (raw: net.Socket) => {
        const address = normalizeAddress(raw.remoteAddress ?? '');
        if (!gate.open(address, this.name)) {
          raw.on('error', () => {});
          raw.destroy();
          return;
        }
        raw.once('close', () => gate.close(address));
      });
    }
    server.on('upgrade', (req, socket, head) => this.upgrade(req, socket, head));
    server.on('clientError', (_err, socket) => socket.destroy());
    // Node leaves the socket open after a TLS handshake timeout.
    if (server instanceof https.Server) server.on('tlsClientError', (_err, socket) => socket.destroy());
    server.on('error', (err) => this.log.error({ err }, `${this.name} server error`));
    this.server = server;
    this.closed = null;
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
    if (!this.opts.gate && this.conns.size >= this.opts.maxConnections) return refuse(503, 'Service Unavailable');
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
    const frameMs = (this.opts.headerTimeout ?? 10) * 1000;
    const entry = { ws, flow, idle: setTimeout(() => ws.terminate(), idleMs).unref(), frame: null as NodeJS.Timeout | null };
    this.conns.set(connId, entry);
    // Slow senders: bytes of a frame that never completes do not count as activity;
    // a frame must be whole within headerTimeout. Runs before ws reads the chunk.
    const settled = (): void => {
      if (entry.frame !== null) clearTimeout(entry.frame);
      entry.frame = null;
    };
    sock.prependListener('data', () => {
      if (entry.frame === null) {
        entry.frame = setTimeout(() => {
          this.log.debug({ connId }, 'closing slow websocket');
          ws.terminate();
        }, frameMs);
        entry.frame.unref();
      }
    });
    ws.on('ping', settled);
    // ws emits every frame of one read in a row: at most a few per turn of the loop.
    const queue = new FairQueue<Buffer>(
      { pause: () => ws.pause(), resume: () => ws.resume(), isOpen: () => ws.readyState === ws.OPEN },
      (buf) => {
        // RFC 7118 has no keep-alive of its own; clients send CRLF(CRLF) in a frame (RFC 5626 style).
        if (isCrlfOnly(buf)) {
          if (buf.length >= 4) ws.send('\r\n');
        } else {
          this.sink.onMessage(buf, flow);
        }
        return true;
      },
    );
    ws.on('message', (data: RawData) => {
      settled();
      entry.idle.refresh();
      queue.push([Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)]);
    });
    ws.on('pong', () => {
      settled();
      entry.idle.refresh();
    });
    ws.on('error', (err) => this.log.debug({ connId, err: err.message }, 'websocket error'));
    ws.on('close', () => {
      clearTimeout(entry.idle);
      settled();
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

  /** Replace the certificate for new handshakes; open connections keep theirs. */
  setSecureContext(creds: TlsSettings): void {
    if (this.server instanceof https.Server) this.server.setSecureContext(secureContextOptions(creds));
  }

  stopAccepting(): void {
    const server = this.server;
    if (!server || this.closed) return;
    this.closed = new Promise((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
  }

  /** Stop listening, close every WebSocket with 1001 "going away" (RFC 6455 §7.4.1), cut stragglers. */
  async stop(): Promise<void> {
    if (!this.server) return;
    const server = this.server;
    this.stopAccepting();
    const closed = this.closed;
    this.server = null;
    for (const c of this.conns.values()) c.ws.close(1001, 'server shutting down');
    // Give clients a moment to answer the close handshake, then cut what is left.
    const cut = setTimeout(() => {
      for (const c of this.conns.values()) c.ws.terminate();
      server.closeAllConnections();
    }, CLOSE_GRACE_MS);
    cut.unref();
    await closed;
    clearTimeout(cut);
  }
}

function isCrlfOnly(buf: Buffer): boolean {
  if (buf.length === 0) return true;
  for (let i = 0; i < buf.length; i++) if (buf[i] !== 0x0d && buf[i] !== 0x0a) return false;
  return true;
}
