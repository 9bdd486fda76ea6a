/**
 * Non-INVITE server transactions (RFC 3261 §17.2.2) of the requests the edge
 * answers itself (REGISTER, OPTIONS): a retransmitted request (same branch,
 * sent-by and method, §17.2.3) is absorbed while the first copy is being
 * processed ("Trying") and answered with the last response once it is final
 * ("Completed"). Stream transports are reliable (Timer J is zero), so only UDP
 * requests are tracked.
 */

/**
 * How long a completed local transaction is remembered: 8 s, not Timer J's 32 s.
 * These requests are idempotent — a REGISTER retransmission met later is a no-op
 * in the store (same Call-ID and CSeq within 32 s), a late OPTIONS is answered
 * again — so keeping every response for 32–64 s only cost memory: ~270 MB of
 * heap and long GC pauses at 3,000 registrations/s, which overflowed the UDP
 * receive buffer. Kamailio keeps a completed transaction 5 s (tm wt_timer) and
 * answers REGISTER statelessly. A request retransmitted after its response was
 * lost arrives within T2 = 4 s, inside this window.
 */
export const LOCAL_LINGER_MS = 8_000;

export type TransactionState =
  | { state: 'new' }
  /** Being processed: the retransmission is absorbed. */
  | { state: 'trying' }
  /** Already answered: send this response again. */
  | { state: 'completed'; response: Buffer };

const TRYING = Symbol('trying');
type Entry = Buffer | typeof TRYING;

/**
 * Entries live between `linger` and 2*`linger`: two generations, rotated every
 * `linger`, so expiry costs one Map drop per rotation instead of a timer per
 * transaction.
 */
export class ServerTransactionTable {
  private current = new Map<string, Entry>();
  private previous = new Map<string, Entry>();
  private readonly timer: NodeJS.Timeout;

  constructor(linger: number = LOCAL_LINGER_MS) {
    this.timer = setInterval(() => this.rotate(), linger);
    this.timer.unref();
  }

  /** Look up a request's transaction; a new one is entered in the Trying state. */
  receive(key: string): TransactionState {
    const e = this.current.get(key) ?? this.previous.get(key);
    if (e === undefined) {
      this.current.set(key, TRYING);
      return { state: 'new' };
    }
    return e === TRYING ? { state: 'trying' } : { state: 'completed', response: e };
  }

  /** Record the final response sent for a transaction. */
  complete(key: string, response: Buffer): void {
    this.previous.delete(key);
    this.current.set(key, response);
  }

  /** Forget a transaction that produced no response (e.g. dropped request). */
  abandon(key: string): void {
    this.current.delete(key);
    this.previous.delete(key);
  }

  get size(): number {
    return this.current.size + this.previous.size;
  }

  rotate(): void {
    this.previous = this.current;
    this.current = new Map();
  }

  stop(): void {
    clearInterval(this.timer);
    this.current.clear();
    this.previous.clear();
  }
}

/**
 * RFC 3261 §17.2.3 matching key: branch + sent-by + method (ACK matches INVITE).
 * Requests whose branch lacks the magic cookie (RFC 2543 peers) fall back to
 * Call-ID, CSeq, From tag and the top Via as written.
 */
export function transactionKey(
  method: string,
  branch: string | null,
  sentBy: string,
  callId: string,
  cseq: number,
  fromTag: string | null,
  topVia: string,
): string {
  const m = method === 'ACK' ? 'INVITE' : method;
  if (branch && branch.startsWith('z9hG4bK')) return `${branch}\u0000${sentBy}\u0000${m}`;
  return `2543\u0000${callId}\u0000${cseq}\u0000${fromTag ?? ''}\u0000${topVia}\u0000${m}`;
}
