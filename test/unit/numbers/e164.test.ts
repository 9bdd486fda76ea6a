/** Numbers are parsed and normalised by libphonenumber-js: E.164 with `+`, or null. */
import { describe, expect, it } from 'vitest';
import { countryOf, normalizeE164 } from '../../../src/numbers/e164.js';
import { addMonths } from '../../../src/numbers/rental.js';

describe('normalizeE164', () => {
  it.each([
    ['+918040001001', '+918040001001'],
    ['918040001001', '+918040001001'],
    [' +91 80 4000 1001 ', '+918040001001'],
    ['+1 (415) 555-0101', '+14155550101'],
    ['14155550101', '+14155550101'],
  ])('%j → %s', (input, out) => {
    expect(normalizeE164(input)).toBe(out);
  });

  it.each([['+9180'], ['+1415555'], ['abc'], [''], ['+999123456789'], ['+91804000100112345678901234567890'], ['sip:+918040001001@x']])('%j is not a number', (input) => {
    expect(normalizeE164(input)).toBe(null);
  });

  it('refuses what is not a string', () => {
    expect(normalizeE164(918040001001)).toBe(null);
    expect(normalizeE164(null)).toBe(null);
  });

  it('knows the country of a number', () => {
    expect(countryOf('+918040001001')).toBe('IN');
    expect(countryOf('+14155550101')).toBe('US');
  });
});

describe('addMonths (rental anniversaries)', () => {
  it('keeps the day, clamped to the end of a shorter month, and never drifts', () => {
    expect(addMonths('2026-01-31T09:00:00.000Z', 1)).toBe('2026-02-28T09:00:00.000Z');
    expect(addMonths('2026-01-31T09:00:00.000Z', 2)).toBe('2026-03-31T09:00:00.000Z');
    expect(addMonths('2028-01-31T09:00:00.000Z', 1)).toBe('2028-02-29T09:00:00.000Z');
    expect(addMonths('2026-11-20T10:00:00.000Z', 2)).toBe('2027-01-20T10:00:00.000Z');
  });
});
