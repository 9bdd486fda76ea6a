/** The list view's fast ISO 8601 formatter writes exactly what Date#toISOString writes. */
import { describe, expect, it } from 'vitest';
import { iso } from '../../src/api/endpoint-view.js';

describe('iso (endpoint views)', () => {
  it('matches toISOString around now, across midnight, at the range edges and for fractional ms', () => {
    const now = Date.now();
    const samples = [
      0,
      1,
      999,
      86_399_999,
      86_400_000,
      Date.parse('2030-12-31T23:59:59.999Z'),
      Date.parse('2031-01-01T00:00:00.000Z'),
      Date.parse('2032-02-29T12:34:56.789Z'),
      253_402_300_799_999, // 9999-12-31T23:59:59.999Z
      now + 0.7,
    ];
    // Alternate between days so the cached date part is replaced often.
    let x = 0x9e3779b9;
    for (let i = 0; i < 20_000; i++) {
      x = (x * 1_103_515_245 + 12_345) % 2_147_483_648;
      samples.push(now + (x % 3) * 86_400_000 + (x % 86_400_000) - 43_200_000);
      samples.push(x * 117_000 + (x % 1000));
    }
    for (const ms of samples) expect(iso(ms)).toBe(new Date(ms).toISOString());
  });

  it('falls back to toISOString outside years 0000-9999', () => {
    for (const ms of [-1, -86_400_001, 253_402_300_800_000, 8.64e15]) expect(iso(ms)).toBe(new Date(ms).toISOString());
    expect(() => iso(Number.NaN)).toThrow(RangeError);
  });
});
