/**
 * Operability of the real server process: Prometheus metrics, health and
 * readiness probes, graceful shutdown on SIGTERM, and TLS (minimum version,
 * configured ciphers, certificate reload on SIGHUP without dropping flows).
 */
import { execFileSync } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import net from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import tls from 'node:tls';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { provision, redisStores } from '../support/provision.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { authorize, parseResponse, registerMessage, registerWithAuth, streamConn, udpConn, wsConn, type SipConn } from '../support/sip-client.js';
import { callId, metric, options, register, scrape, sleep, udpClient, type Endpoint } from '../support/security.js';

const DOMAIN = 'ops.sip.localhost';
const ep = (user: string): Endpoint => ({ user, domain: DOMAIN, password: `${user}-secret-pw` });
const ENDPOINTS = ['u-udp', 'u-tcp', 'u-tls', 'u-ws', 'u-wss', 'u-drain', 'u-tls2', 'u-wss2', 'u-digest'].map(ep);
const byName = (n: string): Endpoint => ENDPOINTS.find((e) => e.user === n) as Endpoint;

const spec = (conn: SipConn, e: Endpoint, transport: 'UDP' | 'TCP' | 'TLS' | 'WS' | 'WSS') => ({
  transport,
  user: e.user,
  domain: e.domain,
  password: e.password,
  viaHost: conn.localHost,
  viaPort: conn.localPort || 9,
  callId: callId(),
  algorithm: 'MD5' as const,
});

