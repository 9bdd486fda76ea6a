/**
 * Calls through the edge with media through a real rtpengine (docs/media.md "Calls"):
 * with MEDIA_RELAY=always the SDP each SIPp side receives names rtpengine's ports, not
 * the other side's, and after the BYE rtpengine holds no session for the call. With
 * rtpengine gone, a call that does not need the relay (two plain RTP legs) still goes
 * through unrelayed, a call that does (a WebSocket callee) fails fast with 503 and a
 * Warning, and calls are relayed again once rtpengine is back.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RtpengineClient } from '../../src/media/rtpengine.js';
import { sessionGone } from '../support/media.js';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { cidStr, sipp, TestUa } from '../support/proxy-harness.js';
import { startPhoneProcess } from '../support/phone-process.js';
import { startRtpengine, type RtpengineHandle } from '../support/rtpengine.mjs';
import { until } from '../support/wait.js';

/** The audio port of every `m=audio` line in the SDP of SIPp's messages matching `start`. */
function audioPorts(messages: string, start: RegExp): number[] {
  const ports: number[] = [];
  // SIPp's -trace_msg: "----- <time>" lines, then "UDP message sent|received …:", a blank line and the message.
  for (const entry of messages.split(/-{20,}[^\n]*\n/)) {
    const m = entry.replace(/^[^\n]*message (sent|received)[^\n]*\n\s*/, '');
    if (!start.test(m)) continue;
    for (const x of m.matchAll(/^m=audio (\d+) /gm)) ports.push(Number(x[1]));
  }
  return ports;
}

