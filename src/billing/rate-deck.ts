/**
 * The rate deck (docs/billing.md "Rates"): what a destination costs. A CSV file
 * (RATE_DECK_FILE) of lines
 * `prefix,rate_per_minute,initial_increment,subsequent_increment,connect_fee,currency,description`;
 * the longest prefix of the destination wins. Prefixes are digits of an E.164
 * number (a leading `+` is ignored on both sides) or start with `sip:` (calls
 * between endpoints: free unless the deck has a `sip:` line). A header line
 * starting with `prefix`, blank lines and `#` comments are skipped. A bad line
 * stops the start with one error naming it; a reload (SIGHUP) with a bad line
 * keeps the deck in use.
 */
import { readFileSync } from 'node:fs';
import { ConfigError } from '../errors.js';
import { parseDecimalText } from './amount.js';
import { normalizeCurrency } from './currency.js';
import type { RateTerms } from './rating.js';

/** One line of the deck. */
export interface RateLine extends RateTerms {
  prefix: string;
  currency: string;
  description: string;
  /** Line number in its file (1-based). */
  line: number;
}

const PREFIX_RE = /^(?:\+?\d{1,20}|sip:[^\s,]*)$/;

/** The key a destination or prefix is matched by: without a leading `+`, lower-case for SIP URIs. */
function matchKey(s: string): string {
  const t = s.trim();
  if (t.toLowerCase().startsWith('sip:')) return t.toLowerCase();
  return t.startsWith('+') ? t.slice(1) : t;
}

/** A parsed deck: per currency, prefix → line. */
export class RateDeck {
  readonly #byCurrency = new Map<string, Map<string, RateLine>>();
  readonly #longest = new Map<string, number>();
  readonly size: number;
  readonly source: string;

  constructor(lines: RateLine[], source: string) {
    for (const l of lines) {
      let m = this.#byCurrency.get(l.currency);
      if (!m) this.#byCurrency.set(l.currency, (m = new Map()));
      m.set(matchKey(l.prefix), l);
      this.#longest.set(l.currency, Math.max(this.#longest.get(l.currency) ?? 0, matchKey(l.prefix).length));
    }
    this.size = lines.length;
    this.source = source;
  }

  /** An empty deck (production without RATE_DECK_FILE: every phone destination is unrated). */
  static empty(): RateDeck {
    return new RateDeck([], 'none');
  }

  /**
   * Parse deck text; throws ConfigError naming the first bad line
   * (`<source> line <n>: <what is wrong>`).
   */
  static parse(text: string, source: string): RateDeck {
    const out: RateLine[] = [];
    const seen = new Set<string>();
    const lines = text.split(/\r?\n/);
    for (let i = 0; i < lines.length; i++) {
      const n = i + 1;
      const raw = (lines[i] ?? '').trim();
      if (raw === '' || raw.startsWith('#')) continue;
      if (out.length === 0 && /^prefix\s*,/i.test(raw)) continue;
      const bad = (what: string): never => {
        throw new ConfigError(`rate deck ${source} line ${n}: ${what}`);
      };
      const f = raw.split(',');
      if (f.length < 6) bad(`expected prefix,rate_per_minute,initial_increment,subsequent_increment,connect_fee,currency,description; got ${f.length} fields`);
      const [prefix = '', rate = '', initial = '', subsequent = '', fee = '', cur = ''] = f.map((x) => x.trim());
      const description = f.slice(6).join(',').trim().replace(/^"(.*)"$/, '$1');
      if (!PREFIX_RE.test(prefix)) bad(`prefix "${prefix}" must be digits of an E.164 number or start with sip:`);
      const ratePerMinute = parseDecimalText(rate);
      if (ratePerMinute === null) bad(`rate_per_minute "${rate}" must be a decimal ≥ 0 with at most 5 decimals`);
      const inc = (v: string, name: string): number => {
        if (!/^\d{1,5}$/.test(v) || Number(v) < 1 || Number(v) > 86400) bad(`${name} "${v}" must be whole seconds from 1 to 86400`);
        return Number(v);
      };
      const initialIncrement = inc(initial, 'initial_increment');
      const subsequentIncrement = inc(subsequent, 'subsequent_increment');
      const connectFee = parseDecimalText(fee === '' ? '0' : fee);
      if (connectFee === null) bad(`connect_fee "${fee}" must be a decimal ≥ 0 with at most 5 decimals`);
      const currency = normalizeCurrency(cur);
      if (currency === null) bad(`currency "${cur}" is not a known ISO 4217 code`);
      const key = `${currency}\n${matchKey(prefix)}`;
      if (seen.has(key)) bad(`prefix ${prefix} appears twice for ${currency}`);
      seen.add(key);
      out.push({ prefix, ratePerMinute: ratePerMinute as number, initialIncrement, subsequentIncrement, connectFee: connectFee as number, currency: currency as string, description, line: n });
    }
    return new RateDeck(out, source);
  }

  /** Read and parse a deck file (ConfigError naming the file or the line). */
  static load(file: string): RateDeck {
    let text: string;
    try {
      text = readFileSync(file, 'utf8');
    } catch (e) {
      throw new ConfigError(`RATE_DECK_FILE ${file}: ${(e as Error).message}`);
    }
    return RateDeck.parse(text, file);
  }

  /**
   * The rate of a destination in a currency: the line with the longest prefix of
   * it, or null (unrated). `destination` is an E.164 number (with or without `+`)
   * or a `sip:` URI.
   */
  lookup(destination: string, currency: string): RateLine | null {
    const m = this.#byCurrency.get(currency);
    if (!m) return null;
    const key = matchKey(destination);
    for (let len = Math.min(key.length, this.#longest.get(currency) ?? 0); len > 0; len--) {
      const l = m.get(key.slice(0, len));
      if (l) return l;
    }
    return null;
  }
}

/**
 * The deck development loads when RATE_DECK_FILE is unset, so the README's flow
 * shows real costs: endpoint-to-endpoint calls at 1.00000/min billed per minute
 * (60/60), a few phone destinations.
 */
export const SAMPLE_DECK = `prefix,rate_per_minute,initial_increment,subsequent_increment,connect_fee,currency,description
sip:,1.00000,60,60,0,USD,Endpoint to endpoint (sample)
1,0.01000,6,6,0,USD,USA and Canada (sample)
44,0.02000,1,1,0,USD,United Kingdom (sample)
91,0.00800,60,60,0,USD,India (sample)
sip:,80.00000,60,60,0,INR,Endpoint to endpoint (sample)
91,0.50000,60,60,0,INR,India (sample)
`;