describe('operability (real server on Redis)', () => {
  let redis: RedisServerHandle;
  let stores: ReturnType<typeof redisStores>;
  let server: ServerProcess;
  const conns: SipConn[] = [];

  beforeAll(async () => {
    redis = await startRedis();
    stores = redisStores(redis.url);
    await provision(stores.credentials, ENDPOINTS);
    server = await startServer({ REDIS_URL: redis.url });
  }, 60_000);

  afterAll(async () => {
    for (const c of conns) c.close();
    await server?.stop();
    await stores?.close();
    await redis?.stop();
  });

  it('answers /healthz and /readyz, and serves /metrics in the Prometheus text format without credentials', async () => {
    const base = `http://127.0.0.1:${server.ports.http}`;
    const h = await fetch(`${base}/healthz`);
    expect(h.status).toBe(200);
    expect(await h.json()).toMatchObject({ status: 'ok' });
    const r = await fetch(`${base}/readyz`);
    expect(r.status).toBe(200);
    expect(await r.json()).toMatchObject({ status: 'ready' });
    const m = await fetch(`${base}/metrics`, { headers: { accept: 'text/plain' } });
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toMatch(/^text\/plain; version=0\.0\.4/);
    const text = await m.text();
    for (const name of [
      'sip_bindings_active',
      'sip_register_outcomes_total',
      'sip_auth_failures_total',
      'sip_auth_blocks_total',
      'sip_bans_total',
      'sip_request_duration_seconds',
      'sip_store_errors_total',
      'sip_connections_open',
      'sip_event_loop_delay_max_seconds',
      'process_resident_memory_bytes',
    ]) {
      expect(text, name).toContain(`# TYPE ${name} `);
    }
  });

  it('counts bindings by transport, open connections, REGISTER outcomes, auth failures and latencies', async () => {
    const udp = await udpClient('127.0.0.1', server.ports.udp as number);
    expect((await register(udp, byName('u-udp'))).final.status).toBe(200);
    expect((await register(udp, byName('u-udp'), 'wrong-password')).final.status).toBe(401);
    udp.close();
    const tcp = await streamConn('127.0.0.1', server.ports.tcp as number, false);
    const tlsc = await streamConn('127.0.0.1', server.ports.tls as number, true);
    const ws = await wsConn(`ws://127.0.0.1:${server.ports.ws}`);
    const wss = await wsConn(`wss://127.0.0.1:${server.ports.wss}`);
    conns.push(tcp, tlsc, ws, wss);
    for (const [c, name, t] of [
      [tcp, 'u-tcp', 'TCP'],
      [tlsc, 'u-tls', 'TLS'],
      [ws, 'u-ws', 'WS'],
      [wss, 'u-wss', 'WSS'],
    ] as const) {
      expect((await registerWithAuth(c, spec(c, byName(name), t))).final.status).toBe(200);
    }
    // The store-wide binding count is refreshed at most every 5 s (it scans the store).
    let m = await scrape(server.ports.http as number);
    for (let i = 0; i < 80 && metric(m, 'sip_bindings_active') < 5; i++) {
      await sleep(100);
      m = await scrape(server.ports.http as number);
    }
    for (const t of ['udp', 'tcp', 'tls', 'ws', 'wss']) {
      expect(metric(m, 'sip_bindings_active', { transport: t }), t).toBe(1);
      expect(metric(m, 'sip_register_outcomes_total', { outcome: 'registered', transport: t }), t).toBe(1);
      expect(metric(m, 'sip_register_outcomes_total', { outcome: 'challenged', transport: t }), t).toBeGreaterThanOrEqual(1);
      expect(metric(m, 'sip_request_duration_seconds_count', { method: 'REGISTER', transport: t }), t).toBeGreaterThanOrEqual(2);
      if (t !== 'udp') expect(metric(m, 'sip_connections_open', { transport: t }), t).toBe(1);
    }
    expect(metric(m, 'sip_auth_failures_total')).toBe(1);
    expect(metric(m, 'sip_responses_total', { method: 'REGISTER', status: '200' })).toBe(5);
    expect(metric(m, 'sip_request_duration_seconds_bucket', { method: 'REGISTER', transport: 'udp', le: '+Inf' })).toBeGreaterThanOrEqual(2);
    expect(metric(m, 'sip_store_up')).toBe(1);
    expect(metric(m, 'http_request_duration_seconds_count', { route: '/readyz' })).toBeGreaterThanOrEqual(1);
    expect(metric(m, 'process_unhandled_rejections_total')).toBe(0);
    expect(metric(m, 'process_resident_memory_bytes')).toBeGreaterThan(10 * 1024 * 1024);
  });

  it('refuses a valid digest computed for another resource (uri sip:elsewhere.example) with 400, counted; the Request-URI, the account domain and this node\'s address are accepted', async () => {
    const conn = await udpConn('127.0.0.1', server.ports.udp as number);
    conns.push(conn);
    const e = byName('u-digest');
    const before = metric(await scrape(server.ports.http as number), 'sip_auth_uri_mismatch_total');
    const attempt = async (uri: string): Promise<ReturnType<typeof parseResponse>> => {
      const s = spec(conn, e, 'UDP');
      conn.send(registerMessage({ ...s, cseq: 1 }));
      const challenge = parseResponse(await conn.next());
      expect(challenge.status).toBe(401);
      const authorization = authorize(challenge.all('www-authenticate').find((c) => c.includes('MD5')) as string, { user: e.user, password: e.password, method: 'REGISTER', uri });
      conn.send(registerMessage({ ...s, cseq: 2, authorization }));
      return parseResponse(await conn.next());
    };
    const refused = await attempt('sip:elsewhere.example');
    expect(refused.status).toBe(400);
    expect(refused.header('warning')).toMatch(/digest uri/);
    expect(refused.all('contact')).toEqual([]);
    expect(metric(await scrape(server.ports.http as number), 'sip_auth_uri_mismatch_total')).toBe(before + 1);
    // Another account's domain is another resource too.
    expect((await attempt('sip:other.sip.localhost')).status).toBe(400);
    for (const ok of [`sip:${DOMAIN}`, `sip:127.0.0.1:${server.ports.udp}`]) expect((await attempt(ok)).status, ok).toBe(200);
    expect(metric(await scrape(server.ports.http as number), 'sip_auth_uri_mismatch_total')).toBe(before + 2);
  });

  it('counts store errors while Redis does not answer', async () => {
    const udp = await udpClient('127.0.0.1', server.ports.udp as number);
    process.kill(redis.pid as number, 'SIGSTOP');
    try {
      // Each store call gives up after REDIS commandTimeout (2 s); the credential may come from the cache.
      const { final } = await register(udp, byName('u-udp'), undefined, { timeoutMs: 6000 });
      expect(final.status).toBe(503);
    } finally {
      process.kill(redis.pid as number, 'SIGCONT');
      udp.close();
    }
    const m = await scrape(server.ports.http as number);
    // The credential read (when not cached) or the binding write met the silent Redis.
    const errors = metric(m, 'sip_store_errors_total', { store: 'credentials', op: 'get' }) + metric(m, 'sip_store_errors_total', { store: 'location', op: 'register' });
    expect(errors).toBeGreaterThanOrEqual(1);
  });
});

