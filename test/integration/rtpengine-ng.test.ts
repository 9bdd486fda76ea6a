/**
 * The rtpengine NG client (src/media/rtpengine.ts, docs/media.md) against a real
 * rtpengine (Debian's rtpengine-daemon in userspace mode, test/support/rtpengine.mjs)
 * on free loopback ports: ping; offer → answer → query → delete of a plain call; a
 * WebRTC offer rewritten for a desk phone and the phone's answer rewritten for the
 * browser; a refusal; retransmission with the same cookie; failover from an engine
 * that does not answer, and its return once it does; every engine down.
 */
import { readdirSync, readFileSync } from 'node:fs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  LEG_FLAGS,
  RtpengineClient,
  RtpengineError,
  RtpengineRejectedError,
  RtpengineTimeoutError,
  RtpengineUnavailableError,
  type NgEngineChange,
  type NgRequestEvent,
} from '../../src/media/rtpengine.js';
import { Metrics } from '../../src/metrics.js';
import { freePort } from '../support/ports.mjs';
import { startRtpengine, type RtpengineHandle } from '../support/rtpengine.mjs';

const CRLF = '\r\n';

/** A desk phone's plain offer/answer: RTP/AVP, PCMU, RTCP on the next port. */
function plainSdp(port: number): string {
  return ['v=0', 'o=- 1 1 IN IP4 127.0.0.1', 's=-', 'c=IN IP4 127.0.0.1', 't=0 0', `m=audio ${port} RTP/AVP 0 8`, 'a=rtpmap:0 PCMU/8000', 'a=rtpmap:8 PCMA/8000', 'a=sendrecv', ''].join(CRLF);
}

/** A browser's offer as Chromium writes it: ICE, DTLS-SRTP fingerprint, rtcp-mux, BUNDLE. */
const WEBRTC_OFFER = [
  'v=0',
  'o=- 4611731400430051336 2 IN IP4 127.0.0.1',
  's=-',
  't=0 0',
  'a=group:BUNDLE 0',
  'a=msid-semantic: WMS',
  'm=audio 9 UDP/TLS/RTP/SAVPF 111 0 8',
  'c=IN IP4 0.0.0.0',
  'a=rtcp:9 IN IP4 0.0.0.0',
  'a=candidate:1467250027 1 udp 2122260223 127.0.0.1 46243 typ host generation 0',
  'a=ice-ufrag:Oyef',
  'a=ice-pwd:7Hw3aBn1kG2XNyTL1qRx6Zfo',
  'a=ice-options:trickle',
  'a=fingerprint:sha-256 6A:7F:3E:26:1A:9E:41:3B:6C:0A:1E:9E:96:2A:CA:64:8B:4D:0E:07:6C:C3:17:A5:93:D7:6A:65:3B:3D:E6:CC',
  'a=setup:actpass',
  'a=mid:0',
  'a=sendrecv',
  'a=rtcp-mux',
  'a=rtpmap:111 opus/48000/2',
  'a=rtpmap:0 PCMU/8000',
  'a=rtpmap:8 PCMA/8000',
  '',
].join(CRLF);

/** The port of the first m= line, and its protocol. */
function mline(sdp: string): { port: number; proto: string } {
  const m = /^m=audio (\d+) (\S+) /m.exec(sdp);
  if (!m) throw new Error(`no m=audio line in:\n${sdp}`);
  return { port: Number(m[1]), proto: m[2] as string };
}

/** Requests rtpengine answered from its cookie cache (its log says so), so far. */
function duplicates(e: RtpengineHandle): number {
  return e.log().split('\n').filter((l) => /Detected command from (udp:)?127\.0\.0\.1:\d+ as a duplicate/.test(l)).length;
}

/** Resolves once every thread of the process is stopped (state T in /proc/<pid>/task/<tid>/stat). */
async function untilStopped(pid: number): Promise<void> {
  const deadline = Date.now() + 3_000;
  for (;;) {
    const states = readdirSync(`/proc/${pid}/task`).map((tid) => {
      try {
        return /\) (\S)/.exec(readFileSync(`/proc/${pid}/task/${tid}/stat`, 'utf8'))?.[1];
      } catch {
        return 'T'; // a thread that just ended
      }
    });
    if (states.every((st) => st === 'T' || st === 't')) return;
    if (Date.now() > deadline) throw new Error(`process ${pid} not stopped after SIGSTOP: thread states ${states.join('')}`);
    await new Promise((res) => setTimeout(res, 5));
  }
}

