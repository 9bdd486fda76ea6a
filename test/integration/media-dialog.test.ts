/**
 * Media changes inside a relayed dialog, across a two-node fleet sharing one Redis
 * (docs/media.md "Calls"), with SIPp on both sides and a real rtpengine:
 *
 * - a late offer: the INVITE has no SDP, the callee's 200 offers, the caller's ACK
 *   answers — both rewritten by rtpengine;
 * - a re-INVITE with SDP (a=sendonly) from the caller and an UPDATE with SDP from the
 *   callee, each offer and answer rewritten;
 * - the caller talks to node B, the callee to node A: the callee's UPDATE and BYE reach
 *   node A, which never saw the INVITE; it finds the call's engine in the store
 *   (`sipedge:media:<Call-ID>`, present during the call), and its BYE takes that key and
 *   ends the session on rtpengine.
 *
 * Plus the failure rule for an SDP the engine refuses: 488 with a Warning.
 */
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RtpengineClient } from '../../src/media/rtpengine.js';
import { sessionGone } from '../support/media.js';
import { startEdge, type Account, type Edge } from '../support/edge.js';
import { cidStr, sipp, TestUa } from '../support/proxy-harness.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { startRtpengine, type RtpengineHandle } from '../support/rtpengine.mjs';
import { until } from '../support/wait.js';

/** SIPp's -trace_msg split into messages (sent and received). */
function traced(messages: string): Array<{ sent: boolean; text: string }> {
  const out: Array<{ sent: boolean; text: string }> = [];
  for (const entry of messages.split(/-{20,}[^\n]*\n/)) {
    const head = /^[^\n]*message (sent|received)[^\n]*\n\s*/.exec(entry);
    if (!head) continue;
    out.push({ sent: head[1] === 'sent', text: entry.slice(head[0].length) });
  }
  return out;
}

/** The audio ports of the SDP of each received message whose start line matches `start` (and CSeq method `cseq`). */
function receivedSdp(messages: string, start: RegExp, cseq: string): Array<{ ports: number[]; text: string }> {
  return traced(messages)
    .filter((m) => !m.sent && start.test(m.text) && new RegExp(`^CSeq:\\s*\\d+ ${cseq}\\s*$`, 'mi').test(m.text))
    .map((m) => ({ ports: [...m.text.matchAll(/^m=audio (\d+) /gm)].map((x) => Number(x[1])), text: m.text }));
}

