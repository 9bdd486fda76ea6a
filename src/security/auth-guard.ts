import { createHash } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { AuthFailureStore, FailureLimits } from './auth-failure-store.js';
import type { TrustedAddresses } from './trusted-addresses.js';

/** Options of {@link AuthGuard}. */
export interface AuthGuardOptions {
  store: AuthFailureStore;
  trusted: TrustedAddresses;
  /** Counting window, ms. */
  windowMs: number;
  /** Failures from one source address within the window before the source is refused. */
  maxPerSource: number;
  /** Failures against one endpoint within the window before it is refused to sources not known good. */
  maxPerEndpoint: number;
  /** Length of a refusal, ms. */
  cooloffMs: number;
  /** How long a source that authenticated as an endpoint stays exempt from that endpoint's block, ms. @default 1 day */
  goodTtlMs?: number;
  log: Logger;
  now?: () => number;
}

/** `ok`: check the password; otherwise refuse it unchecked, naming the counter that refused. */
export type GuardVerdict = 'ok' | 'source' | 'endpoint';

/** Most blocks remembered in process. */
const MAX_KNOWN_BLOCKS = 100_000;

/** Usernames come off the wire: longer ones are hashed so a key stays short. */
const MAX_KEY_PART = 128;

/**
 * Password-guessing defence (the idea of fail2ban and kamailio's
 * `auth_check` + htable counters): failed digest responses are counted per
 * source address and per endpoint. Past a threshold, further attempts are refused
 * for a cooling-off period without the password being checked at all:
 *
 * - a refused **source** is refused whatever endpoint it names;
 * - a refused **endpoint** is refused to every source except those that
 *   authenticated as it within {@link AuthGuardOptions.goodTtlMs}, so its own
 *   phones keep registering while someone else guesses its password.
 *
 * Endpoints are counted by the name the request claims, whether it exists or
 * not, so unknown and known usernames get the same answers after the same
 * number of attempts. Trusted addresses are not counted per source. Store errors
 * fail open (the password is checked) and are counted in {@link storeErrors}.
 */
export class AuthGuard {
  private readonly sourceLimits: FailureLimits;
  private readonly endpointLimits: FailureLimits;
  private readonly goodTtlMs: number;
  private readonly now: () => number;
  /** key → blocked-until learnt from the store: refusals need no round trip. */
  private readonly knownBlocks = new Map<string, number>();
  /** `<endpoint>\0<source>` → when this node last wrote it as good (writes at most hourly). */
  private readonly goodWritten = new Map<string, number>();
  private readonly trustCache = new Map<string, boolean>();
  /** Until then the known blocks may be incomplete (map overflowed): read the store. */
  private lossyUntil = 0;

  /** Counts since start (metrics read them). */
  failures = 0;
  readonly blocks = { source: 0, endpoint: 0 };
  readonly refused = { source: 0, endpoint: 0 };
  storeErrors = 0;

  constructor(private readonly opts: AuthGuardOptions) {
    this.sourceLimits = { windowMs: opts.windowMs, max: opts.maxPerSource, cooloffMs: opts.cooloffMs };
    this.endpointLimits = { windowMs: opts.windowMs, max: opts.maxPerEndpoint, cooloffMs: opts.cooloffMs };
    this.goodTtlMs = opts.goodTtlMs ?? 86_400_000;
    this.now = opts.now ?? Date.now;
    // Blocks started by other nodes and workers are announced; missed ones are reloaded.
    opts.store.watchBlocks?.(
      (key, until) => this.rememberBlock(key, until),
      () => this.knownBlocks.clear(),
    );
  }

  /** Before the password is checked: may it be? */
  async check(source: string | undefined, realm: string, user: string): Promise<GuardVerdict> {
    const now = this.now();
    const src = this.sourceKey(source);
    const ep = endpointKey(realm, user);
    if (src !== null && this.blockedLocally(src, now)) return this.refuse('source');
    // Every active block is known here (own failures + announcements from the other
    // processes): no block on this endpoint → nothing to read. This is the path of
    // every honest registration.
    const complete = this.opts.store.blocksComplete() && now >= this.lossyUntil;
    if (complete && !this.blockedLocally(ep, now)) return 'ok';
    let state;
    try {
      state = await this.opts.store.read(src, ep, source ?? '', now);
    } catch (err) {
      this.storeError(err, 'read');
      return 'ok';
    }
    if (state.sourceUntil > 0 && src !== null) {
      this.rememberBlock(src, state.sourceUntil);
      return this.refuse('source');
    }
    if (state.endpointUntil > 0 && !state.good) return this.refuse('endpoint');
    return 'ok';
  }

