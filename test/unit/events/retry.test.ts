/** The callback retry schedule (docs/callbacks.md "Delivery"). */
import { describe, expect, it } from 'vitest';
import { MAX_ATTEMPTS, RETRY_DELAYS_MS, nextAttemptDelay } from '../../../src/events/retry.js';

describe('nextAttemptDelay', () => {
  it('retries 3 times after 2 s, 4 s and 8 s, then dead-letters', () => {
    expect(MAX_ATTEMPTS).toBe(4);
    expect([1, 2, 3, 4, 5].map((a) => nextAttemptDelay(a))).toEqual([2000, 4000, 8000, null, null]);
  });

  it('doubles each time (exponential backoff)', () => {
    for (let i = 1; i < RETRY_DELAYS_MS.length; i++) expect(RETRY_DELAYS_MS[i]).toBe(2 * (RETRY_DELAYS_MS[i - 1] as number));
    expect(Object.isFrozen(RETRY_DELAYS_MS)).toBe(true);
  });

  it('takes another schedule (tests, benchmarks)', () => {
    expect([1, 2, 3].map((a) => nextAttemptDelay(a, [10, 20]))).toEqual([10, 20, null]);
  });

  it.each([0, -1, 1.5, Number.NaN])('refuses attempt number %s', (a) => {
    expect(() => nextAttemptDelay(a)).toThrowError(RangeError);
  });
});