describe('graceful shutdown on SIGTERM', () => {
  let redis: RedisServerHandle;
  let stores: ReturnType<typeof redisStores>;
  let server: ServerProcess;

  beforeAll(async () => {
    redis = await startRedis();
    stores = redisStores(redis.url);
    await provision(stores.credentials, ENDPOINTS);
    server = await startServer({ REDIS_URL: redis.url });
  }, 60_000);

  afterAll(async () => {
    await server?.stop('SIGKILL');
    await stores?.close();
    await redis?.stop();
  });

  it('stops accepting, answers the request in flight, closes WebSockets with 1001 and exits 0 within 5 s', async () => {
    const ws = await wsConn(`ws://127.0.0.1:${server.ports.ws}`);
    expect((await registerWithAuth(ws, spec(ws, byName('u-ws'), 'WS'))).final.status).toBe(200);
    const wsClosed = new Promise<number>((resolve) => ws.ws.once('close', (code) => resolve(code)));

    // A REGISTER whose store write will still be running when SIGTERM arrives.
    const udp = await udpClient('127.0.0.1', server.ports.udp as number);
    const e = byName('u-drain');
    const id = callId();
    const base = { transport: 'UDP' as const, user: e.user, domain: DOMAIN, viaHost: '127.0.0.1', viaPort: udp.port, callId: id, expires: 300 };
    const first = await udp.request(registerMessage({ ...base, cseq: 1 }), id);
    const challenge = first.all('www-authenticate').find((h) => h.includes('MD5')) as string;
    const authorization = authorize(challenge, { user: e.user, password: e.password, method: 'REGISTER', uri: `sip:${DOMAIN}` });
    const admin = new Redis(redis.url);
    await admin.call('CLIENT', 'PAUSE', '1500', 'WRITE');
    await admin.quit();
    const inFlight = udp.request(registerMessage({ ...base, cseq: 2, authorization }), id, 5000);
    await sleep(200);

    const t0 = performance.now();
    server.child.kill('SIGTERM');
    const exited = new Promise<number | null>((resolve) => server.child.once('exit', (code) => resolve(code)));
    await sleep(150);

    // Draining: not ready, no new connections, new messages unanswered.
    const ready = await fetch(`http://127.0.0.1:${server.ports.http}/readyz`);
    expect(ready.status).toBe(503);
    expect(await ready.json()).toMatchObject({ error: 'not_ready', message: expect.stringMatching(/shutting down/) });
    await expect(
      new Promise((resolve, reject) => {
        const s = net.connect(server.ports.tcp as number, '127.0.0.1', () => resolve(s));
        s.once('error', reject);
      }),
    ).rejects.toThrow(/ECONNREFUSED/);
    const late = callId();
    await expect(udp.request(options('127.0.0.1', udp.port, late), late, 300)).rejects.toThrow(/no response/);

    // The transaction in flight finishes with its 200, its binding stored.
    const final = await inFlight;
    expect(final.status).toBe(200);
    expect((await stores.location.lookup({ domain: DOMAIN, user: e.user })).map((b) => b.callId)).toEqual([id]);

    expect(await wsClosed).toBe(1001);
    expect(await exited).toBe(0);
    expect(performance.now() - t0).toBeLessThan(5000);
    expect(server.logs.some((l) => l.msg === 'stopped')).toBe(true);
    udp.close();
  }, 20_000);
});