describe('calls through rtpengine (MEDIA_RELAY=always)', () => {
  let engine: RtpengineHandle;
  let edge: Edge;
  let account: Account;
  let probe: RtpengineClient;
  let n = 0;

  beforeAll(async () => {
    engine = await startRtpengine({ rtpPorts: 60 });
    edge = await startEdge({ RTPENGINE_NG: engine.id, MEDIA_RELAY: 'always' });
    account = await edge.newAccount();
    probe = new RtpengineClient({ engines: [{ host: engine.host, port: engine.ngPort }], timeoutMs: 300, retries: 1 });
  }, 60_000);
  afterAll(async () => {
    await probe?.close();
    await edge?.stop();
    await engine?.dispose();
  });

  const inRange = (p: number): boolean => p >= engine.portMin && p <= engine.portMax;
  /** rtpengine deletes the edge made that succeeded (a branch's offer, or a whole call). */
  const deletes = async (): Promise<number> =>
    [...(await (await fetch(`${edge.base}/metrics`)).text()).matchAll(/sip_media_engine_requests_total\{engine="[^"]+",command="delete",outcome="ok"\} (\d+)/g)].reduce((a, m) => a + Number(m[1]), 0);
  const pair = async (): Promise<{ a: Endpoint; b: Endpoint }> => {
    n++;
    return { a: await edge.newEndpoint(account, `mcaller${n}`), b: await edge.newEndpoint(account, `mcallee${n}`) };
  };

  it('both sides get rtpengine in their SDP, and the BYE ends the session on rtpengine', async () => {
    const { a, b } = await pair();
    const port = edge.server.ports.udp as number;
    const cid = cidStr();
    const callee = sipp({ scenario: 'call-uas-answer.xml', port, transport: 'udp', endpoint: b, cidStr: cid });
    await edge.waitBindings(b, 1);
    const caller = await sipp({ scenario: 'call-uac.xml', port, transport: 'udp', endpoint: a, cidStr: cid, keys: { callee: b.username }, pauseMs: 500 });
    const uas = await callee;
    expect(caller.failed, caller.errors).toBe(0);
    expect(uas.failed, uas.errors).toBe(0);
    // The callee's INVITE and the caller's 200 carry rtpengine's ports (SIPp's own media port is outside its range).
    const offered = audioPorts(uas.messages, /^INVITE /);
    const answered = audioPorts(caller.messages, /^SIP\/2\.0 200 OK[\s\S]*CSeq: \d+ INVITE/);
    expect(offered.length).toBeGreaterThan(0);
    expect(answered.length).toBeGreaterThan(0);
    for (const p of [...offered, ...answered]) expect(inRange(p), `port ${p} in ${engine.portMin}-${engine.portMax}`).toBe(true);
    expect(offered[0]).not.toBe(answered[0]);
    // After the BYE: no session for this Call-ID on rtpengine.
    const callId = cid.replace('%u', '1');
    await sessionGone(probe, engine.id, callId);
    const metrics = await (await fetch(`${edge.base}/metrics`)).text();
    expect(metrics).toMatch(/sip_media_engine_requests_total\{engine="[^"]+",command="offer",outcome="ok"\} [1-9]/);
    expect(metrics).toMatch(/sip_media_engine_requests_total\{engine="[^"]+",command="answer",outcome="ok"\} [1-9]/);
    expect(metrics).toMatch(/sip_media_engine_requests_total\{engine="[^"]+",command="delete",outcome="ok"\} [1-9]/);
  }, 60_000);

  it('forking to a WebSocket phone and a desk phone of one user: the branch that answers keeps the media, the other offer is deleted at once', async () => {
    n++;
    const callee = await edge.newEndpoint(account, `mfork${n}`);
    const caller = await edge.newEndpoint(account, `ringer${n}`); // a "ring…" caller only rings the SIP.js phone
    const port = edge.server.ports.udp as number;
    const phone = startPhoneProcess(`ws://127.0.0.1:${edge.server.ports.ws}`, callee, { answer: true });
    try {
      await until('the WebSocket phone registered', () => (phone.events.some((e) => e.state === 'Registered') ? true : undefined), 10_000);
      const cid = cidStr();
      const desk = sipp({ scenario: 'call-uas-answer.xml', port, transport: 'udp', endpoint: callee, cidStr: cid });
      await edge.waitBindings(callee, 2);
      const before = await deletes();
      const call = sipp({ scenario: 'call-uac.xml', port, transport: 'udp', endpoint: caller, cidStr: cid, keys: { callee: callee.username }, pauseMs: 2500 });
      // Both devices got the INVITE, each with its own relayed offer.
      await until('the SIP.js phone rang', () => (phone.count('invite') === 1 ? true : undefined), 10_000);
      // The desk phone answers; while the call is up, one delete has gone: the WebSocket branch's offer.
      await until('the losing branch deleted', async () => ((await deletes()) === before + 1 ? true : undefined), 5000);
      const [uac, uas] = await Promise.all([call, desk]);
      expect(uac.failed, uac.errors).toBe(0);
      expect(uas.failed, uas.errors).toBe(0);
      // The answer the caller got came through rtpengine (the desk's own port is outside its range).
      for (const p of audioPorts(uac.messages, /^SIP\/2\.0 200 OK[\s\S]*CSeq: \d+ INVITE/)) expect(inRange(p)).toBe(true);
      // The SIP.js phone's call ended unanswered (CANCEL); the BYE deleted the rest of the session.
      await until('the SIP.js call ended', () => (phone.events.some((e) => e.event === 'call-in' && e.state === 'Terminated') ? true : undefined), 5000);
      expect(phone.events.some((e) => e.event === 'call-in' && e.state === 'Established')).toBe(false);
      await until('the session deleted after the BYE', async () => ((await deletes()) === before + 2 ? true : undefined), 5000);
    } finally {
      phone.child.kill('SIGKILL');
    }
  }, 60_000);

  it('183 early media on a branch that loses: the caller hears it through rtpengine, the 200 of the other branch is relayed, then the caller media goes to the answering branch only and the losing branch is deleted', async () => {
    n++;
    const callee = await edge.newEndpoint(account, `mearly${n}`);
    const caller = await edge.newEndpoint(account, `mearlycaller${n}`);
    const port = edge.server.ports.udp as number;
    const cid = cidStr();
    const callId = cid.replace('%u', '1');
    // Two devices of one user: one plays early media (183 with SDP) and is CANCELed, the other answers 1.5 s later.
    const early = sipp({ scenario: 'call-uas-early-cancel.xml', port, transport: 'udp', endpoint: callee, cidStr: cid });
    await edge.waitBindings(callee, 1);
    const answering = sipp({ scenario: 'call-uas-answer.xml', port, transport: 'udp', endpoint: callee, cidStr: cid, pauseMs: 1500 });
    await edge.waitBindings(callee, 2);
    const before = await deletes();
    const uacRun = sipp({ scenario: 'call-uac.xml', port, transport: 'udp', endpoint: caller, cidStr: cid, keys: { callee: callee.username }, pauseMs: 1500 });
    // The answer deletes the early branch's offer; then, while the call is up, the caller's
    // media goes to the answering branch only, and the early branch gets none.
    await until('the losing branch deleted', async () => ((await deletes()) === before + 1 ? true : undefined), 10_000);
    type Mono = { subscriptions: Array<{ tag: string }>; subscribers: Array<{ tag: string }> };
    const monologues = (await probe.query({ 'call-id': callId }, engine.id)).reply.tags as unknown as Record<string, Mono>;
    const [uac, uasEarly, uasAnswer] = await Promise.all([uacRun, early, answering]);
    expect(uac.failed, uac.errors).toBe(0);
    expect(uasEarly.failed, uasEarly.errors).toBe(0);
    expect(uasAnswer.failed, uasAnswer.errors).toBe(0);
    // The caller got the early media's SDP (183) and the answer (200), both naming rtpengine.
    const e183 = audioPorts(uac.messages, /^SIP\/2\.0 183 /);
    const a200 = audioPorts(uac.messages, /^SIP\/2\.0 200 OK[\s\S]*CSeq: \d+ INVITE/);
    expect(e183.length).toBeGreaterThan(0);
    expect(a200.length).toBeGreaterThan(0);
    for (const p of [...e183, ...a200]) expect(inRange(p)).toBe(true);
    // Each SIPp UAS has its own pid in its tag: the one that answered is on rtpengine, the early one is gone.
    const tagOf = (messages: string, start: RegExp): string | undefined => {
      for (const entry of messages.split(/-{20,}[^\n]*\n/)) {
        const m = entry.replace(/^[^\n]*message (sent|received)[^\n]*\n\s*/, '');
        if (start.test(m)) return /^To:[^\n]*;tag=([^;\s]+)/m.exec(m)?.[1];
      }
      return undefined;
    };
    const earlyTag = tagOf(uasEarly.messages, /^SIP\/2\.0 183 /);
    const answerTag = tagOf(uasAnswer.messages, /^SIP\/2\.0 200 OK[\s\S]*CSeq: \d+ INVITE/);
    expect(earlyTag).toBeDefined();
    expect(answerTag).toBeDefined();
    const callerTag = Object.keys(monologues).find((t) => t.includes('SIPpTag01'));
    expect(callerTag).toBeDefined();
    expect(monologues[callerTag!]!.subscribers.map((x) => x.tag)).toEqual([answerTag]);
    expect(monologues[answerTag!]!.subscriptions.map((x) => x.tag)).toEqual([callerTag]);
    expect(monologues[earlyTag!]?.subscriptions ?? []).toEqual([]);
    await sessionGone(probe, engine.id, callId);
  }, 60_000);

  it('a 2xx the callee retransmits (ACK late) reaches the caller with the same rewritten SDP, without another rtpengine answer', async () => {
    const { a, b } = await pair();
    const port = edge.server.ports.udp as number;
    const cid = cidStr();
    const answers = async (): Promise<number> =>
      [...(await (await fetch(`${edge.base}/metrics`)).text()).matchAll(/sip_media_engine_requests_total\{engine="[^"]+",command="answer",outcome="[a-z_]+"\} (\d+)/g)].reduce((n, m) => n + Number(m[1]), 0);
    const callee = sipp({ scenario: 'call-uas-answer.xml', port, transport: 'udp', endpoint: b, cidStr: cid });
    await edge.waitBindings(b, 1);
    const before = await answers();
    const caller = await sipp({ scenario: 'call-uac-late-ack.xml', port, transport: 'udp', endpoint: a, cidStr: cid, keys: { callee: b.username }, pauseMs: 200 });
    const uas = await callee;
    expect(caller.failed, caller.errors).toBe(0);
    expect(uas.failed, uas.errors).toBe(0);
    // The callee sent its 200 more than once (retransmitted until the late ACK)…
    const sent200 = uas.messages.split(/-{20,}[^\n]*\n/).filter((e) => /message sent/.test(e) && /SIP\/2\.0 200 OK[\s\S]*CSeq: \d+ INVITE/.test(e));
    expect(sent200.length).toBeGreaterThan(1);
    // …the caller got each of them with one and the same rewritten SDP, naming rtpengine…
    const got200 = caller.messages
      .split(/-{20,}[^\n]*\n/)
      .filter((e) => /message received/.test(e) && /SIP\/2\.0 200 OK[\s\S]*CSeq: \d+ INVITE/.test(e))
      .map((e) => e.slice(e.search(/\r?\n\r?\nv=0/)).trim());
    expect(got200.length).toBeGreaterThan(1);
    expect(new Set(got200).size).toBe(1);
    for (const p of audioPorts(caller.messages, /^SIP\/2\.0 200 OK[\s\S]*CSeq: \d+ INVITE/)) expect(inRange(p)).toBe(true);
    // …and rtpengine was asked for one answer only.
    expect((await answers()) - before).toBe(1);
  }, 60_000);

  it('rtpengine stopped: plain calls go through unrelayed, a WebSocket callee fails fast with 503; relayed again once it is back', async () => {
    await engine.stop();
    const port = edge.server.ports.udp as number;
    // Two plain RTP legs do not need the relay: the call proceeds with the SDP as sent.
    const { a, b } = await pair();
    const cid = cidStr();
    const callee = sipp({ scenario: 'call-uas-answer.xml', port, transport: 'udp', endpoint: b, cidStr: cid });
    await edge.waitBindings(b, 1);
    const caller = await sipp({ scenario: 'call-uac.xml', port, transport: 'udp', endpoint: a, cidStr: cid, keys: { callee: b.username } });
    const uas = await callee;
    expect(caller.failed, caller.errors).toBe(0);
    for (const p of audioPorts(uas.messages, /^INVITE /)) expect(inRange(p)).toBe(false);

    // A WebSocket callee needs the relay (it speaks ICE + DTLS-SRTP): 503 with a Warning, quickly.
    const { a: c, b: web } = await pair();
    const phone = startPhoneProcess(`ws://127.0.0.1:${edge.server.ports.ws}`, web, { answer: true });
    try {
      await until('the WebSocket callee registered', () => (phone.events.some((e) => e.state === 'Registered') ? true : undefined), 10_000);
      const ua = await TestUa.start(port, c);
      try {
        expect(await ua.register()).toBe(200);
        const t0 = Date.now();
        const r = await ua.call('INVITE', `sip:${web.username}@${account.sipDomain}`);
        const ms = Date.now() - t0;
        expect(r.status).toBe(503);
        expect(r.headers.find((h) => h.name === 'warning')?.value).toMatch(/no media relay available/);
        // The engine was already marked down by the call above: no wait for it here.
        expect(ms).toBeLessThan(2000);
        expect(phone.count('invite')).toBe(0);

        // rtpengine back: after its recheck (5 s) the same call is relayed and answered.
        await engine.start();
        await until(
          'rtpengine back in the edge',
          async () => ((await (await fetch(`${edge.base}/metrics`)).text()).match(/sip_media_engine_up\{engine="[^"]+"\} 1/) ? true : undefined),
          15_000,
        );
        const again = await ua.call('INVITE', `sip:${web.username}@${account.sipDomain}`);
        expect(again.status).toBe(200);
        expect(phone.count('invite')).toBe(1);
      } finally {
        ua.close();
      }
    } finally {
      phone.child.kill('SIGKILL');
    }
  }, 90_000);
});
