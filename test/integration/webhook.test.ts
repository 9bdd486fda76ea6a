/**
 * One callback delivery attempt (docs/callbacks.md) against real HTTPS receivers on
 * loopback, with a certificate from a throw-away CA: headers, form body, signature,
 * what counts as success, the timeout, HTTPS only, the SSRF guard on IP literals and
 * on resolved names, NODE_EXTRA_CA_CERTS in a child process, and the docs' receiver.
 */
import { execFile, spawn, type ChildProcess } from 'node:child_process';
import { createServer as createHttpServer } from 'node:http';
import { connect, type AddressInfo } from 'node:net';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { CallbackNetworkGuard } from '../../src/events/network-guard.js';
import { verifyCallback } from '../../src/events/signature.js';
import { deliverCallback, type CallbackRequest, type DeliveryOutcome } from '../../src/events/webhook.js';
import { makeTestCa, type TestCa } from '../support/test-ca.js';
import { startHttpsReceiver, type HttpsReceiver } from '../support/https-receiver.js';
import { freePort } from '../support/ports.mjs';
import { ROOT } from '../support/server-process.js';
import { currentRuntime, ltsRuntime, type Runtime } from '../support/runtimes.js';
import { until } from '../support/wait.js';

const SECRET = 'whsec-integration-7f3a9c1e5b2d4f60';
const PARAMS = { Event: 'Hangup', timestamp: '2026-01-02T03:04:05Z', auth_id: 'MAABCDEF', CallUUID: 'c0ffee00-1111-2222-3333-444455556666', From: '+15550001', To: 'sip:bob@x.sip.localhost' };
const LOOPBACK = new CallbackNetworkGuard(['127.0.0.0/8', '::1/128']);
const NOBODY = new CallbackNetworkGuard([]);

let ca: TestCa;
let tls: { key: string; cert: string };
const receivers: HttpsReceiver[] = [];

async function receiver(answer: Parameters<typeof startHttpsReceiver>[1], host?: string): Promise<HttpsReceiver> {
  const r = await startHttpsReceiver(tls, answer, host);
  receivers.push(r);
  return r;
}

function send(over: Partial<CallbackRequest> & { url: string }): Promise<DeliveryOutcome> {
  return deliverCallback({ method: 'POST', params: PARAMS, secret: SECRET, callbackId: 'cb-0001', allowed: LOOPBACK, ca: ca.caCert, ...over });
}

beforeAll(() => {
  ca = makeTestCa();
  tls = { key: ca.serverKey, cert: ca.serverCert };
});
afterAll(async () => {
  await Promise.all(receivers.map((r) => r.close()));
  ca?.remove();
});

