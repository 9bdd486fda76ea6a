import { afterEach, describe, expect, it } from 'vitest';
import { ServerTransactionTable, transactionKey } from '../../../src/core/server-transaction-table.js';

describe('ServerTransactionTable (RFC 3261 §17.2.2)', () => {
  let table: ServerTransactionTable;
  afterEach(() => table.stop());

  it('absorbs a retransmission while the request is being processed (Trying)', () => {
    table = new ServerTransactionTable();
    expect(table.receive('k')).toEqual({ state: 'new' });
    expect(table.receive('k')).toEqual({ state: 'trying' });
  });

  it('answers a retransmission with the last response once Completed', () => {
    table = new ServerTransactionTable();
    table.receive('k');
    const resp = Buffer.from('SIP/2.0 200 OK\r\n\r\n');
    table.complete('k', resp);
    const again = table.receive('k');
    expect(again.state).toBe('completed');
    expect(again.state === 'completed' && again.response).toEqual(resp);
  });

  it('keeps responses in a ring outside the heap: a response the ring has come round onto reads as absent', () => {
    let now = 0;
    table = new ServerTransactionTable(60_000, { ringBytes: 4096, maxRingBytes: 4096, now: () => now });
    const big = Buffer.alloc(900, 'a');
    table.receive('first');
    table.complete('first', Buffer.from('SIP/2.0 200 OK first'));
    for (let i = 0; i < 3; i++) table.complete(`k${i}`, big);
    expect(table.receive('first')).toMatchObject({ state: 'completed' });
    for (let i = 3; i < 8; i++) {
      now += 100_000; // slow wraps: the ring does not grow
      table.complete(`k${i}`, big);
    }
    expect(table.ringBytes).toBe(4096);
    expect(table.receive('first')).toEqual({ state: 'new' });
    const last = table.receive('k7');
    expect(last.state === 'completed' && last.response).toEqual(big);
  });

  it('grows the ring while it comes round faster than the linger time', () => {
    table = new ServerTransactionTable(60_000, { ringBytes: 4096, maxRingBytes: 65_536, now: () => 0 });
    for (let i = 0; i < 200; i++) table.complete(`k${i}`, Buffer.alloc(500, 'b'));
    expect(table.ringBytes).toBe(65_536);
    const r = table.receive('k199');
    expect(r.state === 'completed' && r.response.length).toBe(500);
  });

  it('never answers one request with the response of another, whatever the keys', () => {
    table = new ServerTransactionTable(60_000, { ringBytes: 1 << 20 });
    // Many keys: 30-bit hashes collide somewhere among 100,000 (birthday bound ~2^15).
    const n = 100_000;
    for (let i = 0; i < n; i++) {
      const k = `z9hG4bK${i}\u0000127.0.0.1:5060\u0000REGISTER`;
      table.receive(k);
      table.complete(k, Buffer.from(`resp ${i}`));
    }
    let completed = 0;
    for (let i = 0; i < n; i++) {
      const r = table.receive(`z9hG4bK${i}\u0000127.0.0.1:5060\u0000REGISTER`);
      if (r.state === 'completed') {
        completed++;
        expect(r.response.toString()).toBe(`resp ${i}`);
      }
    }
    // The ring (1 MiB, growing) keeps the most recent ones.
    expect(completed).toBeGreaterThan(10_000);
  });

  it('forgets transactions after two rotations (Timer J)', () => {
    table = new ServerTransactionTable(60_000);
    table.receive('k');
    table.complete('k', Buffer.from('x'));
    table.rotate();
    expect(table.receive('k').state).toBe('completed');
    table.rotate();
    table.rotate();
    expect(table.receive('k').state).toBe('new');
  });
});

describe('transactionKey (RFC 3261 §17.2.3)', () => {
  it('matches by branch, sent-by and method, with ACK matching INVITE', () => {
    const a = transactionKey('INVITE', 'z9hG4bKabc', 'h:5060', 'c', 1, 't', 'v');
    expect(transactionKey('ACK', 'z9hG4bKabc', 'h:5060', 'other', 9, null, 'w')).toBe(a);
    expect(transactionKey('INVITE', 'z9hG4bKabc', 'h:5061', 'c', 1, 't', 'v')).not.toBe(a);
    expect(transactionKey('REGISTER', 'z9hG4bKabc', 'h:5060', 'c', 1, 't', 'v')).not.toBe(a);
  });

  it('falls back to Call-ID, CSeq, From tag and Via for RFC 2543 branches', () => {
    const a = transactionKey('REGISTER', 'old', 'h', 'c', 1, 't', 'v');
    expect(transactionKey('REGISTER', 'old', 'h', 'c', 2, 't', 'v')).not.toBe(a);
    expect(transactionKey('REGISTER', null, 'h', 'c', 1, 't', 'v')).toBe(a);
  });
});
