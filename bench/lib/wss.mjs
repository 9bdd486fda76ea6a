// WSS scale part: N concurrent registered WebSocket flows against the edge.
import { spawn } from 'node:child_process';
import { readdirSync } from 'node:fs';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { pathToFileURL } from 'node:url';
import { startEdge } from './edge.mjs';
import { rssKiB, sleep, cpuMeter, machineCpuMeter, niced, processTree } from './proc.mjs';
import { redisPipeline } from './redis.mjs';
import { wssUser } from './wss-users.mjs';

/** Provision `users` credentials straight into Redis db `db` the way the API does (HA1 only). */
async function provisionRedis(root, url, domain, users) {
  const { Redis } = await import(pathToFileURL(join(root, 'node_modules/ioredis/built/index.js')).href);
  const { RedisCredentialStore } = await import(pathToFileURL(join(root, 'dist/store/credentials/redis.js')).href);
  const { deriveCredential } = await import(pathToFileURL(join(root, 'dist/provisioning/endpoints.js')).href);
  const redis = new Redis(url);
  const store = new RedisCredentialStore(redis);
  for (let i = 0; i < users.length; i += 1000) {
    await Promise.all(
      users.slice(i, i + 1000).map((u) =>
        store.put(domain, u.user, deriveCredential(`wss-${u.user}`, u.user, domain, u.password)),
      ),
    );
  }
  await redis.quit();
}

/** Open file descriptors of a process (sockets included); null when unreadable. */
function openFds(pid) {
  try {
    return readdirSync(`/proc/${pid}/fd`).length;
  } catch {
    return null;
  }
}

/**
 * Run the WSS scale test. Returns {n, registered, failed, dropped, rssBeforeKiB,
 * rssAfterKiB, kibPerFlow, regRate, peakRate, seconds, edgeCpu, redisBytesPerFlow,
 * edgeProcesses: [{pid, role, rssBeforeKiB, rssAfterKiB, fds}]}. The edge's RSS is
 * the sum over its whole process tree: with SIP_WORKERS > 1 the cluster primary
 * accepts each connection and hands it to a worker (then closes its own copy: its
 * `fds` stays small), so the flows are split over the workers, each under its own
 * open-files limit.
 */
