import { describe, expect, it } from 'vitest';
import { dialledE164 as toE164 } from '../../../src/numbers/e164.js';

describe('dialledE164 (numbers as dialled, for routing)', () => {
  it('normalises international and national forms with the account country', () => {
    expect(toE164('+91 80 1234 5678')).toBe('+918012345678');
    expect(toE164('08012345678', 'IN')).toBe('+918012345678');
    expect(toE164('+1 (415) 555-0100', 'IN')).toBe('+14155550100');
    expect(toE164('4155550100', 'US')).toBe('+14155550100');
    // Digits with their country code but no '+' (as some carriers send them).
    expect(toE164('918012345678', 'US')).toBe('+918012345678');
  });

  it('refuses what cannot be a telephone number', () => {
    expect(toE164('alice')).toBeNull();
    expect(toE164('12345')).toBeNull();
    expect(toE164('')).toBeNull();
    expect(toE164('+1'.padEnd(60, '5'))).toBeNull();
  });
});
