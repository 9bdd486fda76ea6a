/**
 * Floods against the real server process: the per-source message rate limit and
 * its ban (dropped before parsing), connection caps per address and in total,
 * slow senders on TCP, TLS and WS, and the cap on remembered UDP transactions.
 * Loopback addresses act as distinct sources; only 127.0.0.9 is trusted.
 */
import net from 'node:net';
import tls from 'node:tls';
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startServer, type ServerProcess } from '../support/server-process.js';
import { callId, metric, options, scrape, sleep, udpClient, type UdpClient } from '../support/security.js';

const LIMIT = 50; // messages per window
const WINDOW_S = 1;
const BAN_S = 3;
const PER_ADDRESS = 4;
const TOTAL = 12;
const HEADER_TIMEOUT_S = 1;
const MAX_TRANSACTIONS = 1000;

/** A TCP (or TLS) connection from `from`; resolves once connected. */
function connect(port: number, from: string, useTls = false): Promise<net.Socket> {
  return new Promise((resolve, reject) => {
    // tls.connect() takes any socket.connect() option too (Node docs); @types/node's
    // tls.ConnectionOptions lacks localAddress, so the options are typed as both.
    const tlsOptions: tls.ConnectionOptions & Pick<net.TcpNetConnectOpts, 'localAddress'> = { host: '127.0.0.1', port, localAddress: from, rejectUnauthorized: false };
    const s = useTls
      ? tls.connect(tlsOptions, () => resolve(s))
      : net.connect({ host: '127.0.0.1', port, localAddress: from }, () => resolve(s));
    s.once('error', reject);
  });
}

/** Milliseconds until the peer closes `s`, or null if it is still open after `within` ms. */
function closedWithin(s: net.Socket, within: number): Promise<number | null> {
  const t0 = performance.now();
  return new Promise((resolve) => {
    if (s.destroyed || s.readableEnded) return resolve(0);
    const t = setTimeout(() => resolve(null), within);
    s.on('error', () => {});
    s.once('close', () => {
      clearTimeout(t);
      resolve(performance.now() - t0);
    });
  });
}

/** Send OPTIONS on a stream and wait for a 200 (or time out). */
async function optionsOverStream(s: net.Socket, timeoutMs = 1500): Promise<boolean> {
  const id = callId();
  return new Promise((resolve) => {
    let buf = '';
    const t = setTimeout(() => resolve(false), timeoutMs);
    const onData = (d: Buffer): void => {
      buf += d.toString();
      if (buf.includes(id)) {
        clearTimeout(t);
        s.off('data', onData);
        resolve(buf.startsWith('SIP/2.0 200'));
      }
    };
    s.on('data', onData);
    s.on('error', () => {});
    s.write(options(s.localAddress ?? '127.0.0.1', s.localPort ?? 9, id, 'TCP'));
  });
}

