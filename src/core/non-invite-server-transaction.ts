import type { SipRequest, SipResponse } from '../sip/message.js';
import type { Flow } from '../transport/types.js';
import { isReliable } from './destination.js';
import { ServerTransaction, type ServerTransactionHost } from './server-transaction.js';
import { unrefTimer } from './timers.js';

/**
 * Non-INVITE server transaction (RFC 3261 §17.2.2) of a proxied request:
 * Trying (retransmissions absorbed) → Proceeding (last provisional repeated)
 * → Completed (final repeated until Timer J: 64*T1 unreliable, 0 reliable).
 */
export class NonInviteServerTransaction extends ServerTransaction {
  private timerJ: NodeJS.Timeout | null = null;

  constructor(host: ServerTransactionHost, key: string, request: SipRequest, flow: Flow, startedAt: bigint) {
    super(host, key, request, flow, startedAt, 'trying');
  }

  forward(res: SipResponse, bytes: Buffer): void {
    this.send(res.status, bytes);
  }

  protected send(status: number, bytes: Buffer): void {
    if (this._state !== 'trying' && this._state !== 'proceeding') return;
    this.last = bytes;
    this.write(bytes);
    if (status < 200) {
      this._state = 'proceeding';
      return;
    }
    this._state = 'completed';
    this.markFinal(status);
    this.timerJ = unrefTimer(() => this.terminate(), isReliable(this.flow.transport) ? 0 : 64 * this.host.timers.t1);
  }

  retransmission(): void {
    if ((this._state === 'proceeding' || this._state === 'completed') && this.last) this.write(this.last);
  }

  terminate(): void {
    if (this._state === 'terminated') return;
    this._state = 'terminated';
    if (this.timerJ) clearTimeout(this.timerJ);
    this.timerJ = null;
    this.host.terminated(this.key);
  }
}
