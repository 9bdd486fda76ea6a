import net from 'node:net';
import { DEFAULTS } from '../config.js';
import tls from 'node:tls';
import type { Logger } from '../logger.js';
import { StreamFramer, type FrameEvent } from './framer.js';
import { FairQueue } from './fair-queue.js';
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

const PONG = Buffer.from('\r\n');

export type StreamOptions = ListenerOptions;

interface Conn {
  socket: net.Socket;
  flow: Flow;
  /** When bytes last arrived (ms). */
  last: number;
  /** Carries a live binding until then (ms): never cut as idle before. 0 = none. */
  holdUntil: number;
  /** When the edge wrote a request (or a probe) that nothing has been heard in reply to since (ms); 0 = none. */
  awaiting: number;
  /** When the last OPTIONS probe was written (ms); 0 = never. */
  probedAt: number;
}

/** Whether bytes written are a request that its peer answers (not a response, not an ACK). */
function expectsAnswer(data: Buffer): boolean {
  // "SIP/2.0 …" is a response; "ACK …" is never answered; CRLF keep-alives neither.
  const c = data[0];
  if (c === 0x53 /* S */ && data[1] === 0x49 && data[2] === 0x50 && data[3] === 0x2f) return false;
  if (c === 0x41 /* A */ && data[1] === 0x43 && data[2] === 0x4b && data[3] === 0x20) return false;
  return c !== 0x0d && c !== undefined;
}

let nextConnId = 0;

/** Messages of one connection handled per turn of the event loop (fairness, bounded stalls). */

/** Time a closing connection gets to flush its last responses before it is cut. */
const END_GRACE_MS = 500;

/** SIP over TCP or TLS (RFC 3261 §18.3): Content-Length framing, CRLF keep-alive. */
export class StreamTransport implements Transport {
  private server: net.Server | null = null;
  private closed: Promise<void> | null = null;
  private readonly conns = new Map<string, Conn>();
  /**
   * Sockets written to in this turn of the event loop, corked until its end: the replies
   * of one turn leave in one write (one TLS record) per connection instead of one each —
   * what the UDP engine's sendmmsg does for datagrams (docs/udp-engine.md).
   */
  private readonly corked = new Set<net.Socket>();
  private uncorkAt: NodeJS.Immediate | null = null;
  private local: BoundAddress = { address: '', port: 0 };
  private readonly headerMs: number;
  private readonly pingMs: number;
  private sweeper: NodeJS.Timeout | null = null;
  /** Flows cut because a request or probe written to them went unanswered (sip_flows_unanswered_total). */
  unansweredCuts = 0;
  /** OPTIONS probes written to quiet held flows. */
  probesSent = 0;

  constructor(
    readonly name: 'tcp' | 'tls',
    private readonly opts: StreamOptions,
    private readonly sink: MessageSink,
    private readonly log: Logger,
  ) {
    this.headerMs = (opts.headerTimeout ?? DEFAULTS.headerTimeout) * 1000;
    this.pingMs = (opts.pingInterval ?? DEFAULTS.pingInterval) * 1000;
  }

