import type { SipRequest, SipResponse } from '../sip/message.js';
import { buildResponse } from '../sip/response.js';
import type { Flow } from '../transport/types.js';
import { isReliable } from './destination.js';
import { ServerTransaction, type ServerTransactionHost } from './server-transaction.js';
import { unrefTimer } from './timers.js';

/**
 * INVITE server transaction (RFC 3261 §17.2.1, with the Accepted state of
 * RFC 6026 §7.1).
 *
 * @remarks
 * Proceeding: a 100 Trying goes out at once; retransmitted INVITEs get the last
 * provisional response again. A 2xx moves it to Accepted (2xx retransmissions
 * from downstream are still sent; retransmitted INVITEs are absorbed) until
 * Timer L. A 300-699 moves it to Completed: the response is retransmitted on
 * Timer G over unreliable transports until the ACK (→ Confirmed, Timer I) or
 * Timer H.
 */
export class InviteServerTransaction extends ServerTransaction {
  private timerG: NodeJS.Timeout | null = null;
  private timerEnd: NodeJS.Timeout | null = null;

  constructor(host: ServerTransactionHost, key: string, request: SipRequest, flow: Flow, startedAt: bigint) {
    super(host, key, request, flow, startedAt, 'proceeding');
    // §17.2.1: "the server transaction MUST generate a 100 (Trying) response unless it knows
    // that the TU will generate a provisional or final response within 200 ms".
    this.last = buildResponse(request, 100, 'Trying', { headers: [['Server', host.serverHeader]] });
    this.write(this.last);
  }

  forward(res: SipResponse, bytes: Buffer): void {
    this.send(res.status, bytes);
  }

  protected send(status: number, bytes: Buffer): void {
    switch (this._state) {
      case 'proceeding':
        this.last = bytes;
        this.write(bytes);
        if (status < 200) return;
        this.markFinal(status);
        if (status < 300) {
          // RFC 6026 §7.1: Accepted, Timer L = 64*T1.
          this._state = 'accepted';
          this.timerEnd = unrefTimer(() => this.terminate(), 64 * this.host.timers.t1);
          return;
        }
        this._state = 'completed';
        if (!isReliable(this.flow.transport)) this.retransmit(this.host.timers.t1);
        // "For any transport, timer H MUST be set to fire in 64*T1 seconds."
        this.timerEnd = unrefTimer(() => this.terminate(), 64 * this.host.timers.t1);
        return;
      case 'accepted':
        // RFC 6026 §8.5: 2xx responses from the TU are passed to the transport while Accepted.
        if (status >= 200 && status < 300) this.write(bytes);
        return;
      default:
        return;
    }
  }

  private retransmit(interval: number): void {
    this.timerG = unrefTimer(() => {
      if (this._state !== 'completed' || !this.last) return;
      this.write(this.last);
      this.retransmit(Math.min(interval * 2, this.host.timers.t2));
    }, interval);
  }

  retransmission(): void {
    // Proceeding: "the most recent provisional response ... MUST be passed to the transport layer";
    // Completed: the final response again. Accepted and Confirmed absorb.
    if ((this._state === 'proceeding' || this._state === 'completed') && this.last) this.write(this.last);
  }

  /** The ACK of our non-2xx final response arrived (same branch; §17.2.1): Confirmed, then Timer I. */
  ack(): void {
    if (this._state !== 'completed') return;
    this._state = 'confirmed';
    if (this.timerG) clearTimeout(this.timerG);
    if (this.timerEnd) clearTimeout(this.timerEnd);
    this.timerG = null;
    this.timerEnd = unrefTimer(() => this.terminate(), isReliable(this.flow.transport) ? 0 : this.host.timers.t4);
  }

  terminate(): void {
    if (this._state === 'terminated') return;
    this._state = 'terminated';
    if (this.timerG) clearTimeout(this.timerG);
    if (this.timerEnd) clearTimeout(this.timerEnd);
    this.timerG = this.timerEnd = null;
    this.host.terminated(this.key);
  }
}
