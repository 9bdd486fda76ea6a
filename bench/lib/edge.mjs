// Start sip-edge (dist/main.js) for the bench and provision endpoints over its HTTP API.
import { baseEnv } from '../../test/support/edge-process.mjs';
import { join } from 'node:path';
import { jsonLogLine, start, stop, waitFor } from './proc.mjs';

export const PARTNER_ID = 'BENCHPARTNER';
export const PARTNER_TOKEN = 'bench-partner-token-0123456789';

/**
 * Start the edge. `store`: 'redis' (needs redisUrl) or 'memory'.
 * `listeners`: which SIP listeners to open on free ports; the others are off.
 * `node`: the runtime binary (default: the one running the bench).
 */
export async function startEdge({ root, tmp, name, store, redisUrl, listeners = ['udp', 'tcp'], nodeArgs = [], env = {}, logLevel, node = process.execPath }) {
  const port = (t) => (listeners.includes(t) ? '0' : 'off');
  const logFile = join(tmp, `${name}.log`);
  // The environment of the one launcher (test/support/edge-process.mjs); the process
  // itself is started here because a benchmark wants its output written straight to
  // a file (no work per log line in this process) and its niceness set (proc.mjs).
  const child = start(node, [...nodeArgs, join(root, 'dist/main.js')], {
    cwd: root,
    logFile,
    env: {
      ...baseEnv(),
      SIP_EDGE_CONFIG: '',
      SIP_UDP_PORT: port('udp'),
      SIP_TCP_PORT: port('tcp'),
      SIP_TLS_PORT: port('tls'),
      SIP_WS_PORT: port('ws'),
      SIP_WSS_PORT: port('wss'),
      ...(store === 'redis' ? { REDIS_URL: redisUrl } : {}),
      LOG_LEVEL: logLevel ?? process.env.BENCH_EDGE_LOG_LEVEL ?? 'info',
      SIP_DOMAIN: 'sip.localhost',
      PARTNER_AUTH_ID: PARTNER_ID,
      PARTNER_AUTH_TOKEN: PARTNER_TOKEN,
      API_RATE_LIMIT: '10000000',
      NONCE_SECRET: 'bench-nonce-secret-0123456789abcdef',
      ...env,
    },
  });
  const listening = await waitFor(
    () => {
      if (child.exitCode !== null) throw new Error(`${name} exited (${child.exitCode}); see ${logFile}`);
      return jsonLogLine(logFile, 'listening');
    },
    30000,
    `${name} "listening" log line`,
  );
  return {
    name,
    child,
    pid: child.pid,
    logFile,
    ports: { udp: listening.udp, tcp: listening.tcp, tls: listening.tls, ws: listening.ws, wss: listening.wss, http: listening.http },
    http: `http://127.0.0.1:${listening.http}`,
    stop: (graceMs) => stop(child, graceMs),
  };
}

async function api(base, method, path, headers, body) {
  const res = await fetch(base + path, {
    method,
    headers: { ...headers, ...(body ? { 'content-type': 'application/json' } : {}) },
    body: body ? JSON.stringify(body) : undefined,
  });
  const text = await res.text();
  let json = null;
  try {
    json = JSON.parse(text);
  } catch {
    /* not JSON */
  }
  if (!res.ok) throw new Error(`${method} ${path} → ${res.status} ${text.slice(0, 300)}`);
  return json;
}

/**
 * Create a customer account through the partner API: {authId, authToken, domain}.
 * `limits`: the account's {cpsLimit, concurrentCallsLimit} (the partner API's
 * `cps_limit`/`concurrent_calls_limit`); absent, the edge's defaults (10 and 100).
 */
export async function createAccount(edge, name = 'Bench', limits = {}) {
  const a = await api(edge.http, 'POST', '/api/v1/partner/accounts', { 'x-auth-id': PARTNER_ID, 'x-auth-token': PARTNER_TOKEN }, {
    name,
    email: 'bench@example.com',
    password: 'bench-account-password',
    country: 'IN',
    ...(limits.cpsLimit !== undefined ? { cps_limit: limits.cpsLimit } : {}),
    ...(limits.concurrentCallsLimit !== undefined ? { concurrent_calls_limit: limits.concurrentCallsLimit } : {}),
  });
  return { authId: a.auth_id, authToken: a.auth_token, domain: a.sip_domain };
}

/**
 * Create `users` (each {user, password}) as endpoints of the account over the
 * API, `concurrency` requests at a time. Returns endpoint ids in the same order.
 */
export async function createEndpoints(edge, account, users, concurrency = 16) {
  const headers = { 'x-auth-id': account.authId, 'x-auth-token': account.authToken };
  const ids = new Array(users.length);
  let next = 0;
  const worker = async () => {
    while (next < users.length) {
      const i = next++;
      const r = await api(edge.http, 'POST', `/api/v1/Account/${account.authId}/Endpoint/`, headers, {
        username: users[i].user,
        password: users[i].password,
      });
      ids[i] = r.endpoint_id;
    }
  };
  await Promise.all(Array.from({ length: concurrency }, worker));
  return ids;
}

/** `count` bench users u00001… with distinct passwords. */
export function benchUsers(count, prefix = 'u') {
  return Array.from({ length: count }, (_, i) => ({
    user: `${prefix}${String(i + 1).padStart(5, '0')}`,
    password: `pw${prefix}${i + 1}x${((i * 7919) % 100000).toString(36)}secret`,
  }));
}
