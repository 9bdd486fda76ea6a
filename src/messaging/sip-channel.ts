/**
 * The `sip` channel (docs/messaging.md "SIP channel"): messages between the API and the
 * account's own SIP endpoints, carried as SIP MESSAGE (RFC 3428) through the proxy.
 *
 * A SIP channel's address is `sip:channel-<channel id>@<account SIP domain>`. A send
 * with `to` = an endpoint username (`alice`) or its AOR (`sip:alice@<account domain>`)
 * goes out as a MESSAGE from that address to the endpoint's AOR; the proxy delivers it
 * to every registered contact. A MESSAGE an endpoint sends to the channel's address is
 * handed to {@link SipInbound.fromEndpoint} by the proxy and becomes an inbound message
 * of the conversation with that endpoint.
 *
 * The messaging layer never touches SIP itself: the proxy/calls layer implements
 * {@link SipMessenger} and calls `fromEndpoint` (both wired in app.ts).
 */
import type { ChannelRecord } from '../store/messaging/messaging.js';
import { MessagingError } from './errors.js';

/** Sends one SIP MESSAGE in an account's domain; implemented by the proxy layer. */
export interface SipMessenger {
  /**
   * @param domain the account's SIP domain
   * @param fromUri the channel's address (`sip:channel-<id>@<domain>`)
   * @param toAor the endpoint's AOR (`sip:<username>@<domain>`)
   * @returns the final SIP status (2xx: delivered to the endpoint; 404/480: not there; 408: no answer)
   */
  send(domain: string, fromUri: string, toAor: string, contentType: string, body: string): Promise<{ status: number }>;
}

/** What the proxy calls when an endpoint sends a MESSAGE to a channel's address. */
export interface SipInbound {
  /**
   * Record the MESSAGE as an inbound message of the channel and fire `message.inbound`.
   * Answers the SIP status the proxy should reply with: 200 recorded, 404 no such
   * SIP channel in this domain, 415 a body that is not text, 413 too large.
   */
  fromEndpoint(domain: string, endpointUsername: string, toChannelUri: string, body: string | Buffer, contentType?: string): Promise<{ status: number; messageId?: string }>;
}

/** Longest text carried by a SIP channel message, bytes (RFC 3428 §7: MESSAGE stays well under 1300 bytes on UDP; TCP carries more). */
export const SIP_TEXT_MAX = 4096;

/** The channel's SIP address. */
export function channelAddress(c: Pick<ChannelRecord, 'id' | 'domain'>): string {
  return `sip:channel-${c.id}@${c.domain ?? ''}`;
}

/** The channel id of a `sip:channel-<id>@<domain>` address in `domain`, or null. */
export function channelIdOf(uri: string, domain: string): string | null {
  const m = /^sips?:channel-(ch_[0-9a-f]{20})@([^;>?:]+)(?::\d+)?(?:[;?].*)?$/i.exec(uri.trim().replace(/^<|>$/g, ''));
  if (!m || (m[2] as string).toLowerCase() !== domain.toLowerCase()) return null;
  return (m[1] as string).toLowerCase();
}

const USERNAME = /^[A-Za-z0-9]{1,64}$/;

/** The endpoint username a send names (`alice` or `sip:alice@<domain>`); invalid → MessagingError naming `to`. */
export function endpointOf(to: string, domain: string): string {
  if (USERNAME.test(to)) return to;
  const m = /^sips?:([A-Za-z0-9]{1,64})@([^;>?:]+)$/i.exec(to.trim());
  if (!m) throw new MessagingError('invalid', 'must be an endpoint username or its sip URI (sip:<username>@<account domain>) on a sip channel', 'to');
  if ((m[2] as string).toLowerCase() !== domain.toLowerCase()) throw new MessagingError('invalid', `must be an endpoint of this account (sip:<username>@${domain})`, 'to');
  return m[1] as string;
}
