import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { endpoints, provision, redisStores } from '../support/provision.js';
import {
  parseResponse,
  registerMessage,
  registerWithAuth,
  streamConn,
  udpConn,
  wsConn,
  type SipConn,
} from '../support/sip-client.js';

const callId = (): string => randomBytes(8).toString('hex');
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe('transports of the real server process (Redis store)', () => {
  let redis: RedisServerHandle;
  let server: ServerProcess;
  let stores: ReturnType<typeof redisStores>;
  const users = endpoints(20, 'tx.sip.localhost', 'tx');
  const aor = (i: number): { domain: string; user: string } => ({ domain: users[i].domain, user: users[i].user });

  beforeAll(async () => {
    redis = await startRedis();
    stores = redisStores(redis.url);
    await provision(stores.credentials, users);
    server = await startServer({ REDIS_URL: redis.url, SIP_MIN_EXPIRES: '1' });
  });
  afterAll(async () => {
    await server?.stop();
    await stores?.close();
    await redis?.stop();
  });

  const spec = (conn: SipConn, i: number, transport: 'UDP' | 'TCP' | 'TLS' | 'WS' | 'WSS') => ({
    transport,
    user: users[i].user,
    domain: users[i].domain,
    password: users[i].password,
    viaHost: conn.localHost,
    viaPort: conn.localPort || 9,
    callId: callId(),
  });

  it.each(['WS', 'WSS'] as const)('registers over %s with subprotocol sip; the binding remembers its flow and goes when the socket closes', async (t) => {
    const i = t === 'WS' ? 0 : 1;
    const url = t === 'WS' ? `ws://127.0.0.1:${server.ports.ws}` : `wss://127.0.0.1:${server.ports.wss}`;
    const conn = await wsConn(url);
    expect(conn.ws.protocol).toBe('sip');
    const { first, final } = await registerWithAuth(conn, {
      ...spec(conn, i, t),
      contacts: [`<sip:abc@${conn.localHost};transport=ws>;+sip.instance="<urn:uuid:${i}0000000-0000-4000-8000-000000000000>";reg-id=1`],
      extra: ['Supported: path, outbound'],
    });
    expect(first.status).toBe(401);
    expect(final.status).toBe(200);
    expect(final.header('contact')).toMatch(/^<sip:abc@df7jal23ls0d\.invalid;transport=ws>;\+sip\.instance=.*;reg-id=1;expires=3[56]\d\d$/);
    expect(final.header('require')).toBe('outbound');
    const b = await stores.location.lookup(aor(i));
    expect(b).toHaveLength(1);
    expect(b[0].transport).toBe(t.toLowerCase());
    expect(b[0].received).toMatch(new RegExp(`^sip:127\\.0\\.0\\.1:\\d+;transport=${t.toLowerCase()}$`));
    expect(b[0].connId).toBeTruthy();
    expect(b[0].instanceId).toBe(`<urn:uuid:${i}0000000-0000-4000-8000-000000000000>`);
    conn.close();
    let left = 1;
    for (let k = 0; k < 20 && left > 0; k++) {
      await sleep(100);
      left = (await stores.location.lookup(aor(i))).length;
    }
    expect(left).toBe(0);
  });

  it('refuses a WebSocket upgrade without the sip subprotocol (RFC 7118 §4)', async () => {
    await expect(wsConn(`ws://127.0.0.1:${server.ports.ws}`, [])).rejects.toThrow(/upgrade refused: 400/);
    await expect(wsConn(`wss://127.0.0.1:${server.ports.wss}`, ['chat'])).rejects.toThrow(/upgrade refused: 400/);
  });

  it('answers CRLF keep-alives inside WebSocket frames', async () => {
    const conn = await wsConn(`ws://127.0.0.1:${server.ports.ws}`);
    conn.send('\r\n\r\n');
    expect(await conn.next()).toBe('\r\n');
    conn.close();
  });

  it('registers over TLS with a Node tls client, and over TCP; both answer CRLF keep-alive pings', async () => {
    for (const [t, port, i] of [['TLS', server.ports.tls!, 2], ['TCP', server.ports.tcp!, 3]] as const) {
      const conn = await streamConn('127.0.0.1', port, t === 'TLS');
      conn.send('\r\n\r\n');
      expect(await conn.next()).toBe('\r\n');
      const { final } = await registerWithAuth(conn, spec(conn, i, t));
      expect(final.status).toBe(200);
      const b = await stores.location.lookup(aor(i));
      expect(b).toHaveLength(1);
      expect(b[0].transport).toBe(t.toLowerCase());
      expect(b[0].received).toBe(`sip:127.0.0.1:${conn.localPort};transport=${t.toLowerCase()}`);
      conn.close();
    }
  });

  it('challenges SHA-256 first, then MD5, in separate WWW-Authenticate headers (RFC 8760), and both register', async () => {
    for (const [algorithm, i] of [['SHA-256', 4], ['MD5', 5]] as const) {
      const conn = await udpConn('127.0.0.1', server.ports.udp!);
      const { first, final } = await registerWithAuth(conn, { ...spec(conn, i, 'UDP'), algorithm });
      const ch = first.all('www-authenticate');
      expect(ch).toHaveLength(2);
      expect(ch[0]).toMatch(/^Digest realm="tx\.sip\.localhost", nonce="[^"]+", algorithm=SHA-256, qop="auth"$/);
      expect(ch[1]).toMatch(/algorithm=MD5/);
      expect(final.status).toBe(200);
      conn.close();
    }
  });

  it('gives an unknown user and a wrong password the same answer', async () => {
    const conn = await udpConn('127.0.0.1', server.ports.udp!);
    const unknown = await registerWithAuth(conn, { ...spec(conn, 6, 'UDP'), user: 'nosuchuser', password: 'whatever1' });
    const wrong = await registerWithAuth(conn, { ...spec(conn, 6, 'UDP'), password: 'wrong-password' });
    for (const r of [unknown.final, wrong.final]) {
      expect(r.status).toBe(401);
      expect(r.headers.map(([k]) => k)).toEqual(unknown.final.headers.map(([k]) => k));
      expect(r.all('www-authenticate')[0]).not.toMatch(/stale/);
    }
    conn.close();
  });

  it('answers a retransmitted REGISTER (same branch) with the same response, processed once (RFC 3261 §17.2.2)', async () => {
    const conn = await udpConn('127.0.0.1', server.ports.udp!);
    const msg = registerMessage({ ...spec(conn, 7, 'UDP'), cseq: 1, branch: 'z9hG4bKretrans1' });
    conn.send(msg);
    const a = await conn.next();
    conn.send(msg);
    const b = await conn.next();
    expect(parseResponse(a).status).toBe(401);
    expect(b).toBe(a); // same To tag, same nonce: the first response again
    conn.close();
  });

  it('stamps received and rport on the top Via and answers to the source port (RFC 3581)', async () => {
    const conn = await udpConn('127.0.0.1', server.ports.udp!);
    conn.send(registerMessage({ ...spec(conn, 8, 'UDP'), viaHost: '192.0.2.7', viaPort: 5999, cseq: 1 }));
    const r = parseResponse(await conn.next());
    expect(r.header('via')).toMatch(new RegExp(`^SIP/2\\.0/UDP 192\\.0\\.2\\.7:5999;branch=z9hG4bK[0-9a-f]+;rport=${conn.localPort};received=127\\.0\\.0\\.1$`));
    conn.close();
  });

  it('answers malformed requests with 400 where it can, drops garbage, and keeps serving', async () => {
    const conn = await udpConn('127.0.0.1', server.ports.udp!);
    conn.send('REGISTER sip:x SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:1;branch=z9hG4bKbad\r\nFrom: <sip:a@x>;tag=1\r\nTo: <sip:a@x>\r\nCall-ID: bad1\r\nCSeq: 1 INVITE\r\nContent-Length: 0\r\n\r\n');
    expect(parseResponse(await conn.next()).status).toBe(400);
    conn.send('\u0000\u0001garbage\r\n\r\n');
    conn.send('OPTIONS sip:x SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:1;branch=z9hG4bKopt\r\nFrom: <sip:a@x>;tag=1\r\nTo: <sip:a@x>\r\nCall-ID: ok1\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n');
    expect(parseResponse(await conn.next()).status).toBe(200);
    conn.close();
    const tcp = await streamConn('127.0.0.1', server.ports.tcp!, false);
    const closed = new Promise((r) => tcp.raw.once('close', r));
    tcp.send('NOT SIP AT ALL\r\nno-length: here\r\n\r\n');
    await closed; // no Content-Length on a stream: the connection is closed
  });

  it('answers 400 to a non-numeric Expires and to * with a non-zero Expires, 405 to an unknown method', async () => {
    const conn = await udpConn('127.0.0.1', server.ports.udp!);
    const brief = await registerWithAuth(conn, { ...spec(conn, 9, 'UDP'), expires: '0.5' });
    expect(brief.final.status).toBe(400); // "0.5" is not delta-seconds
    const star = await registerWithAuth(conn, { ...spec(conn, 9, 'UDP'), contacts: ['*'], expires: 30 });
    expect(star.final.status).toBe(400);
    conn.send('PUBLISH sip:x SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:1;branch=z9hG4bKpub\r\nFrom: <sip:a@x>;tag=1\r\nTo: <sip:a@x>\r\nCall-ID: pub1\r\nCSeq: 1 PUBLISH\r\nContent-Length: 0\r\n\r\n');
    const r = parseResponse(await conn.next());
    expect(r.status).toBe(405);
    expect(r.header('allow')).toContain('REGISTER');
    conn.close();
  });

  it('reads a binding registered with Expires 2 as unregistered 3 s later, with no request in between', async () => {
    const conn = await udpConn('127.0.0.1', server.ports.udp!);
    const { final } = await registerWithAuth(conn, { ...spec(conn, 10, 'UDP'), expires: 2 });
    expect(final.status).toBe(200);
    expect(final.header('contact')).toMatch(/;expires=2$/);
    expect(await stores.location.lookup(aor(10))).toHaveLength(1);
    await sleep(3000);
    expect(await stores.location.lookup(aor(10))).toHaveLength(0);
    conn.close();
  });
});

