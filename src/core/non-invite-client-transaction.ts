import type { SipRequest, SipResponse } from '../sip/message.js';
import { serializeMessage } from '../sip/response.js';
import type { ClientTransaction, ClientTransactionState, ClientTransactionUser, TransactionHost } from './client-transaction.js';
import { isReliable, type Destination } from './destination.js';
import { unrefTimer } from './timers.js';

/**
 * Non-INVITE client transaction (RFC 3261 §17.1.2): Trying → Proceeding →
 * Completed → Terminated. Timer E retransmits over unreliable transports
 * (doubling up to T2; at T2 once a provisional response came), Timer F gives
 * up after 64*T1, Timer K absorbs retransmitted final responses.
 */
export class NonInviteClientTransaction implements ClientTransaction {
  private _state: ClientTransactionState = 'trying';
  private timerE: NodeJS.Timeout | null = null;
  private timerF: NodeJS.Timeout | null = null;
  private timerK: NodeJS.Timeout | null = null;
  private readonly bytes: Buffer;
  readonly method: string;

  constructor(
    private readonly host: TransactionHost,
    readonly key: string,
    readonly branch: string,
    readonly request: SipRequest,
    readonly destination: Destination,
    private readonly user: ClientTransactionUser,
  ) {
    this.method = request.method;
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
    if (!isReliable(this.destination.transport)) this.retransmit(t1);
    // "the client transaction MUST set timer F to fire in 64*T1 seconds"
    this.timerF = unrefTimer(() => {
      if (this._state === 'trying' || this._state === 'proceeding') this.fail(408);
    }, 64 * t1);
  }

  private retransmit(interval: number): void {
    this.timerE = unrefTimer(() => {
      if (this._state !== 'trying' && this._state !== 'proceeding') return;
      this.host.send(this.destination, this.bytes);
      const { t2 } = this.host.timers;
      // Trying: MIN(2*interval, T2); Proceeding: T2.
      this.retransmit(this._state === 'proceeding' ? t2 : Math.min(interval * 2, t2));
    }, interval);
  }

  receive(res: SipResponse): void {
    if (this._state !== 'trying' && this._state !== 'proceeding') return; // Completed absorbs retransmissions
    if (res.status < 200) {
      this._state = 'proceeding';
      this.user.onResponse(res, this);
      return;
    }
    this._state = 'completed';
    if (this.timerE) clearTimeout(this.timerE);
    if (this.timerF) clearTimeout(this.timerF);
    this.timerE = this.timerF = null;
    // Timer K: T4 for unreliable transports, zero for reliable ones.
    this.timerK = unrefTimer(() => this.terminate(), isReliable(this.destination.transport) ? 0 : this.host.timers.t4);
    this.user.onResponse(res, this);
  }

  private fail(status: 408 | 503): void {
    if (this._state === 'terminated') return;
    this.terminate();
    this.user.onFailure(this, status);
  }

  terminate(): void {
    if (this._state === 'terminated') return;
    this._state = 'terminated';
    for (const t of [this.timerE, this.timerF, this.timerK]) if (t) clearTimeout(t);
    this.timerE = this.timerF = this.timerK = null;
    this.host.terminated(this.key);
  }
}
