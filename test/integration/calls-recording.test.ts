/**
 * Call recording (issue 24; docs/calls.md "Recording") on the wire: a real server, a real
 * rtpengine writing pcap recordings (`--recording-method=pcap --recording-format=raw`) into
 * the directory the edge reads (CALLS_RECORDING_DIR), SIPp phones sending SIPp's 7 s of
 * PCMA speech (g711a.pcap), and an HTTPS application server answering answer_url and
 * action requests with XML.
 *
 * - `<Record maxLength="3" action=…/>`: the action gets RecordUrl, RecordingDuration and
 *   RecordingID; RecordUrl (with the account's credentials) is a WAV of 3 s ± 20 % that is
 *   not silence; `GET …/Recording/` lists it (and by call_uuid); DELETE removes it → 404;
 *   rtpengine's files are gone from the directory;
 * - `<Record finishOnKey="#" maxLength="20">`: the phone's RFC 4733 # (2 s in) ends it early,
 *   Digits=#;
 * - the call ends (API DELETE) 1.5 s into a `<Record maxLength="20">`: the 1.5 s recorded
 *   are stored and the action still gets RecordUrl;
 * - the Record API: `POST …/Call/{uuid}/Record/` with time_limit=2 on a call that Waits →
 *   recording_id and url at once; the callback_url gets the same RecordUrl once it is stored;
 * - two nodes on one Redis: the Record API on node A for a call node B runs (a fleet
 *   notice), the recording stored in Redis by B, served by A.
 */
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { startRtpengine, type RtpengineHandle } from '../support/rtpengine.mjs';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { freePort } from '../support/ports.mjs';
import type { SippRun } from '../support/sipp.js';
import { registeredPhone, rtpSink } from '../support/calls-harness.js';
import { until } from '../support/wait.js';

/**
 * A 16-bit mono PCM WAV's figures: rate, channels, samples, RMS level, and `heard`: the
 * share of samples that came from packets (A-law has no code for 0, so a 0 sample is the
 * silence the edge put where no packet was).
 */
function wavFigures(b: Buffer): { rate: number; channels: number; bits: number; samples: number; rms: number; peak: number; heard: number } {
  expect(b.toString('ascii', 0, 4)).toBe('RIFF');
  expect(b.toString('ascii', 8, 12)).toBe('WAVE');
  const rate = b.readUInt32LE(24);
  const channels = b.readUInt16LE(22);
  const bits = b.readUInt16LE(34);
  expect(b.toString('ascii', 36, 40)).toBe('data');
  const n = b.readUInt32LE(40) / 2;
  let sum = 0;
  let peak = 0;
  let nonZero = 0;
  for (let i = 0; i < n; i++) {
    const s = b.readInt16LE(44 + 2 * i);
    sum += s * s;
    peak = Math.max(peak, Math.abs(s));
    if (s !== 0) nonZero++;
  }
  return { rate, channels, bits, samples: n, rms: Math.sqrt(sum / Math.max(n, 1)), peak, heard: nonZero / Math.max(n, 1) };
}

