import type { IncomingRequest } from './incoming.js';
import type { InviteServerTransaction } from './invite-server-transaction.js';
import type { ServerTransaction } from './server-transaction.js';

/**
 * The transaction user for requests processed statefully (the proxy), as the
 * router sees it (SIP.js `transaction-user.ts`: the layers meet through callbacks).
 */
export interface RequestProcessor {
  /** Methods it handles, for the Allow header. */
  readonly methods: readonly string[];
  /**
   * Whether this request is for the processor rather than a local handler of the
   * same method (an OPTIONS to a user is proxied; one to the server is answered here).
   */
  accepts(ctx: IncomingRequest): boolean;
  /**
   * A new request, with its server transaction (retransmissions never reach
   * here). A rejection with a SipError is answered by the router on `tx`.
   */
  onRequest(ctx: IncomingRequest, tx: ServerTransaction): Promise<void>;
  /** A CANCEL matched this INVITE transaction; the router has answered the CANCEL 200 (RFC 3261 §16.10). */
  onCancel(ctx: IncomingRequest, tx: InviteServerTransaction): void;
  /** An ACK that matched no server transaction: the ACK of a 2xx, end to end (§16.11 / §17.2.1). */
  onAck(ctx: IncomingRequest): void;
}
