/**
 * A WebRTC browser talks to a desk phone through rtpengine (docs/media.md "Calls"):
 * headless Chromium with a fake microphone, SIP.js over WSS, calls a SIPp UAS over UDP
 * that echoes RTP back (`-rtp_echo`), and the other way round a SIPp UAC calls the
 * browser. The browser's RTCPeerConnection stats must show inbound RTP packets, more
 * and more during the call; after the BYE rtpengine holds no session for the call.
 * A screenshot of the page in the call is written to test/.tmp/browser-in-call.png.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RtpengineClient } from '../../src/media/rtpengine.js';
import { sessionGone } from '../support/media.js';
import { ROOT } from '../support/server-process.js';
import { startEdge, type Account, type Edge } from '../support/edge.js';
import { cidStr } from '../support/proxy-harness.js';
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
const PAGE_SCRIPT = fileURLToPath(new URL('./browser/call-page.ts', import.meta.url));
const SCREENSHOT = join(ROOT, 'test', '.tmp', 'browser-in-call.png');
const HTML = `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>sip-edge WebRTC call</title>
<style>body { font: 16px system-ui, sans-serif; margin: 2rem; } p { font-size: 1.3rem; }
[data-state="Established"], [data-state="Registered"] { color: #176117; font-weight: bold; }</style></head>
<body><h1>WebRTC phone</h1>
<p id="reg" data-state="Idle">Not registered</p>
<p id="call" data-state="Idle">No call</p>
<p id="rtp" data-packets="0">RTP packets received: 0</p>
<audio id="remote" autoplay></audio>
<script type="module" src="/call-page.js"></script></body></html>`;

describe('headless Chromium calls a desk phone (SIPp) through rtpengine', () => {
  let engine: RtpengineHandle;
  let edge: Edge;
  let account: Account;
  let web: Server;
  let base: string;
  let context: BrowserContext;
  let profile: string;
  let probe: RtpengineClient;

  beforeAll(async () => {
    engine = await startRtpengine({ rtpPorts: 60 });
    edge = await startEdge({ RTPENGINE_NG: engine.id }); // MEDIA_RELAY=bridge by default
    account = await edge.newAccount();
    probe = new RtpengineClient({ engines: [{ host: engine.host, port: engine.ngPort }], timeoutMs: 300, retries: 1 });
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
    await probe?.close();
    await edge?.stop();
    await engine?.dispose();
  });

  const openPhone = async (name: string): Promise<{ page: Page; errors: string[]; username: string }> => {
    const e = await edge.newEndpoint(account, name);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (x) => errors.push(x.message));
    const q = new URLSearchParams({ server: `wss://127.0.0.1:${edge.server.ports.wss}`, domain: account.sipDomain, user: e.username, password: e.password });
    await page.goto(`${base}?${q}`);
    await page.waitForSelector('#reg[data-state="Registered"]', { timeout: 10_000 });
    return { page, errors, username: e.username };
  };
  const packets = async (page: Page): Promise<number> => Number(await page.locator('#rtp').getAttribute('data-packets'));
  const gone = (callId: string): Promise<true> => sessionGone(probe, engine.id, callId);

  it('the browser calls a SIPp phone over UDP that echoes RTP: inbound packets rise during the call; the BYE ends the rtpengine session', async () => {
    const { page, errors } = await openPhone('webcaller');
    const desk = await edge.newEndpoint(account, 'deskecho');
    const cid = cidStr();
    const uas = runSipp({
      scenario: 'call-uas-answer.xml',
      port: edge.server.ports.udp as number,
      transport: 'udp',
      users: [{ user: desk.username, domain: account.sipDomain, password: desk.password }],
      calls: 1,
      cidStr: cid,
      traceMessages: true,
      recvTimeoutMs: null,
      timeoutMs: 60_000,
      extraArgs: ['-rtp_echo', '-mp', String(await freePort())],
    });
    await edge.waitBindings(desk, 1);
    // SIPp maps the INVITE to its call by Call-ID: the page's call must use the one SIPp registered with.
    await page.evaluate(
      ({ target, callId }) => {
        const w = window as unknown as { call: (t: string, c?: string) => void };
        w.call(target, callId);
      },
      { target: `sip:${desk.username}@${account.sipDomain}`, callId: cid.replace('%u', '1') },
    );
    await page.waitForSelector('#call[data-state="Established"]', { timeout: 15_000 });
    await until('inbound RTP at the browser', async () => ((await packets(page)) > 0 ? true : undefined), 10_000);
    const first = await packets(page);
    await new Promise((r) => setTimeout(r, 1500));
    const later = await packets(page);
    console.log(`browser → SIPp (echo): inbound RTP packets ${first} → ${later} over 1.5 s`);
    expect(later).toBeGreaterThan(first);
    mkdirSync(join(ROOT, 'test', '.tmp'), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });
    const callId = await page.evaluate(() => (window as unknown as { callId: () => string | null }).callId());
    await page.evaluate(() => (window as unknown as { hangup: () => Promise<void> }).hangup());
    const r = await uas;
    expect(r.failed, r.errors).toBe(0);
    // The desk phone was offered plain RTP from rtpengine, not the browser's ICE/DTLS.
    expect(r.messages).toMatch(/m=audio \d+ RTP\/AVP /);
    expect(r.messages).not.toMatch(/a=fingerprint/);
    await gone(String(callId));
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);

  it('a SIPp phone over UDP calls the browser, echoing its RTP: inbound packets rise; the BYE ends the rtpengine session', async () => {
    const { page, errors, username } = await openPhone('webcallee');
    const desk = await edge.newEndpoint(account, 'deskcaller');
    const cid = cidStr();
    const uac = runSipp({
      scenario: 'call-uac.xml',
      port: edge.server.ports.udp as number,
      transport: 'udp',
      users: [{ user: desk.username, domain: account.sipDomain, password: desk.password }],
      calls: 1,
      cidStr: cid,
      keys: { callee: username },
      pauseMs: 4000,
      traceMessages: true,
      recvTimeoutMs: null,
      timeoutMs: 60_000,
      extraArgs: ['-rtp_echo', '-mp', String(await freePort())],
    });
    await page.waitForSelector('#call[data-state="Established"]', { timeout: 15_000 });
    await until('inbound RTP at the browser', async () => ((await packets(page)) > 0 ? true : undefined), 10_000);
    const first = await packets(page);
    await new Promise((r) => setTimeout(r, 1000));
    const later = await packets(page);
    console.log(`SIPp (echo) → browser: inbound RTP packets ${first} → ${later} over 1 s`);
    expect(later).toBeGreaterThan(first);
    const r = await uac;
    expect(r.failed, r.errors).toBe(0);
    // The browser got rtpengine's ICE + DTLS offer: the 200 it sent back went to SIPp as plain RTP.
    expect(r.messages).toMatch(/SIP\/2\.0 200 OK[\s\S]*m=audio \d+ RTP\/AVP /);
    await page.waitForSelector('#call[data-state="Terminated"]', { timeout: 10_000 });
    await gone(cid.replace('%u', '1'));
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);
});
