import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { InviteServerTransaction } from '../../../src/core/invite-server-transaction.js';
import { NonInviteServerTransaction } from '../../../src/core/non-invite-server-transaction.js';
import { serializeMessage } from '../../../src/sip/response.js';
import type { Flow } from '../../../src/transport/types.js';
import { FakeHost, invite, response } from './fake-host.js';

const UDP_FLOW: Flow = { transport: 'udp', remoteAddress: '198.51.100.1', remotePort: 5060, localAddress: '', localPort: 0, connId: null };
const TCP_FLOW: Flow = { ...UDP_FLOW, transport: 'tcp', connId: 'tcp-9' };

describe('InviteServerTransaction (RFC 3261 §17.2.1, RFC 6026 §7.1)', () => {
  let host: FakeHost;
  beforeEach(() => {
    vi.useFakeTimers();
    host = new FakeHost();
  });
  afterEach(() => vi.useRealTimers());

  const create = (flow = UDP_FLOW): InviteServerTransaction => new InviteServerTransaction(host, 'k', invite(), flow, 0n);

  it('MUST generate a 100 (Trying) at once, without a To tag', () => {
    create();
    expect(host.lines()).toEqual(['SIP/2.0 100 Trying']);
    expect(host.sent[0].text).toContain('To: <sip:bob@acme.example>\r\n');
  });

  it('answers a retransmitted INVITE with the most recent provisional response', () => {
    const tx = create();
    tx.forward(response(180, 'Ringing'), serializeMessage(response(180, 'Ringing')));
    tx.retransmission();
    expect(host.lines()).toEqual(['SIP/2.0 100 Trying', 'SIP/2.0 180 Ringing', 'SIP/2.0 180 Ringing']);
  });

  it('retransmits a non-2xx final on Timer G until the ACK arrives (Confirmed), then ends after Timer I', () => {
    const tx = create();
    tx.respond(486, 'Busy Here');
    expect(tx.state).toBe('completed');
    expect(host.finals).toEqual([486]);
    vi.advanceTimersByTime(500);
    vi.advanceTimersByTime(1000);
    expect(host.lines().filter((l) => l.startsWith('SIP/2.0 486'))).toHaveLength(3);
    tx.ack();
    expect(tx.state).toBe('confirmed');
    vi.advanceTimersByTime(4000);
    expect(host.lines().filter((l) => l.startsWith('SIP/2.0 486'))).toHaveLength(3);
    vi.advanceTimersByTime(1000);
    expect(tx.state).toBe('terminated');
  });

  it('gives up waiting for the ACK after Timer H (64*T1)', () => {
    const tx = create();
    tx.respond(404, 'Not Found');
    vi.advanceTimersByTime(31_999);
    expect(tx.state).toBe('completed');
    vi.advanceTimersByTime(1);
    expect(tx.state).toBe('terminated');
  });

  it('does not retransmit the final over a reliable transport', () => {
    const tx = create(TCP_FLOW);
    tx.respond(486, 'Busy Here');
    vi.advanceTimersByTime(10_000);
    expect(host.lines().filter((l) => l.startsWith('SIP/2.0 486'))).toHaveLength(1);
  });

  it('moves to Accepted on a 2xx, still sends later 2xx, and absorbs retransmitted INVITEs', () => {
    const tx = create();
    const ok = response(200, 'OK');
    tx.forward(ok, serializeMessage(ok));
    expect(tx.state).toBe('accepted');
    tx.forward(ok, serializeMessage(ok));
    tx.retransmission();
    expect(host.lines()).toEqual(['SIP/2.0 100 Trying', 'SIP/2.0 200 OK', 'SIP/2.0 200 OK']);
    expect(host.finals).toEqual([200]);
    vi.advanceTimersByTime(32_000);
    expect(tx.state).toBe('terminated');
  });

  it('puts one To tag on every response it generates itself', () => {
    const tx = create();
    tx.respond(183, 'Session Progress');
    tx.respond(487, 'Request Terminated');
    const tags = host.sent.slice(1).map((s) => /To: [^\r]*;tag=(\w+)/.exec(s.text)?.[1]);
    expect(tags).toEqual(['tag1', 'tag1']);
  });
});

describe('NonInviteServerTransaction (RFC 3261 §17.2.2)', () => {
  let host: FakeHost;
  beforeEach(() => {
    vi.useFakeTimers();
    host = new FakeHost();
  });
  afterEach(() => vi.useRealTimers());

  it('absorbs retransmissions while Trying, repeats the last response after, until Timer J', () => {
    const tx = new NonInviteServerTransaction(host, 'k', invite('z9hG4bKx', 'MESSAGE'), UDP_FLOW, 0n);
    tx.retransmission();
    expect(host.sent).toHaveLength(0);
    tx.respond(200, 'OK');
    tx.retransmission();
    expect(host.lines()).toEqual(['SIP/2.0 200 OK', 'SIP/2.0 200 OK']);
    tx.respond(500, 'late');
    expect(host.sent).toHaveLength(2);
    vi.advanceTimersByTime(32_000);
    expect(tx.state).toBe('terminated');
  });

  it('ends at once over a reliable transport (Timer J = 0)', () => {
    const tx = new NonInviteServerTransaction(host, 'k', invite('z9hG4bKx', 'BYE'), TCP_FLOW, 0n);
    tx.respond(200, 'OK');
    vi.advanceTimersByTime(0);
    expect(tx.state).toBe('terminated');
  });
});
