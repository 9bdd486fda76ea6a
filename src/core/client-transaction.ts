import type { SipRequest, SipResponse } from '../sip/message.js';
import type { Destination } from './destination.js';
import type { TimerSettings } from './timers.js';

/** What a client transaction reports to its user (RFC 3261 §17.1: the TU; here the proxy's response context). */
export interface ClientTransactionUser {
  /**
   * Every response the transaction passes up: provisional ones, the final one,
   * and — for INVITE — each 2xx retransmission while Accepted (RFC 6026 §7.2).
   */
  onResponse(res: SipResponse, tx: ClientTransaction): void;
  /**
   * No final response: Timer B/F fired (408) or the transport could not send
   * (503) — RFC 3261 §16.7 step 1 and §16.9 treat them as those responses.
   */
  onFailure(tx: ClientTransaction, status: 408 | 503): void;
}

export type ClientTransactionState = 'calling' | 'trying' | 'proceeding' | 'completed' | 'accepted' | 'terminated';

/** One client transaction: a request sent to one destination, matched by its branch (§17.1.3). */
export interface ClientTransaction {
  /** The branch of our Via: the key responses are matched on, with the CSeq method. */
  readonly branch: string;
  readonly method: string;
  /** The request as sent, our Via on top. */
  readonly request: SipRequest;
  readonly destination: Destination;
  readonly state: ClientTransactionState;
  /** A response matched to this transaction. */
  receive(res: SipResponse): void;
  /** Stop every timer and forget the transaction (server shutdown). */
  terminate(): void;
}

/** What a transaction needs from the layer that owns it. */
export interface TransactionHost {
  readonly timers: TimerSettings;
  /** Writes bytes; false when the destination cannot be reached (flow gone). */
  send(d: Destination, data: Buffer): boolean;
  /** The transaction reached Terminated: drop it from the tables. */
  terminated(key: string): void;
}
