/**
 * A WebRTC browser talks to a desk phone through rtpengine (docs/media.md "Calls"):
 * headless Chromium with a fake microphone, SIP.js over WSS, calls a SIPp UAS over UDP
 * that echoes RTP back (`-rtp_echo`), and the other way round a SIPp UAC calls the
 * browser, and a SIPp carrier on 127.0.0.9 (an INBOUND trunk's ACL) calls a number routed
 * to the browser (issue 23). The browser's RTCPeerConnection stats must show inbound RTP packets, more
 * and more during the call; after the BYE rtpengine holds no session for the call.
 * A screenshot of the page in the call is written to test/.tmp/browser-in-call.png.
 */
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
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
  let inventory: string;
  const ADMIN = 'browser-media-admin-token-0123456789';
  const NUMBER = '+918040009001';

  beforeAll(async () => {
    engine = await startRtpengine({ rtpPorts: 60 });
    inventory = mkdtempSync(join(tmpdir(), 'sip-edge-inventory-'));
    writeFileSync(join(inventory, 'numbers.csv'), `e164,country,region,number_type,setup_fee,monthly_fee,currency,provider\n${NUMBER},IN,Karnataka,landline,1.00,2.00,USD,test\n`);
    // MEDIA_RELAY=bridge by default
    edge = await startEdge({ RTPENGINE_NG: engine.id, ADMIN_AUTH_TOKEN: ADMIN, NUMBER_INVENTORY_FILE: join(inventory, 'numbers.csv') });
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
    if (inventory) rmSync(inventory, { recursive: true, force: true });
  });

  const openPhone = async (name: string, flags: Record<string, boolean> = {}): Promise<{ page: Page; errors: string[]; username: string; endpointId: string }> => {
    const e = await edge.newEndpoint(account, name, flags);
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (x) => errors.push(x.message));
    const q = new URLSearchParams({ server: `wss://127.0.0.1:${edge.server.ports.wss}`, domain: account.sipDomain, user: e.username, password: e.password });
    await page.goto(`${base}?${q}`);
    await page.waitForSelector('#reg[data-state="Registered"]', { timeout: 10_000 });
    return { page, errors, username: e.username, endpointId: e.endpointId };
  };
  const packets = async (page: Page): Promise<number> => Number(await page.locator('#rtp').getAttribute('data-packets'));
  const gone = (callId: string): Promise<true> => sessionGone(probe, engine.id, callId);
  /** The page's incoming call is up and its inbound RTP packets rise over a second. */
  const answeredWithMedia = async (page: Page, what: string): Promise<void> => {
    await page.waitForSelector('#call[data-state="Established"]', { timeout: 15_000 });
    await until('inbound RTP at the browser', async () => ((await packets(page)) > 0 ? true : undefined), 10_000);
    const first = await packets(page);
    await new Promise((r) => setTimeout(r, 1000));
    const later = await packets(page);
    console.log(`${what}: inbound RTP packets ${first} → ${later} over 1 s`);
    expect(later).toBeGreaterThan(first);
  };

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
    await answeredWithMedia(page, 'SIPp (echo) → browser');
    const r = await uac;
    expect(r.failed, r.errors).toBe(0);
    // The browser got rtpengine's ICE + DTLS offer: the 200 it sent back went to SIPp as plain RTP.
    expect(r.messages).toMatch(/SIP\/2\.0 200 OK[\s\S]*m=audio \d+ RTP\/AVP /);
    await page.waitForSelector('#call[data-state="Terminated"]', { timeout: 10_000 });
    await gone(cid.replace('%u', '1'));
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);

  it('a carrier in an INBOUND trunk\'s ACL (SIPp on 127.0.0.9, echoing RTP) calls a number routed to the browser: it rings, answers, and media flows', async () => {
    const { page, errors, endpointId } = await openPhone('webnumber', { allow_phones: true });
    const api = async (method: string, path: string, body?: unknown): Promise<Record<string, unknown>> => {
      const r = await edge.api(account, method, `/api/v1/Account/${account.authId}${path}`, body);
      expect(r.status, `${method} ${path}: ${JSON.stringify(r.json)}`).toBeLessThan(300);
      return r.json as Record<string, unknown>;
    };
    const credit = await fetch(`${edge.base}/api/v1/admin/accounts/${account.authId}/credit`, {
      method: 'POST',
      headers: { 'x-admin-token': ADMIN, 'content-type': 'application/json' },
      body: JSON.stringify({ amount: '10.00', currency: 'USD', description: 'test funds' }),
    });
    expect(credit.status).toBeLessThan(300);
    await api('POST', '/numbers/purchase-from-inventory', { e164: NUMBER });
    await api('POST', `/numbers/${encodeURIComponent(NUMBER)}/endpoint`, { endpoint_id: endpointId });
    const trunk = String((await api('POST', '/trunks', { name: 'carrier-in', trunk_type: 'INBOUND' })).trunk_id);
    await api('POST', '/ip-acl', { trunk_id: trunk, ip_address: '127.0.0.9' });
    const carrier = runSipp({
      scenario: 'carrier-uac.xml',
      port: edge.server.ports.udp as number,
      transport: 'udp',
      users: [{ user: 'carrier', domain: 'carrier.example', password: 'x' }],
      calls: 1,
      localIp: '127.0.0.9',
      keys: { dialled: NUMBER },
      pauseMs: 4000,
      traceMessages: true,
      recvTimeoutMs: null,
      timeoutMs: 60_000,
      extraArgs: ['-rtp_echo', '-mp', String(await freePort())],
    });
    await answeredWithMedia(page, 'carrier (echo) → number → browser');
    const r = await carrier;
    expect(r.failed, r.errors).toBe(0);
    expect(r.successful).toBe(1);
    // The carrier got plain RTP from rtpengine, never the browser's DTLS.
    expect(r.messages).toMatch(/SIP\/2\.0 200 OK[\s\S]*m=audio \d+ RTP\/AVP /);
    expect(r.messages).not.toMatch(/a=fingerprint/);
    await page.waitForSelector('#call[data-state="Terminated"]', { timeout: 10_000 });
    expect(errors).toEqual([]);
    await page.close();
  }, 90_000);
});
