import { describe, expect, it } from 'vitest';
import { FairQueue } from '../../../src/transport/fair-queue.js';

const turn = (): Promise<void> => new Promise((r) => setImmediate(r));

function source() {
  const s = { paused: 0, resumed: 0, open: true };
  return { s, src: { pause: () => void s.paused++, resume: () => void s.resumed++, isOpen: () => s.open } };
}

describe('FairQueue', () => {
  it('delivers at most perTurn items per turn of the event loop, pausing the connection meanwhile', async () => {
    const { s, src } = source();
    const got: number[] = [];
    const q = new FairQueue<number>(src, (n) => (got.push(n), true), 4);
    q.push([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
    expect(got).toEqual([1, 2, 3, 4]);
    expect(s.paused).toBe(1);
    await turn();
    expect(got).toHaveLength(8);
    await turn();
    expect(got).toHaveLength(10);
    expect(s.resumed).toBe(1);
  });

  it('counts the budget per turn, not per push (one read of many WebSocket frames)', async () => {
    const { s, src } = source();
    const got: number[] = [];
    const q = new FairQueue<number>(src, (n) => (got.push(n), true), 3);
    for (let i = 0; i < 7; i++) q.push([i]);
    expect(got).toEqual([0, 1, 2]);
    expect(s.paused).toBe(1);
    await turn();
    await turn();
    await turn();
    expect(got).toEqual([0, 1, 2, 3, 4, 5, 6]);
  });

  it('drops what is left when delivery says the connection is closing, and does not resume a closed one', async () => {
    const { s, src } = source();
    const got: number[] = [];
    const q = new FairQueue<number>(src, (n) => (got.push(n), n !== 2), 10);
    q.push([1, 2, 3]);
    expect(got).toEqual([1, 2]);
    const r = new FairQueue<number>(src, (n) => (got.push(n), true), 1);
    r.push([7, 8]);
    s.open = false;
    await turn();
    expect(got).toEqual([1, 2, 7]);
    expect(s.resumed).toBe(0);
  });
});
