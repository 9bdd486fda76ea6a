/**
 * The loop shared by the callback dispatcher and the messaging send worker
 * (src/events/poller.ts): one tick at a time, a wake during a tick gives exactly one more,
 * nothing after stop, and an interval that setInterval would turn into 1 ms is refused.
 */
import { describe, expect, it } from 'vitest';
import { Poller } from '../../../src/events/poller.js';

describe('Poller', () => {
  it('refuses an interval that is not a positive number (setInterval would poll every millisecond)', () => {
    const tick = async (): Promise<void> => undefined;
    expect(() => new Poller(tick, undefined as unknown as number)).toThrow(RangeError);
    expect(() => new Poller(tick, 0)).toThrow(RangeError);
    expect(() => new Poller(tick, Number.NaN)).toThrow(RangeError);
  });

  it('runs one tick at a time: wakes during a tick give one more tick after it, none after stop', async () => {
    let running = 0;
    let most = 0;
    let ticks = 0;
    let release: () => void = () => undefined;
    const p = new Poller(async () => {
      ticks++;
      running++;
      most = Math.max(most, running);
      await new Promise<void>((r) => (release = r));
      running--;
    }, 60_000);
    p.wake();
    p.wake();
    p.wake();
    expect(ticks).toBe(1);
    release();
    await new Promise((r) => setTimeout(r, 10));
    expect(ticks).toBe(2); // the three wakes during the first tick: one more
    p.stop();
    release();
    await new Promise((r) => setTimeout(r, 10));
    p.wake();
    expect(ticks).toBe(2);
    expect(most).toBe(1);
    expect(running).toBe(0);
  });

  it('ticks every interval once started', async () => {
    let ticks = 0;
    const p = new Poller(async () => void ticks++, 50);
    expect(p.started).toBe(false);
    p.start();
    expect(p.started).toBe(true);
    await new Promise((r) => setTimeout(r, 280));
    p.stop();
    expect(ticks).toBeGreaterThanOrEqual(4);
    expect(ticks).toBeLessThanOrEqual(6);
  });
});
