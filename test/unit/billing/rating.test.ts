/** Rating a duration by increments, and the rate deck (longest prefix, bad lines named). */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { billDuration, priceOfSeconds, rateDuration, type RateTerms } from '../../../src/billing/rating.js';
import { RateDeck, SAMPLE_DECK } from '../../../src/billing/rate-deck.js';
import { Rates } from '../../../src/billing/index.js';
import { ConfigError } from '../../../src/errors.js';

const perMinute = (rate: number, initial: number, subsequent: number, connectFee = 0): RateTerms => ({ ratePerMinute: rate, initialIncrement: initial, subsequentIncrement: subsequent, connectFee });

describe('rateDuration', () => {
  it('61 s at 60/60 and 1.00000/min bills 120 s, "2.00000"; at 1/1 61 s, "1.01667"', () => {
    expect(rateDuration(61, perMinute(100_000, 60, 60))).toEqual({ billDuration: 120, amount: 200_000, billedAmount: '2.00000' });
    expect(rateDuration(61, perMinute(100_000, 1, 1))).toEqual({ billDuration: 61, amount: 101_667, billedAmount: '1.01667' });
  });

  it('bills the initial increment for short calls, then whole subsequent increments; nothing for 0 s', () => {
    expect(billDuration(0, 60, 60)).toBe(0);
    expect(billDuration(1, 60, 60)).toBe(60);
    expect(billDuration(60, 60, 60)).toBe(60);
    expect(billDuration(61, 60, 1)).toBe(61);
    expect(billDuration(61, 30, 6)).toBe(66);
    expect(billDuration(3600, 60, 60)).toBe(3600);
    expect(() => billDuration(-1, 60, 60)).toThrow(RangeError);
    expect(() => billDuration(1.5, 60, 60)).toThrow(RangeError);
    expect(rateDuration(0, perMinute(100_000, 60, 60, 50_000))).toEqual({ billDuration: 0, amount: 0, billedAmount: '0.00000' });
    // The connect fee is added once for an answered call.
    expect(rateDuration(30, perMinute(100_000, 60, 60, 50_000)).billedAmount).toBe('1.50000');
  });

  it('rounds half up to the minor unit, exactly (no floats)', () => {
    // 30 s at 0.00001/min = 0.000005: exactly half a minor unit → up to 0.00001.
    expect(priceOfSeconds(30, 1)).toBe(1);
    // 30 s at 0.00003/min = 0.000015 → 0.00002.
    expect(priceOfSeconds(30, 3)).toBe(2);
    // 29 s at 0.00001/min = 0.0000048… → down to 0.
    expect(priceOfSeconds(29, 1)).toBe(0);
    // 7 s at 0.01234/min = 0.00143966… → 0.00144.
    expect(priceOfSeconds(7, 1234)).toBe(144);
    // Large: 86400 s at 99999.99999/min, exact beyond float precision of the product.
    expect(priceOfSeconds(86_400, 9_999_999_999)).toBe(14_399_999_998_560);
  });
});

describe('RateDeck', () => {
  const deck = RateDeck.parse(
    [
      'prefix,rate_per_minute,initial_increment,subsequent_increment,connect_fee,currency,description',
      '# comment',
      '1,0.01000,6,6,0,USD,North America',
      '1415,0.00500,1,1,0,USD,San Francisco',
      '+44,0.02000,60,60,0.01,USD,"UK, landline"',
      'sip:,1.00000,60,60,0,USD,Endpoint to endpoint',
      '1,0.90000,60,60,0,EUR,North America in euros',
      '',
    ].join('\n'),
    'test deck',
  );

  it('the longest prefix wins, per currency; + is ignored; sip: matches endpoint calls; unrated is null', () => {
    expect(deck.size).toBe(5);
    expect(deck.lookup('+14155550100', 'USD')?.description).toBe('San Francisco');
    expect(deck.lookup('12125550100', 'USD')?.description).toBe('North America');
    expect(deck.lookup('442071234567', 'USD')).toMatchObject({ description: 'UK, landline', connectFee: 1000, ratePerMinute: 2000, initialIncrement: 60 });
    expect(deck.lookup('sip:bob@ma1.sip.localhost', 'USD')?.ratePerMinute).toBe(100_000);
    expect(deck.lookup('+14155550100', 'EUR')?.description).toBe('North America in euros');
    expect(deck.lookup('+33123456789', 'USD')).toBe(null);
    expect(deck.lookup('+14155550100', 'INR')).toBe(null);
    expect(RateDeck.empty().lookup('sip:x@y', 'USD')).toBe(null);
  });

  it('a bad line stops with one error naming the file and the line', () => {
    const bad = (line: string): string => {
      try {
        RateDeck.parse(`prefix,rate_per_minute,initial_increment,subsequent_increment,connect_fee,currency,description\n1,0.01,6,6,0,USD,ok\n${line}\n`, 'rates.csv');
      } catch (e) {
        expect(e).toBeInstanceOf(ConfigError);
        return (e as Error).message;
      }
      throw new Error('accepted');
    };
    expect(bad('44,abc,60,60,0,USD,x')).toBe('rate deck rates.csv line 3: rate_per_minute "abc" must be a decimal ≥ 0 with at most 5 decimals');
    expect(bad('44,0.1,0,60,0,USD,x')).toMatch(/^rate deck rates.csv line 3: initial_increment "0"/);
    expect(bad('44,0.1,60,60,0,XXX,x')).toMatch(/line 3: currency "XXX"/);
    expect(bad('4a4,0.1,60,60,0,USD,x')).toMatch(/line 3: prefix "4a4"/);
    expect(bad('44,0.1,60')).toMatch(/line 3: expected prefix,rate_per_minute/);
    expect(bad('1,0.02,6,6,0,USD,again')).toMatch(/line 3: prefix 1 appears twice for USD/);
    expect(bad('44,0.1234567,60,60,0,USD,x')).toMatch(/line 3: rate_per_minute/);
  });

  it('Rates: the sample deck in development, none in production, a file reloaded whole (a bad reload keeps the deck in use)', () => {
    expect(new Rates(null, true).deck.lookup('sip:a@b', 'USD')?.ratePerMinute).toBe(100_000);
    expect(RateDeck.parse(SAMPLE_DECK, 'sample').size).toBeGreaterThan(3);
    expect(new Rates(null, false).deck.size).toBe(0);
    const dir = mkdtempSync(join(tmpdir(), 'sipedge-deck-'));
    const file = join(dir, 'rates.csv');
    writeFileSync(file, '1,0.01,6,6,0,USD,a\n');
    const rates = new Rates(file, true);
    expect(rates.deck.lookup('1212', 'USD')?.ratePerMinute).toBe(1000);
    writeFileSync(file, '1,0.02,6,6,0,USD,a\n');
    expect(rates.reload().lookup('1212', 'USD')?.ratePerMinute).toBe(2000);
    writeFileSync(file, '1,0.03,6,6,0,USD,a\nbroken\n');
    expect(() => rates.reload()).toThrow(/line 2/);
    expect(rates.deck.lookup('1212', 'USD')?.ratePerMinute).toBe(2000);
    expect(() => new Rates(join(dir, 'missing.csv'), true)).toThrow(ConfigError);
  });
});
