/**
 * Calls through the edge between two SIPp instances, both registered through
 * it with endpoints made over the HTTP API (RFC 3261 §16 proxying, §17
 * transactions): SIPp A (UAC) registers, is challenged 407 on its INVITE, and
 * calls SIPp B (UAS), which registered too. Every case is asserted end to end by
 * both scenarios reaching their last message — over UDP and over TCP.
 *
 * SIPp maps an incoming INVITE to a call by Call-ID only, so A and B run with the
 * same -cid_str: B's REGISTER and A's INVITE share a Call-ID (legal: different
 * AORs, different CSeq methods).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getHeader } from '../../src/sip/headers.js';
import { cidStr, sipp, startEdge, TestUa, type Account, type Edge, type Endpoint, type SippResult } from '../support/proxy-harness.js';

/** The edge's no-answer timeout in this suite, seconds. */
const NO_ANSWER_S = 2;

function completed(run: SippResult, who: string): void {
  expect(run.errors, `${who}: ${run.errors}`).toBe('');
  expect(run.code, `${who} exit status`).toBe(0);
  expect(run.successful, `${who} successful calls`).toBe(1);
  expect(run.failed, `${who} failed calls`).toBe(0);
}

describe('calls between registered SIPp endpoints through the edge', () => {
  let edge: Edge;
  let account: Account;
  let n = 0;

  beforeAll(async () => {
    edge = await startEdge({ SIP_NO_ANSWER_TIMEOUT: String(NO_ANSWER_S), SIP_TLS_PORT: 'off', SIP_WSS_PORT: 'off' });
    account = await edge.newAccount();
  });
  afterAll(async () => {
    await edge?.stop();
  });

  const pair = async (): Promise<{ a: Endpoint; b: Endpoint }> => {
    n++;
    return { a: await edge.newEndpoint(account, `caller${n}`), b: await edge.newEndpoint(account, `callee${n}`) };
  };

  /** B registers and waits for the INVITE; once its binding shows, A calls. */
  const call = async (
    transport: 'udp' | 'tcp',
    uas: string,
    uac: string,
    opts: { uasPauseMs?: number; uacPauseMs?: number } = {},
  ): Promise<{ caller: SippResult; callee: SippResult }> => {
    const { a, b } = await pair();
    const port = edge.server.ports[transport] as number;
    const cid = cidStr();
    const callee = sipp({ scenario: uas, port, transport, endpoint: b, cidStr: cid, pauseMs: opts.uasPauseMs });
    await edge.waitBindings(b, 1);
    const caller = await sipp({ scenario: uac, port, transport, endpoint: a, cidStr: cid, keys: { callee: b.username }, pauseMs: opts.uacPauseMs });
    return { caller, callee: await callee };
  };

  describe('3xx recursion (RFC 3261 §16.5, §16.7 step 4; README "Redirects")', () => {
    /**
     * B (SIPp) registers and answers the INVITE with 302 naming `redirectTo`; A (a small UA)
     * calls B with SIPp's Call-ID (SIPp maps an INVITE to its call by Call-ID).
     */
    const redirected = async (redirectTo: (b: Endpoint, c: Endpoint) => string, headers: string[] = []) => {
      n++;
      const a = await edge.newEndpoint(account, `rcaller${n}`);
      const b = await edge.newEndpoint(account, `rredirect${n}`);
      const c = await edge.newEndpoint(account, `rtarget${n}`);
      const port = edge.server.ports.udp as number;
      const [ua, uc] = [await TestUa.start(port, a), await TestUa.start(port, c)];
      try {
        expect(await ua.register()).toBe(200);
        expect(await uc.register()).toBe(200);
        const cid = cidStr();
        const bRun = sipp({ scenario: 'call-uas-redirect.xml', port, transport: 'udp', endpoint: b, cidStr: cid, keys: { redirect_to: redirectTo(b, c) } });
        await edge.waitBindings(b, 1);
        const res = await ua.call('INVITE', `sip:${b.username}@${account.sipDomain}`, { callId: cid.replace('%u', '1'), headers });
        return { res, b: await bRun, c: uc, cUser: c.username, cPort: uc.port };
      } finally {
        ua.close();
        uc.close();
      }
    };

    it('follows a 302 to another endpoint of the account: the caller gets the new target\'s 200, B gets its ACK', async () => {
      const r = await redirected((_b, c) => `${c.username}@${account.sipDomain}`);
      expect(r.res.status).toBe(200);
      expect(getHeader(r.res, 'contact')).toBe(`<sip:${r.cUser}@127.0.0.1:${r.cPort}>`);
      completed(r.b, 'redirecting endpoint');
      expect(r.c.requests.map((q) => q.method)).toEqual(['INVITE', 'BYE']);
    });

    it('passes the 302 upstream, Contact intact, when the request says Request-Disposition: no-recurse (RFC 3841)', async () => {
      const r = await redirected((_b, c) => `${c.username}@${account.sipDomain}`, ['Request-Disposition: no-recurse']);
      expect(r.res.status).toBe(302);
      expect(getHeader(r.res, 'contact')).toBe(`<sip:${r.cUser}@${account.sipDomain}>`);
      completed(r.b, 'redirecting endpoint');
      expect(r.c.requests).toHaveLength(0);
    });

    it('does not loop on a 302 back to the same endpoint, nor relay to a foreign host: the 302 goes upstream', async () => {
      const self = await redirected((b) => `${b.username}@${account.sipDomain}`);
      expect(self.res.status).toBe(302);
      completed(self.b, 'self-redirecting endpoint');
      const foreign = await redirected(() => 'someone@elsewhere.example');
      expect(foreign.res.status).toBe(302);
      expect(getHeader(foreign.res, 'contact')).toBe('<sip:someone@elsewhere.example>');
      completed(foreign.b, 'redirecting endpoint');
      expect(foreign.c.requests).toHaveLength(0);
    });
  });

  describe.each(['udp', 'tcp'] as const)('over %s', (transport) => {
    it('sets up an answered call: 407 then INVITE → 180 → 200 → ACK along the Record-Route, then BYE → 200', async () => {
      const { caller, callee } = await call(transport, 'call-uas-answer.xml', 'call-uac.xml', { uacPauseMs: 200 });
      completed(caller, 'caller');
      completed(callee, 'callee');
      // The callee saw the edge's two Record-Route values (its scenario checks them) and the
      // caller's ACK and BYE came back through the edge: they reached the callee.
      expect(callee.messages).toMatch(/ACK sip:callee\d+@127\.0\.0\.1:\d+;transport=\w+ SIP\/2\.0/);
      expect(callee.messages).toMatch(/BYE sip:callee\d+@127\.0\.0\.1:\d+;transport=\w+ SIP\/2\.0/);
      // The SDP offer passed through unchanged.
      expect(callee.messages).toMatch(/m=audio \d+ RTP\/AVP 0\r?\na=rtpmap:0 PCMU\/8000/);
    });

    it('CANCEL before the answer: 200 to the CANCEL, B gets CANCEL and answers 487, A gets the 487', async () => {
      const { caller, callee } = await call(transport, 'call-uas-ring-cancel.xml', 'call-uac-cancel.xml');
      completed(caller, 'caller');
      completed(callee, 'callee');
    });

    it('486 Busy Here from B reaches A, and each hop ACKs it', async () => {
      const { caller, callee } = await call(transport, 'call-uas-busy.xml', 'call-uac-busy.xml');
      completed(caller, 'caller');
      completed(callee, 'callee');
    });

    it(`no answer: after SIP_NO_ANSWER_TIMEOUT (${NO_ANSWER_S} s) A gets 408 and B is CANCELed`, async () => {
      const started = Date.now();
      const { caller, callee } = await call(transport, 'call-uas-ring-cancel.xml', 'call-uac-noanswer.xml');
      completed(caller, 'caller');
      completed(callee, 'callee');
      expect(Date.now() - started).toBeGreaterThanOrEqual(NO_ANSWER_S * 1000);
    });
  });

  it('forks to two registered devices: the first to answer gets the call, the other gets CANCEL', async () => {
    const { a, b } = await pair();
    const port = edge.server.ports.udp as number;
    const cid = cidStr();
    // Device 1 answers after 500 ms; device 2 only rings and must be CANCELed.
    const first = sipp({ scenario: 'call-uas-answer.xml', port, transport: 'udp', endpoint: b, cidStr: cid, pauseMs: 500 });
    await edge.waitBindings(b, 1);
    const second = sipp({ scenario: 'call-uas-ring-cancel.xml', port, transport: 'udp', endpoint: b, cidStr: cid });
    await edge.waitBindings(b, 2);
    const caller = await sipp({ scenario: 'call-uac.xml', port, transport: 'udp', endpoint: a, cidStr: cid, keys: { callee: b.username }, pauseMs: 200 });
    completed(caller, 'caller');
    completed(await first, 'answering device');
    const cancelled = await second;
    completed(cancelled, 'cancelled device');
    // RFC 3326: the CANCEL says why.
    expect(cancelled.messages).toMatch(/Reason: SIP;cause=200;text="Call completed elsewhere"/);
  });
});