  /** The password was checked and was wrong (or the user is unknown). */
  async failed(source: string | undefined, realm: string, user: string): Promise<void> {
    this.failures++;
    const now = this.now();
    const src = this.sourceKey(source);
    const ep = endpointKey(realm, user);
    try {
      const [s, e] = await Promise.all([
        src === null ? null : this.opts.store.fail(src, now, this.sourceLimits),
        this.opts.store.fail(ep, now, this.endpointLimits),
      ]);
      if (s && src !== null && s.until > 0) {
        this.rememberBlock(src, s.until);
        if (s.started) {
          this.blocks.source++;
          this.opts.log.warn({ source, until: new Date(s.until).toISOString() }, 'password guessing: source refused');
        }
      }
      if (e.until > 0) this.rememberBlock(ep, e.until);
      if (e.started) {
        this.blocks.endpoint++;
        this.opts.log.warn({ realm, user: user.slice(0, 64), until: new Date(e.until).toISOString() }, 'password guessing: endpoint refused to unknown sources');
      }
    } catch (err) {
      this.storeError(err, 'fail');
    }
  }

  /** The password was right: this source is good for this endpoint. */
  async succeeded(source: string | undefined, realm: string, user: string): Promise<void> {
    if (source === undefined) return;
    const now = this.now();
    const ep = endpointKey(realm, user);
    const k = `${ep}\u0000${source}`;
    const last = this.goodWritten.get(k);
    if (last !== undefined && now - last < Math.min(3_600_000, this.goodTtlMs / 2)) return;
    if (this.goodWritten.size >= 100_000) this.goodWritten.clear();
    try {
      await this.opts.store.markGood(ep, source, now, this.goodTtlMs);
      this.goodWritten.set(k, now);
    } catch (err) {
      this.storeError(err, 'markGood');
    }
  }

  private refuse(scope: 'source' | 'endpoint'): GuardVerdict {
    this.refused[scope]++;
    return scope;
  }

  /**
   * Bounded: a flood of blocked sources must not grow the map without limit. When
   * it is full of live blocks, some are forgotten, so checks read the store again
   * for one cooling-off (no block outlives it).
   */
  private rememberBlock(key: string, until: number): void {
    if (this.knownBlocks.size >= MAX_KNOWN_BLOCKS && !this.knownBlocks.has(key)) {
      const now = this.now();
      for (const [k, u] of this.knownBlocks) if (u <= now) this.knownBlocks.delete(k);
      if (this.knownBlocks.size >= MAX_KNOWN_BLOCKS) {
        this.knownBlocks.clear();
        this.lossyUntil = now + this.opts.cooloffMs;
      }
    }
    if (until > (this.knownBlocks.get(key) ?? 0)) this.knownBlocks.set(key, until);
  }

  private blockedLocally(key: string, now: number): boolean {
    const until = this.knownBlocks.get(key);
    if (until === undefined) return false;
    if (until > now) return true;
    this.knownBlocks.delete(key);
    return false;
  }

  private sourceKey(source: string | undefined): string | null {
    if (source === undefined || source === '') return null;
    let trusted = this.trustCache.get(source);
    if (trusted === undefined) {
      if (this.trustCache.size >= 100_000) this.trustCache.clear();
      this.trustCache.set(source, (trusted = this.opts.trusted.has(source)));
    }
    return trusted ? null : `src:${source}`;
  }

  private storeError(err: unknown, op: string): void {
    this.storeErrors++;
    this.opts.log.debug({ err: err instanceof Error ? err.message : String(err), op }, 'auth failure counters unavailable; failing open');
  }

  stop(): void {
    this.opts.store.stop();
  }
}

/** Counter key of an endpoint, known or not: `ep:<realm>:<user>`, hashed when long. */
export function endpointKey(realm: string, user: string): string {
  const raw = `${realm}:${user}`;
  return raw.length <= MAX_KEY_PART ? `ep:${raw}` : `ep#${createHash('sha256').update(raw).digest('base64url')}`;
}