describe('TLS: minimum version, configured ciphers, certificate reload on SIGHUP', () => {
  let redis: RedisServerHandle;
  let stores: ReturnType<typeof redisStores>;
  let server: ServerProcess;
  let dir: string;
  const certFile = (): string => join(dir, 'cert.pem');
  const keyFile = (): string => join(dir, 'key.pem');
  const CIPHERS = 'ECDHE-ECDSA-AES128-GCM-SHA256:ECDHE-ECDSA-CHACHA20-POLY1305';

  /** A fresh self-signed EC certificate; returns its SHA-256 fingerprint. */
  function makeCert(cn: string, into: string): string {
    execFileSync('openssl', [
      'req', '-x509', '-newkey', 'ec', '-pkeyopt', 'ec_paramgen_curve:prime256v1', '-nodes', '-days', '2',
      '-subj', `/CN=${cn}`, '-keyout', join(into, `${cn}.key`), '-out', join(into, `${cn}.crt`),
    ], { stdio: 'ignore' });
    const der = Buffer.from(readFileSync(join(into, `${cn}.crt`), 'utf8').replace(/-----[^-]+-----|\s/g, ''), 'base64');
    return createHash('sha256').update(der).digest('hex');
  }
  const install = (cn: string): void => {
    writeFileSync(certFile(), readFileSync(join(dir, `${cn}.crt`)));
    writeFileSync(keyFile(), readFileSync(join(dir, `${cn}.key`)));
  };
  const peer = (opts: tls.ConnectionOptions): Promise<tls.TLSSocket> =>
    new Promise((resolve, reject) => {
      const s = tls.connect({ host: '127.0.0.1', port: server.ports.tls as number, rejectUnauthorized: false, ...opts }, () => resolve(s));
      s.once('error', reject);
    });
  const fingerprintOf = (s: tls.TLSSocket): string => createHash('sha256').update(s.getPeerCertificate().raw).digest('hex');
  let fpA = '';
  let fpB = '';

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'sipedge-tls-'));
    fpA = makeCert('cert-a', dir);
    fpB = makeCert('cert-b', dir);
    install('cert-a');
    redis = await startRedis();
    stores = redisStores(redis.url);
    await provision(stores.credentials, ENDPOINTS);
    server = await startServer({ REDIS_URL: redis.url, TLS_CERT_FILE: certFile(), TLS_KEY_FILE: keyFile(), TLS_CIPHERS: CIPHERS });
  }, 60_000);

  afterAll(async () => {
    await server?.stop();
    await stores?.close();
    await redis?.stop();
    rmSync(dir, { recursive: true, force: true });
  });

  it('refuses TLS 1.1 and older', async () => {
    await expect(peer({ minVersion: 'TLSv1', maxVersion: 'TLSv1.1', ciphers: 'DEFAULT:@SECLEVEL=0' })).rejects.toThrow();
    const s = await peer({});
    expect(['TLSv1.2', 'TLSv1.3']).toContain(s.getProtocol());
    s.destroy();
  });

  it('negotiates only the configured TLS 1.2 ciphers', async () => {
    await expect(peer({ maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES256-GCM-SHA384' })).rejects.toThrow();
    const s = await peer({ maxVersion: 'TLSv1.2', ciphers: 'ECDHE-ECDSA-AES128-GCM-SHA256' });
    expect(s.getProtocol()).toBe('TLSv1.2');
    expect(s.getCipher().name).toBe('ECDHE-ECDSA-AES128-GCM-SHA256');
    s.destroy();
  });

  it('reloads the certificate on SIGHUP: new handshakes get the new one, registered TLS and WSS flows stay up', async () => {
    const tlsc = await streamConn('127.0.0.1', server.ports.tls as number, true);
    const wss = await wsConn(`wss://127.0.0.1:${server.ports.wss}`);
    expect((await registerWithAuth(tlsc, spec(tlsc, byName('u-tls2'), 'TLS'))).final.status).toBe(200);
    expect((await registerWithAuth(wss, spec(wss, byName('u-wss2'), 'WSS'))).final.status).toBe(200);
    expect(fingerprintOf(tlsc.raw as tls.TLSSocket)).toBe(fpA);

    install('cert-b');
    const reloads = server.logs.filter((l) => l.msg === 'tls certificate reloaded').length;
    server.child.kill('SIGHUP');
    for (let i = 0; i < 50 && server.logs.filter((l) => l.msg === 'tls certificate reloaded').length === reloads; i++) await sleep(50);

    const fresh = await peer({});
    expect(fingerprintOf(fresh)).toBe(fpB);
    fresh.destroy();

    // The flows registered before the reload are the same connections, still serving.
    for (const [c, t] of [[tlsc, 'TLS'], [wss, 'WSS']] as const) {
      const id = callId();
      c.send(options(c.localHost, c.localPort || 9, id, t));
      expect(parseResponse(await c.next()).status).toBe(200);
    }
    expect(fingerprintOf(tlsc.raw as tls.TLSSocket)).toBe(fpA);
    for (const u of ['u-tls2', 'u-wss2']) expect(await stores.location.lookup({ domain: DOMAIN, user: u })).toHaveLength(1);
    tlsc.close();
    wss.close();
  });

  it('keeps the current certificate when the new files are unusable', async () => {
    writeFileSync(certFile(), 'not a certificate\n');
    server.child.kill('SIGHUP');
    for (let i = 0; i < 50 && !server.logs.some((l) => l.msg === 'tls reload failed; keeping the old certificate'); i++) await sleep(50);
    expect(server.logs.some((l) => l.msg === 'tls reload failed; keeping the old certificate')).toBe(true);
    const s = await peer({});
    expect(fingerprintOf(s)).toBe(fpB);
    s.destroy();
  });
});