describe('deliverCallback: the request', () => {
  it('POSTs the form-encoded parameters with CallbackId, the user agent and a valid signature; 200 is success', async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end('thanks'));
    const before = Math.floor(Date.now() / 1000);
    const out = await send({ url: `https://127.0.0.1:${r.port}/hooks/hangup` });
    expect(out).toMatchObject({ ok: true, status: 200, retryable: false });
    expect(out.error).toBeUndefined();
    expect(r.requests).toHaveLength(1);
    const got = r.requests[0]!;
    expect(got.method).toBe('POST');
    expect(got.url).toBe('/hooks/hangup');
    expect(got.headers['user-agent']).toBe('SipEdge-Webhook/1.0');
    expect(got.headers['content-type']).toBe('application/x-www-form-urlencoded');
    const ts = got.headers['x-sipedge-timestamp'] as string;
    expect(ts).toMatch(/^\d+$/);
    expect(Number(ts)).toBeGreaterThanOrEqual(before);
    expect(Number(ts)).toBeLessThanOrEqual(Math.floor(Date.now() / 1000));
    const sig = got.headers['x-sipedge-signature'] as string;
    expect(sig).toMatch(/^[0-9a-f]{64}$/);
    expect(verifyCallback(SECRET, ts, got.body, sig)).toBe(true);
    expect(verifyCallback('another-secret-0000', ts, got.body, sig)).toBe(false);
    expect(Object.fromEntries(new URLSearchParams(got.body))).toEqual({ ...PARAMS, CallbackId: 'cb-0001' });
    // Form encoding: spaces as +, reserved characters escaped.
    expect(got.body).toContain('To=sip%3Abob%40x.sip.localhost');
  });

  it('keeps the CallbackId across attempts and signs each attempt afresh', async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end());
    await send({ url: `https://127.0.0.1:${r.port}/`, callbackId: 'same-id' });
    await send({ url: `https://127.0.0.1:${r.port}/`, callbackId: 'same-id', params: { ...PARAMS, CallbackId: 'forged' } });
    const ids = r.requests.map((q) => new URLSearchParams(q.body).getAll('CallbackId'));
    expect(ids).toEqual([['same-id'], ['same-id']]);
    for (const q of r.requests) expect(verifyCallback(SECRET, q.headers['x-sipedge-timestamp'] as string, q.body, q.headers['x-sipedge-signature'] as string)).toBe(true);
  });

  it('GET: parameters appended to the query string, no body, the query string is what is signed', async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end());
    const out = await send({ url: `https://127.0.0.1:${r.port}/answer?app=7&x=a%20b`, method: 'GET' });
    expect(out.ok).toBe(true);
    const got = r.requests[0]!;
    expect(got.method).toBe('GET');
    expect(got.body).toBe('');
    expect(got.headers['content-type']).toBeUndefined();
    const [path, query = ''] = got.url.split('?');
    expect(path).toBe('/answer');
    expect(query.startsWith('app=7&x=a%20b&Event=Hangup&')).toBe(true);
    expect(Object.fromEntries(new URLSearchParams(query))).toEqual({ app: '7', x: 'a b', ...PARAMS, CallbackId: 'cb-0001' });
    const ts = got.headers['x-sipedge-timestamp'] as string;
    expect(verifyCallback(SECRET, ts, query, got.headers['x-sipedge-signature'] as string)).toBe(true);
    expect(verifyCallback(SECRET, ts, '', got.headers['x-sipedge-signature'] as string)).toBe(false);
  });

  it('sends URL credentials as Basic auth and keeps them out of the outcome', async () => {
    const r = await receiver((_req, res) => res.writeHead(503).end());
    const out = await send({ url: `https://hook%20user:p%40ss-word-42@127.0.0.1:${r.port}/x?token=query-token-99` });
    expect(r.requests[0]!.headers.authorization).toBe(`Basic ${Buffer.from('hook user:p@ss-word-42').toString('base64')}`);
    expect(r.requests[0]!.url).toBe('/x?token=query-token-99');
    expect(out).toMatchObject({ ok: false, status: 503, error: 'status', retryable: true });
    expect(JSON.stringify(out)).not.toMatch(/p@ss|p%40ss|word-42|query-token|hook user/);
  });
});

