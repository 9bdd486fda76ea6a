import { afterEach, describe, expect, it } from 'vitest';
import type { ClientTransaction, ClientTransactionUser } from '../../../src/core/client-transaction.js';
import { TransactionLayer } from '../../../src/core/transaction-layer.js';
import { createLogger } from '../../../src/logger.js';
import type { SipResponse } from '../../../src/sip/message.js';
import { parseUri } from '../../../src/sip/uri.js';
import type { Flow, SipTransportName, Transport } from '../../../src/transport/types.js';
import { invite, msg } from './fake-host.js';

class FakeTransport implements Transport {
  readonly sent: Array<{ flow: Flow; text: string }> = [];
  constructor(readonly name: SipTransportName) {}
  start = async () => ({ address: '127.0.0.1', port: 0 });
  send(flow: Flow, data: Buffer): boolean {
    this.sent.push({ flow, text: data.toString() });
    return true;
  }
  connectionCount = () => 0;
  closeFlow(): void {}
  stop = async () => {};
}

const got: number[] = [];
const user: ClientTransactionUser = {
  onResponse: (res: SipResponse) => got.push(res.status),
  onFailure: (_tx: ClientTransaction, s) => got.push(-s),
};

describe('TransactionLayer (RFC 3261 §17)', () => {
  let layer: TransactionLayer;
  const udp = new FakeTransport('udp');
  const ws = new FakeTransport('ws');
  const make = (): TransactionLayer => {
    layer = new TransactionLayer({ transports: new Map<SipTransportName, Transport>([['udp', udp], ['ws', ws]]), log: createLogger('silent'), server: 't' });
    layer.setListening('udp', { address: '192.0.2.1', port: 5070 });
    layer.setListening('ws', { address: '192.0.2.1', port: 5066 });
    return layer;
  };
  afterEach(() => {
    layer?.stop();
    got.length = 0;
  });

  it('puts our Via on top with a magic-cookie branch, the egress transport and rport', () => {
    make();
    const req = invite('z9hG4bKcaller');
    layer.request(req, { transport: 'ws', address: '203.0.113.7', port: 50000, connId: 'ws-1' }, user);
    const first = ws.sent[0].text.split('\r\n');
    expect(first[1]).toMatch(/^Via: SIP\/2\.0\/WS 192\.0\.2\.1:5066;branch=z9hG4bK[0-9a-f]{8}\.\w+;rport$/);
    expect(ws.sent[0].flow.connId).toBe('ws-1');
  });

  it('matches responses by the top Via branch and the CSeq method; a CANCEL with the same branch is its own transaction', () => {
    make();
    const tx = layer.request(invite('x'), { transport: 'udp', address: '203.0.113.7', port: 5060, connId: null }, user);
    const cancel = invite('x', 'CANCEL');
    layer.request(cancel, { transport: 'udp', address: '203.0.113.7', port: 5060, connId: null }, { onResponse: () => got.push(999), onFailure: () => {} }, { branch: tx.branch });
    const resp = (status: number, method: string, branch = tx.branch) =>
      msg(`SIP/2.0 ${status} X\nVia: SIP/2.0/UDP 192.0.2.1:5070;branch=${branch}\nFrom: <sip:a@x>;tag=1\nTo: <sip:b@x>;tag=2\nCall-ID: c\nCSeq: 7 ${method}\nContent-Length: 0\n\n`) as SipResponse;
    expect(layer.receiveResponse(resp(200, 'CANCEL'))).toBe(true);
    expect(layer.receiveResponse(resp(487, 'INVITE'))).toBe(true);
    expect(layer.receiveResponse(resp(200, 'INVITE', 'z9hG4bKother'))).toBe(false);
    expect(got).toEqual([999, 487]);
  });

  it('knows its own URIs: our hosts on our listening ports', () => {
    make();
    expect(layer.isOwnUri(parseUri('sip:192.0.2.1:5070;lr')!)).toBe(true);
    expect(layer.isOwnUri(parseUri('sip:tok@192.0.2.1:5066;transport=ws;lr')!)).toBe(true);
    expect(layer.isOwnUri(parseUri('sip:192.0.2.1:5999')!)).toBe(false);
    expect(layer.isOwnUri(parseUri('sip:192.0.2.99:5070')!)).toBe(false);
  });

  it('recognises its branches and the loop hash inside them (§16.3 step 4)', () => {
    make();
    expect(layer.ownBranch(layer.newBranch('abc'))).toEqual({ loop: 'abc' });
    expect(layer.ownBranch(layer.newBranch())).toEqual({ loop: '' });
    expect(layer.ownBranch('z9hG4bKsomeoneelse')).toBeNull();
  });
});
