/**
 * Liveness and readiness probes and Prometheus metrics: unauthenticated, never
 * rate limited, no content negotiation (probes and scrapers send whatever Accept
 * they like).
 */
import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import type { ApiContext } from './context.js';
import { answerPrimary, askPrimary, isWorker, type WorkerReadiness } from '../cluster.js';

/** What the operator routes read from the running server (src/app.ts). */
export interface OperatorHooks {
  /** The registry `GET /metrics` exposes. */
  registry: Registry;
  /** True once shutdown began: readiness fails so load balancers stop sending. */
  draining?: () => boolean;
  /** Called after every HTTP response (latency histogram). */
  onHttpResponse?: (method: string, route: string, status: number, seconds: number) => void;
}

/**
 * Register `GET /healthz` (the process answers), `GET /readyz` (the stores
 * answer and the server is not shutting down; with SIP_WORKERS > 1, in every
 * worker of the node) and `GET /metrics` (Prometheus text format; an empty
 * registry when the server passes none; with SIP_WORKERS > 1, summed over the
 * node's workers).
 */
export function registerHealthRoutes(app: FastifyInstance, ctx: ApiContext, ops?: OperatorHooks): void {
  const config = { access: 'probe' as const, rateLimit: false as const };

  app.get('/healthz', { config }, async (req) => ({ api_id: req.id, status: 'ok' }));

  /** This process's readiness: its stores answer and it is not shutting down. */
  const readiness = async (): Promise<WorkerReadiness> => {
    if (ops?.draining?.()) return { ready: false, message: 'The server is shutting down.' };
    const [location, directory] = await Promise.all([
      ctx.location.ping().catch(() => false),
      ctx.directory.ping().catch(() => false),
    ]);
    if (location && directory) return { ready: true };
    const down = [location ? null : 'location store', directory ? null : 'directory'].filter(Boolean).join(' and ');
    return { ready: false, message: `The ${down} does not answer.` };
  };
  const registry = ops?.registry;

  // SIP_WORKERS > 1: a probe or scrape answers for the whole node; the worker that
  // takes it asks the primary, which asks every worker (docs/workers.md).
  const nodeWide = isWorker();
  if (nodeWide) {
    const stop = answerPrimary({
      ready: readiness,
      metrics: async () => (registry ? registry.getMetricsAsJSON() : []),
    });
    app.addHook('onClose', async () => stop());
  }

  app.get('/readyz', { config }, async (req, reply) => {
    if (ops?.draining?.()) {
      return reply.code(503).send({ api_id: req.id, error: 'not_ready', message: 'The server is shutting down.' });
    }
    if (nodeWide) {
      const node = await askPrimary('ready');
      if (node === null) return reply.code(503).send({ api_id: req.id, error: 'not_ready', message: 'The primary process did not answer.' });
      if (node.ready) return { api_id: req.id, status: 'ready', workers: node.workers };
      return reply.code(503).send({ api_id: req.id, error: 'not_ready', message: node.message, workers: node.workers });
    }
    const r = await readiness();
    if (r.ready) return { api_id: req.id, status: 'ready' };
    return reply.code(503).send({ api_id: req.id, error: 'not_ready', message: r.message });
  });

  app.get('/metrics', { config }, async (_req, reply) => {
    if (!registry) return reply.type('text/plain; version=0.0.4; charset=utf-8').send('');
    if (nodeWide) {
      const node = await askPrimary('metrics');
      if (node === null) return reply.code(503).type('text/plain; charset=utf-8').send('# the primary process did not answer\n');
      return reply.type(node.contentType).send(node.body);
    }
    const body = await registry.metrics();
    return reply.type(registry.contentType).send(body);
  });

  const onHttp = ops?.onHttpResponse;
  if (onHttp) {
    app.addHook('onResponse', async (req, reply) => {
      // The route pattern, never the raw URL: label values stay bounded.
      const route = req.routeOptions.url ?? 'unmatched';
      onHttp(req.method, route, reply.statusCode, reply.elapsedTime / 1000);
    });
  }
}
