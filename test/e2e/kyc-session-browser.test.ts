/**
 * A partner's KYC session in redirect flow, completed through its hosted page in
 * headless Chromium (`/usr/bin/chromium`, playwright-core) on the real server: the
 * partner creates the session over the API, the "customer" opens widget_url, picks a
 * company, enters the test-mode PAN and GSTIN and presses Verify; the page shows KYC
 * completed (a screenshot is written to test/.tmp/kyc-session-completed.png, path
 * printed), Continue leads to the partner's redirect_url with session_id, status and
 * auth_id, and a signed `kyc.completed` webhook reaches the partner's HTTPS receiver,
 * whose signature the test verifies with the account's signing secret.
 */
import { mkdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import type { ServerResponse } from 'node:http';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromium, type BrowserContext } from 'playwright-core';
import { E2E_PARTNER, startEdge, type Account, type Edge } from '../support/edge.js';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { until } from '../support/wait.js';
import { verifyCallback } from '../../src/events/signature.js';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');
const SCREENSHOT = join(ROOT, 'test', '.tmp', 'kyc-session-completed.png');
const CHROMIUM_ARGS = ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking', '--ignore-certificate-errors', '--disable-quic', '--no-first-run', '--disable-component-update', '--disable-sync'];

describe('a KYC session completed through its hosted page in headless Chromium', () => {
  let edge: Edge;
  let rx: HttpsReceiver;
  let ca: TestCa;
  let context: BrowserContext;
  let profile: string;
  let account: Account;
  let secret: string;

  beforeAll(async () => {
    ca = makeTestCa();
    rx = await startHttpsReceiver({ key: ca.serverKey, cert: ca.serverCert }, (_req, res: ServerResponse) => void res.writeHead(200, { 'content-type': 'text/html' }).end('<h1>Back at the partner</h1>'));
    edge = await startEdge({ NODE_EXTRA_CA_CERTS: ca.caCertFile, CALLBACK_ALLOWED_NETWORKS: '127.0.0.0/8', SIP_TLS_PORT: 'off', SIP_WSS_PORT: 'off' });
    account = await edge.newAccount();
    const r = await fetch(`${edge.base}/api/v1/Account/${account.authId}/SigningSecret/`, { method: 'POST', headers: { 'x-auth-id': account.authId, 'x-auth-token': account.authToken } });
    expect(r.status).toBe(201);
    secret = String(((await r.json()) as { callback_signing_secret: string }).callback_signing_secret);
    profile = mkdtempSync(join(tmpdir(), 'sip-edge-chromium-'));
    context = await chromium.launchPersistentContext(profile, { executablePath: '/usr/bin/chromium', headless: true, args: CHROMIUM_ARGS, viewport: { width: 640, height: 720 } });
  }, 60_000);
  afterAll(async () => {
    await context?.close();
    if (profile) rmSync(profile, { recursive: true, force: true });
    await edge?.stop();
    await rx?.close();
    ca?.remove();
  });

  it('redirect flow: page → kyc_completed, redirect with the session, a signed kyc.completed webhook', async () => {
    const partner = { 'x-auth-id': E2E_PARTNER.id, 'x-auth-token': E2E_PARTNER.token, 'content-type': 'application/json', accept: 'application/json' };
    const created = await fetch(`${edge.base}/api/v1/partner/kyc-sessions`, {
      method: 'POST',
      headers: partner,
      body: JSON.stringify({ account_auth_id: account.authId, flow_type: 'redirect', redirect_url: `https://127.0.0.1:${rx.port}/done`, webhook_url: `https://127.0.0.1:${rx.port}/kyc-hook`, metadata: { customer_ref: 'C-42' } }),
    });
    const s = (await created.json()) as Record<string, unknown>;
    expect(created.status, JSON.stringify(s)).toBe(201);
    expect(s.status).toBe('link_ready');

    const page = await context.newPage();
    const errors: string[] = [];
    page.on('pageerror', (e) => errors.push(e.message));
    await page.goto(String(s.widget_url));
    expect(await page.locator('#status').getAttribute('data-status')).toBe('opened');
    await page.selectOption('#business_type', 'private_limited');
    expect(await page.locator('#gstin').isVisible()).toBe(true);
    expect(await page.locator('#access_request_id').isVisible()).toBe(false);
    await page.fill('#pan', 'TESTSUCCESS0001');
    await page.fill('#gstin', 'TESTSUCCESS0001');
    await page.click('#submit');
    await page.waitForSelector('#status[data-status="kyc_completed"]', { timeout: 10_000 });
    expect(await page.locator('#result').textContent()).toBe('KYC completed. Thank you.');
    mkdirSync(join(ROOT, 'test', '.tmp'), { recursive: true });
    await page.screenshot({ path: SCREENSHOT });
    console.log(`screenshot of the completed KYC page: ${SCREENSHOT}`);
    await page.click('#continue');
    await page.waitForURL(/\/done\?/, { timeout: 10_000 });
    const back = new URL(page.url());
    expect(Object.fromEntries(back.searchParams)).toEqual({ session_id: String(s.id), status: 'kyc_completed', auth_id: account.authId });
    expect(errors).toEqual([]);

    const got = await fetch(`${edge.base}/api/v1/partner/kyc-sessions/${String(s.id)}`, { headers: partner });
    expect(await got.json()).toMatchObject({ status: 'kyc_completed', kyc_type: 'company', completed_at: expect.any(String), first_opened_at: expect.any(String), metadata: { customer_ref: 'C-42' } });

    const hook = await until('the kyc.completed webhook', async () => rx.requests.find((q) => q.url === '/kyc-hook'), 15_000);
    const params = Object.fromEntries(new URLSearchParams(hook.body));
    expect(params).toMatchObject({ Event: 'kyc.completed', SessionId: String(s.id), AccountAuthId: account.authId, Status: 'kyc_completed', KycType: 'company' });
    expect(verifyCallback(secret, String(hook.headers['x-sipedge-timestamp']), hook.body, String(hook.headers['x-sipedge-signature']))).toBe(true);
    expect(verifyCallback('not-the-secret', String(hook.headers['x-sipedge-timestamp']), hook.body, String(hook.headers['x-sipedge-signature']))).toBe(false);
    expect(rx.requests.filter((q) => q.url === '/kyc-hook')).toHaveLength(1);
  });
});
