/**
 * The SIP transports of RFC 3261 §18 and RFC 7118 (WebSocket), as the Via
 * transport parameter names them in lower case. Part of the SIP vocabulary:
 * transports, the location service and the proxy all speak of them.
 */
export type SipTransportName = 'udp' | 'tcp' | 'tls' | 'ws' | 'wss';

/** Every transport name, for narrowing untrusted text. */
export const SIP_TRANSPORT_NAMES: ReadonlySet<string> = new Set<SipTransportName>(['udp', 'tcp', 'tls', 'ws', 'wss']);
