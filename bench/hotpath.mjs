#!/usr/bin/env node
// The REGISTER hot path in one process, without sockets: REGISTER → 401 → REGISTER with
// MD5 digest → 200, fed straight into the edge's router (dist/, as built), answers caught
// by an in-memory transport. Prints µs of this process's CPU per registration and, with
// `node --cpu-prof bench/hotpath.mjs`, gives a profile free of kernel and scheduling noise
// (what the ladder's wall-clock profile cannot separate on a shared machine).
//
//   node bench/hotpath.mjs [--store=memory|redis] [--n=100000] [--users=10000] [--concurrency=64]
//
// The client side (building requests, computing the digest response) runs in the same
// process; its own cost is measured separately and printed, so the edge's share is clear.
import { createHash } from 'node:crypto';
import { mkdirSync } from 'node:fs';
import { join, dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startRedis } from './lib/redis.mjs';

const ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
const arg = (name, dflt) => process.argv.find((x) => x.startsWith(`--${name}=`))?.slice(name.length + 3) ?? dflt;
const storeKind = arg('store', 'memory');
const N = Number(arg('n', '100000'));
const USERS = Number(arg('users', '10000'));
const CONCURRENCY = Number(arg('concurrency', '64'));

const { createApp } = await import(join(ROOT, 'dist/app.js'));
const { loadConfig } = await import(join(ROOT, 'dist/config.js'));
const { createLogger } = await import(join(ROOT, 'dist/logger.js'));
const { deriveCredential } = await import(join(ROOT, 'dist/provisioning/endpoints.js'));

const tmp = join(ROOT, 'bench/.tmp/hotpath');
mkdirSync(tmp, { recursive: true });
const redis = storeKind === 'redis' ? await startRedis(tmp) : null;

const env = {
  SIP_HOST: '127.0.0.1', HTTP_HOST: '127.0.0.1', SIP_UDP_PORT: 'off', SIP_TCP_PORT: 'off', SIP_TLS_PORT: 'off',
  SIP_WS_PORT: 'off', SIP_WSS_PORT: 'off', HTTP_PORT: 'off', NONCE_SECRET: 'hotpath-nonce-secret-0123456789abcdef',
  ...(redis ? { REDIS_URL: redis.url(0) } : {}),
};
const app = createApp(loadConfig(env, { configFile: null }), createLogger('info'));
await app.start();

// Answers arrive here; each pending request waits on its Call-ID.
const waiting = new Map();
const transport = {
  name: 'udp',
  start: async () => ({ address: '127.0.0.1', port: 5060 }),
  send(_flow, data) {
    const s = data.toString('latin1');
    const i = s.indexOf('\r\nCall-ID: ');
    const callId = s.slice(i + 11, s.indexOf('\r\n', i + 11));
    const w = waiting.get(callId);
    if (w) {
      waiting.delete(callId);
      w(s);
    }
    return true;
  },
  connectionCount: () => 0,
  closeFlow() {},
  stop: async () => {},
};
app.useTransport(transport);

const domain = 'hot.sip.localhost';
const users = Array.from({ length: USERS }, (_, i) => ({ user: `u${String(i + 1).padStart(5, '0')}`, password: `pw${i}secret` }));
for (const u of users) {
  await app.credentials.put(domain, u.user, deriveCredential(`ep-${u.user}`, u.user, domain, u.password));
}

const md5 = (s) => createHash('md5').update(s).digest('hex');
let seq = 0;
function request(u, callId, cseq, port, auth) {
  return Buffer.from(
    `REGISTER sip:${domain} SIP/2.0\r\n` +
      `Via: SIP/2.0/UDP 127.0.0.1:${port};branch=z9hG4bK-${++seq};rport\r\n` +
      'Max-Forwards: 70\r\n' +
      `From: <sip:${u.user}@${domain}>;tag=${seq}SIPpTag\r\n` +
      `To: <sip:${u.user}@${domain}>\r\n` +
      `Call-ID: ${callId}\r\n` +
      `CSeq: ${cseq} REGISTER\r\n` +
      `Contact: <sip:${u.user}@127.0.0.1:5999;transport=UDP>\r\n` +
      'Expires: 3600\r\n' +
      (auth ? `${auth}\r\n` : '') +
      'User-Agent: SIPp-bench\r\n' +
      'Content-Length: 0\r\n\r\n',
    'latin1',
  );
}
const send = (data, flow, callId) =>
  new Promise((resolve) => {
    waiting.set(callId, resolve);
    app.router.onMessage(data, flow);
  });

