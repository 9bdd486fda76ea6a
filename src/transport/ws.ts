import http from 'node:http';
import { DEFAULTS } from '../config.js';
import https from 'node:https';
import type { Duplex } from 'node:stream';
import type net from 'node:net';
import { WebSocket, WebSocketServer, type RawData } from 'ws';
import type { Logger } from '../logger.js';
import { FairQueue, type PausableSource } from './fair-queue.js';
import {
  CONNECTION_ID_TAG,
  normalizeAddress,
  samePeer,
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

/** Time clients get to answer our close frame before the socket is cut. */
const CLOSE_GRACE_MS = 500;

let nextConnId = 0;

/** The connection state of a socket, and the address the gate admitted it under. */
const kConn = Symbol('sip-edge.wsConn');
const kGateAddress = Symbol('sip-edge.gateAddress');
type ConnSocket = Duplex & { [kConn]?: WsConn; [kGateAddress]?: string };
type ConnWebSocket = WebSocket & { [kConn]?: WsConn };

/**
 * One open WebSocket. Tens of thousands of these sit idle on an edge, so a
 * connection is this object and nothing else of ours: no timers (one sweep per
 * listener checks {@link last} and {@link frameStart}), no closures (the
 * listeners are shared functions that find it through the socket), and not the
 * HTTP upgrade request, which is dropped once the handshake is done.
 */
class WsConn implements PausableSource {
  /** When the last whole frame arrived (ms, Date.now()). */
  last: number;
  /** When bytes of a frame not yet whole started to arrive; 0 = none pending. */
  frameStart = 0;
  /** Fairness between connections; made on the first message. */
  queue: FairQueue<Buffer> | null = null;
  /** Carries a live binding until then (ms): pinged when quiet, never cut as idle. 0 = none. */
  holdUntil = 0;
  /** When the ping now awaiting an answer was sent (ms); 0 = none outstanding. */
  pinged = 0;

  constructor(
    readonly ws: WebSocket,
    readonly flow: Flow,
    readonly transport: WsTransport,
    now: number,
  ) {
    this.last = now;
  }

  pause(): void {
    this.ws.pause();
  }

  resume(): void {
    this.ws.resume();
  }

  isOpen(): boolean {
    return this.ws.readyState === WebSocket.OPEN;
  }

  /** A whole frame that counts as activity (message or pong) arrived. */
  settled(): void {
    this.frameStart = 0;
    this.pinged = 0;
    this.last = Date.now();
  }
}

// Listeners shared by every connection (`this` is the emitter).

/** Runs before ws reads the chunk: bytes of a frame that never completes do not count as activity. */
function onSocketData(this: ConnSocket): void {
  const c = this[kConn];
  if (c && c.frameStart === 0) c.frameStart = Date.now();
}

function destroySocket(this: Duplex): void {
  this.destroy();
}

/** A ping is a whole frame, but (as before) not activity that keeps an idle flow open. */
function onPing(this: ConnWebSocket): void {
  const c = this[kConn];
  if (c) c.frameStart = 0;
}

function onPong(this: ConnWebSocket): void {
  this[kConn]?.settled();
}

function onMessage(this: ConnWebSocket, data: RawData): void {
  const c = this[kConn];
  if (!c) return;
  c.settled();
  c.queue ??= new FairQueue<Buffer>(c, (buf) => c.transport.deliver(c, buf));
  c.queue.push([Array.isArray(data) ? Buffer.concat(data) : Buffer.isBuffer(data) ? data : Buffer.from(data)]);
}

function onError(this: ConnWebSocket, err: Error): void {
  const c = this[kConn];
  c?.transport.debug({ connId: c.flow.connId, err: err.message }, 'websocket error');
}

function onClose(this: ConnWebSocket): void {
  const c = this[kConn];
  if (c) c.transport.closed(c);
}

/**
 * SIP over WebSocket (RFC 7118): the `sip` subprotocol is required, one SIP
 * message per frame, CRLF keep-alives inside frames are answered.
 */
export class WsTransport implements Transport {
  private server: http.Server | https.Server | null = null;
  private wss: WebSocketServer | null = null;
  private readonly conns = new Map<string, WsConn>();
  private local: BoundAddress = { address: '', port: 0 };
  private closing: Promise<void> | null = null;
  private sweeper: NodeJS.Timeout | null = null;

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
    const headerMs = (this.opts.headerTimeout ?? DEFAULTS.headerTimeout) * 1000;
    // Upgrade requests must arrive whole within headerMs; node checks every second.
    const httpOptions = { headersTimeout: headerMs, requestTimeout: headerMs, connectionsCheckingInterval: 1000, keepAliveTimeout: headerMs };
    const server = this.opts.tls
      ? https.createServer(
          {
            ...secureContextOptions(this.opts.tls),
            honorCipherOrder: true,
            handshakeTimeout: headerMs,
            // ALPN as https does by default (http/1.1, the only protocol a WebSocket
            // upgrade speaks), chosen by a callback: the ALPNProtocols option makes
            // every TLS socket keep its own copy of the list in a pooled Buffer,
            // which holds a whole 8 KiB pool slab per few idle connections.
            ALPNCallback: ({ protocols }: { protocols: string[] }) => (protocols.includes('http/1.1') ? 'http/1.1' : undefined),
            ...httpOptions,
          },
          (_req, res) => reject(res),
        )
      : http.createServer(httpOptions, (_req, res) => reject(res));
    const gate = this.opts.gate;
    if (gate) {
      const gateClose = function (this: ConnSocket): void {
        gate.close(this[kGateAddress] as string);
      };
      // Admission first, on the raw socket: a refused peer costs no handshake and no HTTP parsing.
      server.prependListener('connection', (raw: net.Socket & ConnSocket) => {
        const address = normalizeAddress(raw.remoteAddress ?? '');
        if (!gate.open(address, this.name)) {
          raw.on('error', () => {});
          raw.destroy();
          return;
        }
        raw[kGateAddress] = address;
        raw.on('close', gateClose);
      });
    }
    server.on('upgrade', (req: http.IncomingMessage, socket: Duplex, head: Buffer) => this.upgrade(req, socket, head));
    server.on('clientError', (_err, socket) => socket.destroy());
    // Node leaves the socket open after a TLS handshake timeout.
    if (server instanceof https.Server) server.on('tlsClientError', (_err, socket) => socket.destroy());
    server.on('error', (err) => this.log.error({ err }, `${this.name} server error`));
    this.server = server;
    this.closing = null;
    this.startSweeper();
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

  /**
   * Idle connections, liveness of held ones and frames that never complete, for
   * every connection at once: a quarter of the shortest timeout between sweeps
   * (at most a second), instead of timers per connection.
   *
   * Liveness (README "Flows", docs/flows.md): a connection that carries a live
   * binding is never cut for being quiet; once quiet for the ping interval it gets
   * a WebSocket ping (RFC 6455 §5.5.2, which every browser and `ws` answers with a
   * pong, §5.5.3). If nothing (pong or message) has come back by the time it has
   * been quiet for 2 × the interval less one sweep step, the peer is dead: the
   * connection is cut and, as on any close, its bindings removed. So a peer that
   * stops answering is cut at most 2 × SIP_PING_INTERVAL after the last frame it sent.
   * A connection without a live binding is cut once quiet for the idle timeout,
   * counted from its last frame or from the end of its last binding, whichever is later.
   */
  private startSweeper(): void {
    const idleMs = this.opts.idleTimeout * 1000;
    const frameMs = (this.opts.headerTimeout ?? DEFAULTS.headerTimeout) * 1000;
    const pingMs = (this.opts.pingInterval ?? DEFAULTS.pingInterval) * 1000;
    const every = Math.max(50, Math.min(1000, Math.floor(Math.min(idleMs, frameMs, pingMs) / 4)));
    const deadMs = 2 * pingMs - every;
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = setInterval(() => {
      const now = Date.now();
      for (const c of this.conns.values()) {
        if (c.frameStart !== 0 && now - c.frameStart >= frameMs) {
          this.log.debug({ connId: c.flow.connId }, 'closing slow websocket');
          c.ws.terminate();
        } else if (c.holdUntil > now) {
          const quiet = now - c.last;
          if (c.pinged !== 0 && quiet >= deadMs) {
            this.log.info({ connId: c.flow.connId, remote: c.flow.remoteAddress, quietMs: quiet }, 'closing websocket: no answer to ping');
            c.ws.terminate();
          } else if (c.pinged === 0 && quiet >= pingMs) {
            c.pinged = now;
            c.ws.ping();
          }
        } else if (now - Math.max(c.last, c.holdUntil) >= idleMs) {
          c.ws.terminate();
        }
      }
    }, every);
    this.sweeper.unref();
  }

  private upgrade(req: http.IncomingMessage, socket: Duplex, head: Buffer): void {
    socket.on('error', destroySocket);
    const refuse = (status: number, text: string): void => {
      socket.end(`HTTP/1.1 ${status} ${text}\r\nConnection: close\r\nContent-Length: 0\r\n\r\n`);
    };
    const protocols = (req.headers['sec-websocket-protocol'] ?? '')
      .split(',')
      .map((p) => p.trim().toLowerCase());
    if (!protocols.includes('sip')) return refuse(400, 'Bad Request');
    const origin = req.headers.origin;
    if (this.opts.allowedOrigins.length > 0 && (!origin || !this.opts.allowedOrigins.includes(origin))) {
      return refuse(403, 'Forbidden');
    }
    if (!this.opts.gate && this.conns.size >= this.opts.maxConnections) return refuse(503, 'Service Unavailable');
    // Nothing made here outlives the handshake: the request (headers and all) is not kept.
    this.wss?.handleUpgrade(req, socket, head, this.accept);
  }

  private readonly accept = (ws: WebSocket, req: http.IncomingMessage): void => {
    const connId = `${this.name}-${CONNECTION_ID_TAG}-${(++nextConnId).toString(36)}`;
    const sock = req.socket as net.Socket & ConnSocket;
    const flow: Flow = {
      transport: this.name,
      remoteAddress: normalizeAddress(sock.remoteAddress ?? ''),
      remotePort: sock.remotePort ?? 0,
      localAddress: this.local.address,
      localPort: this.local.port,
      connId,
    };
    const c = new WsConn(ws, flow, this, Date.now());
    this.conns.set(connId, c);
    sock[kConn] = c;
    (ws as ConnWebSocket)[kConn] = c;
    // Slow senders: a frame must be whole within headerTimeout (checked by the sweep).
    sock.prependListener('data', onSocketData);
    ws.on('message', onMessage);
    ws.on('ping', onPing);
    ws.on('pong', onPong);
    ws.on('error', onError);
    ws.on('close', onClose);
  };

  /** @internal One message of a connection, in turn (FairQueue). */
  deliver(c: WsConn, buf: Buffer): boolean {
    // RFC 7118 has no keep-alive of its own; clients send CRLF(CRLF) in a frame (RFC 5626 style).
    if (isCrlfOnly(buf)) {
      if (buf.length >= 4) c.ws.send('\r\n');
    } else {
      this.sink.onMessage(buf, c.flow);
    }
    return true;
  }

  /** @internal The WebSocket of `c` closed: its bindings can no longer be reached. */
  closed(c: WsConn): void {
    if (this.conns.get(c.flow.connId as string) !== c) return;
    this.conns.delete(c.flow.connId as string);
    c.frameStart = 0;
    this.sink.onFlowClosed(c.flow);
  }

  /** @internal */
  debug(o: object, msg: string): void {
    this.log.debug(o, msg);
  }

  send(flow: Flow, data: Buffer): boolean {
    const c = flow.connId ? this.conns.get(flow.connId) : undefined;
    // The connection must still be the one the flow names (id and peer): never another client's.
    if (!c || c.ws.readyState !== WebSocket.OPEN || !samePeer(flow, c.flow)) return false;
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

  holdFlow(connId: string, until: number): void {
    const c = this.conns.get(connId);
    if (c) c.holdUntil = until;
  }

  /** Replace the certificate for new handshakes; open connections keep theirs. */
  setSecureContext(creds: TlsSettings): void {
    if (this.server instanceof https.Server) this.server.setSecureContext(secureContextOptions(creds));
  }

  stopAccepting(): void {
    const server = this.server;
    if (!server || this.closing) return;
    this.closing = new Promise((resolve) => server.close(() => resolve()));
    server.closeIdleConnections();
  }

  /** Stop listening, close every WebSocket with 1001 "going away" (RFC 6455 §7.4.1), cut stragglers. */
  async stop(): Promise<void> {
    if (!this.server) return;
    const server = this.server;
    this.stopAccepting();
    const closing = this.closing;
    this.server = null;
    for (const c of this.conns.values()) c.ws.close(1001, 'server shutting down');
    // Give clients a moment to answer the close handshake, then cut what is left.
    const cut = setTimeout(() => {
      for (const c of this.conns.values()) c.ws.terminate();
      server.closeAllConnections();
    }, CLOSE_GRACE_MS);
    cut.unref();
    await closing;
    clearTimeout(cut);
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
  }
}

function isCrlfOnly(buf: Buffer): boolean {
  if (buf.length === 0) return true;
  for (let i = 0; i < buf.length; i++) if (buf[i] !== 0x0d && buf[i] !== 0x0a) return false;
  return true;
}
