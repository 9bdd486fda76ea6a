import type { Flow, SipTransportName, Transport } from '../transport/types.js';

/**
 * Where a message goes (RFC 3261 §18.1.1 / §18.2.2): a transport and, for
 * stream transports, the connection (flow) to write to — a flow that a client
 * opened towards us is the only way back to it (RFC 5626 §5.3). UDP messages go
 * to address:port from our listening socket.
 */
export interface Destination {
  transport: SipTransportName;
  address: string;
  port: number;
  /** The connection of a TCP/TLS/WS/WSS flow; null for UDP. */
  connId: string | null;
  /**
   * The process that holds the connection, when it is not this one (a flow of
   * another worker or node): the bytes are relayed to it (docs/fleet.md "Relay").
   */
  node?: string | null;
  /** From a flow token: the account domain of the call whose dialog this is (its record, docs/events.md). */
  callDomain?: string;
  /** From a flow token: the rtpengine that relays the dialog's media (docs/media.md). */
  media?: string;
  /**
   * From a flow token: requests of the dialog going this way carry their CSeq this much
   * higher (the edge answered the carrier's challenge with a second INVITE; docs/trunks.md).
   */
  cseqOffset?: number;
}

/**
 * Reaches flows held by other processes of the fleet (docs/fleet.md "Relay"):
 * bytes for such a flow go to its owner, which writes them on the connection;
 * a response whose top Via branch another process made goes to that process.
 */
export interface FlowRelay {
  /** This process (the `node` of its own destinations). */
  readonly self: string;
  /** The tag of this process in every branch it makes (so the owner of a response can be told). */
  readonly branchTag: string;
  /** Send `data` on `d`'s flow in process `d.node`; false when that process is gone. */
  send(d: Destination, data: Buffer): boolean;
  /**
   * A datagram for a UDP peer that registered with (or called through) process
   * `d.node`: handed to a live process of that node when the node is another one
   * (its NAT answers only that address); false when this node sends it itself.
   */
  sendDatagram(d: Destination, data: Buffer): boolean;
  /** A response came over `flow` for a branch of process `tag`: hand it over. */
  response(tag: string, data: Buffer, flow: Flow): void;
}

/** The way back to whoever sent a message over `flow`. */
export function destinationOf(flow: Flow): Destination {
  return { transport: flow.transport, address: flow.remoteAddress, port: flow.remotePort, connId: flow.connId };
}

/** Reliable transports need no retransmissions (RFC 3261 §17.1.1.2: Timer A/E only for unreliable ones). */
export function isReliable(t: SipTransportName): boolean {
  return t !== 'udp';
}

/**
 * Flows whose connection id starts with this are not network connections: they are the
 * edge's own user agent (calls/, the B2BUA) talking to its proxy inside the process.
 * No transport makes such an id, so no peer can pose as one.
 */
export const INTERNAL_FLOW_PREFIX = 'b2b:';

/** Whether a flow is the edge's own user agent (see {@link INTERNAL_FLOW_PREFIX}). */
export function isInternalFlow(f: { connId: string | null }): boolean {
  return f.connId !== null && f.connId.startsWith(INTERNAL_FLOW_PREFIX);
}

/** Writes bytes to a destination; false when its transport is off or its connection is gone. */
export function sendTo(transports: ReadonlyMap<SipTransportName, Transport>, d: Destination, data: Buffer, relay?: FlowRelay | null): boolean {
  if (d.node && relay && d.node !== relay.self) {
    if (d.connId !== null) return relay.send(d, data);
    if (relay.sendDatagram(d, data)) return true;
  }
  const t = transports.get(d.transport);
  if (!t) return false;
  const flow: Flow = { transport: d.transport, remoteAddress: d.address, remotePort: d.port, localAddress: '', localPort: 0, connId: d.connId };
  return t.send(flow, data);
}

/** `host` as it appears in a URI or Via: IPv6 in brackets. */
export function uriHost(address: string): string {
  return address.includes(':') && !address.startsWith('[') ? `[${address}]` : address;
}
