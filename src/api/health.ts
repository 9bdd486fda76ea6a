/**
 * Liveness and readiness probes: unauthenticated, never rate limited, no
 * content negotiation (probes send whatever Accept they like).
 */
import type { FastifyInstance } from 'fastify';
import type { ApiContext } from './context.js';

/** Register `GET /healthz` (the process answers) and `GET /readyz` (the stores answer). */
export function registerHealthRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const config = { access: 'probe' as const, rateLimit: false as const };

  app.get('/healthz', { config }, async (req) => ({ api_id: req.id, status: 'ok' }));

  app.get('/readyz', { config }, async (req, reply) => {
    const [location, directory] = await Promise.all([
      ctx.location.ping().catch(() => false),
      ctx.directory.ping().catch(() => false),
    ]);
    if (location && directory) return { api_id: req.id, status: 'ready' };
    const down = [location ? null : 'location store', directory ? null : 'directory'].filter(Boolean).join(' and ');
    return reply.code(503).send({ api_id: req.id, error: 'not_ready', message: `The ${down} does not answer.` });
  });
}