describe('media inside a relayed dialog, two nodes (MEDIA_RELAY=always)', () => {
  let redis: RedisServerHandle;
  let admin: Redis;
  let engine: RtpengineHandle;
  let nodeA: Edge;
  let nodeB: Edge;
  let account: Account;
  let probe: RtpengineClient;

  beforeAll(async () => {
    [redis, engine] = await Promise.all([startRedis(), startRtpengine({ rtpPorts: 60 })]);
    admin = new Redis(redis.url);
    const env = { REDIS_URL: redis.url, NONCE_SECRET: 'media-dialog-nonce-secret-0123456789', RTPENGINE_NG: engine.id, MEDIA_RELAY: 'always' };
    [nodeA, nodeB] = await Promise.all([startEdge({ ...env, NODE_ID: 'media-a' }), startEdge({ ...env, NODE_ID: 'media-b' })]);
    account = await nodeA.newAccount();
    probe = new RtpengineClient({ engines: [{ host: engine.host, port: engine.ngPort }], timeoutMs: 300, retries: 1 });
  }, 60_000);
  afterAll(async () => {
    await probe?.close();
    await Promise.all([nodeA?.stop(), nodeB?.stop()]);
    admin?.disconnect();
    await Promise.all([engine?.dispose(), redis?.stop()]);
  });

  const inRange = (p: number): boolean => p >= engine.portMin && p <= engine.portMax;

  it('late offer, re-INVITE and UPDATE are rewritten both ways; the node that never saw the INVITE finds the engine in the store and its BYE ends the session', async () => {
    const caller = await nodeA.newEndpoint(account, 'dlgcaller');
    const callee = await nodeA.newEndpoint(account, 'dlgcallee');
    const cid = cidStr();
    const callId = cid.replace('%u', '1');
    const portA = nodeA.server.ports.udp as number;
    const portB = nodeB.server.ports.udp as number;
    // The callee registers with node A and sends its own requests there; the caller talks to node B.
    const uasRun = sipp({ scenario: 'call-uas-media-dialog.xml', port: portA, transport: 'udp', endpoint: callee, cidStr: cid, pauseMs: 1500 });
    await nodeA.waitBindings(callee, 1);
    const uacRun = sipp({ scenario: 'call-uac-media-dialog.xml', port: portB, transport: 'udp', endpoint: caller, cidStr: cid, keys: { callee: callee.username }, pauseMs: 500 });

    // While the call is up the mapping is in Redis, naming the engine and the caller's tag.
    const stored = await until(
      'the call → engine mapping in Redis',
      async () => {
        const v = await admin.get(`sipedge:media:${callId}`);
        return v ? (JSON.parse(v) as Record<string, unknown>) : undefined;
      },
      10_000,
    );
    expect(stored).toMatchObject({ engine: engine.id, callerWebrtc: false, calleeWebrtc: false });
    expect(String(stored.fromTag)).toMatch(/SIPpTag01/);

    const [uac, uas] = await Promise.all([uacRun, uasRun]);
    expect(uac.failed, uac.errors).toBe(0);
    expect(uas.failed, uas.errors).toBe(0);

    // Late offer: the caller got the callee's offer (200) through rtpengine, the callee the caller's answer (ACK).
    const offer200 = receivedSdp(uac.messages, /^SIP\/2\.0 200 /, 'INVITE');
    expect(offer200.length).toBeGreaterThanOrEqual(2); // the late-offer 200 and the re-INVITE's 200
    const ackAnswer = receivedSdp(uas.messages, /^ACK /, 'ACK').filter((m) => m.ports.length > 0);
    expect(ackAnswer).toHaveLength(1);
    // The re-INVITE (a=sendonly) and its answer (a=recvonly), the UPDATE and its answer.
    const reinvite = receivedSdp(uas.messages, /^INVITE /, 'INVITE');
    expect(reinvite).toHaveLength(2);
    expect(reinvite[0]?.ports).toEqual([]); // the late-offer INVITE: no SDP
    expect(reinvite[1]?.text).toMatch(/^a=sendonly\r?$/m);
    expect(offer200[offer200.length - 1]?.text).toMatch(/^a=recvonly\r?$/m);
    const update = receivedSdp(uac.messages, /^UPDATE /, 'UPDATE');
    const update200 = receivedSdp(uas.messages, /^SIP\/2\.0 200 /, 'UPDATE');
    expect(update).toHaveLength(1);
    expect(update200).toHaveLength(1);
    const rewritten = [...offer200, ...ackAnswer, reinvite[1]!, update[0]!, update200[0]!];
    for (const m of rewritten) {
      expect(m.ports.length, m.text).toBeGreaterThan(0);
      for (const p of m.ports) expect(inRange(p), `port ${p} in ${engine.portMin}-${engine.portMax}:\n${m.text}`).toBe(true);
    }

    // The callee's BYE went to node A: it took the mapping and deleted the session.
    expect(await admin.exists(`sipedge:media:${callId}`)).toBe(0);
    await sessionGone(probe, engine.id, callId);
    const metricsA = await (await fetch(`${nodeA.base}/metrics`)).text();
    expect(metricsA).toMatch(/sip_media_engine_requests_total\{engine="[^"]+",command="offer",outcome="ok"\} [1-9]/); // the UPDATE
    expect(metricsA).toMatch(/sip_media_engine_requests_total\{engine="[^"]+",command="delete",outcome="ok"\} [1-9]/);
    const metricsB = await (await fetch(`${nodeB.base}/metrics`)).text();
    expect(metricsB).toMatch(/sip_media_calls_total\{outcome="relayed"\} 1/);
  }, 60_000);

  it('an SDP the engine refuses: 488 with a Warning, the call is not placed', async () => {
    const a = await nodeB.newEndpoint(account, 'badsdp');
    const b = await nodeB.newEndpoint(account, 'badsdpcallee');
    const port = nodeB.server.ports.udp as number;
    const callee = await TestUa.start(port, b);
    const ua = await TestUa.start(port, a);
    try {
      expect(await callee.register()).toBe(200);
      expect(await ua.register()).toBe(200);
      const r = await ua.call('INVITE', `sip:${b.username}@${account.sipDomain}`, { sdp: 'v=0\r\nthis is not SDP\r\n' });
      expect(r.status).toBe(488);
      expect(r.headers.find((h) => h.name === 'warning')?.value).toMatch(/media relay refused the SDP/);
      expect(callee.requests.filter((q) => q.method === 'INVITE')).toHaveLength(0);
      const metrics = await (await fetch(`${nodeB.base}/metrics`)).text();
      expect(metrics).toMatch(/sip_media_calls_total\{outcome="refused"\} 1/);
    } finally {
      await Promise.all([ua.close(), callee.close()]);
    }
  }, 30_000);
});
