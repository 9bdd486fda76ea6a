import type { TrustedAddresses } from './trusted-addresses.js';

/** Options of {@link ConnectionLimiter}. */
export interface ConnectionLimiterOptions {
  /** Stream connections (TCP, TLS, WS, WSS together) open at once. */
  maxTotal: number;
  /** Connections open at once from one address; trusted addresses are exempt. */
  maxPerAddress: number;
  trusted: TrustedAddresses;
  /** Refuse every connection from an address banned by the rate limiter. */
  isBanned?: (address: string) => boolean;
}

/** Why {@link ConnectionLimiter.acquire} refused a connection. */
export type ConnectionRefusal = 'banned' | 'per_address' | 'total';

/**
 * Caps on open stream connections, per address and in total, shared by every
 * stream listener. A connection is counted from accept (before any TLS handshake
 * or WebSocket upgrade) to close, so half-open handshakes count too.
 */
export class ConnectionLimiter {
  private readonly perAddress = new Map<string, number>();
  private readonly trustCache = new Map<string, boolean>();
  private open = 0;
  /** Connections refused since start, by reason. */
  readonly refused: Record<ConnectionRefusal, number> = { banned: 0, per_address: 0, total: 0 };

  constructor(private readonly opts: ConnectionLimiterOptions) {}

  /** Count a new connection from `address`; null = accepted, else why it must be closed. */
  acquire(address: string): ConnectionRefusal | null {
    let refusal: ConnectionRefusal | null = null;
    if (this.opts.isBanned?.(address)) refusal = 'banned';
    else if (this.open >= this.opts.maxTotal) refusal = 'total';
    else {
      const n = this.perAddress.get(address) ?? 0;
      if (n >= this.opts.maxPerAddress && !this.isTrusted(address)) refusal = 'per_address';
      else {
        this.perAddress.set(address, n + 1);
        this.open++;
        return null;
      }
    }
    this.refused[refusal]++;
    return refusal;
  }

  /** A connection counted by {@link acquire} closed. */
  release(address: string): void {
    const n = this.perAddress.get(address);
    if (n === undefined) return;
    this.open--;
    if (n <= 1) {
      this.perAddress.delete(address);
      this.trustCache.delete(address);
    } else this.perAddress.set(address, n - 1);
  }

  /** Connections open now. */
  get total(): number {
    return this.open;
  }

  /** Connections open now from one address. */
  from(address: string): number {
    return this.perAddress.get(address) ?? 0;
  }

  private isTrusted(address: string): boolean {
    let t = this.trustCache.get(address);
    if (t === undefined) this.trustCache.set(address, (t = this.opts.trusted.has(address)));
    return t;
  }
}
