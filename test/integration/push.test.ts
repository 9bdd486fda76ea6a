/**
 * Push for sleeping mobile devices (RFC 8599, docs/push.md), on the real server against
 * local APNs and FCM stand-ins (test/support/push-stubs.ts): a phone registers over TCP
 * with push parameters and closes its connection; its binding stays registered; an
 * INVITE for it sends exactly one push with its token and topic; the phone registers
 * again on a new connection and gets the held INVITE, and the call (SIPp over TCP)
 * completes. No new REGISTER → 480 after PUSH_WAIT (2 s here); a dead token (APNs 410,
 * FCM UNREGISTERED) removes the binding.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getHeader, getHeaders } from '../../src/sip/headers.js';
import type { SipRequest } from '../../src/sip/message.js';
import { parseMessage } from '../../src/sip/parser.js';
import { startApnsStub, startFcmStub, type ApnsStub, type FcmStub } from '../support/push-stubs.js';
import { cidStr, sipp, startEdge, TestUa, type Account, type Edge, type Endpoint, type SippResult } from '../support/proxy-harness.js';
import { Phone } from '../support/push-phone.js';
import type { SipConn } from '../support/sip-client.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { runServerUntilStopped } from '../support/server-process.js';

const TOPIC_PARAM = 'ABCDE12345.com.example.phone.voip';

const completed = (run: SippResult, who: string): void => {
  expect(run.errors, `${who}: ${run.errors}`).toBe('');
  expect(run.successful, `${who} successful calls`).toBe(1);
};

describe('push to sleeping phones (RFC 8599)', () => {
  let ca: TestCa;
  let apns: ApnsStub;
  let fcm: FcmStub;
  let edge: Edge;
  let account: Account;
  let n = 0;

  beforeAll(async () => {
    ca = makeTestCa();
    apns = await startApnsStub(ca);
    fcm = await startFcmStub(ca);
    edge = await startEdge({
      NODE_EXTRA_CA_CERTS: ca.caCertFile,
      APNS_URL: apns.url,
      APNS_KEY_FILE: apns.keyFile,
      APNS_KEY_ID: apns.keyId,
      APNS_TEAM_ID: apns.teamId,
      FCM_URL: fcm.url,
      FCM_SERVICE_ACCOUNT_FILE: fcm.serviceAccountFile,
      PUSH_WAIT: '2',
      LOG_LEVEL: 'debug',
    });
    account = await edge.newAccount();
  }, 30_000);

  afterAll(async () => {
    await edge?.stop();
    await apns?.close();
    await fcm?.close();
    ca?.remove();
  });

  const sleepingPhone = async (provider: 'apns' | 'fcm', prid = randomBytes(32).toString('hex')) => {
    n++;
    const e = await edge.newEndpoint(account, `mobile${n}`);
    const phone = new Phone(edge, e, provider, prid, provider === 'apns' ? TOPIC_PARAM : 'test-project');
    const r = await phone.register();
    expect(r.status).toBe(200);
    expect(r.featureCaps).toBe(`*;+sip.pns="${provider}"`);
    phone.sleep();
    // The flow is gone; the binding is asleep, still registered, and shows its push service.
    const v = await edge.waitForEndpoint(e, (x) => (x.sip_registrations as Array<{ push?: { asleep: boolean } }> | undefined)?.[0]?.push?.asleep === true);
    expect(v.sip_registered).toBe('true');
    return phone;
  };

  it('the phone sleeps, an INVITE pushes it once (token, topic, voip), it registers again and the call completes', async () => {
    const phone = await sleepingPhone('apns');
    const view = await edge.endpoint(phone.e);
    const reg = view.sip_registration as unknown as { push: { provider: string; prid: string }; contact: string };
    expect(reg.push.provider).toBe('apns');
    expect(reg.push.prid).toBe(`${phone.prid.slice(0, 6)}…${phone.prid.slice(-4)}`);
    expect(reg.contact).not.toContain(phone.prid);

    const caller = await edge.newEndpoint(account, `caller${n}`);
    const seen = apns.pushes.length;
    const port = edge.server.ports.tcp as number;
    const run = sipp({ scenario: 'call-uac.xml', port, transport: 'tcp', endpoint: caller, cidStr: cidStr(), keys: { callee: phone.e.username }, pauseMs: 200, timeoutS: 15 });
    const push = await apns.next(seen, 8000);
    expect(push.token).toBe(phone.prid);
    expect(push.topic).toBe('com.example.phone.voip');
    expect(push.pushType).toBe('voip');
    expect(push.jwtOk).toBe(true);
    // The phone wakes up and registers again on a new connection within 2 s.
    expect((await phone.register()).status).toBe(200);
    const invite = await phone.answerCall(8000);
    expect(invite.uri.toString()).toContain(`${phone.e.username}@127.0.0.1`);
    completed(await run, 'caller');
    expect(apns.pushes.length - seen).toBe(1);
    phone.sleep();
  }, 20_000);

  it('no REGISTER after the push: the caller gets 480 after PUSH_WAIT; the binding stays asleep', async () => {
    const phone = await sleepingPhone('apns');
    const caller = await edge.newEndpoint(account, `caller${n}`);
    const ua = await TestUa.start(edge.server.ports.udp as number, caller);
    try {
      expect(await ua.register()).toBe(200);
      const seen = apns.pushes.length;
      const t0 = Date.now();
      const res = await ua.call('INVITE', `sip:${phone.e.username}@${account.sipDomain}`);
      const took = Date.now() - t0;
      expect(res.status).toBe(480);
      expect(took).toBeGreaterThanOrEqual(1900);
      expect(took).toBeLessThan(4500);
      expect(apns.pushes.length - seen).toBe(1);
      expect((await edge.endpoint(phone.e)).sip_registered).toBe('true');
    } finally {
      ua.close();
    }
  }, 20_000);

  it('APNs answers 410 for the token: the binding is removed and the caller gets 480', async () => {
    const prid = randomBytes(32).toString('hex');
    apns.dead.add(prid);
    const phone = await sleepingPhone('apns', prid);
    const caller = await edge.newEndpoint(account, `caller${n}`);
    const ua = await TestUa.start(edge.server.ports.udp as number, caller);
    try {
      expect(await ua.register()).toBe(200);
      const res = await ua.call('INVITE', `sip:${phone.e.username}@${account.sipDomain}`);
      expect(res.status).toBe(480);
      await edge.waitForEndpoint(phone.e, (v) => v.sip_registered === 'false', 3000);
    } finally {
      ua.close();
    }
  }, 20_000);

  it('APNs answers 503 once: the push is tried once more and the phone is woken; sip_push_sent_total counts it', async () => {
    const prid = randomBytes(32).toString('hex');
    apns.flaky.add(prid);
    const phone = await sleepingPhone('apns', prid);
    const caller = await edge.newEndpoint(account, `caller${n}`);
    const ua = await TestUa.start(edge.server.ports.udp as number, caller);
    try {
      expect(await ua.register()).toBe(200);
      const seen = apns.pushes.length;
      const sent = ua.call('MESSAGE', `sip:${phone.e.username}@${account.sipDomain}`);
      await apns.next(seen + 1, 5000);
      expect(apns.pushes.slice(seen).map((p) => p.token)).toEqual([prid, prid]);
      expect((await phone.register()).status).toBe(200);
      const conn = phone.conn as SipConn;
      for (;;) {
        const p = parseMessage(Buffer.from(phone.early.shift() ?? (await conn.next(5000))));
        if (p.ok && p.msg.kind === 'request' && p.msg.method === 'MESSAGE') {
          const req = p.msg;
          conn.send(
            [`SIP/2.0 200 OK`, ...getHeaders(req, 'via').map((v) => `Via: ${v}`), `From: ${getHeader(req, 'from')}`, `To: ${getHeader(req, 'to')};tag=m2`, `Call-ID: ${getHeader(req, 'call-id')}`, `CSeq: ${getHeader(req, 'cseq')}`, 'Content-Length: 0', '', ''].join('\r\n'),
          );
          break;
        }
      }
      expect((await sent).status).toBe(200);
      const metrics = await (await fetch(`${edge.base}/metrics`)).text();
      expect(metrics).toMatch(/sip_push_sent_total\{provider="apns",outcome="sent"\} [1-9]/);
      expect(metrics).toMatch(/sip_push_sent_total\{provider="apns",outcome="gone"\} 1/);
    } finally {
      ua.close();
      phone.sleep();
    }
  }, 20_000);

  it('FCM: a MESSAGE pushes a data message with a token from the service account; the phone registers again and gets it', async () => {
    const phone = await sleepingPhone('fcm');
    const caller = await edge.newEndpoint(account, `caller${n}`);
    const ua = await TestUa.start(edge.server.ports.udp as number, caller);
    try {
      expect(await ua.register()).toBe(200);
      const seen = fcm.pushes.length;
      const sent = ua.call('MESSAGE', `sip:${phone.e.username}@${account.sipDomain}`);
      const push = await fcm.next(seen, 5000);
      expect(push.bearerOk).toBe(true);
      expect(push.token).toBe(phone.prid);
      expect(push.project).toBe('test-project');
      expect(push.data.method).toBe('MESSAGE');
      expect((await phone.register()).status).toBe(200);
      // The held MESSAGE arrives on the new connection.
      const conn = phone.conn as SipConn;
      for (;;) {
        const p = parseMessage(Buffer.from(phone.early.shift() ?? (await conn.next(5000))));
        if (p.ok && p.msg.kind === 'request' && p.msg.method === 'MESSAGE') {
          const req = p.msg;
          conn.send(
            [`SIP/2.0 200 OK`, ...getHeaders(req, 'via').map((v) => `Via: ${v}`), `From: ${getHeader(req, 'from')}`, `To: ${getHeader(req, 'to')};tag=m1`, `Call-ID: ${getHeader(req, 'call-id')}`, `CSeq: ${getHeader(req, 'cseq')}`, 'Content-Length: 0', '', ''].join('\r\n'),
          );
          break;
        }
      }
      expect((await sent).status).toBe(200);
      expect(fcm.pushes.length - seen).toBe(1);
    } finally {
      ua.close();
      phone.sleep();
    }
  }, 20_000);

  it('FCM answers UNREGISTERED: the binding is removed', async () => {
    const prid = `fcm-${randomBytes(20).toString('hex')}`;
    fcm.dead.add(prid);
    const phone = await sleepingPhone('fcm', prid);
    const caller = await edge.newEndpoint(account, `caller${n}`);
    const ua = await TestUa.start(edge.server.ports.udp as number, caller);
    try {
      expect(await ua.register()).toBe(200);
      expect((await ua.call('MESSAGE', `sip:${phone.e.username}@${account.sipDomain}`)).status).toBe(480);
      await edge.waitForEndpoint(phone.e, (v) => v.sip_registered === 'false', 3000);
    } finally {
      ua.close();
    }
  }, 20_000);

  it('a device token never appears whole in the logs', () => {
    const out = edge.server.output();
    expect(out).toContain('push');
    for (const p of apns.pushes) expect(out).not.toContain(p.token);
    for (const p of fcm.pushes) expect(out).not.toContain(p.token);
  });
});

describe('push settings at start', () => {
  it('a missing APNs key file: the server does not start (exit 2) and says why in one line', async () => {
    const { code, output } = await runServerUntilStopped({ APNS_KEY_FILE: '/nonexistent/AuthKey_X.p8', APNS_KEY_ID: 'K', APNS_TEAM_ID: 'T' });
    expect(code).toBe(2);
    const lines = output.split('\n').filter((l) => l.includes('configuration error'));
    expect(lines).toEqual(['sip-edge: configuration error: APNS_KEY_FILE: cannot read /nonexistent/AuthKey_X.p8 (ENOENT)']);
  });

  it('the same with SIP_WORKERS=2: the node stops before any worker starts (exit 2)', async () => {
    const { code, output } = await runServerUntilStopped({ SIP_WORKERS: '2', APNS_KEY_FILE: '/nonexistent/AuthKey_X.p8', APNS_KEY_ID: 'K', APNS_TEAM_ID: 'T' });
    expect(code).toBe(2);
    expect(output).toContain('sip-edge: configuration error: APNS_KEY_FILE: cannot read /nonexistent/AuthKey_X.p8 (ENOENT)');
  });

  it('an unreadable FCM service account file: exit 2', async () => {
    const ca = makeTestCa();
    try {
      const { code, output } = await runServerUntilStopped({ FCM_SERVICE_ACCOUNT_FILE: ca.caCertFile });
      expect(code).toBe(2);
      expect(output).toMatch(/configuration error: FCM_SERVICE_ACCOUNT_FILE: .* is not a service account key/);
    } finally {
      ca.remove();
    }
  });

  it('neither set: push is reported off at start', async () => {
    const edge = await startEdge();
    try {
      expect(edge.server.logs.some((l) => typeof l.msg === 'string' && l.msg.startsWith('push off'))).toBe(true);
    } finally {
      await edge.stop();
    }
  });
});
