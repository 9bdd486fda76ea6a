/**
 * A start prints nothing but the server's own JSON log lines: no runtime
 * deprecation or experimental warning (fastify's FSTDEP023 was printed at every
 * start until the access log moved to `logController`).
 */
import { afterEach, describe, expect, it } from 'vitest';
import { startServer, type ServerProcess } from '../support/server-process.js';

describe('server start', () => {
  let server: ServerProcess | null = null;
  afterEach(async () => {
    await server?.stop();
    server = null;
  });

  it('prints no warning on stderr (embedded store), and serves the API', async () => {
    server = await startServer();
    const r = await fetch(`http://127.0.0.1:${server.ports.http}/healthz`);
    expect(r.status).toBe(200);
    // Warnings go out when fastify is built and on first use: give them a moment after the first request.
    await new Promise((resolve) => setTimeout(resolve, 300));
    const out = server.output();
    expect(out).toContain('"msg":"listening"');
    expect(out).not.toMatch(/Warning|FSTDEP|DEP0\d{3}/);
  });
});
