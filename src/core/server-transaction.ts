import type { SipRequest, SipResponse } from '../sip/message.js';
import { buildResponse } from '../sip/response.js';
import type { Flow } from '../transport/types.js';
import type { TransactionHost } from './client-transaction.js';
import { destinationOf, type Destination } from './destination.js';

export type ServerTransactionState = 'trying' | 'proceeding' | 'completed' | 'confirmed' | 'accepted' | 'terminated';

/** What a server transaction needs from the layer that owns it. */
export interface ServerTransactionHost extends TransactionHost {
  /** A fresh To tag for responses this element generates (RFC 3261 §8.2.6.2). */
  newTag(): string;
  /** Value of the Server header of generated responses. */
  readonly serverHeader: string;
  /** The first final response went out (metrics hook). */
  finalSent(tx: ServerTransaction, status: number): void;
}

/**
 * A server transaction of a request this element processes statefully
 * (RFC 3261 §17.2), handed to the transaction user (the proxy). Responses go
 * back over the flow the request came on (§18.2.2).
 */
export abstract class ServerTransaction {
  protected _state: ServerTransactionState;
  protected last: Buffer | null = null;
  private tag: string | null = null;
  private _finalStatus = 0;
  /** A CANCEL matched this transaction (RFC 3261 §9.2); INVITE only. */
  cancelled = false;
  /** Called by the router when a CANCEL matches (set by the TU). */
  onCancel: (() => void) | null = null;
  readonly destination: Destination;

  constructor(
    protected readonly host: ServerTransactionHost,
    readonly key: string,
    /** The request as received, top Via with received/rport. */
    readonly request: SipRequest,
    readonly flow: Flow,
    /** process.hrtime.bigint() when the request arrived (metrics). */
    readonly startedAt: bigint,
    initial: ServerTransactionState,
  ) {
    this._state = initial;
    this.destination = destinationOf(flow);
  }

  get method(): string {
    return this.request.method;
  }

  get state(): ServerTransactionState {
    return this._state;
  }

  /** Status of the first final response sent, 0 while there is none. */
  get finalStatus(): number {
    return this._finalStatus;
  }

  /** The To tag this element puts on the responses it generates itself. */
  get toTag(): string {
    return (this.tag ??= this.host.newTag());
  }

  /** Answer with a response generated here (RFC 3261 §8.2.6; §16.7 step 6 for the proxy's own finals). */
  respond(status: number, reason: string, headers: Array<[string, string]> = [], body?: Buffer | string): void {
    const all: Array<[string, string]> = [...headers, ['Server', this.host.serverHeader]];
    this.send(status, buildResponse(this.request, status, reason, { toTag: this.toTag, headers: all, body }));
  }

  /** Send a response received from downstream, our Via already removed (RFC 3261 §16.7 step 9). */
  abstract forward(res: SipResponse, bytes: Buffer): void;

  protected abstract send(status: number, bytes: Buffer): void;

  /** The request came again (same branch): absorb it or repeat the last response. */
  abstract retransmission(): void;

  protected write(bytes: Buffer): void {
    this.host.send(this.destination, bytes);
  }

  protected markFinal(status: number): void {
    if (this._finalStatus !== 0) return;
    this._finalStatus = status;
    this.host.finalSent(this, status);
  }

  /** Whether a final response has been sent. */
  get finalSent(): boolean {
    return this._finalStatus !== 0;
  }

  abstract terminate(): void;
}
