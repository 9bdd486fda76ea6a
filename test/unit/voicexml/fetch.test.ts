/**
 * fetchDocument, fetchWithFallback and AudioCache against real HTTPS servers on
 * loopback (a throw-away CA): the signed form request, what counts as a document,
 * no redirects, the size cap, the deadline, https:// only, and the SSRF guard.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { CallbackNetworkGuard } from '../../../src/events/network-guard.js';
import { verifyCallback } from '../../../src/events/signature.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, WEBHOOK_USER_AGENT } from '../../../src/events/webhook.js';
import { fetchDocument, fetchWithFallback, type FetchDocumentRequest } from '../../../src/voicexml/fetch.js';
import { AudioCache, sniffAudio } from '../../../src/voicexml/audio.js';
import { makeTestCa, type TestCa } from '../../support/test-ca.js';
import { startHttpsReceiver, type HttpsReceiver } from '../../support/https-receiver.js';

const SECRET = 'whsec-voicexml-0a1b2c3d4e5f';
const PARAMS = { CallUUID: 'aleg-0001', From: '+15550001', To: '+15550002', Direction: 'outbound', CallStatus: 'in-progress' };
const LOOPBACK = new CallbackNetworkGuard(['127.0.0.0/8', '::1/128']);
const NOBODY = new CallbackNetworkGuard([]);
const DOC = '<?xml version="1.0"?><Response><Speak>Hi</Speak></Response>';

let ca: TestCa;
let tls: { key: string; cert: string };
const servers: HttpsReceiver[] = [];

async function server(answer: Parameters<typeof startHttpsReceiver>[1]): Promise<HttpsReceiver> {
  const s = await startHttpsReceiver(tls, answer);
  servers.push(s);
  return s;
}
function get(over: Partial<FetchDocumentRequest> & { url: string; method?: 'GET' | 'POST' }): ReturnType<typeof fetchDocument> {
  const { url, method, ...rest } = over;
  return fetchDocument({ target: { url, method: method ?? 'POST' }, params: PARAMS, secret: SECRET, guard: LOOPBACK, ca: ca.caCert, ...rest });
}

beforeAll(() => {
  ca = makeTestCa();
  tls = { key: ca.serverKey, cert: ca.serverCert };
});
afterAll(async () => {
  await Promise.all(servers.map((s) => s.close()));
  ca?.remove();
});

describe('fetchDocument: the request', () => {
  it('POSTs the form-encoded parameters, signed like a callback, and returns the XML', async () => {
    const s = await server((_r, res) => res.writeHead(200, { 'content-type': 'application/xml' }).end(DOC));
    const out = await get({ url: `https://127.0.0.1:${s.port}/answer?app=7` });
    expect(out).toEqual({ ok: true, xml: DOC, status: 200 });
    const r = s.requests[0]!;
    expect(r.method).toBe('POST');
    expect(r.url).toBe('/answer?app=7');
    expect(r.headers['content-type']).toBe('application/x-www-form-urlencoded');
    expect(r.headers['user-agent']).toBe(WEBHOOK_USER_AGENT);
    expect(Object.fromEntries(new URLSearchParams(r.body))).toEqual(PARAMS);
    const ts = String(r.headers[TIMESTAMP_HEADER]);
    expect(verifyCallback(SECRET, ts, r.body, String(r.headers[SIGNATURE_HEADER]))).toBe(true);
    expect(verifyCallback('another-secret', ts, r.body, String(r.headers[SIGNATURE_HEADER]))).toBe(false);
  });

  it('GETs with the parameters appended to the query string, which is what is signed', async () => {
    const s = await server((_r, res) => res.writeHead(200, { 'content-type': 'text/xml' }).end(DOC));
    expect((await get({ url: `https://127.0.0.1:${s.port}/next?step=2#frag`, method: 'GET' })).ok).toBe(true);
    const r = s.requests[0]!;
    const query = r.url.slice(r.url.indexOf('?') + 1);
    expect(r.url.startsWith('/next?step=2&CallUUID=aleg-0001')).toBe(true);
    expect(r.body).toBe('');
    expect(verifyCallback(SECRET, String(r.headers[TIMESTAMP_HEADER]), query, String(r.headers[SIGNATURE_HEADER]))).toBe(true);
  });

  it('sends no signature headers when the account has no secret', async () => {
    const s = await server((_r, res) => res.writeHead(200).end(DOC));
    expect((await get({ url: `https://127.0.0.1:${s.port}/a`, secret: null })).ok).toBe(true);
    expect(s.requests[0]!.headers[SIGNATURE_HEADER]).toBeUndefined();
    expect(s.requests[0]!.headers[TIMESTAMP_HEADER]).toBeUndefined();
  });
});

describe('fetchDocument: what counts', () => {
  it('accepts any 2xx with an XML body (a BOM and leading space allowed)', async () => {
    const s = await server((_r, res) => res.writeHead(201).end(`\uFEFF  ${DOC}`));
    expect(await get({ url: `https://127.0.0.1:${s.port}/a` })).toEqual({ ok: true, xml: `  ${DOC}`, status: 201 });
  });

  it('refuses a non-2xx status and a body that is not XML', async () => {
    const s = await server((r, res) => (r.url === '/500' ? res.writeHead(500).end(DOC) : res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}')));
    expect(await get({ url: `https://127.0.0.1:${s.port}/500` })).toEqual({ ok: false, reason: `HTTP 500 from https://127.0.0.1:${s.port}` });
    expect(await get({ url: `https://127.0.0.1:${s.port}/json` })).toMatchObject({ ok: false, reason: expect.stringContaining('not XML') });
  });

  it('does not follow a redirect', async () => {
    const s = await server((r, res) => (r.url === '/moved' ? res.writeHead(302, { location: '/doc' }).end() : res.writeHead(200).end(DOC)));
    expect(await get({ url: `https://127.0.0.1:${s.port}/moved` })).toMatchObject({ ok: false, reason: expect.stringContaining('HTTP 302') });
    expect(s.requests).toHaveLength(1);
  });

  it('refuses an answer over maxBytes', async () => {
    const s = await server((_r, res) => res.writeHead(200).end(`<Response>${'<Wait/>'.repeat(40_000)}</Response>`));
    expect(await get({ url: `https://127.0.0.1:${s.port}/big` })).toMatchObject({ ok: false, reason: expect.stringContaining('over 102400 bytes') });
    expect(await get({ url: `https://127.0.0.1:${s.port}/big`, maxBytes: 1024 })).toMatchObject({ ok: false, reason: expect.stringContaining('over 1024 bytes') });
  });

  it('gives up after timeoutMs when the application does not answer', async () => {
    const s = await server(() => undefined);
    const started = Date.now();
    const out = await get({ url: `https://127.0.0.1:${s.port}/slow`, timeoutMs: 300 });
    expect(out).toEqual({ ok: false, reason: `no complete answer from https://127.0.0.1:${s.port} within 300 ms` });
    expect(Date.now() - started).toBeLessThan(2000);
    expect(Date.now() - started).toBeGreaterThanOrEqual(290);
  });

  it('never puts the path, query or secret in a reason', async () => {
    const s = await server((_r, res) => res.writeHead(404).end());
    const out = await get({ url: `https://user:pw@127.0.0.1:${s.port}/secret-path?token=abc` });
    expect(out.ok).toBe(false);
    const reason = (out as { reason: string }).reason;
    for (const leak of ['secret-path', 'token', 'pw', SECRET]) expect(reason).not.toContain(leak);
  });
});

describe('fetchDocument: where it may connect', () => {
  it('refuses http:// without connecting', async () => {
    expect(await get({ url: 'http://127.0.0.1:9/answer' })).toMatchObject({ ok: false, reason: expect.stringContaining('https://') });
  });

  it('refuses a loopback address the guard does not allow, as a literal and by name, and connects to nothing', async () => {
    const s = await server((_r, res) => res.writeHead(200).end(DOC));
    expect(await get({ url: `https://127.0.0.1:${s.port}/a`, guard: NOBODY })).toMatchObject({ ok: false, reason: expect.stringContaining('refused (loopback)') });
    expect(await get({ url: `https://localhost:${s.port}/a`, guard: NOBODY })).toMatchObject({ ok: false, reason: expect.stringContaining('refused') });
    expect(await get({ url: `https://169.254.169.254/latest/meta-data`, guard: NOBODY })).toMatchObject({ ok: false, reason: expect.stringContaining('link-local') });
    expect(s.connections).toBe(0);
  });
});

describe('fetchWithFallback', () => {
  it('says which URL answered: the fallback when the first fails', async () => {
    const s = await server((r, res) => (r.url.startsWith('/answer') ? res.writeHead(503).end() : res.writeHead(200).end(DOC)));
    const base = { params: PARAMS, secret: SECRET, guard: LOOPBACK, ca: ca.caCert };
    const primary = { url: `https://127.0.0.1:${s.port}/answer`, method: 'POST' as const };
    const fallback = { url: `https://127.0.0.1:${s.port}/fallback`, method: 'GET' as const };
    expect(await fetchWithFallback(primary, fallback, base)).toMatchObject({ ok: true, answeredBy: 'fallback', target: fallback, xml: DOC });
    expect(await fetchWithFallback(primary, null, base)).toMatchObject({ ok: false, reason: expect.stringContaining('HTTP 503') });
    expect(await fetchWithFallback(fallback, primary, base)).toMatchObject({ ok: true, answeredBy: 'primary' });
    const both = await fetchWithFallback(primary, primary, base);
    expect(both).toMatchObject({ ok: false, reason: expect.stringContaining('fallback: HTTP 503') });
  });
});

/** A 16-bit mono PCM WAV of `ms` milliseconds at 8 kHz. */
function wav(ms: number): Buffer {
  const data = Buffer.alloc(16 * ms);
  const h = Buffer.alloc(44);
  h.write('RIFF', 0, 'latin1');
  h.writeUInt32LE(36 + data.length, 4);
  h.write('WAVEfmt ', 8, 'latin1');
  h.writeUInt32LE(16, 16);
  h.writeUInt16LE(1, 20);
  h.writeUInt16LE(1, 22);
  h.writeUInt32LE(8000, 24);
  h.writeUInt32LE(16000, 28);
  h.writeUInt16LE(2, 32);
  h.writeUInt16LE(16, 34);
  h.write('data', 36, 'latin1');
  h.writeUInt32LE(data.length, 40);
  return Buffer.concat([h, data]);
}

