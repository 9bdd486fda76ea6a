import { afterEach, describe, expect, it } from 'vitest';
import { ServerTransactionTable, transactionKey } from '../../../src/core/transactions.js';

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
    expect(again.state === 'completed' && again.response).toBe(resp);
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
