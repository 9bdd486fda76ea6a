import { SipError, StoreUnavailableError } from '../errors.js';

/** Options of {@link RequestGate}. */
export interface RequestGateOptions {
  /** Requests processed at once; more are refused with 503. */
  maxPending: number;
  /**
   * Whether the store answers now (Redis connection ready). While it does not,
   * requests that need it get 503 at once instead of waiting for a timeout.
   */
  storeReady: () => boolean;
}

/** Seconds a client should wait after an overload 503 (RFC 3261 §21.5.4). */
const RETRY_AFTER_OVERLOAD = '2';

/**
 * The bound on pending transactions: wraps request handlers, counts the
 * requests in flight, refuses past `maxPending` with 503 + Retry-After, short-cuts
 * store-bound requests while the store is known to be down, and lets graceful
 * shutdown wait for what is in flight.
 */
export class RequestGate {
  private inFlight = 0;
  private idleWaiters: Array<() => void> = [];
  /** Requests refused since start, by reason (metrics). */
  readonly refused = { overload: 0, store: 0 };
  /** Handler rejections caused by the store since start (metrics). */
  storeErrors = 0;

  constructor(private readonly opts: RequestGateOptions) {}

  /**
   * A handler bounded by this gate. `needsStore` handlers are refused with
   * StoreUnavailableError (the router's 503 + Retry-After) while the store is down.
   */
  wrap<C, R>(handler: (ctx: C) => Promise<R>, needsStore: boolean): (ctx: C) => Promise<R> {
    return (ctx) => {
      if (needsStore && !this.opts.storeReady()) {
        this.refused.store++;
        return Promise.reject(new StoreUnavailableError('store not connected'));
      }
      if (this.inFlight >= this.opts.maxPending) {
        this.refused.overload++;
        return Promise.reject(new SipError(503, 'Service Unavailable', 'OVERLOADED', [['Retry-After', RETRY_AFTER_OVERLOAD]]));
      }
      this.inFlight++;
      let p: Promise<R>;
      try {
        p = handler(ctx);
      } catch (err) {
        this.done();
        return Promise.reject(err);
      }
      return p.then(
        (r) => {
          this.done();
          return r;
        },
        (err: unknown) => {
          if (err instanceof StoreUnavailableError) this.storeErrors++;
          this.done();
          throw err;
        },
      );
    };
  }

  /** Requests being processed now. */
  get pending(): number {
    return this.inFlight;
  }

  /** Resolves once nothing is in flight, or after `timeoutMs`; true when idle. */
  idle(timeoutMs: number): Promise<boolean> {
    if (this.inFlight === 0) return Promise.resolve(true);
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.idleWaiters = this.idleWaiters.filter((w) => w !== wake);
        resolve(false);
      }, timeoutMs);
      t.unref();
      const wake = (): void => {
        clearTimeout(t);
        resolve(true);
      };
      this.idleWaiters.push(wake);
    });
  }

  private done(): void {
    this.inFlight--;
    if (this.inFlight === 0 && this.idleWaiters.length > 0) {
      const w = this.idleWaiters;
      this.idleWaiters = [];
      for (const f of w) f();
    }
  }
}