describe('IPv6 (SIP_HOST=::)', () => {
  let redis: RedisServerHandle;
  let server: ServerProcess;
  let stores: ReturnType<typeof redisStores>;
  const users = endpoints(2, 'v6.sip.localhost', 'v6');

  beforeAll(async () => {
    redis = await startRedis();
    stores = redisStores(redis.url);
    await provision(stores.credentials, users);
    server = await startServer({ REDIS_URL: redis.url, SIP_HOST: '::' });
  });
  afterAll(async () => {
    await server?.stop();
    await stores?.close();
    await redis?.stop();
  });

  it('registers from ::1 over UDP and TCP, storing an IPv6 reference in received', async () => {
    const udp = await udpConn('::1', server.ports.udp!);
    const r1 = await registerWithAuth(udp, {
      transport: 'UDP', user: users[0].user, domain: users[0].domain, password: users[0].password,
      viaHost: '[::1]', viaPort: udp.localPort, callId: callId(),
      contacts: [`<sip:${users[0].user}@[::1]:${udp.localPort}>`],
    });
    expect(r1.final.status).toBe(200);
    const b = await stores.location.lookup({ domain: users[0].domain, user: users[0].user });
    expect(b[0].received).toBe(`sip:[::1]:${udp.localPort};transport=udp`);
    expect(b[0].uri).toBe(`sip:${users[0].user}@[::1]:${udp.localPort}`);
    udp.close();
    const tcp = await streamConn('::1', server.ports.tcp!, false);
    const r2 = await registerWithAuth(tcp, {
      transport: 'TCP', user: users[1].user, domain: users[1].domain, password: users[1].password,
      viaHost: '[::1]', viaPort: tcp.localPort, callId: callId(),
    });
    expect(r2.final.status).toBe(200);
    tcp.close();
    // The same dual-stack socket still serves IPv4.
    const v4 = await udpConn('127.0.0.1', server.ports.udp!);
    v4.send('OPTIONS sip:x SIP/2.0\r\nVia: SIP/2.0/UDP 127.0.0.1:1;branch=z9hG4bKv4\r\nFrom: <sip:a@x>;tag=1\r\nTo: <sip:a@x>\r\nCall-ID: v4\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n');
    expect(parseResponse(await v4.next()).status).toBe(200);
    v4.close();
  });
});
