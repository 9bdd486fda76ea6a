/**
 * The billing capability (docs/billing.md): the ledger on its store, the rate
 * deck, and their metrics — built by {@link createBilling}, the one builder the
 * composition root (src/app.ts) calls.
 */
import { Counter, Registry } from 'prom-client';
import type { Config } from '../config.js';
import { createLogger, type Logger } from '../logger.js';
import type { RedisClient } from '../store/redis/client.js';
import type { BillingStore } from '../store/billing/billing.js';
import { MemoryBillingStore } from '../store/billing/memory.js';
import { RedisBillingStore } from '../store/billing/redis.js';
import { Ledger } from './ledger.js';
import { CallCharging } from './calls.js';
import { MemoryLiveCallStore, RedisLiveCallStore } from '../store/billing/live.js';
import { RateDeck, SAMPLE_DECK } from './rate-deck.js';

export { Ledger } from './ledger.js';
export { RateDeck } from './rate-deck.js';

/** The rate deck in use, replaced whole by a reload. */
export class Rates {
  #deck: RateDeck;
  constructor(
    private readonly file: string | null,
    sample: boolean,
  ) {
    // A bad deck at start is a configuration error (exit 2, one line naming the line).
    this.#deck = file ? RateDeck.load(file) : sample ? RateDeck.parse(SAMPLE_DECK, 'sample deck') : RateDeck.empty();
  }

  get deck(): RateDeck {
    return this.#deck;
  }

  /** Read RATE_DECK_FILE again (SIGHUP). A bad file throws and leaves the deck in use. */
  reload(): RateDeck {
    if (this.file) this.#deck = RateDeck.load(this.file);
    return this.#deck;
  }
}

export interface Billing {
  ledger: Ledger;
  rates: Rates;
  /** Prices, credit checks, cuts and debits of calls (billing/calls.ts). */
  charging: CallCharging;
  /** `sip_calls_cut_for_credit_total` (prepaid enforcement counts its cuts here). */
  callCutForCredit(): void;
}

export interface BillingDeps {
  config: Readonly<Config>;
  /** The shared Redis client; the embedded store when null. */
  redis: RedisClient | null;
  /** Where the billing metrics go (`GET /metrics`); a private registry when absent. */
  registry?: Registry;
  log?: Logger;
  /** A store in place of the one `redis` selects (tests). */
  store?: BillingStore;
}

/** Build the billing capability. Throws ConfigError for a bad rate deck. */
export function createBilling(d: BillingDeps): Billing {
  const registers = [d.registry ?? new Registry()];
  const rows = new Counter({ name: 'sip_ledger_transactions_total', help: 'Ledger rows written, by type (credit, debit); docs/billing.md', labelNames: ['type'], registers });
  const cut = new Counter({ name: 'sip_calls_cut_for_credit_total', help: 'Calls ended by the edge because the balance ran out (prepaid enforcement; docs/billing.md)', registers });
  const store = d.store ?? (d.redis ? new RedisBillingStore(d.redis) : new MemoryBillingStore());
  const ledger = new Ledger({
    store,
    partners: d.config.partners,
    defaultCurrency: d.config.defaultCurrency,
    onRow: (type) => rows.inc({ type }),
  });
  const rates = new Rates(d.config.rateDeckFile, !d.config.production);
  d.log?.info({ rates: rates.deck.size, source: rates.deck.source }, 'rate deck loaded');
  const charging = new CallCharging({
    ledger,
    rates,
    live: d.redis ? new RedisLiveCallStore(d.redis) : new MemoryLiveCallStore(),
    log: d.log ?? createLogger('silent'),
    onCut: () => cut.inc(),
  });
  return { ledger, rates, charging, callCutForCredit: () => cut.inc() };
}
