import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import type { ClientTransaction, ClientTransactionUser } from '../../../src/core/client-transaction.js';
import type { Destination } from '../../../src/core/destination.js';
import { InviteServerTransaction } from '../../../src/core/invite-server-transaction.js';
import type { TransactionLayer } from '../../../src/core/transaction-layer.js';
import { createLogger } from '../../../src/logger.js';
import type { SipRequest, SipResponse } from '../../../src/sip/message.js';
import { ResponseContext } from '../../../src/proxy/response-context.js';
import { FakeHost, invite, response } from '../core/fake-host.js';

/** Stands in for the transaction layer: records requests, lets the test play the branches' responses. */
class FakeLayer {
  readonly timers = { t1: 500, t2: 4000, t4: 5000 };
  readonly sent: Array<{ method: string; branch: string; to: Destination; req: SipRequest }> = [];
  readonly txs: Array<ClientTransaction & { user: ClientTransactionUser; _state: string }> = [];
  private n = 0;
  request(req: SipRequest, to: Destination, user: ClientTransactionUser, opts: { branch?: string } = {}): ClientTransaction {
    const branch = opts.branch ?? `z9hG4bKb${++this.n}`;
    this.sent.push({ method: req.method, branch, to, req });
    const tx = {
      branch, method: req.method, request: req, destination: to, user, _state: 'calling',
      get state() { return this._state as ClientTransaction['state']; },
      receive() {}, terminate() {},
    };
    this.txs.push(tx as never);
    return tx as never;
  }
  /** Branch i answers (as its client transaction would pass it up). */
  answer(i: number, status: number): void {
    const tx = this.txs.filter((t) => t.method === 'INVITE')[i];
    if (status >= 200) tx._state = status < 300 ? 'accepted' : 'completed';
    else tx._state = 'proceeding';
    tx.user.onResponse(response(status, 'X', tx.branch, 'INVITE', `b${i}`) as SipResponse, tx);
  }
  cancels(): string[] {
    return this.sent.filter((s) => s.method === 'CANCEL').map((s) => s.branch);
  }
}

const DEST = (port: number): Destination => ({ transport: 'udp', address: '192.0.2.50', port, connId: null });

