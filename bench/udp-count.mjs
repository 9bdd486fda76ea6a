#!/usr/bin/env node
// Issue 27: "a datagram is never lost or duplicated by the engine". N datagrams (1,000,000
// by default) through each UDP engine on loopback, counted: the server's transport (the
// engine under test, dist/) echoes every datagram; a client (native engine where built,
// else node:dgram) keeps a window in flight so the kernel's socket buffers never overflow
// (a loss would then be the engine's). Every sequence number must reach the server exactly
// once and come back exactly once. Prints datagrams/s and the server's CPU per datagram;
// exits 1 when a count differs. A bench script, not a test: the unit suite's share is
// test/unit/transport/udp-engine.test.ts (20,000 datagrams per engine).
//
//   node bench/udp-count.mjs [--n=1000000] [--window=512] [--sources=4] [--engines=dgram,native]
//
// Run `npm run build` first (it builds dist/ and the addon).
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const option = (name, def) => process.argv.slice(2).find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? def;
const N = Number(option('n', '1000000'));
const WINDOW = Number(option('window', '512'));
const SOURCES = Number(option('sources', '4'));
const { createUdpTransport } = await import(join(ROOT, 'dist/transport/udp.js'));
const { loadNativeUdp } = await import(join(ROOT, 'dist/transport/udp-native.js'));
const { createLogger } = await import(join(ROOT, 'dist/logger.js'));
const log = createLogger('silent');
const nativeBuilt = 'addon' in loadNativeUdp();
const engines = option('engines', nativeBuilt ? 'dgram,native' : 'dgram').split(',');

async function run(engine) {
  const seen = new Uint8Array(N);
  let received = 0;
  let dup = 0;
  const server = createUdpTransport('127.0.0.1', 0, { onMessage: (data, flow) => {
    const seq = data.readUInt32LE(0);
    if (seen[seq]++ !== 0) dup++;
    received++;
    server.send(flow, data);
  }, onFlowClosed() {} }, log, 65535, engine);
  const { port } = await server.start();
  const back = new Uint8Array(N);
  let echoed = 0;
  let echoDup = 0;
  const perSource = Math.ceil(N / SOURCES);
  const clients = [];
  const cpu0 = process.cpuUsage();
  const t0 = process.hrtime.bigint();
  await Promise.all(
    Array.from({ length: SOURCES }, (_, k) => new Promise((resolve, reject) => {
      const first = k * perSource;
      const last = Math.min(N, first + perSource);
      let next = first;
      let answered = 0;
      const total = last - first;
      const payload = Buffer.alloc(180, 'x'); // about a SIP response's head: sizes do not matter here
      const to = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: port, localAddress: '', localPort: 0, connId: null };
      let stall = null;
      const arm = () => {
        clearTimeout(stall);
        stall = setTimeout(() => reject(new Error(`${engine}: source ${k} stalled at ${answered}/${total} answered (a datagram lost)`)), 5000);
      };
      const pump = () => {
        while (next < last && next - first - answered < WINDOW) {
          const d = Buffer.allocUnsafe(payload.length);
          payload.copy(d);
          d.writeUInt32LE(next++, 0);
          client.send(to, d);
        }
      };
      const client = createUdpTransport('127.0.0.1', 0, { onMessage: (data) => {
        const seq = data.readUInt32LE(0);
        if (back[seq]++ !== 0) echoDup++;
        echoed++;
        answered++;
        if (answered === total) {
          clearTimeout(stall);
          resolve();
        } else {
          if ((answered & 1023) === 0) arm();
          pump();
        }
      }, onFlowClosed() {} }, log, 65535, nativeBuilt ? 'native' : 'dgram');
      clients.push(client);
      client.start().then(() => { arm(); pump(); }, reject);
    })),
  );
  const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
  const cpu = process.cpuUsage(cpu0);
  for (const c of clients) await c.stop();
  await server.stop();
  let missing = 0;
  for (let i = 0; i < N; i++) if (seen[i] === 0 || back[i] === 0) missing++;
  const ok = received === N && echoed === N && dup === 0 && echoDup === 0 && missing === 0;
  // Server and clients share this process: CPU per datagram is of both sides, per round trip.
  console.log(
    `${engine.padEnd(6)} ${N.toLocaleString('en')} datagrams: server received ${received.toLocaleString('en')} (duplicates ${dup}), echoed back ${echoed.toLocaleString('en')} (duplicates ${echoDup}), missing ${missing}; ` +
      `${(N / seconds).toFixed(0)} round trips/s, ${(((cpu.user + cpu.system) / N)).toFixed(2)} µs CPU per round trip (both ends, one process) → ${ok ? 'OK' : 'FAILED'}`,
  );
  return ok;
}

let allOk = true;
for (const e of engines) allOk = (await run(e)) && allOk;
process.exit(allOk ? 0 : 1);