describe('deliverCallback: what counts as success', () => {
  it('a 500 is a retryable failure carrying the status', async () => {
    const r = await receiver((_req, res) => res.writeHead(500).end('boom'));
    const out = await send({ url: `https://127.0.0.1:${r.port}/` });
    expect(out).toMatchObject({ ok: false, status: 500, error: 'status', retryable: true });
    expect(r.requests).toHaveLength(1);
  });

  it.each([201, 204, 202])('%i is not 200, so a failure', async (code) => {
    const r = await receiver((_req, res) => res.writeHead(code).end());
    expect(await send({ url: `https://127.0.0.1:${r.port}/` })).toMatchObject({ ok: false, status: code, error: 'status' });
  });

  it('does not follow a redirect', async () => {
    const r = await receiver((req, res) => (req.url === '/moved' ? res.writeHead(302, { location: '/there' }).end() : res.writeHead(200).end()));
    const out = await send({ url: `https://127.0.0.1:${r.port}/moved` });
    expect(out).toMatchObject({ ok: false, status: 302, error: 'status' });
    await new Promise((res) => setTimeout(res, 100));
    expect(r.requests.map((q) => q.url)).toEqual(['/moved']);
  });

  it('reads a large response body only up to its cap', async () => {
    const chunk = Buffer.alloc(64 * 1024, 'x');
    const total = 64 * 1024 * 1024;
    let sent = 0;
    let completed = false;
    let closed: Promise<void> = Promise.resolve();
    const r = await receiver((_req, res) => {
      closed = new Promise((resolve) => res.on('close', resolve));
      res.writeHead(200, { 'content-type': 'text/plain' });
      const more = (): void => {
        while (sent < total) {
          sent += chunk.length;
          if (!res.write(chunk)) return void res.once('drain', more);
        }
        res.end(() => (completed = true));
      };
      more();
    });
    const out = await send({ url: `https://127.0.0.1:${r.port}/` });
    expect(out).toMatchObject({ ok: true, status: 200 });
    await closed;
    // The edge hung up long before 64 MiB were sent.
    expect(completed).toBe(false);
    expect(sent).toBeLessThan(total);
  });

  it('a receiver that never answers fails the attempt at the 3 s deadline', async () => {
    const r = await receiver(() => undefined);
    const out = await send({ url: `https://127.0.0.1:${r.port}/` });
    expect(out).toMatchObject({ ok: false, error: 'timeout', retryable: true });
    expect(out.status).toBeUndefined();
    expect(r.requests).toHaveLength(1);
    expect(out.ms).toBeGreaterThanOrEqual(2900);
    expect(out.ms).toBeLessThan(8000);
  });

  it('a port nobody listens on is a retryable connect failure', async () => {
    const port = await freePort();
    const out = await send({ url: `https://127.0.0.1:${port}/` });
    expect(out).toMatchObject({ ok: false, error: 'connect', retryable: true });
    expect(out.detail).toMatch(/ECONNREFUSED/);
  });

  it('a certificate from an unknown CA is a TLS failure (checks are never off)', async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end());
    const out = await send({ url: `https://127.0.0.1:${r.port}/`, ca: undefined });
    expect(out).toMatchObject({ ok: false, error: 'tls', retryable: true });
    expect(r.requests).toHaveLength(0);
  });

  it('a certificate for another name is a TLS failure', async () => {
    // The receiver's certificate names localhost, 127.0.0.1 and ::1; reached as 127.0.0.2 it does not match.
    const r = await receiver((_req, res) => res.writeHead(200).end(), '127.0.0.2');
    const out = await send({ url: `https://127.0.0.2:${r.port}/` });
    expect(out).toMatchObject({ ok: false, error: 'tls' });
    expect(out.detail).toMatch(/ERR_TLS_CERT_ALTNAME_INVALID/);
    expect(r.requests).toHaveLength(0);
  });

  it('a URL that does not parse is refused, not thrown', async () => {
    expect(await send({ url: 'not a url' })).toMatchObject({ ok: false, error: 'bad_url', retryable: false });
    expect(await send({ url: 'https://' })).toMatchObject({ ok: false, error: 'bad_url', retryable: false });
  });

  it('never puts the signing secret into an outcome', async () => {
    const r = await receiver((_req, res) => res.writeHead(500).end(SECRET));
    const port = await freePort();
    const outs = await Promise.all([
      send({ url: `https://127.0.0.1:${r.port}/${SECRET}` }),
      send({ url: `https://127.0.0.1:${port}/` }),
      send({ url: `http://127.0.0.1:${port}/` }),
      send({ url: `https://127.0.0.1:${r.port}/`, ca: undefined }),
      send({ url: `https://localhost:${r.port}/`, allowed: NOBODY }),
    ]);
    for (const o of outs) expect(JSON.stringify(o)).not.toContain(SECRET);
  });
});

