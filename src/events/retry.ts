/**
 * The retry schedule of a callback (docs/callbacks.md "Delivery"), as data: attempt 1
 * at once, then after a failure up to 3 retries, 2 s, 4 s and 8 s after the failed
 * attempt ended (exponential backoff, factor 2). A failure of attempt 4, or a failure
 * that no retry can cure (see DeliveryOutcome.retryable), dead-letters the callback.
 */

/** Delay before attempt n + 2, after attempt n + 1 failed, in ms. */
export const RETRY_DELAYS_MS: readonly number[] = Object.freeze([2_000, 4_000, 8_000]);

/** The first attempt and every retry. */
export const MAX_ATTEMPTS = 1 + RETRY_DELAYS_MS.length;

/**
 * How long to wait after attempt `failedAttempt` (1-based) failed before the next
 * one, in ms; null when it was the last one (dead letter).
 */
export function nextAttemptDelay(failedAttempt: number, delays: readonly number[] = RETRY_DELAYS_MS): number | null {
  if (!Number.isInteger(failedAttempt) || failedAttempt < 1) throw new RangeError(`attempt numbers start at 1, got ${failedAttempt}`);
  return delays[failedAttempt - 1] ?? null;
}