/** The Authorization header answering `nonce` (MD5, qop=auth, nc 1), as SIPp builds it. */
function authorization(u, nonce, k) {
  const uri = `sip:${domain}`;
  const ha1 = md5(`${u.user}:${domain}:${u.password}`);
  const ha2 = md5(`REGISTER:${uri}`);
  const cnonce = (k * 2654435761 >>> 0).toString(16);
  const response = md5(`${ha1}:${nonce}:00000001:${cnonce}:auth:${ha2}`);
  return `Authorization: Digest username="${u.user}",realm="${domain}",nonce="${nonce}",uri="${uri}",response="${response}",algorithm=MD5,cnonce="${cnonce}",qop=auth,nc=00000001`;
}

async function registerOnce(k) {
  const u = users[k % USERS];
  const port = 10000 + (k % 50000);
  const flow = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: port, localAddress: '127.0.0.1', localPort: 5060, connId: null };
  const callId = `hot-${k}`;
  const first = request(u, callId, 1, port, null);
  const challenge = await send(first, flow, callId);
  if (!challenge.startsWith('SIP/2.0 401')) throw new Error(`expected 401, got ${challenge.slice(0, 40)}`);
  const nonce = /nonce="([^"]+)"/.exec(challenge)[1];
  const second = request(u, callId, 2, port, authorization(u, nonce, k));
  const ok = await send(second, flow, callId);
  if (!ok.startsWith('SIP/2.0 200')) throw new Error(`expected 200, got ${ok.slice(0, 60)}`);
}

let runs = 0;
async function run(count) {
  let next = 0;
  const base = 1_000_000 * runs++;
  const worker = async () => {
    while (next < count) await registerOnce(base + next++);
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, worker));
}

/** The client's own work (requests and digest responses, with a made-up nonce), CPU µs per registration. */
function clientOnly(count) {
  const c0 = process.cpuUsage();
  let sink = 0;
  for (let k = 0; k < count; k++) {
    const u = users[k % USERS];
    const first = request(u, `c-${k}`, 1, 5060, null);
    const nonce = 'AAAAAZq0cXl3abcdefghijklmnopqrstuvwxyz0123456789_-';
    const second = request(u, `c-${k}`, 2, 5060, authorization(u, nonce, k));
    // What the client does with the answers: find the nonce in the 401, the status of both.
    sink += first.length + second.length + (/nonce="([^"]+)"/.exec(`WWW-Authenticate: Digest nonce="${nonce}"`)?.[1].length ?? 0);
    sink += 'SIP/2.0 200 OK'.startsWith('SIP/2.0 200') ? 1 : 0;
  }
  const c = process.cpuUsage(c0);
  return { us: (c.user + c.system) / count, sink };
}

await run(Math.min(N, 20000)); // warm-up: JIT, every binding created once

const cpu0 = process.cpuUsage();
const t0 = process.hrtime.bigint();
await run(N);
const wallS = Number(process.hrtime.bigint() - t0) / 1e9;
const cpu = process.cpuUsage(cpu0);
const cpuUs = (cpu.user + cpu.system) / N;
const clientUs = clientOnly(N).us;
const heap = process.memoryUsage();
console.log(
  `hotpath ${storeKind}: ${N} registrations in ${wallS.toFixed(2)} s (${(N / wallS).toFixed(0)}/s), ` +
    `process CPU ${cpuUs.toFixed(1)} µs/registration, of which client ≈${clientUs.toFixed(1)} µs → edge ≈${(cpuUs - clientUs).toFixed(1)} µs` +
    `${redis ? ' (+ redis-server, not counted)' : ''}; heap ${(heap.heapUsed / 1048576).toFixed(0)} MiB, ` +
    `transactions remembered ${app.router.pendingTransactions}`,
);
if (process.env.HOTPATH_SNAPSHOT) {
  const v8 = await import('node:v8');
  console.log(`heap snapshot: ${v8.writeHeapSnapshot(process.env.HOTPATH_SNAPSHOT)}`);
}
if (globalThis.gc && process.env.HOTPATH_HEAP) {
  gc();
  const before = process.memoryUsage().heapUsed;
  app.router.forgetTransactions();
  gc();
  const after = process.memoryUsage().heapUsed;
  console.log(`heap held by remembered transactions: ${((before - after) / 1048576).toFixed(0)} MiB`);
}
if (redis) {
  // Redis's own cost per command (usec_per_call), e.g. the REGISTER script.
  const stats = await redis.cmd('INFO', 'commandstats');
  for (const line of String(stats).split('\r\n')) {
    const m = /^cmdstat_(\w+):calls=(\d+),usec=(\d+),usec_per_call=([\d.]+)/.exec(line);
    if (m && Number(m[2]) >= N / 10) console.log(`redis ${m[1]}: ${m[2]} calls, ${m[4]} µs per call`);
  }
}
await app.stop();
await redis?.stop();