describe('calls placed by the API are recorded (rtpengine pcap → WAV, served by the API)', () => {
  let ca: TestCa;
  let engine: RtpengineHandle;
  let edge: Edge;
  let app: HttpsReceiver;
  let account: Account;
  let dir: string;
  let recDir: string;
  const docs = new Map<string, string>();

  beforeAll(async () => {
    ca = makeTestCa();
    dir = mkdtempSync(join(tmpdir(), 'sip-edge-rec-'));
    recDir = join(dir, 'recordings');
    const dtmfPort = await freePort();
    engine = await startRtpengine({ extraArgs: [`--dtmf-log-dest=127.0.0.1:${dtmfPort}`, '--recording-method=pcap', `--recording-dir=${recDir}`, '--recording-format=raw'] });
    app = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (req, res: ServerResponse) => {
      const doc = docs.get(req.url.split('?')[0] as string);
      if (doc) res.writeHead(200, { 'content-type': 'application/xml' }).end(doc);
      else res.writeHead(200).end('ok');
    });
    edge = await startEdge({
      RTPENGINE_NG: engine.id,
      CALLS_DTMF_LISTEN: `127.0.0.1:${dtmfPort}`,
      CALLS_MEDIA_DIR: join(dir, 'media'),
      CALLS_RECORDING_DIR: recDir,
      NODE_EXTRA_CA_CERTS: ca.caCertFile,
      CALLBACK_ALLOWED_NETWORKS: '127.0.0.0/8',
      LOG_LEVEL: process.env.CALLS_TEST_LOG ?? 'info',
      SIP_TLS_PORT: 'off',
      SIP_WSS_PORT: 'off',
    });
    account = await edge.newAccount({ cps_limit: 20, concurrent_calls_limit: 20 });
  }, 60_000);
  afterAll(async () => {
    await edge?.stop();
    await app?.close();
    await engine?.dispose();
    ca?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  const url = (path: string): string => `https://127.0.0.1:${app.port}${path}`;
  const base = (): string => `/api/v1/Account/${account.authId}`;
  const get = (path: string, auth: Account | null = account): Promise<Response> =>
    fetch(edge.base + path, { headers: auth ? { 'x-auth-id': auth.authId, 'x-auth-token': auth.authToken } : {} });

  /** A SIPp phone registered as `e`, answering one call with `scenario`; rtpengine's media to it goes to `sinkPort`. */
  const phone = (e: Endpoint, scenario: string, sinkPort: number): Promise<{ run: Promise<SippRun> }> => registeredPhone(edge, account, e, scenario, { sinkPort });

  const place = async (callee: Endpoint, caller: Endpoint, answer: string): Promise<void> => {
    const r = await edge.api(account, 'POST', `${base()}/Call/`, { from: `sip:${caller.username}@${account.sipDomain}`, to: `sip:${callee.username}@${account.sipDomain}`, answer_url: url(answer) });
    expect(r.status, JSON.stringify(r.json)).toBe(201);
  };

  /** The NG commands rtpengine got for a placed call after its offer/answer, in order. */
  const commandsOf = (callUuid: string): string[] =>
    engine
      .log()
      .split('\n')
      .filter((l) => l.includes(`[b2b-${callUuid}]`))
      .map((l) => /Received command '([^']+)'/.exec(l)?.[1])
      .filter((c): c is string => c !== undefined && c !== 'offer' && c !== 'answer');

  const dump = (run: SippRun): void => {
    if (run.code !== 0) console.log(edge.server.output().split('\n').filter((l) => !/registrar|REGISTER/.test(l)).slice(-60).join('\n'));
  };

  it('<Record maxLength="3">: the action gets RecordUrl; its WAV is 3 s of speech; listed, then deleted', async () => {
    const callee = await edge.newEndpoint(account, 'reccallee1');
    const caller = await edge.newEndpoint(account, 'reccaller1');
    const sink = await rtpSink();
    docs.set('/answer1', `<Response><Record maxLength="3" action="${url('/rec1')}" method="POST"/></Response>`);
    docs.set('/rec1', '<Response><Hangup/></Response>');
    const ring = await phone(callee, 'api-call-uas-record.xml', sink.port);
    await place(callee, caller, '/answer1');
    const run = await ring.run;
    sink.socket.close();
    dump(run);
    expect(run.code, run.errors).toBe(0);

    const action = await until('the Record action', async () => app.requests.find((q) => q.url.startsWith('/rec1')), 10_000);
    const p = new URLSearchParams(action.body);
    const recordingId = p.get('RecordingID') as string;
    const recordUrl = p.get('RecordUrl') as string;
    const callUuid = p.get('CallUUID') as string;
    expect(recordingId).toMatch(/^[0-9a-f-]{36}$/);
    expect(recordUrl).toBe(`${base()}/Recording/${recordingId}.wav`);
    expect(p.get('RecordingDuration')).toBe('3');
    const reportedMs = Number(p.get('RecordingDurationMs'));

    // The audio, with the account's credentials (and not without).
    expect((await get(recordUrl, null)).status).toBe(401);
    const res = await get(recordUrl);
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/audio\/wav/);
    const wav = Buffer.from(await res.arrayBuffer());
    const f = wavFigures(wav);
    const ms = (f.samples * 1000) / f.rate;
    console.info(`Record maxLength=3: WAV ${ms} ms (action said ${reportedMs} ms), ${f.samples} samples, ${(f.heard * 100).toFixed(1)} % from packets, RMS ${f.rms.toFixed(0)}, peak ${f.peak}`);
    expect([f.rate, f.channels, f.bits]).toEqual([8000, 1, 16]);
    expect(ms).toBeGreaterThan(3000 * 0.8);
    expect(ms).toBeLessThan(3000 * 1.2);
    expect(Math.round(ms)).toBe(reportedMs);
    // Speech, not silence: SIPp's g711a.pcap is a spoken sentence.
    expect(f.rms).toBeGreaterThan(300);
    expect(f.peak).toBeGreaterThan(3000);
    // The phone spoke the whole time: at least 80 % of the WAV is its packets (the rest: before its first one arrived).
    expect(f.heard).toBeGreaterThan(0.8);

    // Listed (all, and by call_uuid), and described.
    const list = await edge.api(account, 'GET', `${base()}/Recording/`);
    expect(list.status).toBe(200);
    const objects = list.json.objects as Array<Record<string, unknown>>;
    const item = objects.find((o) => o.recording_id === recordingId);
    expect(item).toMatchObject({ call_uuid: callUuid, recording_format: 'wav', recording_type: 'xml', recording_url: recordUrl, recording_duration_ms: String(reportedMs) });
    const byCall = await edge.api(account, 'GET', `${base()}/Recording/?call_uuid=${callUuid}`);
    expect((byCall.json.objects as unknown[]).length).toBe(1);
    expect((await edge.api(account, 'GET', `${base()}/Recording/${recordingId}/`)).json.recording_id).toBe(recordingId);
    // Another account does not see it.
    const other = await edge.newAccount();
    expect((await get(`/api/v1/Account/${other.authId}/Recording/${recordingId}.wav`, other)).status).toBe(404);

    // The beep (playBeep defaults to true) was played to the phone, then the recording started.
    // (Its RTP goes to where the phone sends from — rtpengine learns that — not to the SDP's sink.)
    expect(commandsOf(callUuid)).toEqual(['play media', 'start recording', 'stop recording', 'delete']);
    expect(readdirSync(join(dir, 'media', 'tones'))).toEqual(['beep-1000hz-300ms.wav']);
    expect(edge.server.output()).not.toMatch(/recording failed|recording not stored|wrote no pcap/);
    // rtpengine's pcap and metadata files were read and removed.
    expect(readdirSync(join(recDir, 'pcaps')).filter((n) => n.includes(callUuid))).toEqual([]);
    expect(readdirSync(join(recDir, 'metadata')).filter((n) => n.includes(callUuid))).toEqual([]);

    // DELETE: gone (the audio too).
    expect((await edge.api(account, 'DELETE', `${base()}/Recording/${recordingId}/`)).status).toBe(204);
    expect((await edge.api(account, 'GET', `${base()}/Recording/${recordingId}/`)).status).toBe(404);
    expect((await get(recordUrl)).status).toBe(404);
    expect((await edge.api(account, 'DELETE', `${base()}/Recording/${recordingId}/`)).status).toBe(404);
  }, 60_000);

  it('<Record finishOnKey="#">: the phone\'s # ends the recording early; Digits=#', async () => {
    const callee = await edge.newEndpoint(account, 'reccallee2');
    const caller = await edge.newEndpoint(account, 'reccaller2');
    const sink = await rtpSink();
    docs.set('/answer2', `<Response><Record maxLength="20" finishOnKey="#" action="${url('/rec2')}"/></Response>`);
    docs.set('/rec2', '<Response><Hangup/></Response>');
    const ring = await phone(callee, 'api-call-uas-record-key.xml', sink.port);
    await place(callee, caller, '/answer2');
    const run = await ring.run;
    sink.socket.close();
    dump(run);
    expect(run.code, run.errors).toBe(0);
    const action = await until('the Record action', async () => app.requests.find((q) => q.url.startsWith('/rec2')), 10_000);
    const p = new URLSearchParams(action.body);
    expect(p.get('Digits')).toBe('#');
    const ms = Number(p.get('RecordingDurationMs'));
    console.info(`Record finishOnKey=#: ${ms} ms (the # was sent 2 s after the answer; speech until then)`);
    expect(ms).toBeGreaterThan(1000);
    expect(ms).toBeLessThan(3500);
    const f = wavFigures(Buffer.from(await (await get(p.get('RecordUrl') as string)).arrayBuffer()));
    expect(Math.round((f.samples * 1000) / f.rate)).toBe(ms);
    expect(f.rms).toBeGreaterThan(300);
  }, 60_000);

  it('the call ends during <Record>: what was recorded is stored and still goes to the action', async () => {
    const callee = await edge.newEndpoint(account, 'reccallee4');
    const caller = await edge.newEndpoint(account, 'reccaller4');
    const sink = await rtpSink();
    docs.set('/answer4', `<Response><Record maxLength="20" finishOnKey="none" playBeep="false" action="${url('/rec4')}"/></Response>`);
    const ring = await phone(callee, 'api-call-uas-record.xml', sink.port);
    await place(callee, caller, '/answer4');
    const answer = await until('the answer_url request', async () => app.requests.find((q) => q.url.startsWith('/answer4')), 15_000);
    const callUuid = new URLSearchParams(answer.body).get('CallUUID') as string;
    await new Promise((r) => setTimeout(r, 1500));
    expect((await edge.api(account, 'DELETE', `${base()}/Call/${callUuid}/`)).status).toBe(204);
    const action = await until('the Record action', async () => app.requests.find((q) => q.url.startsWith('/rec4')), 10_000);
    const p = new URLSearchParams(action.body);
    const ms = Number(p.get('RecordingDurationMs'));
    console.info(`Record ended by the call's end 1.5 s after answer_url: ${ms} ms`);
    expect(ms).toBeGreaterThan(1000);
    expect(ms).toBeLessThan(2500);
    const f = wavFigures(Buffer.from(await (await get(p.get('RecordUrl') as string)).arrayBuffer()));
    expect(Math.round((f.samples * 1000) / f.rate)).toBe(ms);
    expect(f.heard).toBeGreaterThan(0.8);
    // playBeep="false": nothing played; the call's end (its rtpengine delete) closed the recording.
    expect(commandsOf(callUuid)[0]).toBe('start recording');
    expect(commandsOf(callUuid)).not.toContain('play media');
    const run = await ring.run;
    sink.socket.close();
    dump(run);
    expect(run.code, run.errors).toBe(0);
  }, 60_000);

  it('the Record API: time_limit=2 on a waiting call; recording_id and url at once, the callback once stored', async () => {
    const callee = await edge.newEndpoint(account, 'reccallee3');
    const caller = await edge.newEndpoint(account, 'reccaller3');
    const sink = await rtpSink();
    docs.set('/answer3', '<Response><Wait length="15"/></Response>');
    const ring = await phone(callee, 'api-call-uas-record.xml', sink.port);
    await place(callee, caller, '/answer3');
    const answer = await until('the answer_url request', async () => app.requests.find((q) => q.url.startsWith('/answer3')), 15_000);
    const callUuid = new URLSearchParams(answer.body).get('CallUUID') as string;
    const r = await edge.api(account, 'POST', `${base()}/Call/${callUuid}/Record/`, { time_limit: 2, file_format: 'wav', callback_url: url('/reccb3'), callback_method: 'POST' });
    expect(r.status, JSON.stringify(r.json)).toBe(202);
    const recordingId = String(r.json.recording_id);
    expect(r.json.url).toBe(`${base()}/Recording/${recordingId}.wav`);
    // A second start while it runs is refused.
    const again = await edge.api(account, 'POST', `${base()}/Call/${callUuid}/Record/`, { time_limit: 2 });
    expect(again.status).toBe(400);
    const cb = await until('the recording callback', async () => app.requests.find((q) => q.url.startsWith('/reccb3')), 15_000);
    const c = new URLSearchParams(cb.body);
    expect(c.get('RecordingID')).toBe(recordingId);
    expect(c.get('RecordUrl')).toBe(r.json.url);
    expect(c.get('CallUUID')).toBe(callUuid);
    const ms = Number(c.get('RecordingDurationMs'));
    console.info(`Record API time_limit=2: ${ms} ms`);
    expect(ms).toBeGreaterThan(2000 * 0.8);
    expect(ms).toBeLessThan(2000 * 1.2);
    const rec = await edge.api(account, 'GET', `${base()}/Recording/${recordingId}/`);
    expect(rec.json).toMatchObject({ recording_type: 'call', call_uuid: callUuid });
    expect((await edge.api(account, 'DELETE', `${base()}/Call/${callUuid}/`)).status).toBe(204);
    const run = await ring.run;
    sink.socket.close();
    dump(run);
    expect(run.code, run.errors).toBe(0);
  }, 60_000);
});

