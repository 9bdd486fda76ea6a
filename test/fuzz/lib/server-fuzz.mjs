/**
 * Drives fuzz messages into a running server over UDP, TCP and WS, and checks
 * after every batch that the server still answers a well-formed OPTIONS on
 * every transport (over connections of their own, so the fuzz traffic cannot
 * swallow the probes). Connections the server closes (unframeable streams,
 * invalid UTF-8 in text frames, oversize frames) are reopened from a spread of
 * loopback source addresses, so connection churn never exhausts local ports.
 */
import dgram from 'node:dgram';
import net from 'node:net';
import { WebSocket } from 'ws';
import { fetchNonce, registrarMessages } from './registrar-fuzz.mjs';
import { scrape } from './server.mjs';

const HOST = '127.0.0.1';

/** Requests below this are considered answered in time; a slower probe fails the run. */
const DEFAULT_PROBE_TIMEOUT_MS = 5_000;

let probeSeq = 0;
function options(transport, callId) {
  return Buffer.from(
    [
      'OPTIONS sip:127.0.0.1 SIP/2.0',
      `Via: SIP/2.0/${transport} 127.0.0.1:9;branch=z9hG4bKprobe${callId};rport`,
      'Max-Forwards: 70',
      'From: <sip:probe@fuzz.invalid>;tag=probe',
      'To: <sip:probe@fuzz.invalid>',
      `Call-ID: ${callId}`,
      'CSeq: 1 OPTIONS',
      'Content-Length: 0',
      '',
      '',
    ].join('\r\n'),
  );
}

/** Waiters keyed by Call-ID; every response text is offered to them. */
class Probes {
  waiting = new Map();
  offer(text) {
    const m = /\r\nCall-ID:\s*([^\r\n]+)/i.exec(text);
    const w = m && this.waiting.get(m[1].trim());
    if (w) {
      this.waiting.delete(m[1].trim());
      w(text);
    }
  }
  wait(callId, timeoutMs) {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiting.delete(callId);
        reject(new Error(`probe ${callId} not answered within ${timeoutMs} ms`));
      }, timeoutMs);
      this.waiting.set(callId, (text) => {
        clearTimeout(t);
        resolve(text);
      });
    });
  }
}

