/**
 * Everything that keeps the edge standing in front of the open internet, built
 * from configuration in one place so the composition root (src/app.ts) only
 * plugs it in: the per-source rate limit and ban (before parsing), connection
 * caps, the password-guessing guard, the bound on pending requests, TLS
 * settings, and the draining state of graceful shutdown.
 */
import type { RedisClient } from '../store/redis/client.js';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { MetricSources } from '../metrics.js';
import type { LocationStore } from '../store/location/location.js';
import type { ConnectionGate, Flow, SipTransportName, TlsSettings, Transport } from '../transport/types.js';
import { MemoryAuthFailureStore } from './auth-failure-store.js';
import { AuthGuard } from './auth-guard.js';
import type { RedisEvents } from '../store/redis/notices.js';
import { ConnectionLimiter } from './connection-limiter.js';
import { RedisAuthFailureStore } from './redis-auth-failure-store.js';
import { RequestGate } from './request-gate.js';
import { SourceRateLimiter } from './source-rate-limiter.js';
import { TrustedAddresses } from './trusted-addresses.js';

export interface HardeningDeps {
  /** The shared Redis connection when REDIS_URL is set: auth counters live there. */
  redis: RedisClient | null;
  /** Notices between the processes sharing that Redis (blocks announced to every node). */
  events?: RedisEvents | null;
  log: Logger;
  /** Close a stream flow whose source was just banned. */
  closeFlow: (flow: Flow) => void;
}

export class Hardening {
  readonly trusted: TrustedAddresses;
  /** Null when SIP_RATE_LIMIT is off. */
  readonly rateLimiter: SourceRateLimiter | null;
  readonly connections: ConnectionLimiter;
  readonly guard: AuthGuard;
  readonly gate: RequestGate;
  /** Admission of stream connections for the transports. */
  readonly connectionGate: ConnectionGate;
  /** Set when shutdown begins: new messages are dropped, readiness fails. */
  draining = false;
  /** Messages dropped by admit() for reasons of its own (the limiter counts its own). */
  private readonly dropped = { overload: 0, draining: 0 };
  private readonly pendingWork = new Set<Promise<unknown>>();
  private readonly log: Logger;

  constructor(
    private readonly config: Readonly<Config>,
    private readonly deps: HardeningDeps,
  ) {
    this.log = deps.log.child({ component: 'security' });
    this.trusted = new TrustedAddresses(config.trustedAddresses);
    this.rateLimiter =
      config.rateLimit > 0
        ? new SourceRateLimiter({
            limit: config.rateLimit,
            windowMs: config.rateWindow * 1000,
            banMs: config.banTime * 1000,
            trusted: this.trusted,
            onBan: (address, until) => this.log.warn({ source: address, until: new Date(until).toISOString() }, 'source banned: message rate exceeded'),
          })
        : null;
    const limiter = this.rateLimiter;
    this.connections = new ConnectionLimiter({
      maxTotal: config.maxConnections,
      maxPerAddress: config.maxConnectionsPerAddress,
      trusted: this.trusted,
      isBanned: limiter ? (a) => limiter.isBanned(a) : undefined,
    });
    this.connectionGate = {
      open: (address) => !this.draining && this.connections.acquire(address) === null,
      close: (address) => this.connections.release(address),
    };
    this.guard = new AuthGuard({
      store: deps.redis ? new RedisAuthFailureStore(deps.redis, undefined, deps.events ?? null) : new MemoryAuthFailureStore(),
      trusted: this.trusted,
      windowMs: config.authFailureWindow * 1000,
      maxPerSource: config.authMaxFailuresPerSource,
      maxPerEndpoint: config.authMaxFailuresPerEndpoint,
      cooloffMs: config.authCooloff * 1000,
      log: this.log,
    });
    const redis = deps.redis;
    this.gate = new RequestGate({
      maxPending: config.maxPendingRequests,
      storeReady: redis ? () => redis.status === 'ready' : () => true,
    });
  }

  /**
   * RouterOptions.admit: runs before a message is parsed. Drops messages while
   * draining, from banned or over-rate sources (closing their stream flows), and
   * new UDP work once `transactions` reaches the cap.
   */
  admit(flow: Flow, _size: number, transactions: number): boolean {
    if (this.draining) {
      this.dropped.draining++;
      return false;
    }
    const limiter = this.rateLimiter;
    if (limiter !== null && !limiter.admit(flow.remoteAddress)) {
      if (flow.connId !== null) this.deps.closeFlow(flow);
      return false;
    }
    if (flow.connId === null && transactions >= this.config.maxTransactions) {
      this.dropped.overload++;
      return false;
    }
    return true;
  }

  /** TLS settings of the listeners: the loaded certificate plus configured ciphers and minimum version. */
  tls(creds: { key: Buffer; cert: Buffer }): TlsSettings {
    return {
      key: creds.key,
      cert: creds.cert,
      minVersion: this.config.tlsMinVersion,
      ...(this.config.tlsCiphers === null ? {} : { ciphers: this.config.tlsCiphers }),
    };
  }

  /** Keep track of background work (binding clean-up of closed flows) so shutdown can wait for it. */
  settle(p: Promise<unknown>): void {
    const q = p.catch(() => {}).finally(() => this.pendingWork.delete(q));
    this.pendingWork.add(q);
  }

  /** Wait for background work, at most `timeoutMs`. */
  async settled(timeoutMs: number): Promise<void> {
    if (this.pendingWork.size === 0) return;
    let t: NodeJS.Timeout | undefined;
    await Promise.race([Promise.allSettled([...this.pendingWork]), new Promise((r) => (t = setTimeout(r, timeoutMs)))]);
    clearTimeout(t);
  }

  /** What the metrics registry reads from the running server. */
  metricSources(s: {
    transports: ReadonlyMap<SipTransportName, Transport>;
    location: LocationStore;
    transactions: () => number;
    storeUp: () => boolean;
    authUriMismatches: () => number;
  }): MetricSources {
    const limiter = this.rateLimiter;
    const guard = this.guard;
    const gate = this.gate;
    return {
      transports: s.transports,
      countBindings: () => s.location.countLive(),
      transactions: s.transactions,
      pendingRequests: () => gate.pending,
      storeUp: s.storeUp,
      security: {
        dropped: () => ({ banned: limiter?.dropped.banned ?? 0, rate: limiter?.dropped.rate ?? 0, ...this.dropped }),
        bans: () => limiter?.bans ?? 0,
        banned: () => limiter?.bannedCount() ?? 0,
        connectionsRefused: () => ({ ...this.connections.refused }),
        authFailures: () => guard.failures,
        authBlocks: () => ({ ...guard.blocks }),
        authRefused: () => ({ ...guard.refused }),
        requestsRefused: () => ({ ...gate.refused }),
        storeErrors: () => guard.storeErrors,
        authUriMismatches: s.authUriMismatches,
      },
    };
  }

  stop(): void {
    this.rateLimiter?.stop();
    this.guard.stop();
  }
}
