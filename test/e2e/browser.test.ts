/**
 * A WebRTC browser over WSS: headless Chromium from Debian (`/usr/bin/chromium`,
 * driven by playwright-core) loads a small page served by this test, with the
 * `sip.js` browser library bundled for it by esbuild, and registers an endpoint
 * that was created through the HTTP API. The test reads the endpoint back over the
 * API, writes a screenshot of the registered page to a path it prints, then closes
 * the page: the WebSocket flow goes, and with it the binding (README, "Flows").
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { build } from 'esbuild';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { version as sipJsVersion } from 'sip.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ROOT } from '../support/server-process.js';
import { startEdge, type Account, type Edge } from '../support/edge.js';

const CHROMIUM = '/usr/bin/chromium';
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-background-networking',
  '--ignore-certificate-errors', // the server's self-signed development certificate
  '--disable-quic',
  '--no-first-run',
  '--disable-component-update',
  '--disable-sync',
];
const PAGE_SCRIPT = fileURLToPath(new URL('./browser/register-page.ts', import.meta.url));
const SCREENSHOT = join(ROOT, 'test', '.tmp', 'browser-registered.png');

const HTML = `<!doctype html>
<html lang="en">
<head><meta charset="utf-8"><title>sip-edge WebRTC registration</title>
<style>
  body { font: 16px system-ui, sans-serif; margin: 2rem; max-width: 40rem; }
  label { display: block; margin: .4rem 0; } input { width: 100%; font: inherit; }
  #state { display: block; margin-top: 1rem; font-size: 1.4rem; font-weight: bold; }
  #state[data-state="Registered"] { color: #176117; } #state[data-state="Failed"] { color: #a11; }
</style></head>
<body>
  <h1>WebRTC phone</h1>
  <p id="library"></p>
  <form id="register">
    <label>Server <input name="server"></label>
    <label>SIP domain <input name="domain"></label>
    <label>Username <input name="username"></label>
    <label>Password <input name="password" type="password"></label>
    <button id="submit" type="submit">Register</button>
  </form>
  <output id="state" data-state="Idle">Not registered</output>
  <p id="detail"></p>
  <script type="module" src="/register-page.js"></script>
</body>
</html>`;

describe('headless Chromium with SIP.js over WSS', () => {
  let edge: Edge;
  let account: Account;
  let web: Server;
  let pageUrl: string;
  let context: BrowserContext;
  let profile: string;

  beforeAll(async () => {
    edge = await startEdge();
    account = await edge.newAccount();

    const bundle = await build({
      entryPoints: [PAGE_SCRIPT],
      bundle: true,
      format: 'esm',
      platform: 'browser',
      target: 'chrome120',
      write: false,
      logLevel: 'silent',
    });
    const script = bundle.outputFiles[0].text;
    web = createServer((req, res) => {
      if (req.url === '/register-page.js') {
        res.writeHead(200, { 'content-type': 'text/javascript; charset=utf-8' }).end(script);
      } else if (req.url === '/') {
        res.writeHead(200, { 'content-type': 'text/html; charset=utf-8' }).end(HTML);
      } else {
        res.writeHead(404).end();
      }
    });
    await new Promise<void>((resolve) => web.listen(0, '127.0.0.1', resolve));
    const addr = web.address();
    if (addr === null || typeof addr === 'string') throw new Error('no address');
    pageUrl = `http://127.0.0.1:${addr.port}/`;

    profile = mkdtempSync(join(tmpdir(), 'sip-edge-chromium-')); // a fresh user-data-dir
    context = await chromium.launchPersistentContext(profile, {
      executablePath: CHROMIUM,
      headless: true,
      args: CHROMIUM_ARGS,
      viewport: { width: 800, height: 600 },
    });
  });
  afterAll(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await new Promise<void>((resolve) => (web ? web.close(() => resolve()) : resolve()));
    await edge?.stop();
  });

  /** Opens the page and registers as a person would: fill in the form, press Register. */
  const openAndRegister = async (username: string, password: string): Promise<{ page: Page; errors: string[] }> => {
    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(pageUrl);
    await page.fill('input[name=server]', `wss://127.0.0.1:${edge.server.ports.wss}`);
    await page.fill('input[name=domain]', account.sipDomain);
    await page.fill('input[name=username]', username);
    await page.fill('input[name=password]', password);
    await page.click('#submit');
    await page.waitForSelector('#state[data-state="Registered"], #state[data-state="Failed"]', { timeout: 10_000 });
    return { page, errors };
  };

  it('registers an endpoint over WSS: the page says so, the API shows SIP.js over wss, and closing the page removes the binding', async () => {
    const e = await edge.newEndpoint(account, 'browser1');
    const { page, errors } = await openAndRegister(e.username, e.password);

    expect(await page.locator('#state').getAttribute('data-state')).toBe('Registered');
    expect(await page.locator('#state').textContent()).toBe(`Registered as ${e.username}@${account.sipDomain}`);
    expect(await page.locator('#detail').textContent()).toMatch(/: 200 OK from sip-edge\/[\d.]+, binding expires in 600 s$/);
    mkdirSync(join(ROOT, 'test', '.tmp'), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });
    console.log(`browser page after registration: ${SCREENSHOT}`);

    const v = await edge.endpoint(e);
    expect(v.sip_registered).toBe('true');
    expect(v.sip_user_agent).toBe(`SIP.js/${sipJsVersion}`);
    expect(v.sip_registration?.received).toMatch(/^sip:127\.0\.0\.1:\d+;transport=wss$/);
    expect(v.sip_registration?.contact).toMatch(/\.invalid;transport=ws$/);
    expect(v.sip_registrations).toHaveLength(1);
    expect(v.sip_registrations[0].transport).toBe('wss');
    expect(errors).toEqual([]);

    // The page goes without unregistering; its WebSocket closes and nothing can reach the binding any more.
    await page.close();
    const gone = await edge.waitForEndpoint(e, (x) => x.sip_registered === 'false', 5000);
    expect(gone.sip_user_agent).toBeNull();
    expect(gone.sip_registrations).toEqual([]);
  }, 60_000);

  it('shows a failed registration in the page when the password is wrong (401), and the endpoint stays unregistered', async () => {
    const e = await edge.newEndpoint(account, 'browser2');
    const { page, errors } = await openAndRegister(e.username, 'not-the-password');
    expect(await page.locator('#state').getAttribute('data-state')).toBe('Failed');
    expect(await page.locator('#state').textContent()).toBe('Registration failed: 401 Unauthorized');
    expect((await edge.endpoint(e)).sip_registered).toBe('false');
    expect(errors).toEqual([]);
    await page.close();
  }, 60_000);
});