/** Splits a byte stream of responses on Content-Length (probe answers carry none or 0). */
function responseSplitter(onText) {
  let buf = '';
  return (d) => {
    buf += d.toString('latin1');
    for (;;) {
      while (buf.startsWith('\r\n')) buf = buf.slice(2);
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const len = Number(/\r\n(?:content-length|l)\s*:\s*(\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      onText(buf.slice(0, end + 4 + len));
      buf = buf.slice(end + 4 + len);
    }
  };
}

const localAddress = (rand) => `127.0.0.${2 + Math.floor(rand() * 250)}`;

function connectTcp(port, rand) {
  return new Promise((resolve, reject) => {
    const s = net.connect({ host: HOST, port, localAddress: localAddress(rand) }, () => resolve(s));
    s.once('error', reject);
  });
}

function connectWs(port, rand) {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(`ws://${HOST}:${port}`, ['sip'], { localAddress: localAddress(rand), perMessageDeflate: false });
    ws.once('open', () => resolve(ws));
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
}

/**
 * @param {object} o
 * @param {{udp:number, tcp:number, ws:number, http:number}} o.ports
 * @param {Iterator<Buffer>} o.messages fuzz messages
 * @param {number} o.count how many to send in total
 * @param {string[]} [o.transports] subset of udp, tcp, ws
 * @param {number} [o.batch] messages between two probe rounds
 * @param {number} [o.sampleEvery] probe rounds between two /metrics samples
 * @param {() => boolean} [o.alive] false once the server process is gone
 * @param {(s: object) => void} [o.onSample]
 * @param {{ user: string, domain: string, password: string }} [o.authenticated] an endpoint: a share of
 *   the messages are REGISTERs that pass digest authentication with hostile headers (registrar-fuzz.mjs)
 * @param {number} [o.authenticatedShare] that share, 0..1 (default 0.2)
 */
export async function fuzzServer(o) {
  const transports = o.transports ?? ['udp', 'tcp', 'ws'];
  const batch = o.batch ?? 300;
  const sampleEvery = o.sampleEvery ?? 50;
  const probeTimeout = o.probeTimeoutMs ?? DEFAULT_PROBE_TIMEOUT_MS;
  const alive = o.alive ?? (() => true);
  let seed = 0x9e3779b9;
  const rand = () => {
    seed = (Math.imul(seed ^ (seed >>> 15), 0x2c1b3c6d) + 0x6d2b79f5) >>> 0;
    return seed / 4294967296;
  };
  const stats = {
    sent: { udp: 0, tcp: 0, ws: 0 },
    bytes: 0,
    reconnects: { tcp: 0, ws: 0 },
    connectFailures: 0,
    probeRounds: 0,
    maxProbeMs: 0,
    samples: [],
    authenticated: 0,
  };
  const probes = new Probes();

  // Probe connections (well-formed traffic only).
  const udpProbe = dgram.createSocket('udp4');
  udpProbe.on('message', (m) => probes.offer(m.toString('latin1')));
  await new Promise((r) => udpProbe.bind(0, HOST, r));
  let tcpProbe = null;
  let wsProbe = null;
  const openTcpProbe = async () => {
    tcpProbe = await connectTcp(o.ports.tcp, rand);
    tcpProbe.on('data', responseSplitter((t) => probes.offer(t)));
    tcpProbe.on('error', () => {});
    tcpProbe.on('close', () => (tcpProbe = null));
  };
  const openWsProbe = async () => {
    wsProbe = await connectWs(o.ports.ws, rand);
    wsProbe.on('message', (d) => probes.offer(d.toString('latin1')));
    wsProbe.on('error', () => {});
    wsProbe.on('close', () => (wsProbe = null));
  };

  // Fuzz senders.
  const udp = dgram.createSocket('udp4');
  udp.on('message', () => {});
  udp.on('error', () => {});
  await new Promise((r) => udp.bind(0, HOST, r));
  let tcp = null;
  let tcpCount = 0;
  let ws = null;
  let wsCount = 0;

  const sendTcp = async (m) => {
    if (tcp === null || tcp.destroyed || tcpCount >= 200) {
      tcp?.destroy();
      try {
        tcp = await connectTcp(o.ports.tcp, rand);
      } catch {
        stats.connectFailures++;
        tcp = null;
        return;
      }
      tcp.on('error', () => {});
      tcp.on('data', () => {});
      tcpCount = 0;
      stats.reconnects.tcp++;
    }
    tcpCount++;
    // Split now and then, so framing meets messages across chunk boundaries.
    if (m.length > 8 && rand() < 0.2) {
      const cut = 1 + Math.floor(rand() * (m.length - 1));
      tcp.write(m.subarray(0, cut));
      if (!tcp.write(m.subarray(cut))) await new Promise((r) => tcp.once('drain', r).once('close', r));
    } else if (!tcp.write(m)) {
      await new Promise((r) => tcp.once('drain', r).once('close', r));
    }
    stats.sent.tcp++;
  };
  const sendWs = async (m) => {
    if (ws === null || ws.readyState !== WebSocket.OPEN || wsCount >= 200) {
      ws?.terminate();
      try {
        ws = await connectWs(o.ports.ws, rand);
      } catch {
        stats.connectFailures++;
        ws = null;
        return;
      }
      ws.on('error', () => {});
      wsCount = 0;
      stats.reconnects.ws++;
    }
    wsCount++;
    ws.send(m, { binary: rand() < 0.3 });
    if (ws.bufferedAmount > 1 << 20) await new Promise((r) => setTimeout(r, 5));
    stats.sent.ws++;
  };

  const probeRound = async () => {
    if (!alive()) throw new Error('server process is gone');
    const t0 = performance.now();
    const waits = [];
    const send = (name, conn, transport) => {
      const id = `probe-${++probeSeq}-${name}`;
      waits.push(probes.wait(id, probeTimeout));
      conn(options(transport, id));
    };
    if (transports.includes('udp')) send('udp', (b) => udpProbe.send(b, o.ports.udp, HOST), 'UDP');
    if (transports.includes('tcp')) {
      if (tcpProbe === null) await openTcpProbe();
      send('tcp', (b) => tcpProbe.write(b), 'TCP');
    }
    if (transports.includes('ws')) {
      if (wsProbe === null) await openWsProbe();
      send('ws', (b) => wsProbe.send(b), 'WS');
    }
    const texts = await Promise.all(waits);
    for (const t of texts) if (!t.startsWith('SIP/2.0 200 ')) throw new Error(`probe answered ${t.split('\r\n')[0]}`);
    stats.probeRounds++;
    stats.maxProbeMs = Math.max(stats.maxProbeMs, performance.now() - t0);
  };

  const sample = async () => {
    const m = await scrape(o.ports.http);
    const s = {
      sent: stats.sent.udp + stats.sent.tcp + stats.sent.ws,
      rssBytes: m.process_resident_memory_bytes,
      heapBytes: m.nodejs_heap_size_used_bytes,
      loopDelayMaxSeconds: m.sip_event_loop_delay_max_seconds,
      loopBusyStallMaxSeconds: m.sip_event_loop_busy_stall_max_seconds,
      transactions: m.sip_server_transactions,
      unhandledRejections: m.process_unhandled_rejections_total,
    };
    stats.samples.push(s);
    o.onSample?.(s);
    return s;
  };

  const sendAndWait = (b, id) => {
    const w = probes.wait(id, probeTimeout);
    udpProbe.send(b, o.ports.udp, HOST);
    return w;
  };
  const deep = o.authenticated ? registrarMessages(0x51ed + o.count, o.authenticated) : null;
  const share = o.authenticatedShare ?? 0.2;
  let nonce = deep ? await fetchNonce(sendAndWait, o.authenticated) : '';

  try {
    await probeRound();
    await sample();
    let inBatch = 0;
    let rounds = 0;
    for (let i = 0; i < o.count; i++) {
      const t = transports[i % transports.length];
      let m;
      if (deep && rand() < share) {
        // A nonce is fresh for NONCE_TTL (300 s): take a new one now and then.
        if (stats.authenticated > 0 && stats.authenticated % 20_000 === 0) nonce = await fetchNonce(sendAndWait, o.authenticated);
        m = deep(nonce, t.toUpperCase());
        stats.authenticated++;
      } else m = o.messages.next().value;
      stats.bytes += m.length;
      if (t === 'udp') {
        udp.send(m.length > 65_000 ? m.subarray(0, 65_000) : m, o.ports.udp, HOST);
        stats.sent.udp++;
        // Keep the kernel buffers from overflowing: yield now and then.
        if (stats.sent.udp % 64 === 0) await new Promise((r) => setImmediate(r));
      } else if (t === 'tcp') await sendTcp(m);
      else await sendWs(m);
      if (++inBatch >= batch) {
        inBatch = 0;
        await probeRound();
        if (++rounds % sampleEvery === 0) await sample();
      }
    }
    await probeRound();
    // Let Timer-J-bound state settle is not needed for the verdict; sample what is there now.
    stats.final = await sample();
  } finally {
    tcp?.destroy();
    ws?.terminate();
    tcpProbe?.destroy();
    wsProbe?.terminate();
    udp.close();
    udpProbe.close();
  }
  return stats;
}
