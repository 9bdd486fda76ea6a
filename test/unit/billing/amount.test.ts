/** Amounts in minor units of 1/100000: parsing client text exactly, formatting with five decimals. */
import { describe, expect, it } from 'vitest';
import { formatAmount, MAX_AMOUNT_MINOR, parseAmount, parseDecimalText } from '../../../src/billing/amount.js';
import { normalizeCurrency } from '../../../src/billing/currency.js';

describe('parseAmount', () => {
  it('reads decimal strings and JSON numbers exactly into minor units', () => {
    expect(parseAmount('23906.83')).toEqual({ ok: true, minor: 2_390_683_000 });
    expect(parseAmount('0.00001')).toEqual({ ok: true, minor: 1 });
    expect(parseAmount('10')).toEqual({ ok: true, minor: 1_000_000 });
    expect(parseAmount(' 7.5 ')).toEqual({ ok: true, minor: 750_000 });
    // 0.1 + 0.2 in floats is 0.30000000000000004; here no arithmetic happens on floats.
    expect(parseAmount(0.3)).toEqual({ ok: true, minor: 30_000 });
    expect(parseAmount(10.1)).toEqual({ ok: true, minor: 1_010_000 });
    expect(parseAmount(1_000_000_000)).toEqual({ ok: true, minor: MAX_AMOUNT_MINOR });
  });

  it('refuses negative, zero, non-numeric, more than five decimals and too large, saying which', () => {
    const problem = (v: unknown): string => {
      const r = parseAmount(v);
      if (r.ok) throw new Error(`accepted ${String(v)}`);
      return r.problem;
    };
    expect(problem('-1')).toMatch(/positive/);
    expect(problem(-0.5)).toMatch(/positive/);
    expect(problem('0')).toMatch(/greater than zero/);
    expect(problem('0.00000')).toMatch(/greater than zero/);
    expect(problem(0)).toMatch(/greater than zero/);
    expect(problem('1.000001')).toMatch(/at most 5 decimals/);
    expect(problem(0.0000001)).toMatch(/at most 5 decimals/);
    expect(problem('abc')).toMatch(/decimal/);
    expect(problem('1e5')).toMatch(/decimal/);
    expect(problem('1,5')).toMatch(/decimal/);
    expect(problem('')).toMatch(/decimal/);
    expect(problem(null)).toMatch(/decimal/);
    expect(problem(Number.NaN)).toMatch(/decimal/);
    expect(problem('1000000000.00001')).toMatch(/must not exceed 1000000000.00000/);
    expect(problem(1e21)).toMatch(/too large/);
  });
});

describe('formatAmount and parseDecimalText', () => {
  it('renders five decimals, negatives included, and reads them back', () => {
    expect(formatAmount(2_390_683_000)).toBe('23906.83000');
    expect(formatAmount(0)).toBe('0.00000');
    expect(formatAmount(1)).toBe('0.00001');
    expect(formatAmount(-150_000)).toBe('-1.50000');
    expect(formatAmount(Number.MAX_SAFE_INTEGER)).toBe('90071992547.40991');
    expect(() => formatAmount(0.5)).toThrow(RangeError);
    expect(parseDecimalText('0')).toBe(0);
    expect(parseDecimalText('1.01667')).toBe(101_667);
    expect(parseDecimalText('-1')).toBe(null);
    expect(parseDecimalText('1.123456')).toBe(null);
  });

  it('knows ISO 4217 codes of the list, any case, and nothing else', () => {
    expect(normalizeCurrency('usd')).toBe('USD');
    expect(normalizeCurrency('INR')).toBe('INR');
    expect(normalizeCurrency('XYZ')).toBe(null);
    expect(normalizeCurrency('US')).toBe(null);
    expect(normalizeCurrency(5)).toBe(null);
  });
});
