import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Destination } from '../core/destination.js';
import type { SipTransportName } from '../transport/types.js';
import { SIP_TRANSPORT_NAMES } from '../sip/transport-name.js';

const MAC_BYTES = 9;

/**
 * Flow tokens (RFC 5626 §5.2): the user part of our Record-Route URIs names the
 * flow a dialog's party is reached over — a TCP/TLS/WS/WSS connection, or the
 * address a UDP peer behind NAT really sends from — so that in-dialog requests
 * coming back through the edge go out over that flow, whatever the remote
 * target's host says (`.invalid` for WebSocket clients, RFC 7118 §5).
 *
 * @remarks
 * A token is `base64url(transport|connId|address|port).base64url(mac)`, the MAC
 * an HMAC-SHA-256 over the flow and the dialog's Call-ID: it cannot be forged,
 * nor lifted from one dialog into another to reach someone's flow. It needs no
 * state, so it survives restarts as long as the secret does (a connection id
 * does not, and then the request gets 430 Flow Failed, RFC 5626 §5.3).
 */
export class FlowTokens {
  constructor(private readonly secret: Buffer) {}

  /**
   * @param callDomain the account domain of the call, when the dialog is a call with a record (CDRs, docs/events.md)
   * @param media the rtpengine that relays the call's media, when one does (docs/media.md): any node ends it there
   * @param cseqOffset how much higher the CSeq of requests towards this flow must be (a carrier challenge answered)
   */
  encode(d: Destination, callId: string, callDomain?: string, media?: string, cseqOffset?: number): string {
    // The owning process too (a flow of another worker or node is reached through it).
    const extra = [d.node ?? '', callDomain ?? '', media ?? '', cseqOffset ? String(cseqOffset) : ''];
    while (extra.length > 0 && extra[extra.length - 1] === '') extra.pop();
    const tail = extra.map((x) => `|${x}`).join('');
    const flow = `${d.transport}|${d.connId ?? ''}|${d.address}|${d.port}${tail}`;
    return `${Buffer.from(flow).toString('base64url')}.${this.mac(flow, callId).toString('base64url')}`;
  }

  /** The flow a token names, or null when it is not a token of ours for this Call-ID. */
  decode(token: string, callId: string): Destination | null {
    const dot = token.indexOf('.');
    if (dot <= 0) return null;
    const flow = Buffer.from(token.slice(0, dot), 'base64url').toString();
    const given = Buffer.from(token.slice(dot + 1), 'base64url');
    const want = this.mac(flow, callId);
    if (given.length !== want.length || !timingSafeEqual(given, want)) return null;
    const [transport, connId, address, port, node, callDomain, media, cseq] = flow.split('|');
    if (!SIP_TRANSPORT_NAMES.has(transport as string) || address === undefined || !/^\d+$/.test(port ?? '')) return null;
    return {
      transport: transport as SipTransportName,
      connId: connId === '' || connId === undefined ? null : connId,
      address,
      port: Number(port),
      ...(node ? { node } : {}),
      ...(callDomain ? { callDomain } : {}),
      ...(media ? { media } : {}),
      ...(cseq && /^\d{1,6}$/.test(cseq) ? { cseqOffset: Number(cseq) } : {}),
    };
  }

  private mac(flow: string, callId: string): Buffer {
    return createHmac('sha256', this.secret).update(flow).update('\u0000').update(callId).digest().subarray(0, MAC_BYTES);
  }
}