export async function wssScale({ root, tmp, redis, n, perProcess = 5000, idleS = 10, log, workers = '' }) {
  const domain = 'wss.sip.localhost';
  const users = Array.from({ length: n }, (_, i) => wssUser(i + 1));
  const db = 2;
  await redisPipeline(redis.port, db, [['FLUSHDB']]);
  await provisionRedis(root, redis.url(db), domain, users);
  const edge = await startEdge({ root, tmp, name: 'edge-wss', store: 'redis', redisUrl: redis.url(db), listeners: ['wss'], env: workers ? { SIP_WORKERS: workers } : {} });
  // RSS and CPU of the edge's whole process tree (its workers, when SIP_WORKERS > 1).
  const edgeRss = () => processTree(edge.pid).reduce((a, p) => a + rssKiB(p), 0);
  const results = { n, processes: 0, workers: Number(workers || 1) };
  const perProcessRss = new Map(); // pid → {pid, role, rssBeforeKiB, rssAfterKiB, fds}
  const clients = [];
  const clientCpu = [];
  try {
    await sleep(2000);
    for (const pid of processTree(edge.pid)) {
      perProcessRss.set(pid, { pid, role: pid === edge.pid ? (results.workers > 1 ? 'primary' : 'edge') : 'worker', rssBeforeKiB: rssKiB(pid), rssAfterKiB: 0, fds: null });
    }
    results.rssBeforeKiB = edgeRss();
    const redisMem0 = await redis.usedMemory();
    const cpu = cpuMeter([edge.pid], { tree: true });
    cpu.begin();
    const machine = machineCpuMeter();
    const k = Math.ceil(n / perProcess);
    results.processes = k;
    const state = Array.from({ length: k }, () => ({ registered: 0, failed: 0, dropped: 0, done: false, ms: 0, firstFailure: null }));
    const t0 = Date.now();
    const timeline = [];
    for (let p = 0; p < k; p++) {
      const from = p * perProcess + 1;
      const count = Math.min(perProcess, n - p * perProcess);
      // Source addresses 127.0.x.y: each has its own ephemeral port range, and fewer
      // than 150 flows per address stay under per-address connection caps (default 200).
      const perAddress = 120;
      const localAddresses = Array.from({ length: Math.max(1, Math.ceil(count / perAddress)) }, (_, j) => `127.0.${1 + p}.${10 + j}`);
      const cfg = { url: `wss://127.0.0.1:${edge.ports.wss}`, domain, from, count, localAddresses, window: Number(process.env.BENCH_WSS_WINDOW ?? 64), keepaliveS: 25, expires: 3600 };
      const [cmd, args] = niced(process.execPath, ['--max-old-space-size=4096', join(root, 'bench/lib/wss-client.mjs'), JSON.stringify(cfg)]);
      const child = spawn(cmd, args, {
        stdio: ['ignore', 'pipe', 'inherit'],
      });
      clients.push(child);
      clientCpu.push(cpuMeter([child.pid]));
      clientCpu[clientCpu.length - 1].begin();
      createInterface({ input: child.stdout }).on('line', (line) => {
        try {
          const o = JSON.parse(line);
          Object.assign(state[p], o);
          if (o.type === 'done') state[p].done = true;
        } catch {
          /* ignore */
        }
      });
    }
    // Wait until every client process has finished its registrations (or 240 s).
    let last = 0;
    while (Date.now() - t0 < 240_000) {
      await sleep(1000);
      const reg = state.reduce((a, s) => a + s.registered, 0);
      timeline.push({ t: (Date.now() - t0) / 1000, reg, rate: reg - last });
      last = reg;
      if (state.every((s) => s.done)) break;
    }
    const tReg = (Date.now() - t0) / 1000;
    results.seconds = tReg;
    results.edgeCpu = cpu.end();
    results.clientCpu = clientCpu.reduce((a, m) => a + m.end(), 0);
    results.machineCpu = machine.end();
    results.timeline = timeline.filter((_, i) => i % 5 === 4).map((x) => [Math.round(x.t), x.reg]);
    results.registered = state.reduce((a, s) => a + s.registered, 0);
    results.failed = state.reduce((a, s) => a + s.failed, 0);
    results.firstFailure = state.find((s) => s.firstFailure)?.firstFailure ?? null;
    // Registration rate: flows registered per second from the first connect to the last 200 OK.
    const lastMs = Math.max(...state.map((s) => s.ms || 0));
    results.regRate = results.registered / Math.max(0.001, lastMs / 1000);
    results.peakRate = Math.max(0, ...timeline.map((x) => x.rate));
    log?.(`wss: ${results.registered}/${n} registered in ${(lastMs / 1000).toFixed(1)} s; idling ${idleS} s with keep-alives`);
    await sleep(idleS * 1000);
    results.rssAfterKiB = edgeRss();
    for (const pid of processTree(edge.pid)) {
      const e = perProcessRss.get(pid) ?? { pid, role: 'worker (restarted)', rssBeforeKiB: 0, rssAfterKiB: 0, fds: null };
      e.rssAfterKiB = rssKiB(pid);
      e.fds = openFds(pid);
      perProcessRss.set(pid, e);
    }
    // Processes gone since the first reading (a worker that died) count as 0 after.
    results.edgeProcesses = [...perProcessRss.values()];
    results.dropped = state.reduce((a, s) => a + s.dropped, 0);
    results.open = state.reduce((a, s) => a + (s.open ?? 0), 0);
    results.kibPerFlow = (results.rssAfterKiB - results.rssBeforeKiB) / Math.max(1, results.registered);
    results.redisBytesPerFlow = ((await redis.usedMemory()) - redisMem0) / Math.max(1, results.registered);
  } finally {
    for (const c of clients) {
      try {
        process.kill(c.pid, 'SIGTERM');
      } catch {
        /* gone */
      }
    }
    await Promise.all(clients.map((c) => (c.exitCode !== null ? null : new Promise((r) => c.once('exit', r)))));
    await edge.stop();
  }
  return results;
}
