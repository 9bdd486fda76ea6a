/**
 * Idle WebSocket flows against the real server process (WS and WSS): a silent
 * connection without a binding is cut after SIP_IDLE_TIMEOUT; one that sends CRLF
 * keep-alives stays. A silent connection that carries a live binding is never cut
 * for being quiet (issue 13, README "Flows"): the server pings it instead and it
 * stays, binding and all, while it answers. The transport checks every connection
 * in one sweep (no timer per flow), so these bound its lateness.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { WebSocket } from 'ws';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { endpoints, provision, redisStores } from '../support/provision.js';
import { registerWithAuth, wsConn } from '../support/sip-client.js';

const IDLE_S = 5; // the smallest SIP_IDLE_TIMEOUT allowed
const PING_S = 2;

/** Milliseconds until the server closes `ws`, or null if it is still open after `within` ms. */
function closedWithin(ws: WebSocket, within: number): Promise<number | null> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    if (ws.readyState === ws.CLOSED) return resolve(0);
    const t = setTimeout(() => resolve(null), within);
    ws.on('error', () => {});
    ws.once('close', () => {
      clearTimeout(t);
      resolve(performance.now() - t0);
    });
  });
}

describe('idle WebSocket flows (real server)', () => {
  let redis: RedisServerHandle;
  let server: ServerProcess;
  let stores: ReturnType<typeof redisStores>;
  const users = endpoints(2, 'idle.sip.localhost', 'idle');
  const bindings = async (i: number): Promise<number> => (await stores.location.lookup({ domain: users[i].domain, user: users[i].user })).length;

  beforeAll(async () => {
    redis = await startRedis();
    stores = redisStores(redis.url);
    await provision(stores.credentials, users);
    server = await startServer({ REDIS_URL: redis.url, SIP_IDLE_TIMEOUT: String(IDLE_S), SIP_PING_INTERVAL: String(PING_S), SIP_HEADER_TIMEOUT: '1' });
  }, 30_000);
  afterAll(async () => {
    await server?.stop();
    await stores?.close();
    await redis?.stop();
  });

  it.each(['ws', 'wss'] as const)('over %s: cuts a silent flow without a binding after the idle timeout, keeps one with CRLF keep-alives and a silent one with a binding (pinged)', async (t) => {
    const url = `${t}://127.0.0.1:${t === 'ws' ? server.ports.ws : server.ports.wss}`;
    const i = t === 'ws' ? 0 : 1;
    const u = users[i];
    const silent = await wsConn(url);
    const { final } = await registerWithAuth(silent, {
      transport: t === 'ws' ? 'WS' : 'WSS',
      user: u.user,
      domain: u.domain,
      password: u.password,
      viaHost: silent.localHost,
      viaPort: 9,
      callId: randomBytes(8).toString('hex'),
    });
    expect(final.status).toBe(200);
    expect(await bindings(i)).toBe(1);
    let pings = 0;
    silent.ws.on('ping', () => pings++); // `ws` answers each with a pong by itself (RFC 6455 §5.5.3)
    const live = await wsConn(url);
    const keepAlive = setInterval(() => live.send('\r\n\r\n'), 1000);
    const quiet = await wsConn(url); // upgraded, then never a frame, no binding
    try {
      const [q, a, b] = await Promise.all([
        closedWithin(quiet.ws, (IDLE_S + 3) * 1000),
        closedWithin(silent.ws, (IDLE_S + 3) * 1000),
        closedWithin(live.ws, (IDLE_S + 2) * 1000),
      ]);
      expect(q).not.toBeNull();
      expect(q as number).toBeGreaterThan(IDLE_S * 1000 - 1500);
      expect(q as number).toBeLessThan(IDLE_S * 1000 + 1500);
      // Issue 13 changed this: the silent flow with a live binding is no longer cut after
      // SIP_IDLE_TIMEOUT; it is pinged about once per quiet SIP_PING_INTERVAL and stays.
      expect(a).toBeNull();
      expect(pings).toBeGreaterThanOrEqual(IDLE_S / PING_S / 2);
      expect(await bindings(i)).toBe(1);
      expect(b).toBeNull();
      // Its binding still goes with the connection.
      silent.ws.terminate();
      const deadline = Date.now() + 2000;
      while ((await bindings(i)) !== 0 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
      expect(await bindings(i)).toBe(0);
    } finally {
      clearInterval(keepAlive);
      live.close();
      quiet.close();
    }
  }, 20_000);
});
