/**
 * Registrations that stay true on a quiet flow (issue 13; README "Flows",
 * docs/flows.md). SIP.js 0.21 on library defaults sends no keep-alives and
 * re-registers only near the end of its 600 s expiry; the edge used to cut such a
 * WebSocket after SIP_IDLE_TIMEOUT and drop its binding. Now a flow that carries a
 * live binding is pinged instead: with SIP_IDLE_TIMEOUT=5 s the phones below sit
 * silent for 3 × that, the API reads `sip_registered: "true"` the whole time, and a
 * MESSAGE sent through the edge at the end is answered 200 by the phone itself.
 *
 * Two real clients, at once: headless Chromium (Debian `chromium`, driven by
 * playwright-core) with SIP.js bundled into a page over WSS, and SIP.js in Node over
 * `ws` (a process of its own, test/support/sipjs-phone.mjs) over WS.
 */
import type { ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium, type BrowserContext } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestUa } from '../support/proxy-harness.js';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { startPhoneProcess } from '../support/phone-process.js';

const IDLE_S = 5; // SIP_IDLE_TIMEOUT for this server (the smallest allowed)
const PING_S = 2; // SIP_PING_INTERVAL
const QUIET_MS = 3 * IDLE_S * 1000;
const PAGE_SCRIPT = fileURLToPath(new URL('./browser/quiet-phone-page.ts', import.meta.url));
const CHROMIUM = '/usr/bin/chromium';
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('SIP.js on library defaults stays registered and reachable on a quiet flow', () => {
  let edge: Edge;
  let account: Account;
  let sender: TestUa;
  let web: Server;
  let context: BrowserContext;
  let profile: string;
  const children: ChildProcess[] = [];

  beforeAll(async () => {
    edge = await startEdge({ SIP_IDLE_TIMEOUT: String(IDLE_S), SIP_PING_INTERVAL: String(PING_S), SIP_TLS_PORT: 'off' });
    account = await edge.newAccount();
    // Sends the MESSAGEs through the edge: a UDP user agent of the same account.
    sender = await TestUa.start(edge.server.ports.udp as number, await edge.newEndpoint(account, 'sender'));

    const bundle = await build({ entryPoints: [PAGE_SCRIPT], bundle: true, format: 'esm', platform: 'browser', target: 'chrome120', write: false, logLevel: 'silent' });
    const script = bundle.outputFiles[0].text;
    web = createServer((req, res) => {
      if (req.url === '/phone.js') res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(script);
      else if (req.url === '/') res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end('<!doctype html><title>phone</title><script type="module" src="/phone.js"></script>');
      else res.writeHead(404).end();
    });
    await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
    profile = mkdtempSync(join(tmpdir(), 'sip-edge-chromium-'));
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--ignore-certificate-errors', '--no-first-run', '--disable-component-update', '--disable-sync'],
    });
  });
  afterAll(async () => {
    for (const c of children) if (c.exitCode === null && c.signalCode === null) c.kill('SIGKILL');
    sender?.close();
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await new Promise<void>((resolve) => (web ? web.close(() => resolve()) : resolve()));
    await edge?.stop();
  });

  /** Polls the API every 500 ms for `ms`: every reading of every endpoint must be "true". Returns the readings. */
  const watchRegistered = async (e: Endpoint, ms: number): Promise<string[]> => {
    const seen: string[] = [];
    const end = Date.now() + ms;
    while (Date.now() < end) {
      seen.push((await edge.endpoint(e)).sip_registered);
      await sleep(500);
    }
    return seen;
  };

  /** A MESSAGE (body `hello`) from the sender through the edge to `e`; the final status. */
  const message = async (e: Endpoint): Promise<number> => (await sender.call('MESSAGE', `sip:${e.username}@${account.sipDomain}`)).status;

  it.concurrent('SIP.js in Node over WS', async () => {
    const e = await edge.newEndpoint(account, 'nodephone');
    const phone = startPhoneProcess(`ws://127.0.0.1:${edge.server.ports.ws}`, e);
    children.push(phone.child);
    const { events } = phone;
    await edge.waitForEndpoint(e, (v) => v.sip_registered === 'true', 10_000);
    const t0 = Date.now();

    const readings = await watchRegistered(e, QUIET_MS);
    expect(readings.length).toBeGreaterThan(QUIET_MS / 1000);
    expect(new Set(readings)).toEqual(new Set(['true']));
    // The flow stayed the same one, quiet but pinged by the edge, and SIP.js never re-registered.
    expect(events.filter((x) => x.event === 'disconnect')).toEqual([]);
    expect(events.filter((x) => x.event === 'state').map((x) => x.state)).toEqual(['Registered']);
    const pings = phone.count('ping');
    expect(pings).toBeGreaterThanOrEqual(Math.floor(QUIET_MS / 1000 / PING_S / 2));

    expect(await message(e)).toBe(200);
    expect(events.filter((x) => x.event === 'message').map((x) => x.body)).toEqual(['hello']);
    console.log(`SIP.js/Node over WS: registered and quiet for ${Date.now() - t0} ms (SIP_IDLE_TIMEOUT ${IDLE_S} s): ${readings.length} API readings all "true", ${pings} pings from the edge, MESSAGE answered 200 by the phone`);
    phone.child.kill('SIGTERM');
  }, 60_000);

  it.concurrent('SIP.js in headless Chromium over WSS', async () => {
    const e = await edge.newEndpoint(account, 'browserphone');
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (err) => errors.push(err.message));
    const params = new URLSearchParams({ server: `wss://127.0.0.1:${edge.server.ports.wss}`, domain: account.sipDomain, username: e.username, password: e.password });
    await page.goto(`http://127.0.0.1:${(web.address() as { port: number }).port}/#${params}`);
    await page.waitForSelector('body[data-state="Registered"]', { state: 'attached', timeout: 10_000 });
    const t0 = Date.now();

    const readings = await watchRegistered(e, QUIET_MS);
    expect(readings.length).toBeGreaterThan(QUIET_MS / 1000);
    expect(new Set(readings)).toEqual(new Set(['true']));
    type Log = { states: string[]; messages: string[]; disconnects: number };
    const before = await page.evaluate(() => (window as unknown as { phone: Log }).phone);
    expect(before.disconnects).toBe(0);
    expect(before.states).toEqual(['Registered']);

    expect(await message(e)).toBe(200);
    const after = await page.evaluate(() => (window as unknown as { phone: Log }).phone);
    expect(after.messages).toEqual(['hello']);
    expect(errors).toEqual([]);
    console.log(`SIP.js/Chromium over WSS: registered and quiet for ${Date.now() - t0} ms (SIP_IDLE_TIMEOUT ${IDLE_S} s): ${readings.length} API readings all "true", MESSAGE answered 200 by the page`);
    await page.close();
  }, 60_000);
});
