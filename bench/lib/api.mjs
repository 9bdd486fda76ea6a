// HTTP API under load (autocannon): retrieve one endpoint; list 100 endpoints
// with live registration state. Each at a fixed 200 req/s and at max.
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { cpuMeter } from './proc.mjs';

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
  const cases = [
    { name: 'retrieve one endpoint', requests: [{ method: 'GET', path: `${base}${one}/` }] },
    {
      name: 'list 100 endpoints (live state)',
      // Walk every page of the 10,000 in turn.
      requests: [
        {
          method: 'GET',
          setupRequest: (req) => ({ ...req, path: `${base}?limit=100&offset=${(page++ % pages) * 100}` }),
        },
      ],
    },
  ];
  // Check once that the list really carries live state.
  const check = await fetch(`${edge.http}${base}?limit=100&offset=0`, { headers });
  const body = await check.json();
  const live = (body.objects ?? []).filter((o) => o.sip_registered === 'true').length;
  const rows = [];
  for (const c of cases) {
    for (const mode of ['200/s', 'max']) {
      const cpu = cpuMeter([edge.pid], { tree: true });
      const redisCpu = redisPid ? cpuMeter([redisPid]) : null;
      cpu.begin();
      redisCpu?.begin();
      const res = await runCannon(autocannon, {
        url: edge.http,
        headers,
        requests: c.requests,
        duration: seconds,
        connections: mode === 'max' ? maxConnections : 10,
        ...(mode === '200/s' ? { overallRate: 200 } : {}),
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
