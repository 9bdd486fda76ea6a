import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ClientTransaction, ClientTransactionUser } from '../../../src/core/client-transaction.js';
import { InviteClientTransaction } from '../../../src/core/invite-client-transaction.js';
import { NonInviteClientTransaction } from '../../../src/core/non-invite-client-transaction.js';
import type { SipResponse } from '../../../src/sip/message.js';
import { FakeHost, TCP, UDP, invite, response } from './fake-host.js';

class Recorder implements ClientTransactionUser {
  readonly responses: number[] = [];
  readonly failures: number[] = [];
  onResponse(res: SipResponse): void {
    this.responses.push(res.status);
  }
  onFailure(_tx: ClientTransaction, status: 408 | 503): void {
    this.failures.push(status);
  }
}

describe('InviteClientTransaction (RFC 3261 §17.1.1, RFC 6026 §7.2)', () => {
  let host: FakeHost;
  let user: Recorder;
  beforeEach(() => {
    vi.useFakeTimers();
    host = new FakeHost();
    user = new Recorder();
  });
  afterEach(() => vi.useRealTimers());

  const start = (dest = UDP): InviteClientTransaction => {
    const tx = new InviteClientTransaction(host, 'k', 'z9hG4bKours1', invite(), dest, user);
    tx.start();
    return tx;
  };

  it('retransmits the INVITE on Timer A (T1, doubling) over UDP until Timer B, then reports 408', () => {
    const tx = start();
    expect(host.sent).toHaveLength(1);
    vi.advanceTimersByTime(500);
    expect(host.sent).toHaveLength(2);
    vi.advanceTimersByTime(1000);
    expect(host.sent).toHaveLength(3);
    vi.advanceTimersByTime(2000);
    expect(host.sent).toHaveLength(4);
    vi.advanceTimersByTime(32_000);
    expect(user.failures).toEqual([408]);
    expect(tx.state).toBe('terminated');
    expect(host.terminatedKeys).toEqual(['k']);
  });

  it('does not retransmit over a reliable transport, but Timer B still applies', () => {
    start(TCP);
    vi.advanceTimersByTime(31_999);
    expect(host.sent).toHaveLength(1);
    expect(user.failures).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(user.failures).toEqual([408]);
  });

  it('MUST transition to Proceeding on a provisional response and stop retransmitting', () => {
    const tx = start();
    tx.receive(response(180, 'Ringing'));
    expect(tx.state).toBe('proceeding');
    vi.advanceTimersByTime(60_000);
    expect(host.sent).toHaveLength(1);
    expect(user.responses).toEqual([180]);
    expect(user.failures).toEqual([]);
  });

  it('ACKs a non-2xx final itself with the INVITE branch and the response To tag, and again for each retransmission', () => {
    const tx = start();
    tx.receive(response(486, 'Busy Here'));
    expect(tx.state).toBe('completed');
    expect(user.responses).toEqual([486]);
    const ack = host.sent[1].text;
    expect(ack.split('\r\n')[0]).toBe('ACK sip:bob@192.0.2.10:5060 SIP/2.0');
    expect(ack).toContain('Via: SIP/2.0/UDP 198.51.100.1:5060;branch=z9hG4bKours1;rport\r\n');
    expect(ack).not.toContain('z9hG4bKcaller');
    expect(ack).toContain('To: <sip:bob@acme.example>;tag=b1\r\n');
    expect(ack).toContain('CSeq: 7 ACK\r\n');
    expect(ack).toContain('Route: <sip:next.example;lr>\r\n');
    tx.receive(response(486, 'Busy Here'));
    expect(host.lines().filter((l) => l.startsWith('ACK'))).toHaveLength(2);
    expect(user.responses).toEqual([486]);
    vi.advanceTimersByTime(32_000);
    expect(tx.state).toBe('terminated');
  });

  it('moves to Accepted on a 2xx and passes 2xx retransmissions up until Timer M (RFC 6026)', () => {
    const tx = start();
    tx.receive(response(200, 'OK'));
    expect(tx.state).toBe('accepted');
    tx.receive(response(200, 'OK'));
    expect(user.responses).toEqual([200, 200]);
    expect(host.lines().some((l) => l.startsWith('ACK'))).toBe(false);
    vi.advanceTimersByTime(32_000);
    expect(tx.state).toBe('terminated');
  });

  it('reports 503 after start() returns when the flow is gone (RFC 3261 §16.9)', async () => {
    host.reachable = false;
    const tx = start(TCP);
    expect(user.failures).toEqual([]);
    await Promise.resolve();
    expect(user.failures).toEqual([503]);
    expect(tx.state).toBe('terminated');
  });
});

describe('NonInviteClientTransaction (RFC 3261 §17.1.2)', () => {
  let host: FakeHost;
  let user: Recorder;
  beforeEach(() => {
    vi.useFakeTimers();
    host = new FakeHost();
    user = new Recorder();
  });
  afterEach(() => vi.useRealTimers());

  const start = (dest = UDP): NonInviteClientTransaction => {
    const tx = new NonInviteClientTransaction(host, 'k', 'z9hG4bKours1', invite('z9hG4bKours1', 'MESSAGE'), dest, user);
    tx.start();
    return tx;
  };

  it('retransmits on Timer E doubling up to T2, and gives up with 408 on Timer F', () => {
    start();
    const times: number[] = [];
    for (let t = 0; t < 32_000; t += 100) {
      const before = host.sent.length;
      vi.advanceTimersByTime(100);
      if (host.sent.length > before) times.push(t + 100);
    }
    // 0.5, 1.5, 3.5, 7.5, then every 4 s (T2)
    expect(times.slice(0, 6)).toEqual([500, 1500, 3500, 7500, 11500, 15500]);
    expect(user.failures).toEqual([408]);
  });

  it('retransmits every T2 once a provisional response came', () => {
    const tx = start();
    tx.receive(response(100, 'Trying', 'z9hG4bKours1', 'MESSAGE'));
    expect(tx.state).toBe('proceeding');
    vi.advanceTimersByTime(500);
    expect(host.sent).toHaveLength(2);
    vi.advanceTimersByTime(3999);
    expect(host.sent).toHaveLength(2);
    vi.advanceTimersByTime(1);
    expect(host.sent).toHaveLength(3);
  });

  it('passes the final response up once and absorbs its retransmissions until Timer K', () => {
    const tx = start();
    tx.receive(response(200, 'OK', 'z9hG4bKours1', 'MESSAGE'));
    tx.receive(response(200, 'OK', 'z9hG4bKours1', 'MESSAGE'));
    expect(user.responses).toEqual([200]);
    expect(tx.state).toBe('completed');
    vi.advanceTimersByTime(5000);
    expect(tx.state).toBe('terminated');
    expect(host.sent).toHaveLength(1);
  });
});