describe('ResponseContext (RFC 3261 §16.7, §16.10)', () => {
  let host: FakeHost;
  let layer: FakeLayer;
  let server: InviteServerTransaction;
  const finals: number[] = [];
  beforeEach(() => {
    vi.useFakeTimers();
    host = new FakeHost();
    layer = new FakeLayer();
    server = new InviteServerTransaction(host, 's', invite('z9hG4bKcallerbranch'), { transport: 'udp', remoteAddress: '203.0.113.5', remotePort: 5060, localAddress: '', localPort: 0, connId: null }, 0n);
    finals.length = 0;
  });
  afterEach(() => vi.useRealTimers());

  const context = (noAnswerMs?: number): ResponseContext => {
    const c = new ResponseContext({ layer: layer as unknown as TransactionLayer, log: createLogger('silent'), server, noAnswerMs, events: { onFinal: (s) => finals.push(s) } });
    c.fork(invite('z9hG4bKcallerbranch'), DEST(5001));
    c.fork(invite('z9hG4bKcallerbranch'), DEST(5002));
    return c;
  };
  const upstream = (): string[] => host.lines().slice(1); // after our 100 Trying

  it('forwards provisional responses, then the first 2xx at once, and CANCELs the other branch (after its provisional)', () => {
    context();
    layer.answer(0, 180);
    expect(upstream()).toEqual(['SIP/2.0 180 X']);
    layer.answer(0, 200);
    expect(upstream()).toEqual(['SIP/2.0 180 X', 'SIP/2.0 200 X']);
    expect(finals).toEqual([200]);
    // Branch 2 has not answered yet: no CANCEL before its provisional response (§9.1).
    expect(layer.cancels()).toEqual([]);
    layer.answer(1, 180);
    expect(layer.cancels()).toEqual([layer.txs[1].branch]);
    const cancel = layer.sent.find((s) => s.method === 'CANCEL')!.req;
    expect(cancel.headers.find((h) => h.name === 'reason')?.value).toBe('SIP;cause=200;text="Call completed elsewhere"');
    // 180 of the cancelled branch is not forwarded after the final.
    expect(upstream()).toHaveLength(2);
  });

  it('waits for every branch and forwards the best final: 486 over 503', () => {
    context();
    layer.answer(0, 503);
    expect(upstream()).toEqual([]);
    layer.answer(1, 486);
    expect(upstream()).toEqual(['SIP/2.0 486 X']);
    expect(finals).toEqual([486]);
  });

  it('turns a best 503 into 500 (§16.7 step 6)', () => {
    context();
    layer.answer(0, 503);
    layer.answer(1, 503);
    expect(upstream()).toEqual(['SIP/2.0 500 Server Internal Error']);
  });

  it('on the caller\'s CANCEL, CANCELs ringing branches and gives silent ones 487 at once; the ringing one\'s 487 is forwarded', () => {
    const c = context();
    layer.answer(0, 180);
    c.cancelByCaller();
    expect(layer.cancels()).toEqual([layer.txs[0].branch]);
    layer.answer(0, 487);
    expect(upstream()).toEqual(['SIP/2.0 180 X', 'SIP/2.0 487 X']);
    // The silent branch is CANCELed as soon as it rings.
    layer.answer(1, 180);
    expect(layer.cancels()).toEqual([layer.txs[0].branch, layer.txs[1].branch]);
  });

  it('gives the caller 408 when nobody answers within the no-answer timeout, and CANCELs the ringing branches', () => {
    context(2000);
    layer.answer(0, 180);
    layer.answer(1, 180);
    vi.advanceTimersByTime(1999);
    expect(layer.cancels()).toEqual([]);
    vi.advanceTimersByTime(1);
    expect(layer.cancels()).toHaveLength(2);
    expect(upstream()).toEqual(['SIP/2.0 180 X', 'SIP/2.0 180 X', 'SIP/2.0 408 Request Timeout']);
  });

  it('counts a branch whose flow is gone as flowFailure (480 for a registered contact)', () => {
    const c = new ResponseContext({ layer: layer as unknown as TransactionLayer, log: createLogger('silent'), server, flowFailure: { status: 480, reason: 'Temporarily Unavailable' } });
    c.fork(invite('z9hG4bKcallerbranch'), DEST(5001));
    const tx = layer.txs[0];
    tx.user.onFailure(tx, 503);
    expect(upstream()).toEqual(['SIP/2.0 480 Temporarily Unavailable']);
  });

  describe('serial failover (trunk gateways, docs/trunks.md "Outbound")', () => {
    /** One branch; on its failure the handler forks the next one from `next` (what the proxy does with a trunk's gateways). */
    const serial = (next: Destination[], answerTimeoutMs?: number) => {
      const seen: number[] = [];
      const c: ResponseContext = new ResponseContext({
        layer: layer as unknown as TransactionLayer,
        log: createLogger('silent'),
        server,
        events: { onFinal: (s) => finals.push(s) },
        failover: async (final) => {
          seen.push(final.status);
          const d = next.shift();
          if (!d) return 0;
          c.fork(invite('z9hG4bKcallerbranch'), d, { answerTimeoutMs, restore: [['cseq', '1 INVITE']] });
          return 1;
        },
      });
      c.fork(invite('z9hG4bKcallerbranch'), DEST(5001), { answerTimeoutMs });
      return { c, seen };
    };

    it('tries the next branch after a 503 and forwards its answer, not the 503', async () => {
      const { seen } = serial([DEST(5002)]);
      layer.answer(0, 503);
      await vi.runAllTicks();
      await Promise.resolve();
      await Promise.resolve();
      expect(layer.sent.filter((s) => s.method === 'INVITE').map((s) => s.to.port)).toEqual([5001, 5002]);
      layer.answer(1, 200);
      expect(seen).toEqual([503]);
      expect(upstream()).toEqual(['SIP/2.0 200 X']);
      expect(finals).toEqual([200]);
    });

    it('gives a silent branch 503 after its answer timeout, and the edge\'s own 503 goes up as 503 when nothing is left', async () => {
      const { seen } = serial([DEST(5002)], 2000);
      await vi.advanceTimersByTimeAsync(2000);
      expect(layer.sent.filter((s) => s.method === 'INVITE')).toHaveLength(2);
      await vi.advanceTimersByTimeAsync(2000);
      expect(seen).toEqual([503, 503]);
      expect(upstream()).toEqual(['SIP/2.0 503 Service Unavailable']);
      // A silent branch that speaks after its timeout is CANCELed, and its 180 does not go up.
      layer.answer(0, 180);
      expect(layer.cancels()).toContain(layer.txs[0].branch);
      expect(upstream()).toHaveLength(1);
    });

    it('gives responses of a branch the headers the caller sent back (restore)', async () => {
      serial([DEST(5002)]);
      layer.answer(0, 503);
      await vi.advanceTimersByTimeAsync(0);
      const tx = layer.txs.filter((t) => t.method === 'INVITE')[1];
      const r = response(200, 'OK', tx.branch, 'INVITE', 'b1') as SipResponse;
      r.headers = r.headers.map((h) => (h.name.toLowerCase() === 'cseq' ? { name: h.name, value: '2 INVITE' } : h));
      tx.user.onResponse(r, tx);
      expect(host.sent.at(-1)?.text).toMatch(/\r\nCSeq: 1 INVITE\r\n/i);
    });
  });
});