describe('deliverCallback: HTTPS only and no SSRF', () => {
  async function plainHttpServer(): Promise<{ port: number; connections: () => number; close: () => Promise<void> }> {
    let n = 0;
    const s = createHttpServer((_req, res) => res.writeHead(200).end());
    s.on('connection', () => n++);
    await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
    return { port: (s.address() as AddressInfo).port, connections: () => n, close: () => new Promise((res) => s.close(() => res())) };
  }

  it('refuses an http:// URL without connecting, even to an allowed address', async () => {
    const s = await plainHttpServer();
    try {
      for (const method of ['POST', 'GET'] as const) {
        const out = await send({ url: `http://127.0.0.1:${s.port}/`, method });
        expect(out).toMatchObject({ ok: false, error: 'not_https', retryable: false });
      }
      await new Promise((res) => setTimeout(res, 100));
      expect(s.connections()).toBe(0);
    } finally {
      await s.close();
    }
  });

  it('refuses a loopback receiver unless CALLBACK_ALLOWED_NETWORKS covers 127.0.0.0/8', async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end());
    const refused = await send({ url: `https://127.0.0.1:${r.port}/`, allowed: NOBODY });
    expect(refused).toMatchObject({ ok: false, error: 'address_refused', retryable: false });
    expect(refused.detail).toMatch(/127\.0\.0\.1 refused \(loopback\)/);
    const otherNet = await send({ url: `https://127.0.0.1:${r.port}/`, allowed: new CallbackNetworkGuard(['10.0.0.0/8', '::1']) });
    expect(otherNet).toMatchObject({ ok: false, error: 'address_refused' });
    expect(r.connections).toBe(0);
    const allowed = await send({ url: `https://127.0.0.1:${r.port}/`, allowed: new CallbackNetworkGuard(['127.0.0.0/8']) });
    expect(allowed).toMatchObject({ ok: true, status: 200 });
    expect(r.connections).toBe(1);
  });

  it.each(['[::1]', '[::ffff:127.0.0.1]', '[::ffff:7f00:1]', '0x7f.1', '2130706433', '127.1', '0177.0.0.1', '[0:0:0:0:0:0:0:1]'])(
    'refuses the IP-literal host %s (loopback in disguise) without connecting',
    async (host) => {
      const r = await receiver((_req, res) => res.writeHead(200).end());
      const out = await send({ url: `https://${host}:${r.port}/`, allowed: NOBODY });
      expect(out).toMatchObject({ ok: false, error: 'address_refused', retryable: false });
      expect(out.detail).toMatch(/loopback/);
      expect(r.connections).toBe(0);
    },
  );

  it('refuses a host name that resolves to loopback (localhost) the same way: the check is on the resolved address', async () => {
    const r = await receiver((_req, res) => res.writeHead(200).end());
    const out = await send({ url: `https://localhost:${r.port}/`, allowed: NOBODY });
    expect(out).toMatchObject({ ok: false, error: 'address_refused', retryable: false });
    expect(out.detail).toMatch(/(127\.0\.0\.1|::1) refused \(loopback\)/);
    expect(r.connections).toBe(0);
    // Allowed, the name is resolved and the certificate's DNS name checked.
    const ok = await send({ url: `https://localhost:${r.port}/hook`, allowed: new CallbackNetworkGuard(['127.0.0.0/8']) });
    expect(ok).toMatchObject({ ok: true, status: 200 });
    expect(r.requests.map((q) => q.url)).toEqual(['/hook']);
  });

  it('a name that does not resolve is a retryable DNS failure', async () => {
    const out = await send({ url: 'https://no-such-host.invalid/' });
    expect(out).toMatchObject({ ok: false, error: 'dns', retryable: true });
  });
});

const execFileAsync = promisify(execFile);

describe('private CAs through NODE_EXTRA_CA_CERTS', () => {
  // A child Node process (the variable is read at start-up) makes one delivery with
  // the built module (dist/, made by `npm test`'s pretest) and prints the outcome.
  const script = `
    const { deliverCallback } = await import(${JSON.stringify(`${ROOT}dist/events/webhook.js`)});
    const { CallbackNetworkGuard } = await import(${JSON.stringify(`${ROOT}dist/events/network-guard.js`)});
    const out = await deliverCallback({ url: process.env.URL, method: 'POST', params: { Event: 'Ring' },
      secret: 'child-secret-0123456789', callbackId: 'cb-child', allowed: new CallbackNetworkGuard(['127.0.0.0/8']) });
    console.log(JSON.stringify(out));`;
  async function deliverFromChild(node: Runtime, url: string, extraCa: string | null): Promise<DeliveryOutcome> {
    const env: Record<string, string> = { PATH: process.env.PATH ?? '/usr/bin:/bin', URL: url };
    if (extraCa !== null) env.NODE_EXTRA_CA_CERTS = extraCa;
    const { stdout } = await execFileAsync(node.bin, ['--input-type=module', '-e', script], { env, timeout: 20_000 });
    return JSON.parse(stdout.trim().split('\n').pop() as string) as DeliveryOutcome;
  }

  it.each([
    ['the test runtime', currentRuntime],
    ['the LTS runtime', ltsRuntime],
  ])('under %s, a receiver with a private-CA certificate is accepted only when NODE_EXTRA_CA_CERTS names the CA', async (_name, runtime) => {
    const node = runtime();
    const r = await receiver((_req, res) => res.writeHead(200).end());
    const url = `https://localhost:${r.port}/private-ca`;
    const trusted = await deliverFromChild(node, url, ca.caCertFile);
    expect(trusted).toMatchObject({ ok: true, status: 200 });
    expect(r.requests).toHaveLength(1);
    expect(new URLSearchParams(r.requests[0]!.body).get('CallbackId')).toBe('cb-child');

    const untrusted = await deliverFromChild(node, url, null);
    expect(untrusted).toMatchObject({ ok: false, error: 'tls', retryable: true });
    expect(untrusted.detail).toMatch(/UNABLE_TO_VERIFY_LEAF_SIGNATURE/);

    const otherCa = makeTestCa();
    try {
      const wrongCa = await deliverFromChild(node, url, otherCa.caCertFile);
      expect(wrongCa).toMatchObject({ ok: false, error: 'tls' });
    } finally {
      otherCa.remove();
    }
    expect(r.requests).toHaveLength(1);
  });
});