  start(): Promise<BoundAddress> {
    const server = this.opts.tls
      ? tls.createServer({ ...secureContextOptions(this.opts.tls), honorCipherOrder: true, handshakeTimeout: this.headerMs })
      : net.createServer();
    // The gate enforces the caps shared by every listener; without one, this listener's own.
    if (!this.opts.gate) server.maxConnections = this.opts.maxConnections;
    // Admission first, on the raw socket: a refused peer costs no TLS handshake.
    server.prependListener('connection', (raw: net.Socket) => this.admit(raw));
    if (server instanceof tls.Server) {
      server.on('secureConnection', (socket: tls.TLSSocket) => this.accept(socket));
      // Handshake failures (scanners, plain TCP on the TLS port, handshake timeouts) are
      // routine; node leaves the socket open after a handshake timeout, so close it here.
      server.on('tlsClientError', (err, socket) => {
        this.log.debug({ err: err.message }, 'tls handshake failed');
        socket.destroy();
      });
    } else {
      server.on('connection', (socket: net.Socket) => this.accept(socket));
    }
    server.on('error', (err) => this.log.error({ err }, `${this.name} server error`));
    this.server = server;
    this.closed = null;
    // One sweep per listener (as for WebSockets): probes quiet held flows, cuts unanswered ones.
    const step = Math.max(250, Math.min(5000, Math.floor(this.pingMs / 4)));
    this.sweeper ??= setInterval(() => this.sweep(Date.now()), step);
    this.sweeper.unref();
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

  private admit(raw: net.Socket): void {
    const gate = this.opts.gate;
    if (!gate) return;
    const address = normalizeAddress(raw.remoteAddress ?? '');
    if (!gate.open(address, this.name)) {
      raw.on('error', () => {});
      raw.destroy();
      return;
    }
    raw.once('close', () => gate.close(address));
  }

  private accept(socket: net.Socket): string | null {
    if (socket.destroyed) return null; // refused by the gate
    const connId = `${this.name}-${CONNECTION_ID_TAG}-${(++nextConnId).toString(36)}`;
    const flow: Flow = {
      transport: this.name,
      remoteAddress: normalizeAddress(socket.remoteAddress ?? ''),
      remotePort: socket.remotePort ?? 0,
      localAddress: this.local.address,
      localPort: this.local.port,
      connId,
    };
    const conn: Conn = { socket, flow, last: Date.now(), holdUntil: 0, awaiting: 0, probedAt: 0 };
    this.conns.set(connId, conn);
    const framer = new StreamFramer({ maxMessageSize: this.opts.maxMessageSize });
    socket.setNoDelay(true);
    // Liveness of held flows (README "Flows", docs/flows.md): the kernel probes a connection
    // quiet for the ping interval (libuv then sets 10 probes 1 s apart), so a peer whose
    // packets no longer arrive is found dead — and the connection closed — at most
    // SIP_PING_INTERVAL + 10 s after its last packet. No CRLF pings from here: RFC 5626
    // §4.4.1 has the client ping, and bytes sent to a dead peer would hold the kernel's
    // keep-alive off behind minutes of retransmissions.
    socket.setKeepAlive(true, this.pingMs);
    const idleMs = this.opts.idleTimeout * 1000;
    // A connection without a live binding is closed once quiet for the idle timeout
    // (counted from its last byte or the end of its last binding, whichever is later);
    // one with a live binding never is. Re-armed for at most idleMs at a time, so that
    // activity (which restarts node's timer with the last duration set) never delays a cut.
    // (A listener of its own: setTimeout's callback would be called once only.)
    socket.setTimeout(idleMs);
    socket.on('timeout', () => {
      const now = Date.now();
      const due = Math.max(conn.last, conn.holdUntil) + idleMs;
      if (conn.holdUntil <= now && now >= due) socket.destroy();
      else socket.setTimeout(Math.min(idleMs, Math.max(1, due - now)));
    });
    // Slow senders: the first message, and every message once started, must be
    // complete within headerTimeout, however the bytes trickle in (slowloris).
    const arm = (why: string): NodeJS.Timeout => {
      const t = setTimeout(() => this.cut(socket, connId, why), this.headerMs);
      t.unref();
      return t;
    };
    let delivered = false;
    let slow: NodeJS.Timeout | null = arm('no complete message in time');
    const queue = new FairQueue<FrameEvent>(
      { pause: () => socket.pause(), resume: () => socket.resume(), isOpen: () => !socket.destroyed },
      (ev) => {
        if (ev.type === 'message') this.sink.onMessage(ev.data, flow);
        else if (ev.type === 'ping') socket.write(PONG);
        else {
          this.log.debug({ connId, reason: ev.reason, remote: flow.remoteAddress }, 'closing unframeable stream');
          socket.destroy();
          return false;
        }
        return true;
      },
    );
    socket.on('data', (chunk: Buffer) => {
      conn.last = Date.now();
      // Anything from the peer answers (a frozen process sends nothing, though its kernel ACKs).
      conn.awaiting = 0;
      const events = framer.push(chunk);
      if (events.length > 0) {
        // Something complete arrived: the clock restarts for whatever follows.
        delivered = true;
        if (slow !== null) clearTimeout(slow);
        slow = null;
        queue.push(events);
      }
      if (framer.pending > 0) slow ??= arm('message not completed in time');
      else if (delivered && slow !== null) {
        clearTimeout(slow);
        slow = null;
      }
    });
    socket.on('error', (err) => this.log.debug({ connId, err: err.message }, 'stream socket error'));
    socket.on('close', () => {
      if (slow !== null) clearTimeout(slow);
      this.conns.delete(connId);
      this.sink.onFlowClosed(flow);
    });
    return connId;
  }

  /** Client connections this listener opened, by `address|port` (reused while open). */
  private readonly dialled = new Map<string, Promise<string>>();

  /**
   * A connection of ours to `address:port` (a trunk's TCP/TLS gateway, docs/trunks.md):
   * the open one when there is one, else a new one — for TLS verified against the system's
   * CAs (or `ca`) for `servername`. Resolves with its connection id once it can carry
   * messages; it is then a flow like an accepted one (responses and requests come back on it).
   */
  dial(address: string, port: number, servername: string, ca?: Buffer, timeoutMs = 3000): Promise<string> {
    const key = `${address}|${port}`;
    const open = this.dialled.get(key);
    if (open) return open;
    const p = new Promise<string>((resolve, reject) => {
      const ready = 'connect';
      const socket: net.Socket =
        this.name === 'tls'
          ? tls.connect({ host: address, port, servername: net.isIP(servername) ? undefined : servername, ca, minVersion: 'TLSv1.2' })
          : net.connect({ host: address, port });
      const timer = setTimeout(() => socket.destroy(new Error(`${this.name} connect to ${address}:${port} timed out`)), timeoutMs);
      timer.unref();
      socket.once(this.name === 'tls' ? 'secureConnect' : ready, () => {
        clearTimeout(timer);
        const connId = this.accept(socket);
        if (!connId) return reject(new Error('connection closed'));
        socket.once('close', () => this.dialled.delete(key));
        resolve(connId);
      });
      socket.once('error', (err) => {
        clearTimeout(timer);
        this.dialled.delete(key);
        reject(err);
      });
    });
    this.dialled.set(key, p);
    p.catch(() => undefined);
    return p;
  }

  private cut(socket: net.Socket, connId: string, why: string): void {
    this.log.debug({ connId, why }, 'closing slow stream');
    socket.destroy();
  }

  send(flow: Flow, data: Buffer): boolean {
    const conn = flow.connId ? this.conns.get(flow.connId) : undefined;
    // The connection must still be the one the flow names (id and peer): never another client's.
    if (!conn || conn.socket.destroyed || !samePeer(flow, conn.flow)) return false;
    if (conn.awaiting === 0 && expectsAnswer(data)) conn.awaiting = Date.now();
    const socket = conn.socket;
    if (!this.corked.has(socket)) {
      socket.cork();
      this.corked.add(socket);
      this.uncorkAt ??= setImmediate(() => this.uncorkAll());
    }
    socket.write(data);
    return true;
  }

  private uncorkAll(): void {
    this.uncorkAt = null;
    for (const socket of this.corked) if (!socket.destroyed) socket.uncork();
    this.corked.clear();
  }

  /**
   * Liveness beyond the kernel's keep-alive (README "Flows", docs/flows.md): a process that
   * stops reading while its kernel still ACKs looks alive to TCP, and Linux sends no
   * keep-alive probe while written data is unacknowledged. So (1) a flow that holds a live
   * binding and has been quiet for SIP_PING_INTERVAL gets a SIP OPTIONS (once per quiet
   * spell), and (2) any flow on which a request or probe has gone unanswered — no byte at
   * all back — for 2 × SIP_PING_INTERVAL is cut, which removes its bindings.
   */
  private sweep(now: number): void {
    const limit = 2 * this.pingMs;
    for (const [connId, c] of this.conns) {
      if (c.socket.destroyed) continue;
      if (c.awaiting !== 0 && now - c.awaiting >= limit) {
        this.unansweredCuts++;
        this.log.info({ connId, transport: this.name, remote: `${c.flow.remoteAddress}:${c.flow.remotePort}`, silentMs: now - c.last }, 'stream flow cut: request or probe unanswered');
        c.socket.destroy();
        continue;
      }
      if (c.holdUntil > now && now - c.last >= this.pingMs && c.probedAt <= c.last && this.opts.probe) {
        const probe = this.opts.probe(c.flow);
        if (!probe) continue;
        c.probedAt = now;
        this.probesSent++;
        if (c.awaiting === 0) c.awaiting = now;
        c.socket.write(probe);
      }
    }
  }

  connectionCount(): number {
    return this.conns.size;
  }

  closeFlow(connId: string): void {
    this.conns.get(connId)?.socket.end();
  }

  holdFlow(connId: string, until: number): void {
    const c = this.conns.get(connId);
    if (c) c.holdUntil = until;
  }

  /** Replace the certificate for new handshakes; open connections keep theirs. */
  setSecureContext(creds: TlsSettings): void {
    if (this.server instanceof tls.Server) this.server.setSecureContext(secureContextOptions(creds));
  }

  stopAccepting(): void {
    const server = this.server;
    if (!server || this.closed) return;
    this.closed = new Promise((resolve) => server.close(() => resolve()));
  }

  /** Stop listening, then end every connection (flushing what was written), cutting stragglers. */
  async stop(): Promise<void> {
    if (this.sweeper) clearInterval(this.sweeper);
    this.sweeper = null;
    if (!this.server) return;
    this.stopAccepting();
    const closed = this.closed;
    this.server = null;
    if (this.uncorkAt) clearImmediate(this.uncorkAt);
    this.uncorkAll();
    for (const c of this.conns.values()) c.socket.end();
    const cut = setTimeout(() => {
      for (const c of this.conns.values()) c.socket.destroy();
    }, END_GRACE_MS);
    cut.unref();
    await closed;
    clearTimeout(cut);
  }
}
