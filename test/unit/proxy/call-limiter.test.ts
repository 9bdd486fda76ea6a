import { describe, expect, it } from 'vitest';
import { MemoryCallLimiter } from '../../../src/proxy/call-limiter.js';

describe('MemoryCallLimiter', () => {
  const limits = { cps: 2, concurrent: 2 };
  it('admits up to concurrent_calls_limit calls at once and frees a slot on release', async () => {
    const l = new MemoryCallLimiter();
    expect(await l.admit('A', 'c1', { cps: 100, concurrent: 2 }, 0)).toBe('ok');
    expect(await l.admit('A', 'c2', { cps: 100, concurrent: 2 }, 0)).toBe('ok');
    expect(await l.admit('A', 'c3', { cps: 100, concurrent: 2 }, 0)).toBe('concurrent');
    expect(await l.admit('B', 'c3', { cps: 100, concurrent: 2 }, 0)).toBe('ok');
    await l.release('A', 'c1');
    expect(await l.admit('A', 'c3', { cps: 100, concurrent: 2 }, 0)).toBe('ok');
  });
  it('admits up to cps_limit new calls per second', async () => {
    const l = new MemoryCallLimiter();
    expect(await l.admit('A', 'c1', { cps: 2, concurrent: 100 }, 1000)).toBe('ok');
    expect(await l.admit('A', 'c2', { cps: 2, concurrent: 100 }, 1500)).toBe('ok');
    expect(await l.admit('A', 'c3', { cps: 2, concurrent: 100 }, 1999)).toBe('cps');
    expect(await l.admit('A', 'c4', { cps: 2, concurrent: 100 }, 2000)).toBe('ok');
  });
  it('counts the same Call-ID once (the INVITE re-sent after a challenge)', async () => {
    const l = new MemoryCallLimiter();
    expect(await l.admit('A', 'c1', limits, 0)).toBe('ok');
    expect(await l.admit('A', 'c1', limits, 0)).toBe('ok');
    expect(await l.admit('A', 'c2', limits, 0)).toBe('ok');
  });
  it('forgets a call whose end was never seen after the longest call duration', async () => {
    const l = new MemoryCallLimiter({ maxCallDurationMs: 10_000 });
    expect(await l.admit('A', 'c1', { cps: 100, concurrent: 1 }, 0)).toBe('ok');
    expect(await l.admit('A', 'c2', { cps: 100, concurrent: 1 }, 5_000)).toBe('concurrent');
    expect(await l.admit('A', 'c2', { cps: 100, concurrent: 1 }, 10_001)).toBe('ok');
  });
});