describe('the receiver of docs/callbacks.md', () => {
  let child: ChildProcess | undefined;
  afterAll(() => {
    if (child?.pid !== undefined && child.exitCode === null) child.kill('SIGTERM');
  });

  it('verifies a real delivery, POST and GET, and refuses a forged one', async () => {
    const md = readFileSync(join(ROOT, 'docs/callbacks.md'), 'utf8');
    const m = /<!-- receiver\.mjs[^>]*-->\s*```js\n([\s\S]*?)```/.exec(md);
    expect(m, 'docs/callbacks.md holds the receiver snippet').not.toBeNull();
    const code = (m as RegExpExecArray)[1] as string;
    expect(code.trim().split('\n').length).toBeLessThanOrEqual(13);
    const file = join(ca.dir, 'receiver.mjs');
    writeFileSync(file, code);
    const secret = 'docs-receiver-secret-0123';
    let stdout = '';
    let port = 0;
    // A free port can be taken by another lane's process before the receiver binds it: the
    // receiver then exits (EADDRINUSE) and is started again on another port (three tries).
    for (let attempt = 1; ; attempt++) {
      port = await freePort();
      const c = spawn(process.execPath, [file], {
        env: { PATH: process.env.PATH ?? '/usr/bin:/bin', SECRET: secret, TLS_KEY: ca.serverKeyFile, TLS_CERT: ca.serverCertFile, PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      child = c;
      c.stdout?.on('data', (d: Buffer) => (stdout += d.toString()));
      c.stderr?.on('data', (d: Buffer) => (stdout += d.toString()));
      const listening = await until(`the docs receiver to listen (output so far: ${stdout.slice(0, 500)})`, () =>
        c.exitCode !== null || c.signalCode !== null
          ? false
          : new Promise<true | undefined>((resolve) => {
              const s = connect(port, '127.0.0.1', () => (s.destroy(), resolve(true)));
              s.on('error', () => resolve(undefined));
            }),
      );
      if (listening) break;
      if (attempt >= 3) throw new Error(`the docs receiver exited three times: ${stdout.slice(0, 1000)}`);
      stdout = '';
    }
    const url = `https://127.0.0.1:${port}/cb?route=1`;
    const post = await deliverCallback({ url, method: 'POST', params: PARAMS, secret, callbackId: 'docs-1', allowed: LOOPBACK, ca: ca.caCert });
    expect(post).toMatchObject({ ok: true, status: 200 });
    const get = await deliverCallback({ url, method: 'GET', params: { Event: 'Ring', CallUUID: 'u-2' }, secret, callbackId: 'docs-2', allowed: LOOPBACK, ca: ca.caCert });
    expect(get).toMatchObject({ ok: true, status: 200 });
    const forged = await deliverCallback({ url, method: 'POST', params: PARAMS, secret: 'not-the-secret-000', callbackId: 'docs-3', allowed: LOOPBACK, ca: ca.caCert });
    expect(forged).toMatchObject({ ok: false, status: 401, error: 'status' });
    const lines = await until('the receiver to print two callbacks', () => {
      const l = stdout.trim().split('\n').filter((x) => x.startsWith('{'));
      return l.length >= 2 ? l : undefined;
    }, 5000);
    expect(lines.map((l) => JSON.parse(l))).toEqual([
      { ...PARAMS, CallbackId: 'docs-1' },
      { route: '1', Event: 'Ring', CallUUID: 'u-2', CallbackId: 'docs-2' },
    ]);
  });
});
