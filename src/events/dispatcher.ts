/**
 * Delivers the callback outbox (docs/callbacks.md "Delivery"): every process
 * claims due callbacks (each leased to it for LEASE_MS, so one process at a time
 * delivers one callback, and a process that dies mid-delivery leaves it to
 * another when the lease ends), makes one attempt each, and then completes,
 * schedules the next attempt, moves to fallback_answer_url, or dead-letters.
 */
import { Poller } from './poller.js';
import type { Logger } from '../logger.js';
import type { CallStore, OutboxItem } from '../store/calls/calls.js';
import { SecretBoxError } from '../security/secret-box.js';

/** What one attempt came to (the webhook module's outcome, reduced). */
export interface AttemptOutcome {
  ok: boolean;
  status?: number;
  /** A log-safe line (no secret, no URL path or query). */
  detail?: string;
  /** False when no retry can succeed (not HTTPS, a refused address): dead-letter now. */
  retryable: boolean;
}

export interface CallbackDispatcherOptions {
  store: CallStore;
  /** One attempt: sign with `secret`, send, report. */
  deliver: (item: OutboxItem, secret: string) => Promise<AttemptOutcome>;
  /** Delay before the next attempt after attempt `n` (1-based) failed; null after the last. */
  retryDelay: (failedAttempt: number) => number | null;
  log: Logger;
  onAttempt?: (event: string, outcome: string) => void;
  onDead?: (event: string) => void;
  /** How often the outbox is polled, ms. @default 250 */
  pollMs?: number;
  /** How long a claimed callback is this process's, ms (longer than an attempt). @default 15000 */
  leaseMs?: number;
  /** Attempts in flight at most. @default 32 */
  concurrency?: number;
}

/** A signing secret read from the store is reused this long. */
const SECRET_CACHE_MS = 5_000;

export class CallbackDispatcher {
  readonly #o: Required<Pick<CallbackDispatcherOptions, 'pollMs' | 'leaseMs' | 'concurrency'>> & CallbackDispatcherOptions;
  readonly #poller: Poller;
  #inFlight = 0;
  readonly #secrets = new Map<string, { secret: string | null; at: number }>();
  readonly #running = new Set<Promise<void>>();

  constructor(o: CallbackDispatcherOptions) {
    this.#o = { ...o, pollMs: o.pollMs ?? 250, leaseMs: o.leaseMs ?? 15_000, concurrency: o.concurrency ?? 32 };
    this.#poller = new Poller(() => this.#tick(), this.#o.pollMs);
  }

  start(): void {
    this.#poller.start();
  }

  /** Look at the outbox now (this process just queued a callback). */
  wake(): void {
    this.#poller.wake();
  }

  /** Stop claiming; wait for the attempts in flight. */
  async stop(): Promise<void> {
    this.#poller.stop();
    await Promise.all([...this.#running]);
  }

  async #tick(): Promise<void> {
    const room = this.#o.concurrency - this.#inFlight;
    if (room <= 0) return;
    let items: OutboxItem[];
    try {
      items = await this.#o.store.claim(Date.now(), room, this.#o.leaseMs);
    } catch (err) {
      this.#o.log.debug({ err: err instanceof Error ? err.message : String(err) }, 'callbacks: outbox not readable; retried at the next poll');
      return;
    }
    for (const item of items) {
      this.#inFlight++;
      const p = this.#attempt(item).finally(() => {
        this.#inFlight--;
        this.#running.delete(p);
      });
      this.#running.add(p);
    }
  }

  async #secret(domain: string): Promise<string | null> {
    const c = this.#secrets.get(domain);
    if (c && Date.now() - c.at < SECRET_CACHE_MS) return c.secret;
    const secret = await this.#o.store.signingSecret(domain);
    if (this.#secrets.size > 10_000) this.#secrets.clear();
    this.#secrets.set(domain, { secret, at: Date.now() });
    return secret;
  }

  async #attempt(item: OutboxItem): Promise<void> {
    const { store, log } = this.#o;
    const where = { event: item.event, callbackId: item.id, account: item.authId, host: hostOf(item.url) };
    try {
      let secret: string | null;
      try {
        secret = await this.#secret(item.domain);
      } catch (err) {
        if (!(err instanceof SecretBoxError)) throw err;
        // Sealed with a key this process does not hold (DATA_ENCRYPTION_KEY changed, or a
        // development key of an earlier run): nothing is sent unsigned or signed with a guess.
        log.error(
          { ...where, kid: err.kid, why: err.reason },
          'callbacks: the account\'s signing secret cannot be decrypted with DATA_ENCRYPTION_KEY; the callback is dead-lettered (put the key it was sealed with back in DATA_ENCRYPTION_KEY, or POST …/SigningSecret/ for a new secret)',
        );
        await this.#dead(item, 'the account\'s callback signing secret cannot be decrypted by the server (POST …/SigningSecret/ makes a new one)', where);
        return;
      }
      if (secret === null) {
        await this.#dead(item, 'the account has no callback signing secret (POST …/SigningSecret/ makes one)', where);
        return;
      }
      const out = await this.#o.deliver(item, secret);
      this.#o.onAttempt?.(item.event, out.ok ? 'ok' : out.status !== undefined ? `http_${out.status}` : 'error');
      if (out.ok) {
        await store.complete(item);
        log.debug({ ...where, attempt: item.attempts + 1 }, 'callback delivered');
        return;
      }
      const attempts = item.attempts + 1;
      const why = out.status !== undefined ? `HTTP ${out.status}` : (out.detail ?? 'no answer');
      const delay = out.retryable ? this.#o.retryDelay(attempts) : null;
      if (delay !== null) {
        log.info({ ...where, attempt: attempts, why, retryInMs: delay }, 'callback failed; will retry');
        await store.retry({ ...item, attempts }, Date.now() + delay);
      } else if (item.fallback) {
        log.info({ ...where, attempt: attempts, why, fallbackHost: hostOf(item.fallback.url) }, 'callback failed on every attempt; trying the fallback URL');
        await store.retry({ ...item, url: item.fallback.url, method: item.fallback.method, fallback: null, attempts: 0 }, Date.now());
      } else {
        await this.#dead({ ...item, attempts }, `${why} after ${attempts} attempt${attempts === 1 ? '' : 's'}`, where);
      }
    } catch (err) {
      // The store failed: the lease runs out and the callback is attempted again (a duplicate, which receivers drop by CallbackId).
      log.warn({ ...where, err: err instanceof Error ? err.message : String(err) }, 'callbacks: outbox update failed; the callback will be attempted again');
    }
  }

  async #dead(item: OutboxItem, reason: string, where: Record<string, unknown>): Promise<void> {
    await this.#o.store.deadLetter(item, reason, Date.now());
    this.#o.onDead?.(item.event);
    this.#o.log.warn({ ...where, reason }, 'callback dead-lettered');
  }
}

/** The host of a URL for logs (never its path, query or credentials). */
function hostOf(url: string): string {
  try {
    return new URL(url).host;
  } catch {
    return '(not a URL)';
  }
}
