/**
 * Rating a call (docs/billing.md "Rounding"): the billed seconds by the rate's
 * increments, and the amount, in integer minor units (1/100000).
 *
 * - bill_duration = 0 when the call lasted 0 s; `initial` when it lasted up to
 *   `initial` seconds; else initial + ceil((d − initial) / subsequent) × subsequent.
 * - billed = connect_fee + bill_duration / 60 × rate_per_minute, rounded to the
 *   minor unit half up (exactly: integer arithmetic, no float ever).
 */
import { formatAmount } from './amount.js';

/** The price terms of one rate (a deck line). Amounts in minor units. */
export interface RateTerms {
  /** Per minute, minor units. */
  ratePerMinute: number;
  /** Seconds billed for the start of a call (the first increment). */
  initialIncrement: number;
  /** Seconds of each further increment. */
  subsequentIncrement: number;
  /** Charged once per answered call, minor units. */
  connectFee: number;
}

export interface Rated {
  /** Seconds billed. */
  billDuration: number;
  /** Minor units. */
  amount: number;
  /** The amount as decimal text with five decimals ("2.00000"). */
  billedAmount: string;
}

/** Seconds billed for a call of `duration` seconds. */
export function billDuration(duration: number, initial: number, subsequent: number): number {
  if (!Number.isInteger(duration) || duration < 0) throw new RangeError(`duration must be a whole number of seconds ≥ 0, got ${duration}`);
  if (duration === 0) return 0;
  if (duration <= initial) return initial;
  return initial + Math.ceil((duration - initial) / subsequent) * subsequent;
}

/** Minor units of `seconds` at `perMinute` minor units a minute, rounded half up. */
export function priceOfSeconds(seconds: number, perMinute: number): number {
  const n = BigInt(seconds) * BigInt(perMinute);
  // floor(n / 60 + 1/2) = floor((2n + 60) / 120), for n ≥ 0.
  return Number((2n * n + 60n) / 120n);
}

/**
 * Rate a call of `duration` whole seconds. A call of 0 s (not answered) costs
 * nothing, connect fee included.
 */
export function rateDuration(duration: number, t: RateTerms): Rated {
  const d = billDuration(duration, t.initialIncrement, t.subsequentIncrement);
  const amount = d === 0 ? 0 : t.connectFee + priceOfSeconds(d, t.ratePerMinute);
  return { billDuration: d, amount, billedAmount: formatAmount(amount) };
}
