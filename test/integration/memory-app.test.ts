import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp, type App, type Listening } from '../../src/app.js';
import { loadConfig } from '../../src/config.js';
import { FREE_DECK } from '../support/edge-process.mjs';
import { createLogger } from '../../src/logger.js';
import { endpoints, provision } from '../support/provision.js';
import { registerWithAuth, udpConn } from '../support/sip-client.js';

/** The composition root on the embedded in-memory store (the default without REDIS_URL). */
describe('server on the embedded in-memory store', () => {
  let app: App;
  let ports: Listening;
  const users = endpoints(2, 'mem.sip.localhost', 'mem');

  beforeAll(async () => {
    const config = loadConfig(
      {
        SIP_HOST: '127.0.0.1', HTTP_HOST: '127.0.0.1', SIP_UDP_PORT: '0', SIP_TCP_PORT: '0', SIP_TLS_PORT: 'off',
        SIP_WS_PORT: 'off', SIP_WSS_PORT: 'off', HTTP_PORT: 'off', SIP_MIN_EXPIRES: '1', RATE_DECK_FILE: FREE_DECK,
      },
      { configFile: null },
    );
    app = createApp(config, createLogger('silent'));
    ports = await app.start();
    await provision(app.credentials, users);
  });
  afterAll(async () => {
    await app?.stop();
  });

  it('reads a binding registered with Expires 2 as unregistered 3 s later, with no request in between', async () => {
    const conn = await udpConn('127.0.0.1', ports.udp!.port);
    const { final } = await registerWithAuth(conn, {
      transport: 'UDP', user: users[0].user, domain: users[0].domain, password: users[0].password,
      viaHost: '127.0.0.1', viaPort: conn.localPort, callId: randomBytes(6).toString('hex'), expires: 2,
    });
    expect(final.status).toBe(200);
    const aor = { domain: users[0].domain, user: users[0].user };
    expect(await app.location.lookup(aor)).toHaveLength(1);
    await new Promise((r) => setTimeout(r, 3000));
    expect(await app.location.lookup(aor)).toHaveLength(0);
    conn.close();
  });
});
