import type { TransactionHost } from '../../../src/core/client-transaction.js';
import type { Destination } from '../../../src/core/destination.js';
import type { ServerTransaction, ServerTransactionHost } from '../../../src/core/server-transaction.js';
import { parseMessage } from '../../../src/sip/parser.js';
import type { SipMessage, SipRequest, SipResponse } from '../../../src/sip/message.js';

/** Records what a transaction sends; its timers are the RFC defaults (run under fake timers). */
export class FakeHost implements ServerTransactionHost, TransactionHost {
  readonly timers = { t1: 500, t2: 4000, t4: 5000 };
  readonly serverHeader = 'test';
  readonly sent: Array<{ to: Destination; text: string }> = [];
  readonly terminatedKeys: string[] = [];
  readonly finals: number[] = [];
  /** False makes every send fail (flow gone). */
  reachable = true;
  private tags = 0;

  send(to: Destination, data: Buffer): boolean {
    if (!this.reachable) return false;
    this.sent.push({ to, text: data.toString() });
    return true;
  }
  terminated(key: string): void {
    this.terminatedKeys.push(key);
  }
  newTag(): string {
    return `tag${++this.tags}`;
  }
  finalSent(_tx: ServerTransaction, status: number): void {
    this.finals.push(status);
  }
  /** Start lines of what was sent, in order. */
  lines(): string[] {
    return this.sent.map((s) => s.text.split('\r\n')[0]);
  }
}

export const UDP: Destination = { transport: 'udp', address: '192.0.2.10', port: 5060, connId: null };
export const TCP: Destination = { transport: 'tcp', address: '192.0.2.10', port: 40000, connId: 'tcp-1' };

export function msg(text: string): SipMessage {
  const p = parseMessage(Buffer.from(text.replace(/\n/g, '\r\n')));
  if (!p.ok) throw new Error(p.reason);
  return p.msg;
}

export function invite(branch = 'z9hG4bKours1', method = 'INVITE'): SipRequest {
  return msg(
    `${method} sip:bob@192.0.2.10:5060 SIP/2.0
Via: SIP/2.0/UDP 198.51.100.1:5060;branch=${branch};rport
Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bKcaller;received=203.0.113.5
Route: <sip:next.example;lr>
Max-Forwards: 69
From: <sip:alice@acme.example>;tag=a1
To: <sip:bob@acme.example>
Call-ID: call-1@test
CSeq: 7 ${method}
Content-Length: 0

`,
  ) as SipRequest;
}

export function response(status: number, reason: string, branch = 'z9hG4bKours1', method = 'INVITE', toTag = 'b1'): SipResponse {
  return msg(
    `SIP/2.0 ${status} ${reason}
Via: SIP/2.0/UDP 198.51.100.1:5060;branch=${branch};rport=5060
Via: SIP/2.0/UDP 203.0.113.5:5060;branch=z9hG4bKcaller;received=203.0.113.5
From: <sip:alice@acme.example>;tag=a1
To: <sip:bob@acme.example>${status > 100 ? `;tag=${toTag}` : ''}
Call-ID: call-1@test
CSeq: 7 ${method}
Content-Length: 0

`,
  ) as SipResponse;
}