describe('recording across two nodes (one Redis, one rtpengine and recording directory)', () => {
  let ca: TestCa;
  let redis: RedisServerHandle;
  let engine: RtpengineHandle;
  let app: HttpsReceiver;
  let a: Edge;
  let b: Edge;
  let account: Account;
  let dir: string;

  beforeAll(async () => {
    ca = makeTestCa();
    dir = mkdtempSync(join(tmpdir(), 'sip-edge-rec-fleet-'));
    const recDir = join(dir, 'recordings');
    redis = await startRedis();
    engine = await startRtpengine({ extraArgs: ['--recording-method=pcap', `--recording-dir=${recDir}`, '--recording-format=raw'] });
    app = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (req, res: ServerResponse) => {
      if (req.url.startsWith('/answer')) res.writeHead(200, { 'content-type': 'application/xml' }).end('<Response><Wait length="30"/></Response>');
      else res.writeHead(200).end('ok');
    });
    const env = {
      REDIS_URL: redis.url,
      NONCE_SECRET: 'calls-recording-fleet-nonce-0123456789',
      RTPENGINE_NG: engine.id,
      CALLS_MEDIA_DIR: join(dir, 'media'),
      CALLS_RECORDING_DIR: recDir,
      NODE_EXTRA_CA_CERTS: ca.caCertFile,
      CALLBACK_ALLOWED_NETWORKS: '127.0.0.0/8',
      SIP_TLS_PORT: 'off',
      SIP_WSS_PORT: 'off',
    };
    [a, b] = await Promise.all([startEdge({ ...env, NODE_ID: 'node-a' }), startEdge({ ...env, NODE_ID: 'node-b' })]);
    account = await a.newAccount({ cps_limit: 20, concurrent_calls_limit: 20 });
  }, 60_000);
  afterAll(async () => {
    await a?.stop();
    await b?.stop();
    await app?.close();
    await engine?.dispose();
    await redis?.stop();
    ca?.remove();
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('the Record API on node A records a call node B runs; node A serves the recording', async () => {
    const base = `/api/v1/Account/${account.authId}`;
    const callee = await a.newEndpoint(account, 'fleetreccallee');
    const caller = await a.newEndpoint(account, 'fleetreccaller');
    const sink = await rtpSink();
    const { run } = await registeredPhone(b, account, callee, 'api-call-uas-record.xml', { sinkPort: sink.port });
    const placed = await b.api(account, 'POST', `${base}/Call/`, { from: `sip:${caller.username}@${account.sipDomain}`, to: `sip:${callee.username}@${account.sipDomain}`, answer_url: `https://127.0.0.1:${app.port}/answer` });
    expect(placed.status, JSON.stringify(placed.json)).toBe(201);
    const answer = await until('the answer_url request', async () => app.requests.find((q) => q.url.startsWith('/answer')), 15_000);
    const callUuid = new URLSearchParams(answer.body).get('CallUUID') as string;
    const r = await a.api(account, 'POST', `${base}/Call/${callUuid}/Record/`, { time_limit: 2, callback_url: `https://127.0.0.1:${app.port}/cb` });
    expect(r.status, JSON.stringify(r.json)).toBe(202);
    const cb = await until('the recording callback', async () => app.requests.find((q) => q.url.startsWith('/cb')), 15_000);
    const p = new URLSearchParams(cb.body);
    expect(p.get('RecordingID')).toBe(r.json.recording_id);
    const ms = Number(p.get('RecordingDurationMs'));
    console.info(`two nodes, Record API time_limit=2 via node A on node B's call: ${ms} ms`);
    expect(ms).toBeGreaterThan(1600);
    expect(ms).toBeLessThan(2400);
    for (const node of [a, b]) {
      const res = await fetch(node.base + String(r.json.url), { headers: { 'x-auth-id': account.authId, 'x-auth-token': account.authToken } });
      expect(res.status).toBe(200);
      const f = wavFigures(Buffer.from(await res.arrayBuffer()));
      expect(Math.round((f.samples * 1000) / f.rate)).toBe(ms);
      expect(f.heard).toBeGreaterThan(0.8);
    }
    const listed = await a.api(account, 'GET', `${base}/Recording/?call_uuid=${callUuid}`);
    expect((listed.json.objects as Array<Record<string, unknown>>).map((o) => o.recording_id)).toEqual([r.json.recording_id]);
    expect((await a.api(account, 'DELETE', `${base}/Call/${callUuid}/`)).status).toBe(204);
    const done = await run;
    sink.socket.close();
    expect(done.code, done.errors).toBe(0);
  }, 60_000);
});
