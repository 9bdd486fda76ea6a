/** When the money of an account's live calls runs out (billing/calls.ts cutMoment, docs/billing.md "Calls"). */
import { describe, expect, it } from 'vitest';
import { costAt, CUT_MARGIN_MS, cutMoment, firstIncrementCost } from '../../../src/billing/calls.js';
import type { LiveCall } from '../../../src/store/billing/live.js';

const MINOR = 100_000;
const call = (key: string, answerAt: number, initial: number, subsequent: number, perMinute = MINOR): LiveCall => ({
  key,
  answerAt,
  ratePerMinute: perMinute,
  initialIncrement: initial,
  subsequentIncrement: subsequent,
  connectFee: 0,
});

describe('cutMoment', () => {
  it('two concurrent calls at 1/1 and 1.00000/min with 30 s of money: both end just before their 16th second is billed (15 s each)', () => {
    const t0 = 1_000_000;
    const calls = [call('a', t0, 1, 1), call('b', t0, 1, 1)];
    const available = MINOR / 2; // 0.50000 = 30 s at 1.00000/min
    const at = cutMoment(available, calls, t0 + 1000, t0 + 60_000) as number;
    expect(at).toBe(t0 + 15_500 - CUT_MARGIN_MS);
    // Ended then, each CDR rounds to 15 s: exactly the money, never more.
    expect(costAt(calls[0] as LiveCall, at) + costAt(calls[1] as LiveCall, at)).toBe(available);
    expect(costAt(calls[0] as LiveCall, at + CUT_MARGIN_MS) * 2).toBeGreaterThan(available);
  });

  it('60/60: the second minute is never started without the money for it', () => {
    const t0 = 0;
    const c = [call('a', t0, 60, 60)];
    expect(cutMoment(MINOR, c, 1000, 200_000)).toBe(60_500 - CUT_MARGIN_MS);
    expect(cutMoment(2 * MINOR, c, 1000, 200_000)).toBe(120_500 - CUT_MARGIN_MS);
    // Beyond the horizon: not yet.
    expect(cutMoment(2 * MINOR, c, 1000, 100_000)).toBeNull();
  });

  it('calls answered at different times drain one balance; a balance already spent cuts now', () => {
    const c = [call('a', 0, 1, 1), call('b', 10_000, 1, 1)];
    // 20 s of money: a alone for 10 s, then both: 5 s more each → a at 15 s, b at 5 s.
    const at = cutMoment(MINOR / 3, c, 10_000, 100_000) as number;
    expect(at).toBe(15_500 - CUT_MARGIN_MS);
    expect(cutMoment(0, [call('a', 0, 1, 1)], 5_000, 100_000)).toBe(5_000);
    expect(cutMoment(100, [], 0, 100)).toBeNull();
  });

  it('first increment cost: connect fee plus the initial increment', () => {
    expect(firstIncrementCost({ ratePerMinute: MINOR, initialIncrement: 60, subsequentIncrement: 60, connectFee: 500 })).toBe(MINOR + 500);
    expect(firstIncrementCost({ ratePerMinute: 6 * MINOR, initialIncrement: 1, subsequentIncrement: 1, connectFee: 0 })).toBe(MINOR / 10);
  });
});