describe('AudioCache', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(join(tmpdir(), 'sip-edge-audio-test-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('downloads a WAV once, with its duration; concurrent and later plays share it', async () => {
    const s = await server((_r, res) => setTimeout(() => res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(wav(1500)), 50));
    const audio = new AudioCache({ guard: LOOPBACK, dir, ca: ca.caCert });
    const url = `https://127.0.0.1:${s.port}/prompt.wav`;
    const [a, b] = await Promise.all([audio.get(url), audio.get(url)]);
    expect(a).toEqual(b);
    expect(a).toMatchObject({ durationMs: 1500, path: expect.stringMatching(/\.wav$/) });
    expect(readFileSync((a as { path: string }).path).subarray(0, 4).toString()).toBe('RIFF');
    expect(await audio.get(url)).toEqual(a);
    expect(s.requests).toHaveLength(1);
  });

  it('takes audio/* or MP3 magic, and refuses what is not audio', async () => {
    const s = await server((r, res) => {
      if (r.url === '/id3.mp3') res.writeHead(200, { 'content-type': 'application/octet-stream' }).end(Buffer.from('ID3\x04\x00rest', 'latin1'));
      else if (r.url === '/typed') res.writeHead(200, { 'content-type': 'audio/mpeg' }).end(Buffer.from('....'));
      else res.writeHead(200, { 'content-type': 'text/html' }).end('<html>not found</html>');
    });
    const audio = new AudioCache({ guard: LOOPBACK, dir, ca: ca.caCert });
    expect(await audio.get(`https://127.0.0.1:${s.port}/id3.mp3`)).toMatchObject({ path: expect.stringMatching(/\.mp3$/), durationMs: null });
    expect(await audio.get(`https://127.0.0.1:${s.port}/typed`)).toMatchObject({ path: expect.stringMatching(/\.mp3$/) });
    expect(await audio.get(`https://127.0.0.1:${s.port}/page`)).toEqual({ error: `the answer from https://127.0.0.1:${s.port} is not audio (text/html)` });
  });

  it('refuses http://, refused addresses and non-2xx answers with an error, never a throw', async () => {
    const s = await server((_r, res) => res.writeHead(404).end());
    const audio = new AudioCache({ guard: NOBODY, dir, ca: ca.caCert });
    expect(await audio.get('http://media.example/a.wav')).toMatchObject({ error: expect.stringContaining('https://') });
    expect(await audio.get(`https://127.0.0.1:${s.port}/a.wav`)).toMatchObject({ error: expect.stringContaining('refused') });
    expect(await new AudioCache({ guard: LOOPBACK, dir, ca: ca.caCert }).get(`https://127.0.0.1:${s.port}/a.wav`)).toEqual({ error: `HTTP 404 from https://127.0.0.1:${s.port}` });
  });

  it('sniffs RIFF/WAVE, ID3 and MPEG frame sync', () => {
    expect(sniffAudio(wav(10))).toBe('wav');
    expect(sniffAudio(Buffer.from('ID3abc', 'latin1'))).toBe('mp3');
    expect(sniffAudio(Buffer.from([0xff, 0xfb, 0x90, 0x00]))).toBe('mp3');
    expect(sniffAudio(Buffer.from('<html>', 'latin1'))).toBeNull();
  });
});
