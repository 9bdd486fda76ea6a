import type { CSeq, SipRequest, Via } from '../sip/message.js';
import type { Flow } from '../transport/types.js';

/**
 * The contract between the core and whoever handles a request locally (the
 * transaction user, as SIP.js's core calls it): an {@link IncomingRequest} in,
 * a {@link Reply} out, which the router sends as the response.
 */

/** A request as the core hands it to a handler: parsed essentials plus its flow. */
export interface IncomingRequest {
  req: SipRequest;
  flow: Flow;
  callId: string;
  cseq: CSeq;
  /** Top Via with received/rport filled in (RFC 3261 §18.2.1, RFC 3581 §4). */
  via: Via;
  /** Where the request really came from: `sip:<ip>:<port>;transport=<t>` (docs/design.md). */
  received: string;
}

/** A reply the router turns into a response to the request. */
export interface Reply {
  status: number;
  reason: string;
  headers: Array<[string, string]>;
}

/** Answers one request method locally (REGISTER → the registrar, OPTIONS → the server). */
export type RequestHandler = (ctx: IncomingRequest) => Promise<Reply>;
