/**
 * The server on each UDP engine (docs/udp-engine.md): the integration suites run on the
 * default engine (native where it is built); this file is the cheap share that runs the
 * registrar over node:dgram too, and checks the choice of engine and its one log line.
 * In-process apps on the embedded store (no Redis), one real server process.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, describe, expect, it } from 'vitest';
import { createApp, type App } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { createLogger } from '../../src/logger.js';
import { loadNativeUdp } from '../../src/transport/udp-native.js';
import { FREE_DECK } from '../support/edge-process.mjs';
import { endpoints, provision } from '../support/provision.js';
import { runServerUntilStopped, startServer } from '../support/server-process.js';
import { parseResponse, registerMessage, registerWithAuth, udpConn } from '../support/sip-client.js';

const nativeBuilt = 'addon' in loadNativeUdp();
const engines = nativeBuilt ? (['dgram', 'native'] as const) : (['dgram'] as const);

describe.each(engines)('registrar over UDP on the %s engine (in process, embedded store)', (engine) => {
  let app: App;
  const users = endpoints(31, `${engine}.sip.localhost`, engine);

  afterAll(async () => {
    await app?.stop();
  });

  it('registers (401 → 200); a retransmitted REGISTER gets the identical response; 30 phones registering at once all succeed', async () => {
    const config = loadConfig(
      {
        SIP_HOST: '127.0.0.1', HTTP_HOST: '127.0.0.1', SIP_UDP_PORT: '0', SIP_TCP_PORT: 'off', SIP_TLS_PORT: 'off',
        SIP_WS_PORT: 'off', SIP_WSS_PORT: 'off', HTTP_PORT: 'off', RATE_DECK_FILE: FREE_DECK, SIP_UDP_ENGINE: engine,
      },
      { configFile: null },
    );
    app = createApp(config, createLogger('silent'));
    const ports = await app.start();
    await provision(app.credentials, users);
    const port = ports.udp!.port;
    const conn = await udpConn('127.0.0.1', port);
    const spec = { transport: 'UDP' as const, user: users[0].user, domain: users[0].domain, password: users[0].password, viaHost: '127.0.0.1', viaPort: conn.localPort, callId: randomBytes(6).toString('hex') };
    const { first, final } = await registerWithAuth(conn, spec);
    expect(first.status).toBe(401);
    expect(final.status).toBe(200);
    // A retransmission (same branch, Call-ID, CSeq) of an unauthenticated REGISTER: the same 401, byte for byte.
    const again = registerMessage({ ...spec, callId: 'rtx-' + spec.callId, cseq: 1 });
    conn.send(again);
    const a = await conn.next();
    conn.send(again);
    const b = await conn.next();
    expect(parseResponse(a).status).toBe(401);
    expect(b).toBe(a);
    conn.close();

    // 30 phones at once: every one gets its 401 and its 200.
    const conns = await Promise.all(Array.from({ length: 30 }, () => udpConn('127.0.0.1', port)));
    const results = await Promise.all(
      conns.map((c, i) => registerWithAuth(c, { ...spec, user: users[i + 1].user, domain: users[i + 1].domain, password: users[i + 1].password, viaPort: c.localPort, callId: `many-${i}-${spec.callId}` })),
    );
    for (const c of conns) c.close();
    expect(results.map((r) => r.final.status)).toEqual(Array(30).fill(200));
  });
});

describe('choice of engine in the server process', () => {
  it('auto without the addon (SIP_EDGE_NATIVE=0): node:dgram with one log line, and it serves', async () => {
    const server = await startServer({ SIP_EDGE_NATIVE: '0', SIP_UDP_ENGINE: 'auto' });
    try {
      const lines = server.logs.filter((l) => typeof l.msg === 'string' && l.msg.startsWith('udp engine:'));
      expect(lines).toHaveLength(1);
      expect(lines[0]).toMatchObject({ udpEngine: 'dgram', reason: 'the native UDP engine is switched off (SIP_EDGE_NATIVE=0)' });
      const conn = await udpConn('127.0.0.1', server.ports.udp!);
      conn.send(registerMessage({ transport: 'UDP', user: 'nobody', domain: 'x.sip.localhost', viaHost: '127.0.0.1', viaPort: conn.localPort, callId: 'c1', cseq: 1 }));
      expect(parseResponse(await conn.next()).status).toBeGreaterThanOrEqual(400);
      conn.close();
    } finally {
      await server.stop();
    }
  });

  it('SIP_UDP_ENGINE=native without the addon does not start, and says why', async () => {
    const { code, output } = await runServerUntilStopped({ SIP_EDGE_NATIVE: '0', SIP_UDP_ENGINE: 'native', SIP_UDP_PORT: '0', SIP_TCP_PORT: '0', SIP_TLS_PORT: 'off', SIP_WS_PORT: 'off', SIP_WSS_PORT: 'off', HTTP_PORT: '0', RATE_DECK_FILE: FREE_DECK });
    expect(code).not.toBe(0);
    expect(output).toMatch(/SIP_UDP_ENGINE=native: the native UDP engine is switched off/);
  });

  it('SIP_UDP_ENGINE=banana is a configuration error', async () => {
    const { code, output } = await runServerUntilStopped({ SIP_UDP_ENGINE: 'banana' });
    expect(code).toBe(2);
    expect(output).toMatch(/SIP_UDP_ENGINE must be native, dgram or auto/);
  });
});
