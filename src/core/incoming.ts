import type { CSeq, SipRequest, Via } from '../sip/message.js';
import type { Flow } from '../transport/types.js';

/** A request as the core hands it to a handler: parsed essentials plus its flow. */
export interface IncomingRequest {
  req: SipRequest;
  flow: Flow;
  callId: string;
  cseq: CSeq;
  /** Top Via with received/rport filled in (RFC 3261 §18.2.1, RFC 3581 §4). */
  via: Via;
  /** Where the request really came from: `sip:<ip>:<port>;transport=<t>` (DESIGN.md). */
  received: string;
}