let seq = 0;
const callId = () => `ng-test-${process.pid}-${Date.now()}-${seq++}`;

describe('rtpengine NG client against a real rtpengine', () => {
  let engine: RtpengineHandle;
  let client: RtpengineClient;
  const events: NgRequestEvent[] = [];

  beforeAll(async () => {
    engine = await startRtpengine();
    client = new RtpengineClient({ engines: [{ host: engine.host, port: engine.ngPort }], onRequest: (e) => events.push(e) });
  });

  afterAll(async () => {
    await client?.close();
    await engine?.dispose();
  });

  it('ping: rtpengine answers pong, the request is reported', async () => {
    const r = await client.ping(engine.id);
    expect(r.engine).toBe(engine.id);
    expect(r.reply.result).toBe('pong');
    expect(events.at(-1)).toMatchObject({ engine: engine.id, command: 'ping', outcome: 'ok', attempts: 1 });
  });

  it('offer → answer → query → delete of a plain RTP/AVP call; afterwards the call is unknown', async () => {
    const id = callId();
    const offer = await client.offer({ 'call-id': id, 'from-tag': 'caller', sdp: plainSdp(30_000), flags: ['trust-address'] });
    expect(offer.engine).toBe(engine.id);
    const o = mline(offer.sdp);
    expect(o.proto).toBe('RTP/AVP');
    expect(o.port).toBeGreaterThanOrEqual(engine.portMin);
    expect(o.port).toBeLessThanOrEqual(engine.portMax);
    expect(offer.sdp).toMatch(/^c=IN IP4 127\.0\.0\.1\r$/m);

    const answer = await client.answer({ 'call-id': id, 'from-tag': 'caller', 'to-tag': 'callee', sdp: plainSdp(30_010), flags: ['trust-address'] }, offer.engine);
    const a = mline(answer.sdp);
    expect(a.port).toBeGreaterThanOrEqual(engine.portMin);
    expect(a.port).toBeLessThanOrEqual(engine.portMax);
    expect(a.port).not.toBe(o.port);

    const q = await client.query({ 'call-id': id }, offer.engine);
    expect(Object.keys(q.reply.tags as object).sort()).toEqual(['callee', 'caller']);

    const d = await client.delete({ 'call-id': id, 'from-tag': 'caller' }, offer.engine);
    expect(d.reply.result).toBe('ok');
    const gone = await client.query({ 'call-id': id }, offer.engine).catch((e: unknown) => e);
    expect(gone).toBeInstanceOf(RtpengineRejectedError);
    expect((gone as RtpengineRejectedError).reason).toMatch(/Unknown call-id/i);
    expect((gone as RtpengineRejectedError).engine).toBe(engine.id);
    expect(client.engines()[0]?.up).toBe(true); // a refusal does not take the engine out
  });

  it('a WebRTC offer becomes plain RTP/AVP for the desk phone; its answer becomes ICE + DTLS-SRTP for the browser', async () => {
    const id = callId();
    const offer = await client.offer({ 'call-id': id, 'from-tag': 'browser', sdp: WEBRTC_OFFER, ...LEG_FLAGS.plain });
    // What the desk phone gets: plain RTP from rtpengine's address, no ICE, no DTLS, RTCP on its own port.
    expect(mline(offer.sdp).proto).toBe('RTP/AVP');
    expect(offer.sdp).not.toMatch(/a=ice-ufrag|a=ice-pwd|a=candidate|a=fingerprint|a=setup|a=rtcp-mux/);
    expect(offer.sdp).toMatch(/^c=IN IP4 127\.0\.0\.1\r$/m);
    const port = mline(offer.sdp).port;
    expect(port).toBeGreaterThanOrEqual(engine.portMin);
    expect(offer.sdp).toContain(`a=rtcp:${port + 1}`);
    expect(offer.sdp).toContain('a=rtpmap:0 PCMU/8000');

    const answer = await client.answer({ 'call-id': id, 'from-tag': 'browser', 'to-tag': 'phone', sdp: plainSdp(31_000), ...LEG_FLAGS.webrtc }, offer.engine);
    // What the browser gets: SAVPF with rtpengine's own fingerprint (passive), ICE and its candidate, rtcp-mux.
    const a = mline(answer.sdp);
    expect(a.proto).toBe('UDP/TLS/RTP/SAVPF');
    expect(answer.sdp).toMatch(/^a=ice-ufrag:\S+\r$/m);
    expect(answer.sdp).toMatch(/^a=ice-pwd:\S+\r$/m);
    expect(answer.sdp).toMatch(/^a=fingerprint:sha-256 [0-9A-F:]+\r$/m);
    expect(answer.sdp).not.toContain('6A:7F:3E:26'); // not the browser's own fingerprint
    expect(answer.sdp).toMatch(/^a=setup:passive\r$/m);
    expect(answer.sdp).toMatch(/^a=rtcp-mux\r$/m);
    expect(answer.sdp).toMatch(new RegExp(`^a=candidate:\\S+ 1 UDP \\d+ 127\\.0\\.0\\.1 ${a.port} typ host\\r$`, 'm'));
    expect(answer.sdp).toMatch(/^c=IN IP4 127\.0\.0\.1\r$/m);
    expect(answer.sdp).not.toMatch(/a=crypto:/); // SDES off: keys only over DTLS

    await client.delete({ 'call-id': id, 'from-tag': 'browser' }, offer.engine);
  });

  it('an SDP rtpengine cannot use: a typed refusal carrying its reason', async () => {
    const err = await client.offer({ 'call-id': callId(), 'from-tag': 'x', sdp: 'this is not SDP' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(RtpengineRejectedError);
    expect((err as RtpengineRejectedError).code).toBe('RTPENGINE_REJECTED');
    expect((err as RtpengineRejectedError).reason).toMatch(/SDP/i);
    expect(events.at(-1)).toMatchObject({ command: 'offer', outcome: 'rejected' });
    expect(client.engines()[0]?.up).toBe(true);
  });

  it('retransmits with the same cookie: a paused engine runs the first transmission and answers the others from its cookie cache', async () => {
    const slowEvents: NgRequestEvent[] = [];
    const slow = new RtpengineClient({ engines: [{ host: engine.host, port: engine.ngPort }], timeoutMs: 300, retries: 3, onRequest: (e) => slowEvents.push(e) });
    const id = callId();
    const dupsBefore = duplicates(engine);
    const pid = engine.pid as number;
    process.kill(pid, 'SIGSTOP');
    await untilStopped(pid); // every thread: one still in epoll_wait could take the first datagram
    const pending = slow.offer({ 'call-id': id, 'from-tag': 'caller', sdp: plainSdp(32_000), flags: ['trust-address'] });
    await new Promise((r) => setTimeout(r, 700)); // two more transmissions queue up meanwhile
    process.kill(pid, 'SIGCONT');
    try {
      const r = await pending;
      expect(mline(r.sdp).proto).toBe('RTP/AVP');
      expect(slowEvents[0]).toMatchObject({ command: 'offer', outcome: 'ok' });
      expect(slowEvents[0]?.attempts).toBeGreaterThanOrEqual(2);
      // rtpengine answered the retransmissions from its cookie cache instead of running them again.
      // (logged after the first reply went out: wait for the lines)
      const want = (slowEvents[0]?.attempts ?? 0) - 1;
      const until = Date.now() + 3_000;
      while (duplicates(engine) - dupsBefore < want && Date.now() < until) await new Promise((res) => setTimeout(res, 25));
      expect(duplicates(engine) - dupsBefore).toBe(want);
      const q = await slow.query({ 'call-id': id }, r.engine);
      expect(Object.keys(q.reply.tags as object)).toContain('caller');
      const again = await slow.offer({ 'call-id': id, 'from-tag': 'caller', sdp: plainSdp(32_000), flags: ['trust-address'] }, r.engine);
      expect(mline(again.sdp).port).toBe(mline(r.sdp).port); // a re-offer keeps the ports
      await slow.delete({ 'call-id': id, 'from-tag': 'caller' }, r.engine);
    } finally {
      await slow.close();
    }
  });

  it('two engines, one not answering: a new call fails over, the silent one is taken out and put back once it answers', async () => {
    const deadPort = await freePort();
    const deadId = `127.0.0.1:${deadPort}`;
    const changes: NgEngineChange[] = [];
    const seen: NgRequestEvent[] = [];
    const metrics = new Metrics();
    const c = new RtpengineClient({
      engines: [
        { host: '127.0.0.1', port: deadPort },
        { host: engine.host, port: engine.ngPort },
      ],
      timeoutMs: 200,
      retries: 1,
      recheckIntervalMs: 200,
      onEngineChange: (e) => changes.push(e),
      onRequest: (e) => {
        seen.push(e);
        metrics.mediaRequest(e);
      },
    });
    metrics.attachMediaEngines(() => c.engines());
    let second: RtpengineHandle | null = null;
    const calls: Array<{ id: string; engine: string }> = [];
    try {
      expect(c.choose()).toBe(deadId); // equal weights: the first listed goes first
      const id = callId();
      const r = await c.offer({ 'call-id': id, 'from-tag': 'a', sdp: plainSdp(33_000) });
      calls.push({ id, engine: r.engine });
      expect(r.engine).toBe(engine.id);
      expect(seen.find((e) => e.engine === deadId)).toMatchObject({ command: 'offer', outcome: 'timeout', attempts: 2 });
      expect(changes).toEqual([{ engine: deadId, up: false, reason: 'offer: no answer' }]);
      expect(c.engines().map((e) => [e.id, e.up])).toEqual([
        [deadId, false],
        [engine.id, true],
      ]);
      // Taken out: the next new calls go straight to the live engine. A command pinned to the
      // taken-out engine (a call it holds) is still sent, once: here nobody answers, one timeout.
      expect(c.choose()).toBe(engine.id);
      const t0 = performance.now();
      const pinned = await c.query({ 'call-id': id }, deadId).catch((e: unknown) => e);
      expect(pinned).toBeInstanceOf(RtpengineTimeoutError);
      expect((pinned as RtpengineTimeoutError).attempts).toBe(1);
      expect(performance.now() - t0).toBeLessThan(1500);
      expect(c.engines().find((e) => e.id === deadId)?.up).toBe(false);
      const text = await metrics.registry.metrics();
      expect(text).toContain(`sip_media_engine_requests_total{engine="${deadId}",command="offer",outcome="timeout"} 1`);
      expect(text).toContain(`sip_media_engine_requests_total{engine="${engine.id}",command="offer",outcome="ok"} 1`);
      expect(text).toContain(`sip_media_engine_up{engine="${deadId}"} 0`);
      expect(text).toMatch(new RegExp(`sip_media_engine_request_duration_seconds_count\\{engine="${engine.id.replace(/\./g, '\\.')}",command="offer"\\} 1`));

      // The silent port starts answering: a periodic ping puts it back.
      second = await startRtpengine({ ngPort: deadPort });
      const deadline = Date.now() + 5_000;
      while (!changes.some((e) => e.engine === deadId && e.up) && Date.now() < deadline) await new Promise((res) => setTimeout(res, 50));
      expect(changes.at(-1)).toEqual({ engine: deadId, up: true, reason: 'ping answered' });
      expect(c.engines().every((e) => e.up)).toBe(true);
      expect(await metrics.registry.metrics()).toContain(`sip_media_engine_up{engine="${deadId}"} 1`);
      // Back in the rotation: new calls spread over both again.
      for (let i = 0; i < 2; i++) {
        const cid = callId();
        const rr = await c.offer({ 'call-id': cid, 'from-tag': 'a', sdp: plainSdp(33_100 + 10 * i) });
        calls.push({ id: cid, engine: rr.engine });
      }
      expect(new Set(calls.slice(1).map((x) => x.engine))).toEqual(new Set([deadId, engine.id]));
      // Each call's later commands reach the engine that holds it.
      for (const call of calls) expect((await c.query({ 'call-id': call.id }, call.engine)).reply.result).toBe('ok');
    } finally {
      for (const call of calls) await c.delete({ 'call-id': call.id, 'from-tag': 'a' }, call.engine).catch(() => {});
      await c.close();
      await second?.dispose();
    }
  });

  it('weights: new calls split 3:1 between two engines, a weight-0 (draining) engine gets none', async () => {
    const other = await startRtpengine();
    const drainPort = await freePort();
    const c = new RtpengineClient({
      engines: [
        { host: engine.host, port: engine.ngPort, weight: 3 },
        { host: other.host, port: other.ngPort, weight: 1 },
        { host: '127.0.0.1', port: drainPort, weight: 0 },
      ],
      timeoutMs: 250,
      retries: 1,
    });
    const calls: Array<{ id: string; engine: string }> = [];
    try {
      for (let i = 0; i < 8; i++) {
        const id = callId();
        calls.push({ id, engine: (await c.offer({ 'call-id': id, 'from-tag': 'a', sdp: plainSdp(35_000 + 10 * i) })).engine });
      }
      const count = (id: string) => calls.filter((x) => x.engine === id).length;
      expect([count(engine.id), count(other.id), count(`127.0.0.1:${drainPort}`)]).toEqual([6, 2, 0]);
      // Smooth: the light engine's calls are spread out, not bunched at the end.
      expect(calls.slice(0, 4).filter((x) => x.engine === other.id)).toHaveLength(1);
      expect(c.engines().every((e) => e.up)).toBe(true); // the draining engine was never asked
      // Its own calls would still reach it: a pinned command is sent (and here times out).
      const pinned = await c.command('ping', {}, `127.0.0.1:${drainPort}`).catch((e: unknown) => e);
      expect(pinned).toBeInstanceOf(RtpengineTimeoutError);
    } finally {
      for (const call of calls) await c.delete({ 'call-id': call.id, 'from-tag': 'a' }, call.engine).catch(() => {});
      await c.close();
      await other.dispose();
    }
  });

  it('close() ends what is pending with a typed error; an engine id that is not configured is refused at once', async () => {
    const c = new RtpengineClient({ engines: [{ host: '127.0.0.1', port: await freePort() }] });
    const pending = c.offer({ 'call-id': callId(), 'from-tag': 'a', sdp: plainSdp(36_000) }).catch((e: unknown) => e);
    const unknown = await c.query({ 'call-id': 'x' }, '192.0.2.1:2223').catch((e: unknown) => e);
    expect(unknown).toBeInstanceOf(RtpengineUnavailableError);
    expect((unknown as Error).message).toBe('rtpengine 192.0.2.1:2223 is not configured');
    await c.close();
    const err = await pending;
    expect(err).toBeInstanceOf(RtpengineError);
    expect((err as RtpengineError).code).toBe('RTPENGINE_CLOSED');
    expect(await c.ping(c.engines()[0]?.id as string).catch((e: unknown) => (e as RtpengineError).code)).toBe('RTPENGINE_CLOSED');
  });

  it('an IPv6 engine: the reply from ::1 is matched to a request sent to a non-canonical literal', async () => {
    const v6 = await startRtpengine({ ngHost: '::1' });
    const c = new RtpengineClient({ engines: [{ host: '0:0::1', port: v6.ngPort }] });
    try {
      expect(c.engines()[0]?.id).toBe(`[0:0::1]:${v6.ngPort}`);
      expect((await c.ping(`[0:0::1]:${v6.ngPort}`)).reply.result).toBe('pong');
    } finally {
      await c.close();
      await v6.dispose();
    }
  });

  it('every engine down: the first new call fails within timeout × transmissions × engines, the next at once, typed', async () => {
    const ports = [await freePort(), await freePort()];
    const c = new RtpengineClient({ engines: ports.map((port) => ({ host: '127.0.0.1', port })), timeoutMs: 150, retries: 2, recheckIntervalMs: 60_000 });
    try {
      const t0 = performance.now();
      const first = await c.offer({ 'call-id': callId(), 'from-tag': 'a', sdp: plainSdp(34_000) }).catch((e: unknown) => e);
      const took = performance.now() - t0;
      expect(first).toBeInstanceOf(RtpengineUnavailableError);
      expect((first as RtpengineUnavailableError).code).toBe('RTPENGINE_UNAVAILABLE');
      expect((first as Error).message).toMatch(/no rtpengine answered/);
      expect((first as Error).cause).toBeInstanceOf(RtpengineTimeoutError);
      // 2 engines × 3 transmissions × 150 ms = 900 ms; loosely bounded on a shared machine.
      expect(took).toBeGreaterThanOrEqual(850);
      expect(took).toBeLessThan(2_500);
      expect(c.engines().every((e) => !e.up)).toBe(true);

      const t1 = performance.now();
      const next = await c.offer({ 'call-id': callId(), 'from-tag': 'a', sdp: plainSdp(34_000) }).catch((e: unknown) => e);
      expect(next).toBeInstanceOf(RtpengineUnavailableError);
      expect((next as Error).message).toBe('no rtpengine is up');
      expect(performance.now() - t1).toBeLessThan(100);
      expect(c.choose()).toBeNull();
    } finally {
      await c.close();
    }
  });
});
