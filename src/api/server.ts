/**
 * The HTTP API server (fastify): every route of the API, its authentication,
 * content negotiation, validation, rate limiting and error bodies. Built here,
 * listened on by the composition root (src/app.ts).
 *
 * Per request, in order: fresh request id (X-Request-Id; the `api_id` of every
 * JSON body) → rate limit (X-RateLimit-* on every response, 429 + Retry-After) →
 * Accept check (406) → authentication (401) and authorization (403/404) → body
 * parsing (415 unless application/json) → schema validation (400 naming every
 * bad field) → handler. The principal lookup is started with the rate-limit check
 * (one Redis round trip for both), but answers keep that order.
 */
import { createHash, randomUUID } from 'node:crypto';
import { Ajv } from 'ajv';
import Fastify, { LogController, type FastifyBaseLogger, type FastifyError, type FastifyInstance, type FastifyReply, type FastifyRequest } from 'fastify';
import rateLimit from '@fastify/rate-limit';
import type { RedisClient } from '../store/redis/client.js';
import type { Config } from '../config.js';
import { StoreUnavailableError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { CredentialStore } from '../store/credentials/credentials.js';
import type { Directory } from '../store/directory/directory.js';
import type { Aor, LocationStore } from '../store/location/location.js';
import { EndpointProvisioning } from '../provisioning/endpoints.js';
import { registerAccountRoutes } from './account.js';
import { registerApplicationRoutes } from './applications.js';
import { Authenticator, checkAdminToken, headerValue, type Access, type Principal } from './auth.js';
import type { ApiContext } from './context.js';
import { registerEndpointRoutes } from './endpoints.js';
import { registerCdrRoutes } from './cdrs.js';
import type { CallStore } from '../store/calls/calls.js';
import { MemoryCallStore } from '../store/calls/memory.js';
import { RegistrationEventHub, registerRegistrationEventRoutes, wantsEventStream } from './registration-events.js';
import { ApiError, badRequest, detailsFromAjv, endpointNotFound, notFound, notFoundNoBody } from './errors.js';
import { registerHealthRoutes, type OperatorHooks } from './health.js';
import { Idempotency } from './idempotency.js';
import { registerPartnerRoutes } from './partner.js';
import { registerSubAccountRoutes } from './subaccounts.js';
import { createBilling, type Billing } from '../billing/index.js';
import { registerBalanceRoutes } from './balance.js';
import { registerAdminRoutes } from './admin.js';
import { registerPartnerMoneyRoutes } from './partner-money.js';
import { createNumbers, type Numbers } from '../numbers/index.js';
import { registerNumberRoutes } from './numbers.js';
import { registerTrunkRoutes } from './trunks.js';
import { registerKycRoutes, registerKycSessionRoutes } from './kyc.js';
import { createKyc, type Kyc } from '../kyc/index.js';
import { createTrunks, type Trunks } from '../trunks/index.js';
import { createSecretBox } from '../security/secret-box.js';
import type { CallControl } from '../calls/control.js';
import { registerCallRoutes } from './calls.js';
import { createMessaging, type Messaging } from '../messaging/index.js';
import { messagingRateLimit, registerMessagingRoutes } from './messaging.js';
import type { MessagingCatalog } from '../messaging/catalog/index.js';
import { registerMessagingCatalogRoutes } from './messaging-catalog.js';

/** What the API server is built from. */
export interface ApiServerDeps {
  config: Readonly<Config>;
  logger: Logger;
  location: LocationStore;
  credentials: CredentialStore;
  directory: Directory;
  /** When given, rate-limit counters live in Redis and are shared by every node. */
  redis?: RedisClient | null;
  /** Called after an endpoint's bindings were removed (password change, delete): close its flows. */
  onEndpointRemoved?: (aor: Aor) => void;
  /** Calls, CDRs and callbacks (docs/events.md); an embedded one when absent. */
  calls?: CallStore;
  /** Ledger and rates (docs/billing.md); an embedded one (on `redis` when given) when absent. */
  billing?: Billing;
  /**
   * Phone numbers (docs/numbers.md); when absent, one of its own on `redis` (or memory)
   * with the inventory loaded and no rental sweep (the composition root runs that).
   */
  numbers?: Numbers;
  /** SIP trunks (docs/trunks.md); an embedded one (on `redis` when given) when absent. */
  trunks?: Trunks;
  /** Sub-account KYC (docs/kyc.md); one of its own (on `redis` when given) when absent. */
  kyc?: Kyc;
  /**
   * Messaging (docs/messaging.md); when absent, one of its own (on `redis` when given,
   * its events on `calls`' outbox) whose send worker runs until the server closes.
   */
  messaging?: Messaging;
  /** Wakes the registration event streams (docs/events.md); one of its own when absent (this process's events only). */
  eventHub?: RegistrationEventHub;
  /** Metrics registry, draining state and latency hook of the probe routes (`/metrics`, `/readyz`). */
  ops?: OperatorHooks;
  /** The B2BUA behind the Calls API (src/calls/control.ts); absent or null: the Calls routes answer 503. */
  callControl?: CallControl | null;
  /** Messaging contacts, templates, canned responses, numbers, calls, campaigns (docs/messaging-catalog.md); routes absent without it. */
  messagingCatalog?: MessagingCatalog;
}

/** A route as registered: method and URL pattern (the OpenAPI test compares these). */
export interface RegisteredRoute {
  method: string;
  url: string;
}

declare module 'fastify' {
  interface FastifyInstance {
    /** Every route this server registered, in registration order. */
    apiRoutes: readonly RegisteredRoute[];
  }
}

/** Largest request body accepted, bytes. */
const BODY_LIMIT = 64 * 1024;

/** Whether an Accept header admits a JSON response (absent, `application/json`, `application/*`, `*\/*`). */
export function acceptsJson(accept: string | undefined): boolean {
  return accepts(accept, ['application/json', 'application/*', '*/*']);
}

/** Whether an Accept header admits CSV (`text/csv`, `text/*`); JSON-or-anything is judged by acceptsJson. */
function acceptsCsv(accept: string | undefined): boolean {
  return accept !== undefined && accepts(accept, ['text/csv', 'text/*']);
}

/** Whether an Accept header (absent or empty: anything) has one of `types` with q > 0. */
function accepts(accept: string | undefined, types: readonly string[]): boolean {
  if (accept === undefined || accept.trim() === '') return true;
  for (const range of accept.split(',')) {
    const [type = '', ...params] = range.split(';').map((s) => s.trim().toLowerCase());
    const q = params.find((p) => p.startsWith('q='));
    if (q !== undefined && !(Number(q.slice(2)) > 0)) continue;
    if (types.includes(type)) return true;
  }
  return false;
}

/**
 * The rate-limit key: the API key (Auth ID and token) as presented, hashed. A
 * caller who knows only an Auth ID therefore cannot spend that account's quota;
 * requests without credentials count against their address.
 */
export function rateLimitKey(req: FastifyRequest): string {
  const id = headerValue(req, 'x-auth-id');
  const token = headerValue(req, 'x-auth-token');
  const digest = (s: string): string => createHash('sha256').update(s).digest('base64url').slice(0, 32);
  if (id !== null && token !== null) return `key:${digest(`${id}\u0000${token}`)}`;
  const authz = headerValue(req, 'authorization');
  if (authz !== null) return `bearer:${digest(authz)}`;
  return `ip:${req.ip}`;
}

/** The 404 a route answers for a resource the caller cannot see. */
function routeNotFound(shape: 'empty' | 'endpoint' | undefined, params: Record<string, unknown>): ApiError {
  if (shape === 'empty') return notFoundNoBody();
  if (shape === 'endpoint') return endpointNotFound(String(params.endpoint_id ?? ''));
  return notFound();
}

/** Map anything thrown during a request to the API error it answers with. */
function toApiError(err: unknown): ApiError {
  if (err instanceof ApiError) return err;
  if (err instanceof StoreUnavailableError) {
    return new ApiError(503, 'service_unavailable', 'A backing store is unavailable; retry shortly.');
  }
  const fe = err as Partial<FastifyError> & { validation?: unknown; validationContext?: string };
  if (Array.isArray(fe.validation)) {
    return badRequest(detailsFromAjv(fe.validation, fe.validationContext ?? 'body'));
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return new ApiError(415, 'unsupported_media_type', 'Content-Type must be application/json.');
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return badRequest({ body: 'must be a JSON object' });
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return badRequest({ body: 'is not valid JSON' });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return new ApiError(413, 'payload_too_large', `The request body exceeds ${BODY_LIMIT} bytes.`);
    default:
      break;
  }
  if (err instanceof SyntaxError && fe.statusCode === 400) return badRequest({ body: 'is not valid JSON' });
  const status = typeof fe.statusCode === 'number' ? fe.statusCode : 500;
  if (status >= 400 && status < 500) return new ApiError(status, 'bad_request', fe.message ?? 'Bad request.');
  return new ApiError(500, 'internal_error', 'Internal error.');
}

/**
 * Build the API server (not listening). Closing the returned instance does not
 * close the stores: their owner (src/app.ts) does.
 *
 * @remarks
 * Routes added to the returned instance later go through the same hooks and are
 * authenticated as customer routes unless their `config.access` says otherwise:
 * set `{ access: 'probe', rateLimit: false }` for an operator route such as
 * `/metrics`. `apiRoutes` lists every route registered.
 */
export async function buildApiServer(deps: ApiServerDeps): Promise<FastifyInstance> {
  // The composition root may already hand over an `api` child; bind the component once.
  const log = deps.logger.bindings().component === undefined ? deps.logger.child({ component: 'api' }) : deps.logger;
  const app = Fastify({
    loggerInstance: log as FastifyBaseLogger,
    genReqId: () => randomUUID(),
    // Always a fresh id: a client-chosen one could collide or be forged into logs.
    requestIdHeader: false,
    bodyLimit: BODY_LIMIT,
    exposeHeadRoutes: false,
    routerOptions: { ignoreTrailingSlash: true },
    // One access-log line per request (below) instead of fastify's two (the
    // logController form: the top-level disableRequestLogging is deprecated, FSTDEP023).
    logController: new LogController({ disableRequestLogging: true }),
  });
  app.addHook('onResponse', async (req, reply) => {
    req.log.info(
      // The hosted KYC page's token is a credential (docs/kyc.md "KYC sessions"): not logged.
      // Nor is Meta's hub.verify_token (WHATSAPP_VERIFY_TOKEN) in the query of its handshake (docs/messaging.md).
      { method: req.method, url: req.url.replace(/^\/kyc\/s\/[^/?]+/, '/kyc/s/[token]').replace(/([?&]hub\.verify_token=)[^&]*/g, '$1[redacted]'), status: reply.statusCode, ms: Math.round(reply.elapsedTime * 10) / 10 },
      'request',
    );
  });

  // Two validators: bodies are typed strictly (a "true" string is not a boolean),
  // while query and path values, always strings on the wire, are coerced.
  // allErrors so one 400 names every bad field; inputs are bounded (maxLength, bodyLimit).
  const common = { allErrors: true, removeAdditional: false, allowUnionTypes: true, strict: true } as const;
  const bodyAjv = new Ajv({ ...common, coerceTypes: false, useDefaults: false });
  const partsAjv = new Ajv({ ...common, coerceTypes: 'array', useDefaults: true });
  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? bodyAjv : partsAjv).compile(schema));

  const billing = deps.billing ?? createBilling({ config: deps.config, redis: deps.redis ?? null });
  const secretBox = createSecretBox(deps.config.dataEncryptionKeys.map((k) => ({ kid: k.kid, key: Buffer.from(k.key, 'base64') })));
  const trunks = deps.trunks ?? createTrunks({ config: deps.config, redis: deps.redis ?? null, secretBox });
  let numbers = deps.numbers;
  if (!numbers) {
    numbers = createNumbers({ config: deps.config, redis: deps.redis ?? null, ledger: billing.ledger, directory: deps.directory, trunks, log });
    await numbers.reload();
  }
  const calls = deps.calls ?? new MemoryCallStore();
  const kyc = deps.kyc ?? createKyc({ config: deps.config, redis: deps.redis ?? null, directory: deps.directory, outbox: calls, log });
  let messaging = deps.messaging;
  if (!messaging) {
    const own = createMessaging({ config: deps.config, redis: deps.redis ?? null, secretBox, outbox: calls, log: log.child({ component: 'messaging' }) });
    own.start();
    app.addHook('onClose', async () => own.close());
    messaging = own;
  }
  const ctx: ApiContext = {
    config: deps.config,
    log,
    location: deps.location,
    credentials: deps.credentials,
    directory: deps.directory,
    calls,
    billing,
    numbers,
    trunks,
    kyc,
    messaging,
    auth: new Authenticator(deps.directory, deps.config.partners, deps.config.nonceSecret),
    idempotency: new Idempotency(deps.directory),
    provisioning: new EndpointProvisioning({
      directory: deps.directory,
      credentials: deps.credentials,
      location: deps.location,
      onEndpointRemoved: deps.onEndpointRemoved,
    }),
    startedAt: new Date().toISOString(),
    callControl: deps.callControl ?? null,
  };

  // JSON only (docs/api.md: a body that is not application/json is 415).
  app.removeContentTypeParser('text/plain');
  // An empty body sent with `Content-Type: application/json` is no body (many SDKs
  // send the header on every request; the spec requires it only with a body): a
  // DELETE goes through, an update names what is missing. Anything else is parsed
  // by fastify's own JSON parser (prototype-poisoning checks included).
  const json = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (req, body, done) => {
    const text = typeof body === 'string' ? body : body.toString('utf8');
    if (text.trim() === '') {
      done(null, undefined);
      return;
    }
    json(req, text, done);
  });

  const routes: RegisteredRoute[] = [];
  app.decorate('apiRoutes', routes);
  app.decorateRequest('principal', null);

  app.addHook('onRequest', async (req, reply) => {
    reply.header('x-request-id', req.id);
  });

  app.setErrorHandler((err: unknown, req: FastifyRequest, reply: FastifyReply) => {
    const e = toApiError(err);
    if (e.status >= 500) req.log.error({ err, code: e.code }, 'request failed');
    for (const [k, v] of Object.entries(e.headers)) reply.header(k, v);
    reply.code(e.status);
    if (e.noBody) return reply.send();
    return reply.send({ api_id: req.id, error: e.code, message: e.message, ...e.extra });
  });

  await app.register(rateLimit, {
    global: true,
    max: deps.config.apiRateLimit,
    timeWindow: '1 minute',
    keyGenerator: rateLimitKey,
    redis: deps.redis ?? undefined,
    nameSpace: 'sipedge:ratelimit:',
    // Redis down: serve (the stores answer 503 on their own) rather than refuse everyone.
    skipOnError: true,
    errorResponseBuilder: (_req, c) =>
      new ApiError(429, 'rate_limited', `Rate limit of ${c.max} requests per minute exceeded; retry in ${c.after}.`),
  });

  // Runs after the rate-limit plugin's own onRoute hook, so each route's onRequest
  // list is [start auth, rate limit, guard]: even a 401 carries the X-RateLimit-*
  // headers. The principal lookup starts before the rate-limit check and runs
  // alongside it (with Redis, both are a round trip); the guard still decides in
  // the documented order (429, then 406, then 401/403/404), so a refused request
  // answers exactly as if the lookup had not been started.
  const pendingAuth = new WeakMap<FastifyRequest, Promise<Principal>>();
  app.addHook('onRoute', (route) => {
    const methods = Array.isArray(route.method) ? route.method : [route.method];
    for (const m of methods) routes.push({ method: m, url: route.url });
    const access: Access = route.config?.access ?? 'customer';
    const notFoundShape = route.config?.notFound;
    if (access === 'probe') return;
    const startAuth = (req: FastifyRequest, _reply: FastifyReply, done: () => void): void => {
      if (access !== 'public' && access !== 'admin') {
        const p = ctx.auth.authenticate(req);
        // Awaited by the guard; a request refused before it (429) leaves it unread.
        p.catch(() => undefined);
        pendingAuth.set(req, p);
      }
      done();
    };
    const guard = async (req: FastifyRequest): Promise<void> => {
      const accept = headerValue(req, 'accept') ?? undefined;
      if (!route.config?.html && !route.config?.audio && !route.config?.anyAccept && !acceptsJson(accept) && !(route.config?.eventStream && wantsEventStream(accept)) && !(route.config?.csv && acceptsCsv(accept))) {
        throw new ApiError(406, 'not_acceptable', 'This API answers with application/json; the Accept header does not allow it.');
      }
      if (access === 'public') return;
      if (access === 'admin') {
        checkAdminToken(req, deps.config.adminAuthToken);
        return;
      }
      const principal = await (pendingAuth.get(req) ?? ctx.auth.authenticate(req));
      req.principal = principal;
      const params = (req.params ?? {}) as Record<string, unknown>;
      const pathAuthId = typeof params.auth_id === 'string' ? params.auth_id : undefined;
      try {
        ctx.auth.authorize(principal, access, pathAuthId);
      } catch (err) {
        throw err instanceof ApiError && err.status === 404 ? routeNotFound(notFoundShape, params) : err;
      }
    };
    const existing = route.onRequest;
    route.onRequest = [startAuth, ...(Array.isArray(existing) ? existing : existing ? [existing] : []), guard];
  });

  app.setNotFoundHandler({ preHandler: app.rateLimit() }, async (req) => {
    throw new ApiError(404, 'not_found', `No route ${req.method} ${req.url.split('?')[0] ?? ''}.`);
  });

  registerHealthRoutes(app, ctx, deps.ops);
  registerPartnerRoutes(app, ctx);
  registerAccountRoutes(app, ctx);
  registerEndpointRoutes(app, ctx);
  registerRegistrationEventRoutes(app, ctx, deps.eventHub ?? new RegistrationEventHub());
  registerCdrRoutes(app, ctx);
  registerApplicationRoutes(app, ctx);
  registerSubAccountRoutes(app, ctx);
  registerBalanceRoutes(app, ctx);
  registerAdminRoutes(app, ctx);
  registerPartnerMoneyRoutes(app, ctx);
  registerNumberRoutes(app, ctx);
  registerTrunkRoutes(app, ctx);
  registerKycRoutes(app, ctx);
  registerKycSessionRoutes(app, ctx);
  registerCallRoutes(app, ctx);
  await registerMessagingRoutes(app, ctx, messaging, rateLimitKey, { numbers: !deps.messagingCatalog });
  if (deps.messagingCatalog) registerMessagingCatalogRoutes(app, ctx, deps.messagingCatalog, messagingRateLimit(messaging, rateLimitKey));
  return app;
}
