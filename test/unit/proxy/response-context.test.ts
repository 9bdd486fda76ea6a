import { describe, expect, it } from 'vitest';
import { chooseBest } from '../../../src/proxy/response-context.js';

describe('chooseBest (RFC 3261 §16.7 step 6)', () => {
  it('chooses a 6xx over anything else', () => {
    expect(chooseBest([486, 603, 200])).toBe(1);
  });
  it('otherwise chooses the lowest response class', () => {
    expect(chooseBest([503, 486, 408])).toBe(1);
    expect(chooseBest([503, 302])).toBe(1);
  });
  it('prefers 401, 407, 415, 420 and 484 within 4xx', () => {
    expect(chooseBest([486, 408, 407])).toBe(2);
    expect(chooseBest([480, 484])).toBe(1);
  });
  it('returns -1 for no responses', () => {
    expect(chooseBest([])).toBe(-1);
  });
});
