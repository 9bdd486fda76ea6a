/**
 * Click-to-call (issue 24, "Done when"): the platform places a call (POST /Call/) to a
 * WebRTC browser — headless Chromium, SIP.js over WSS, a fake microphone, auto-answering —
 * and the answer_url's `<Dial><User>` bridges it on rtpengine with a SIPp desk phone that
 * echoes RTP (`-rtp_echo` on its own media port). The A leg reaches the browser through
 * the edge's proxy, whose rtpengine relay turns the B2BUA's plain RTP offer into ICE +
 * DTLS-SRTP; what the browser sends goes to SIPp and comes back, so the browser's
 * inbound RTP packets are > 0 and rising while bridged. DELETE of the call through the
 * API ends the browser's session (BYE) and the phone's (SIPp exits 0).
 * A screenshot of the page in the call is written to test/.tmp/browser-click-to-call.png.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import type { ServerResponse } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/server-process.js';
import { startEdge, type Account, type Edge } from '../support/edge.js';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { freePort } from '../support/ports.mjs';
import { startRtpengine, type RtpengineHandle } from '../support/rtpengine.mjs';
import { runSipp } from '../support/sipp.js';
import { until } from '../support/wait.js';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--ignore-certificate-errors', // the server's self-signed development certificate
  '--use-fake-device-for-media-stream', // a generated tone as the microphone
  '--use-fake-ui-for-media-stream', // microphone permission granted
  '--allow-loopback-in-peer-connection', // ICE over 127.0.0.1, where rtpengine listens here
  '--disable-features=WebRtcHideLocalIpsWithMdns',
  '--no-first-run',
];
/** The page of browser-media.test.ts: registers, auto-answers (delegate.onInvite → accept), counts inbound RTP. */
const PAGE_SCRIPT = fileURLToPath(new URL('./browser/call-page.ts', import.meta.url));
const SCREENSHOT = join(ROOT, 'test', '.tmp', 'browser-click-to-call.png');
const HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sip-edge click-to-call</title>
<style>body { font: 16px system-ui, sans-serif; margin: 2rem; } p { font-size: 1.3rem; }
[data-state="Established"], [data-state="Registered"] { color: #176117; font-weight: bold; }</style></head>
<body><h1>WebRTC phone (click-to-call)</h1>
<p id="reg" data-state="Idle">Not registered</p>
<p id="call" data-state="Idle">No call</p>
<p id="rtp" data-packets="0">RTP packets received: 0</p>
<audio id="remote" autoplay></audio>
<script type="module" src="/call-page.js"></script></body></html>`;

describe('click-to-call: the API calls a browser and Dials a SIPp phone, bridged on rtpengine', () => {
  let ca: TestCa;
  let engine: RtpengineHandle;
  let edge: Edge;
  let app: HttpsReceiver;
  let account: Account;
  let web: Server;
  let base: string;
  let context: BrowserContext;
  let profile: string;
  /** answer_url documents by path. */
  const docs = new Map<string, string>();

  beforeAll(async () => {
    ca = makeTestCa();
    engine = await startRtpengine({ rtpPorts: 60 });
    app = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (req, res: ServerResponse) => {
      const doc = docs.get(req.url.split('?')[0] as string);
      if (doc) res.writeHead(200, { 'content-type': 'application/xml' }).end(doc);
      else res.writeHead(200).end('ok');
    });
    // MEDIA_RELAY=bridge by default; WSS on (the browser's transport).
    edge = await startEdge({
      RTPENGINE_NG: engine.id,
      NODE_EXTRA_CA_CERTS: ca.caCertFile,
      CALLBACK_ALLOWED_NETWORKS: '127.0.0.0/8',
      LOG_LEVEL: process.env.CALLS_TEST_LOG ?? 'info',
    });
    account = await edge.newAccount({ cps_limit: 20, concurrent_calls_limit: 20 });
    const bundle = await build({ entryPoints: [PAGE_SCRIPT], bundle: true, format: 'esm', platform: 'browser', target: 'chrome120', write: false, logLevel: 'silent' });
    const script = bundle.outputFiles[0]?.text ?? '';
    web = createServer((req, res) => {
      if (req.url === '/call-page.js') res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(script);
      else if (req.url?.startsWith('/?') || req.url === '/') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(HTML);
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
    const addr = web.address();
    if (addr === null || typeof addr === 'string') throw new Error('no address');
    base = `http://127.0.0.1:${addr.port}/`;
    profile = mkdtempSync(join(tmpdir(), 'sip-edge-chromium-'));
    context = await chromium.launchPersistentContext(profile, { executablePath: CHROMIUM, headless: true, args: CHROMIUM_ARGS, viewport: { width: 800, height: 500 } });
  }, 90_000);
  afterAll(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await new Promise<void>((resolve) => (web ? web.close(() => resolve()) : resolve()));
    await edge?.stop();
    await app?.close();
    await engine?.dispose();
    ca?.remove();
  });

  const url = (path: string): string => `https://127.0.0.1:${app.port}${path}`;
  const calls = (): string => `/api/v1/Account/${account.authId}/Call/`;
  const packets = async (page: Page): Promise<number> => Number(await page.locator('#rtp').getAttribute('data-packets'));
  /** What the edge and rtpengine said, when the media or the call did not come. */
  const diagnose = (): void => {
    console.log(edge.server.output().split('\n').filter((l) => !/registrar|"url":"\/api/.test(l)).slice(-60).join('\n'));
    console.log(engine.log().split('\n').slice(-60).join('\n'));
  };

  it('POST /Call/ to the browser, <Dial><User> a SIPp phone echoing RTP: the browser\'s inbound RTP rises while bridged; DELETE ends both sessions', async () => {
    // The browser endpoint: registered over WSS, auto-answers.
    const web1 = await edge.newEndpoint(account, 'c2cbrowser');
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (x) => errors.push(x.message));
    const q = new URLSearchParams({ server: `wss://127.0.0.1:${edge.server.ports.wss}`, domain: account.sipDomain, user: web1.username, password: web1.password });
    await page.goto(`${base}?${q}`);
    await page.waitForSelector('#reg[data-state="Registered"]', { timeout: 10_000 });

    // The SIPp desk phone: registered first (SIPp maps messages by Call-ID, so the REGISTER
    // and the edge's INVITE cannot share one scenario), then answers the Dial on the same port,
    // echoing RTP on its own media port.
    const desk = await edge.newEndpoint(account, 'c2cdesk');
    const localPort = await freePort();
    const reg = await runSipp({ scenario: 'register.xml', port: edge.server.ports.udp as number, transport: 'udp', users: [{ user: desk.username, domain: account.sipDomain, password: desk.password }], localPort, timeoutMs: 15_000 });
    expect(reg.code, reg.errors).toBe(0);
    const phone = runSipp({
      localPort,
      scenario: 'api-call-uas-echo.xml',
      port: edge.server.ports.udp as number,
      transport: 'udp',
      users: [{ user: desk.username, domain: account.sipDomain, password: desk.password }],
      calls: 1,
      recvTimeoutMs: null,
      traceMessages: true,
      timeoutMs: 60_000,
      extraArgs: ['-mp', String(await freePort()), '-rtp_echo'],
    });
    await edge.waitBindings(web1, 1);
    await edge.waitBindings(desk, 1);

    // The click: a third endpoint of the account calls the browser; the app Dials the desk phone.
    const from = await edge.newEndpoint(account, 'c2cfrom');
    docs.set('/answer', `<Response><Dial><User>sip:${desk.username}@${account.sipDomain}</User></Dial></Response>`);
    const r = await edge.api(account, 'POST', calls(), {
      from: `sip:${from.username}@${account.sipDomain}`,
      to: `sip:${web1.username}@${account.sipDomain}`,
      answer_url: url('/answer'),
    });
    expect(r.status, JSON.stringify(r.json)).toBe(201);

    await page.waitForSelector('#call[data-state="Established"]', { timeout: 15_000 }).catch((err: unknown) => {
      diagnose();
      throw err;
    });
    await until('the answer_url request', async () => app.requests.find((x) => x.url.startsWith('/answer')), 10_000);
    // The desk phone answered the Dial: a live call of the account is in progress.
    const live = await until(
      'the bridged call',
      async () => {
        const ids = ((await edge.api(account, 'GET', `${calls()}?status=live`)).json.calls as string[]) ?? [];
        for (const id of ids) {
          const one = await edge.api(account, 'GET', `${calls()}${id}/?status=live`);
          if (one.status === 200 && one.json.call_status === 'in-progress') return one.json;
        }
        return undefined;
      },
      10_000,
    );
    expect(live.direction).toBe('outbound');
    await until('inbound RTP at the browser', async () => ((await packets(page)) > 0 ? true : undefined), 15_000).catch((err: unknown) => {
      diagnose();
      throw err;
    });
    const first = await packets(page);
    await new Promise((res) => setTimeout(res, 1500));
    const later = await packets(page);
    console.log(`click-to-call (browser ← rtpengine ← SIPp echo): inbound RTP packets ${first} → ${later} over 1.5 s`);
    expect(first).toBeGreaterThan(0);
    expect(later).toBeGreaterThan(first);
    mkdirSync(join(ROOT, 'test', '.tmp'), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });

    // Hang up through the API: every live leg → 204; the browser gets a BYE, SIPp too.
    const ids = (await edge.api(account, 'GET', `${calls()}?status=live`)).json.calls as string[];
    expect(ids).toContain(String(live.call_uuid));
    for (const id of ids) {
      const d = await edge.api(account, 'DELETE', `${calls()}${id}/`);
      expect(d.status, `DELETE ${id}: ${JSON.stringify(d.json)}`).toBe(204);
    }
    await page.waitForSelector('#call[data-state="Terminated"]', { timeout: 10_000 });
    const run = await phone;
    if (run.code !== 0) diagnose();
    expect(run.code, run.errors).toBe(0);
    expect(run.failed, run.errors).toBe(0);
    // The desk phone was offered plain RTP by rtpengine, never the browser's ICE/DTLS.
    expect(run.messages).toMatch(/INVITE sip:[\s\S]*m=audio \d+ RTP\/AVP /);
    expect(run.messages).not.toMatch(/a=fingerprint/);
    await until('no live calls', async () => (((await edge.api(account, 'GET', `${calls()}?status=live`)).json.calls as string[]).length === 0 ? true : undefined), 10_000);
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);
});
