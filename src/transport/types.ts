import { randomBytes } from 'node:crypto';
import type { SipTransportName } from '../sip/transport-name.js';

export type { SipTransportName };

/**
 * Where a message came from and how to answer it (RFC 3261 §18.2.2: responses go
 * back over the flow the request arrived on). `connId` names the connection of a
 * stream transport (TCP/TLS/WS/WSS); null for UDP.
 */
export interface Flow {
  transport: SipTransportName;
  remoteAddress: string;
  remotePort: number;
  localAddress: string;
  localPort: number;
  connId: string | null;
}

/** Receives whole SIP messages (already framed) from every transport. */
export interface MessageSink {
  onMessage(data: Buffer, flow: Flow): void;
  /** A stream connection closed; bindings that rely on it can no longer be reached. */
  onFlowClosed(flow: Flow): void;
}

export interface BoundAddress {
  address: string;
  port: number;
}

/** One listener (SIP.js `transport.ts`: a protocol name and send). */
export interface Transport {
  readonly name: SipTransportName;
  start(): Promise<BoundAddress>;
  /** Send bytes over a flow; false when the flow is gone (connection closed). */
  send(flow: Flow, data: Buffer): boolean;
  /** Number of open connections (0 for UDP). */
  connectionCount(): number;
  /** Close the connection behind a flow (stream transports). */
  closeFlow(connId: string): void;
  /**
   * The connection carries a live binding until `until` (ms since the epoch; 0 =
   * none any more): until then it is never closed for being quiet, and it is
   * probed instead (README "Flows", docs/flows.md). Stream transports only.
   */
  holdFlow?(connId: string, until: number): void;
  /** TCP/TLS: OPTIONS probes written to quiet flows that hold bindings (README "Flows"). */
  readonly probesSent?: number;
  /** TCP/TLS: flows cut because a request or probe written to them went unanswered. */
  readonly unansweredCuts?: number;
  /** Stop accepting connections; open flows stay until {@link stop} (graceful shutdown). */
  stopAccepting?(): void;
  stop(): Promise<void>;
}

/**
 * Admission of stream connections (connection caps, bans), consulted on accept,
 * before any TLS handshake or WebSocket upgrade.
 */
export interface ConnectionGate {
  /** A new connection from `address`: true keeps it, false closes it at once. */
  open(address: string, transport: SipTransportName): boolean;
  /** A connection that {@link open} admitted closed. */
  close(address: string): void;
}

/** Certificate, key and protocol settings of the TLS and WSS listeners. */
export interface TlsSettings {
  key: Buffer;
  cert: Buffer;
  /** OpenSSL cipher list; undefined = Node's default. */
  ciphers?: string;
  /** Oldest version accepted; never below TLS 1.2. @default 'TLSv1.2' */
  minVersion?: 'TLSv1.2' | 'TLSv1.3';
}

/** The secure-context options of a listener (also used for SIGHUP reloads). */
export function secureContextOptions(t: TlsSettings): { key: Buffer; cert: Buffer; minVersion: 'TLSv1.2' | 'TLSv1.3'; ciphers?: string } {
  return t.ciphers === undefined
    ? { key: t.key, cert: t.cert, minVersion: t.minVersion ?? 'TLSv1.2' }
    : { key: t.key, cert: t.cert, minVersion: t.minVersion ?? 'TLSv1.2', ciphers: t.ciphers };
}

/**
 * A tag of this process start, in every connection id it hands out: a process
 * that restarts (a crashed worker, say) never hands out an id a binding of its
 * predecessor still names (docs/fleet.md).
 */
export const CONNECTION_ID_TAG = randomBytes(4).toString('hex');

/**
 * Whether a send for `flow` may go out on a connection whose peer is `peer`: the
 * flow must name the same remote address and port (a binding or a flow token
 * names both), so no stale id can alias another client's connection. A flow
 * with no address (an internal reply path) names only the connection.
 */
export function samePeer(flow: Flow, peer: Flow): boolean {
  return flow.remoteAddress === '' || (flow.remoteAddress === peer.remoteAddress && flow.remotePort === peer.remotePort);
}

/** IPv4-mapped IPv6 addresses from dual-stack sockets read as plain IPv4. */
export function normalizeAddress(address: string): string {
  return address.startsWith('::ffff:') && address.includes('.') ? address.slice(7) : address;
}

/** What every stream listener (TCP, TLS, WS, WSS) is configured with. */
export interface ListenerOptions {
  host: string;
  port: number;
  maxMessageSize: number;
  /** Seconds without any byte before a connection that carries no live binding is closed. */
  idleTimeout: number;
  /**
   * Seconds of silence before a connection that carries a live binding is probed:
   * a WebSocket ping (dead when unanswered by 2 × this), or TCP keep-alive probes
   * from the kernel (TCP/TLS). @default 30
   */
  pingInterval?: number;
  /**
   * Seconds a connection may take for its TLS handshake, its first message (or
   * HTTP upgrade request), and any message or frame it has started: slow senders
   * (slowloris) are cut. @default 10
   */
  headerTimeout?: number;
  /** Cap of this listener alone, applied when no gate is given (the gate enforces the shared caps). */
  maxConnections: number;
  /** Connection caps and bans, consulted before the TLS handshake. */
  gate?: ConnectionGate;
  /** TLS settings; absent for plain TCP and WS. */
  tls?: TlsSettings;
  /**
   * TCP/TLS: the bytes of a SIP OPTIONS probe for a quiet flow that holds live bindings
   * (README "Flows"), or null when nothing on it is to be probed.
   */
  probe?: (flow: Flow) => Buffer | null;
}
