// HTTP API under load: retrieve one endpoint; list 100 endpoints with live
// registration state. Each at a steady 200 req/s (open loop, one request every
// 5 ms), at autocannon's 200/s (bursts at each second) and at max (autocannon).
import http from 'node:http';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { performance } from 'node:perf_hooks';
import { cpuMeter, sleep } from './proc.mjs';

/**
 * Open-loop load at a constant arrival rate: request i is due at t0 + i/rate,
 * whether or not earlier ones have answered (keep-alive sockets, as many as
 * needed). Latency runs from when the request was due (or sent, if later), so
 * a stalled server or a late generator shows in it: no coordinated omission.
 *
 * autocannon's `overallRate` is no substitute: each connection sends its share
 * of a second back to back at the start of the second and then waits, and its
 * latency histogram is "corrected" with an expected interval of ceil(1/rate) =
 * 1 ms, adding a synthetic sample for every millisecond of each slow response.
 */
async function paced({ url, headers, pathFor, rate, seconds, maxSockets = 128, onStart = () => {} }) {
  const u = new URL(url);
  const agent = new http.Agent({ keepAlive: true, maxSockets });
  const send = (path) =>
    new Promise((resolve) => {
      const req = http.request({ host: u.hostname, port: u.port, path, headers, agent }, (res) => {
        let bytes = 0;
        res.on('data', (c) => (bytes += c.length));
        res.on('end', () => resolve({ status: res.statusCode ?? 0, bytes }));
        res.on('error', () => resolve({ status: 0, bytes }));
      });
      req.setTimeout(10_000, () => req.destroy(new Error('timeout')));
      req.on('error', () => resolve({ status: 0, bytes: 0 }));
      req.end();
    });
  // Open a few keep-alive sockets first (not measured).
  await Promise.all(Array.from({ length: 16 }, (_, i) => send(pathFor(i))));
  onStart();
  const n = Math.round(rate * seconds);
  const interval = 1000 / rate;
  const lat = [];
  let errors = 0;
  let non2xx = 0;
  const inflight = [];
  const t0 = performance.now() + 10;
  for (let i = 0; i < n; i++) {
    const due = t0 + i * interval;
    const wait = due - performance.now();
    if (wait >= 1) await sleep(wait);
    const start = Math.max(due, performance.now());
    inflight.push(
      send(pathFor(i)).then(({ status }) => {
        if (status === 0) errors++;
        else if (status < 200 || status >= 300) non2xx++;
        else lat.push(performance.now() - start);
      }),
    );
  }
  await Promise.all(inflight);
  const elapsed = (performance.now() - t0) / 1000;
  agent.destroy();
  lat.sort((a, b) => a - b);
  const pct = (p) => (lat.length ? lat[Math.min(lat.length - 1, Math.ceil((p / 100) * lat.length) - 1)] : 0);
  const r1 = (x) => Math.round(x * 10) / 10;
  return {
    requests: { average: n / elapsed, total: n },
    duration: elapsed,
    latency: { p50: r1(pct(50)), p99: r1(pct(99)), max: r1(lat[lat.length - 1] ?? 0) },
    errors,
    timeouts: 0,
    non2xx,
  };
}

function runCannon(autocannon, opts) {
  return new Promise((resolve, reject) => {
    autocannon(opts, (err, res) => (err ? reject(err) : resolve(res)));
  });
}

/**
 * `edge` (running, HTTP API), `account` {authId, authToken}, `endpointIds` of
 * the registered endpoints, `redisPid` when the edge uses Redis. Returns rows
 * {case, mode, rps, p50, p99, errors, non2xx, edgeCpu, edgeCpuMsPerReq, redisCpu}:
 * edge CPU over its process tree (workers included), percent of one core.
 */
export async function apiBench({ root, edge, account, endpointIds, seconds = 8, maxConnections = 16, redisPid = null }) {
  const require = createRequire(join(root, 'package.json'));
  const autocannon = require('autocannon');
  const headers = { 'x-auth-id': account.authId, 'x-auth-token': account.authToken, accept: 'application/json' };
  const base = `/api/v1/Account/${account.authId}/Endpoint/`;
  const one = endpointIds[Math.floor(endpointIds.length / 2)];
  const pages = Math.max(1, Math.floor(endpointIds.length / 100));
  let page = 0;
  const listPath = () => `${base}?limit=100&offset=${(page++ % pages) * 100}`;
  const cases = [
    { name: 'retrieve one endpoint', path: () => `${base}${one}/`, requests: [{ method: 'GET', path: `${base}${one}/` }] },
    {
      name: 'list 100 endpoints (live state)',
      // Walk every page of the 10,000 in turn.
      path: listPath,
      requests: [{ method: 'GET', setupRequest: (req) => ({ ...req, path: listPath() }) }],
    },
  ];
  // Check once that the list really carries live state.
  const check = await fetch(`${edge.http}${base}?limit=100&offset=0`, { headers });
  const body = await check.json();
  const live = (body.objects ?? []).filter((o) => o.sip_registered === 'true').length;
  const rows = [];
  for (const c of cases) {
    for (const mode of ['200/s', '200/s autocannon', 'max']) {
      const cpu = cpuMeter([edge.pid], { tree: true });
      const redisCpu = redisPid ? cpuMeter([redisPid]) : null;
      const begin = () => {
        cpu.begin();
        redisCpu?.begin();
      };
      if (mode !== '200/s') begin();
      const res =
        mode === '200/s'
          ? await paced({ url: edge.http, headers, pathFor: c.path, rate: 200, seconds, onStart: begin })
          : await runCannon(autocannon, {
              url: edge.http,
              headers,
              requests: c.requests,
              duration: seconds,
              connections: mode === 'max' ? maxConnections : 10,
              ...(mode === 'max' ? {} : { overallRate: 200 }),
              pipelining: 1,
            });
      const edgeCpu = cpu.end();
      const redisCpuPct = redisCpu ? redisCpu.end() : null;
      rows.push({
        case: c.name,
        mode,
        rps: res.requests.average,
        total: res.requests.total,
        p50: res.latency.p50,
        p99: res.latency.p99,
        max: res.latency.max,
        errors: res.errors + res.timeouts,
        non2xx: res.non2xx,
        edgeCpu,
        // CPU time per request, ms: percent of one core × wall seconds / requests.
        edgeCpuMsPerReq: res.requests.total > 0 ? (edgeCpu * 10 * res.duration) / res.requests.total : null,
        redisCpu: redisCpuPct,
      });
    }
  }
  return { rows, liveInFirstPage: live, total: body.meta?.total_count ?? null };
}
