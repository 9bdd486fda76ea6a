import { getHeader, getHeaders, getListValues } from '../sip/headers.js';
import type { SipRequest, SipResponse } from '../sip/message.js';
import { serializeMessage } from '../sip/response.js';
import type { ClientTransaction, ClientTransactionState, ClientTransactionUser, TransactionHost } from './client-transaction.js';
import { isReliable, type Destination } from './destination.js';
import { unrefTimer } from './timers.js';

/**
 * INVITE client transaction (RFC 3261 §17.1.1, with the Accepted state of
 * RFC 6026 §7.2).
 *
 * @remarks
 * Calling: the INVITE is retransmitted on Timer A (unreliable transports only)
 * until Timer B. A provisional response moves it to Proceeding; a 2xx to
 * Accepted, where 2xx retransmissions still reach the TU until Timer M; a
 * 300-699 to Completed, where the transaction itself sends the ACK and absorbs
 * retransmissions of the final response until Timer D.
 */
export class InviteClientTransaction implements ClientTransaction {
  readonly method = 'INVITE';
  private _state: ClientTransactionState = 'calling';
  private timerA: NodeJS.Timeout | null = null;
  private timerB: NodeJS.Timeout | null = null;
  private timerEnd: NodeJS.Timeout | null = null;
  private ack: Buffer | null = null;
  private readonly bytes: Buffer;

  constructor(
    private readonly host: TransactionHost,
    readonly key: string,
    readonly branch: string,
    readonly request: SipRequest,
    readonly destination: Destination,
    private readonly user: ClientTransactionUser,
  ) {
    this.bytes = serializeMessage(request);
  }

  get state(): ClientTransactionState {
    return this._state;
  }

  start(): void {
    if (!this.host.send(this.destination, this.bytes)) {
      // Reported after start() returns, so the TU never sees a callback from inside its own send.
      queueMicrotask(() => this.fail(503));
      return;
    }
    const { t1 } = this.host.timers;
    // "If an unreliable transport is being used, the client transaction MUST start timer A with a value of T1."
    if (!isReliable(this.destination.transport)) this.retransmit(t1);
    // "For any transport, the client transaction MUST start timer B with a value of 64*T1 seconds."
    this.timerB = unrefTimer(() => {
      if (this._state === 'calling') this.fail(408);
    }, 64 * t1);
  }

  private retransmit(interval: number): void {
    this.timerA = unrefTimer(() => {
      if (this._state !== 'calling') return;
      this.host.send(this.destination, this.bytes);
      this.retransmit(interval * 2);
    }, interval);
  }

  receive(res: SipResponse): void {
    const s = res.status;
    switch (this._state) {
      case 'calling':
      case 'proceeding':
        if (s < 200) {
          this._state = 'proceeding';
          this.clearRetransmissions();
          this.user.onResponse(res, this);
        } else if (s < 300) {
          // RFC 6026 §7.2: "the client transaction MUST transition to the Accepted state, and Timer M MUST be started" (64*T1).
          this._state = 'accepted';
          this.clearRetransmissions();
          this.timerEnd = unrefTimer(() => this.terminate(), 64 * this.host.timers.t1);
          this.user.onResponse(res, this);
        } else {
          // §17.1.1.2: "the client transaction MUST ... generate an ACK request ... and pass the response up to the TU".
          this._state = 'completed';
          this.clearRetransmissions();
          this.ack = serializeMessage(buildAck(this.request, res));
          this.host.send(this.destination, this.ack);
          // Timer D: at least 32 s for unreliable transports, zero for reliable ones.
          const d = isReliable(this.destination.transport) ? 0 : Math.max(32_000, 64 * this.host.timers.t1);
          this.timerEnd = unrefTimer(() => this.terminate(), d);
          this.user.onResponse(res, this);
        }
        break;
      case 'completed':
        // "Any retransmissions of the final response that are received while in the Completed state MUST cause the ACK to be re-passed to the transport layer".
        if (s >= 300 && this.ack) this.host.send(this.destination, this.ack);
        break;
      case 'accepted':
        // RFC 6026 §8.4: "Any 2xx responses that match this client transaction ... MUST be passed up to the TU."
        if (s >= 200 && s < 300) this.user.onResponse(res, this);
        break;
      default:
        break;
    }
  }

  private clearRetransmissions(): void {
    if (this.timerA) clearTimeout(this.timerA);
    if (this.timerB) clearTimeout(this.timerB);
    this.timerA = this.timerB = null;
  }

  private fail(status: 408 | 503): void {
    if (this._state === 'terminated') return;
    this.terminate();
    this.user.onFailure(this, status);
  }

  terminate(): void {
    if (this._state === 'terminated') return;
    this._state = 'terminated';
    this.clearRetransmissions();
    if (this.timerEnd) clearTimeout(this.timerEnd);
    this.timerEnd = null;
    this.host.terminated(this.key);
  }
}

/**
 * The ACK for a non-2xx final response (RFC 3261 §17.1.1.3): same Request-URI,
 * the INVITE's top Via only, From, Call-ID and Route of the INVITE, the To of
 * the response (with its tag), CSeq number of the INVITE with method ACK.
 */
export function buildAck(invite: SipRequest, res: SipResponse): SipRequest {
  const via = getListValues(invite, 'via')[0];
  const cseq = (getHeader(invite, 'cseq') ?? '').trim().split(/\s+/)[0];
  const headers = [
    { name: 'via', value: via },
    { name: 'max-forwards', value: '70' },
    { name: 'from', value: getHeader(invite, 'from') ?? '' },
    { name: 'to', value: getHeader(res, 'to') ?? getHeader(invite, 'to') ?? '' },
    { name: 'call-id', value: getHeader(invite, 'call-id') ?? '' },
    { name: 'cseq', value: `${cseq} ACK` },
  ];
  for (const r of getHeaders(invite, 'route')) headers.push({ name: 'route', value: r });
  return { kind: 'request', method: 'ACK', uri: invite.uri, headers, body: Buffer.alloc(0) };
}