describe('floods and slow senders (real server)', () => {
  let server: ServerProcess;
  const open: net.Socket[] = [];
  const clients: UdpClient[] = [];
  const udp = async (from: string): Promise<UdpClient> => {
    const c = await udpClient(from, server.ports.udp as number);
    clients.push(c);
    return c;
  };
  const metrics = (): Promise<Map<string, number>> => scrape(server.ports.http as number);

  beforeAll(async () => {
    server = await startServer({
      SIP_TRUSTED_ADDRESSES: '127.0.0.9',
      SIP_RATE_LIMIT: String(LIMIT),
      SIP_RATE_WINDOW: String(WINDOW_S),
      SIP_BAN_TIME: String(BAN_S),
      SIP_MAX_CONNECTIONS_PER_ADDRESS: String(PER_ADDRESS),
      SIP_MAX_CONNECTIONS: String(TOTAL),
      SIP_HEADER_TIMEOUT: String(HEADER_TIMEOUT_S),
      SIP_MAX_TRANSACTIONS: String(MAX_TRANSACTIONS),
    });
  }, 30_000);

  afterAll(async () => {
    for (const s of open) s.destroy();
    for (const c of clients) c.close();
    await server?.stop();
  });

  it('bans a source that floods past the rate: drops its messages unread while others are served, and lets it back after the ban', async () => {
    const flooder = await udp('127.0.0.5');
    const other = await udp('127.0.0.6');
    const answered: Array<Promise<unknown>> = [];
    let ok = 0;
    for (let i = 0; i < 500; i++) {
      const id = callId();
      answered.push(flooder.request(options(flooder.host, flooder.port, id), id, 800).then(() => ok++, () => {}));
    }
    await Promise.all(answered);
    expect(ok).toBe(LIMIT);
    const id = callId();
    expect((await other.request(options(other.host, other.port, id), id)).status).toBe(200);

    const m = await metrics();
    expect(metric(m, 'sip_bans_total')).toBe(1);
    expect(metric(m, 'sip_banned_sources')).toBe(1);
    expect(metric(m, 'sip_dropped_messages_total', { reason: 'rate' })).toBe(1);
    expect(metric(m, 'sip_dropped_messages_total', { reason: 'banned' })).toBe(500 - LIMIT - 1);
    // Dropped before parsing: not one of the 449 reached the parser or a handler.
    expect(metric(m, 'sip_responses_total', { method: 'OPTIONS' })).toBe(LIMIT + 1);

    // A banned source cannot open stream connections either.
    const s = await connect(server.ports.tcp as number, '127.0.0.5');
    expect(await closedWithin(s, 1000)).not.toBeNull();
    expect(metric(await metrics(), 'sip_connections_refused_total', { reason: 'banned' })).toBe(1);

    await sleep(BAN_S * 1000 + 300);
    const back = callId();
    expect((await flooder.request(options(flooder.host, flooder.port, back), back)).status).toBe(200);
  }, 20_000);

  it('makes banned traffic cheap: CPU per dropped datagram is a fraction of that of a served one', async () => {
    const trusted = await udp('127.0.0.9');
    const banned = await udp('127.0.0.7');
    // Get 127.0.0.7 banned.
    for (let i = 0; i < LIMIT + 5; i++) banned.send(options(banned.host, banned.port, callId()));
    await sleep(200);
    const cpu = async (): Promise<number> => metric(await metrics(), 'process_cpu_seconds_total');
    const N = 4000;
    // A request with a broken CSeq: parsed and answered 400 when admitted, remembered by no transaction.
    const bad = (c: UdpClient): string => options(c.host, c.port, callId()).replace('CSeq: 1 OPTIONS', 'CSeq: x OPTIONS');
    const burst = async (c: UdpClient): Promise<number> => {
      const before = await cpu();
      for (let i = 0; i < N; i += 100) {
        for (let k = 0; k < 100; k++) c.send(bad(c));
        await sleep(5);
      }
      await sleep(300);
      return ((await cpu()) - before) / N;
    };
    const perDropped = await burst(banned);
    const perServed = await burst(trusted);
    console.info(`CPU per datagram: dropped ${(perDropped * 1e6).toFixed(1)} µs, served ${(perServed * 1e6).toFixed(1)} µs`);
    expect(perDropped).toBeLessThan(perServed / 2);
  }, 20_000);

  it('caps connections per address (trusted ones exempt) and in total, across TCP and WS, and frees the slots on close', async () => {
    const tcpPort = server.ports.tcp as number;
    for (let i = 0; i < PER_ADDRESS; i++) open.push(await connect(tcpPort, '127.0.0.20'));
    for (const s of open) expect(await optionsOverStream(s)).toBe(true);
    const fifth = await connect(tcpPort, '127.0.0.20');
    expect(await closedWithin(fifth, 1000)).not.toBeNull();
    // The cap is per address and shared by the stream transports: a WebSocket from the same address is refused too.
    const ws = await connect(server.ports.ws as number, '127.0.0.20');
    expect(await closedWithin(ws, 1000)).not.toBeNull();
    expect(metric(await metrics(), 'sip_connections_refused_total', { reason: 'per_address' })).toBe(2);

    // Another address still connects; fill up to the total.
    let k = 21;
    while (open.length < TOTAL) open.push(await connect(tcpPort, `127.0.0.${k++}`));
    const over = await connect(tcpPort, `127.0.0.${k++}`);
    expect(await closedWithin(over, 1000)).not.toBeNull();
    expect(metric(await metrics(), 'sip_connections_refused_total', { reason: 'total' })).toBe(1);
    expect(metric(await metrics(), 'sip_connections_open', { transport: 'tcp' })).toBe(TOTAL);

    for (const s of open.splice(0)) s.destroy();
    await sleep(200);
    const again = await connect(tcpPort, '127.0.0.20');
    expect(await optionsOverStream(again)).toBe(true);
    again.destroy();
  });

  it('cuts slow senders on TCP: silent after connect, or a message trickling in byte by byte, within the header timeout', async () => {
    const tcpPort = server.ports.tcp as number;
    const silent = await connect(tcpPort, '127.0.0.40');
    const dripping = await connect(tcpPort, '127.0.0.41');
    const text = options('127.0.0.41', 5060, callId(), 'TCP');
    let i = 0;
    const drip = setInterval(() => {
      if (!dripping.destroyed && i < text.length) dripping.write(text[i++] as string);
    }, 100);
    try {
      const [a, b] = await Promise.all([closedWithin(silent, 3000), closedWithin(dripping, 3000)]);
      expect(a).not.toBeNull();
      expect(b).not.toBeNull();
      expect(a as number).toBeLessThan(HEADER_TIMEOUT_S * 1000 + 500);
      expect(b as number).toBeLessThan(HEADER_TIMEOUT_S * 1000 + 500);
      expect(i).toBeLessThan(text.length); // cut before the message was complete
    } finally {
      clearInterval(drip);
    }
  });

  it('keeps a live flow that sends CRLF keep-alives, however long it lasts', async () => {
    const s = await connect(server.ports.tcp as number, '127.0.0.42');
    expect(await optionsOverStream(s)).toBe(true);
    const ping = setInterval(() => s.write('\r\n\r\n'), 400);
    try {
      expect(await closedWithin(s, HEADER_TIMEOUT_S * 1000 * 3)).toBeNull();
      expect(await optionsOverStream(s)).toBe(true);
    } finally {
      clearInterval(ping);
      s.destroy();
    }
  });

  it('cuts a TLS client that never completes its handshake, and a WebSocket upgrade that trickles in', async () => {
    const tlsRaw = await connect(server.ports.tls as number, '127.0.0.43'); // plain TCP: no ClientHello ever
    const upgrade = await connect(server.ports.ws as number, '127.0.0.44');
    const req = 'GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Version: 13\r\n';
    let i = 0;
    const drip = setInterval(() => {
      if (!upgrade.destroyed && i < req.length) upgrade.write(req[i++] as string);
    }, 100);
    try {
      const [a, b] = await Promise.all([closedWithin(tlsRaw, 4000), closedWithin(upgrade, 4000)]);
      expect(a).not.toBeNull();
      expect(a as number).toBeLessThan(HEADER_TIMEOUT_S * 1000 + 700);
      // Node checks HTTP header timeouts once a second.
      expect(b).not.toBeNull();
      expect(b as number).toBeLessThan(HEADER_TIMEOUT_S * 1000 + 1700);
    } finally {
      clearInterval(drip);
    }
  });

  it('cuts a WebSocket whose frame never completes', async () => {
    const s = await connect(server.ports.ws as number, '127.0.0.45');
    const key = randomBytes(16).toString('base64');
    s.write(
      `GET / HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: ${key}\r\n` +
        'Sec-WebSocket-Version: 13\r\nSec-WebSocket-Protocol: sip\r\n\r\n',
    );
    await new Promise<void>((resolve) => s.once('data', () => resolve()));
    // A masked text frame announcing 100 bytes, of which 10 arrive.
    s.write(Buffer.concat([Buffer.from([0x81, 0x80 | 100]), randomBytes(4), randomBytes(10)]));
    const t = await closedWithin(s, 4000);
    expect(t).not.toBeNull();
    expect(t as number).toBeLessThan(HEADER_TIMEOUT_S * 1000 + 700);
  });

  it('bounds the transactions remembered for retransmissions: past the cap new UDP requests are dropped unread, streams still served', async () => {
    const c = await udp('127.0.0.9'); // trusted: no rate limit
    // Entries of earlier tests still held (they age out in 8-16 s) take part of the cap.
    const held = metric(await metrics(), 'sip_server_transactions');
    let answered = 0;
    const waits: Array<Promise<unknown>> = [];
    for (let i = 0; i < MAX_TRANSACTIONS + 300; i++) {
      const id = callId();
      waits.push(c.request(options(c.host, c.port, id), id, 4000).then(() => answered++, () => {}));
      if (i % 100 === 99) await sleep(20);
    }
    await Promise.all(waits);
    const m = await metrics();
    console.log(`transaction cap ${MAX_TRANSACTIONS}: ${held} held before the burst, ${answered} of ${MAX_TRANSACTIONS + 300} answered`);
    // What earlier tests held counts too (and may age out while this runs).
    expect(metric(m, 'sip_server_transactions')).toBeLessThanOrEqual(MAX_TRANSACTIONS);
    expect(answered).toBeLessThanOrEqual(MAX_TRANSACTIONS);
    expect(answered).toBeGreaterThan(MAX_TRANSACTIONS - held - 100);
    expect(metric(m, 'sip_dropped_messages_total', { reason: 'overload' })).toBe(MAX_TRANSACTIONS + 300 - answered);
    const s = await connect(server.ports.tcp as number, '127.0.0.46');
    expect(await optionsOverStream(s)).toBe(true);
    s.destroy();
  }, 20_000);
});
