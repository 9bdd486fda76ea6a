/**
 * Call records and callback administration (docs/events.md "CDRs", docs/callbacks.md):
 * - `GET /api/v1/Account/<auth_id>/CDR/` with the spec's CDR filters, `page`/`per_page`;
 * - `GET /api/v1/Account/<auth_id>/CDR/<call_uuid>/`;
 * - `GET /api/v1/partner/accounts/<customer_auth_id>/CDR/` (a partner's view of its customer);
 * - `POST /api/v1/Account/<auth_id>/SigningSecret/` (a new callback signing secret, shown once);
 * - `GET /api/v1/Account/<auth_id>/CallbackDeadLetter/` (callbacks given up on).
 *
 * The vendor SDK's paths serve the same records from the same query in the SDK's
 * shape (src/api/vendor-cdr.ts): `GET …/Account/<auth_id>/cdr`, `…/cdr/search`,
 * `…/cdr/recent`, `…/cdr/export` (text/csv), `…/cdr/<call_id>` and the partner's
 * `GET /api/v1/partner/accounts/<customer_auth_id>/cdrs`.
 */
import { randomBytes } from 'node:crypto';
import { Readable } from 'node:stream';
import { stringify } from 'csv-stringify';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { CDR_MAX, type CallStatus, type CdrFilter, type CdrPage, type CdrRecord } from '../store/calls/calls.js';
import type { AccountRecord } from '../store/directory/directory.js';
import { customerOf, queryObject, type ApiContext, type Customer } from './context.js';
import { ApiError, badRequest, notFound, type Details } from './errors.js';
import { csvSafe, VENDOR_CDR_FIELDS, vendorCdr, vendorCdrDetail, vendorPagination, vendorSummary } from './vendor-cdr.js';

const DATE = '^\\d{4}-\\d{2}-\\d{2}$';
const cdrQuery = {
  type: 'object',
  properties: {
    from_number: { type: 'string', maxLength: 128 },
    to_number: { type: 'string', maxLength: 128 },
    start_date: { type: 'string', pattern: DATE },
    end_date: { type: 'string', pattern: DATE },
    call_direction: { type: 'string', enum: ['inbound', 'outbound'] },
    min_duration: { type: 'integer', minimum: 0 },
    sip_call_id: { type: 'string', maxLength: 512 },
    bridge_uuid: { type: 'string', maxLength: 128 },
    hangup_cause: { type: 'string', maxLength: 64 },
    hangup_disposition: { type: 'string', maxLength: 64 },
    context: { type: 'string', maxLength: 64 },
    campaign_id: { type: 'string', maxLength: 128 },
    search: { type: 'string', minLength: 1, maxLength: 128 },
    page: { type: 'integer', minimum: 1, default: 1 },
    per_page: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
  },
} as const;

/** A new callback signing secret (256 bits). */
export function newSigningSecret(): string {
  return randomBytes(32).toString('base64url');
}

/** A CDR as the API shows it (without the internal owner and currency fields; a free call's rate fields are null). */
export function cdrView(c: CdrRecord, pathAuthId: string): Record<string, unknown> {
  const { sub_account: _s, currency: _c, ...rest } = c;
  return { ...rest, total_rate: c.total_rate ?? null, rate_prefix: c.rate_prefix ?? null, resource_uri: `/v1/Account/${pathAuthId}/CDR/${c.call_uuid}/` };
}

/** The spec's filters as a store filter; `start_date`/`end_date` both or neither (else 400). */
function filterOf(q: Record<string, unknown>): CdrFilter {
  const s = (k: string): string | undefined => (typeof q[k] === 'string' ? (q[k] as string) : undefined);
  const details: Details = {};
  const start = s('start_date');
  const end = s('end_date');
  if ((start === undefined) !== (end === undefined)) details[start === undefined ? 'start_date' : 'end_date'] = 'is required when ' + (start === undefined ? 'end_date' : 'start_date') + ' is given';
  const day = (d: string, k: string, endOfDay: boolean): number | undefined => {
    const t = Date.parse(`${d}T00:00:00.000Z`);
    if (Number.isNaN(t) || new Date(t).toISOString().slice(0, 10) !== d) {
      details[k] = 'must be a real date YYYY-MM-DD';
      return undefined;
    }
    return endOfDay ? t + 86_400_000 - 1 : t;
  };
  const from = start !== undefined && end !== undefined ? day(start, 'start_date', false) : undefined;
  const to = start !== undefined && end !== undefined ? day(end, 'end_date', true) : undefined;
  if (from !== undefined && to !== undefined && from > to) details.end_date = 'must not be before start_date';
  if (Object.keys(details).length > 0) throw badRequest(details);
  return {
    fromNumber: s('from_number'),
    toNumber: s('to_number'),
    from,
    to,
    callDirection: s('call_direction'),
    minDuration: typeof q.min_duration === 'number' ? q.min_duration : undefined,
    sipCallId: s('sip_call_id'),
    bridgeUuid: s('bridge_uuid'),
    hangupCause: s('hangup_cause'),
    hangupDisposition: s('hangup_disposition'),
    context: s('context'),
    campaignId: s('campaign_id'),
    search: s('search'),
  };
}

/** The one CDR query behind every CDR list, in either shape: the page the query's `page`/`per_page` names. */
async function queryCdrs(req: FastifyRequest, ctx: ApiContext, domain: string, filter: CdrFilter): Promise<CdrPage & { page: number; perPage: number }> {
  const q = queryObject(req);
  const page = typeof q.page === 'number' ? q.page : 1;
  const perPage = typeof q.per_page === 'number' ? q.per_page : 20;
  const r = await ctx.calls.cdrs(domain, filter, { limit: perPage, offset: (page - 1) * perPage });
  return { ...r, page, perPage };
}

/** The caller's filter: the query's, narrowed to its own calls for a sub-account. */
function customerFilter(req: FastifyRequest, c: Customer): CdrFilter {
  const filter = filterOf(queryObject(req));
  if (c.subAccount) filter.subAccount = c.subAccount.authId;
  return filter;
}

/** The customer account of a partner's path, or 404 (another partner's customer answers exactly as an unknown one). */
async function partnerCustomer(req: FastifyRequest, ctx: ApiContext): Promise<AccountRecord> {
  const p = req.principal;
  if (p?.kind !== 'partner') throw new ApiError(401, 'unauthorized', 'Partner credentials required.');
  const { customer_auth_id: id } = req.params as { customer_auth_id: string };
  const account = await ctx.directory.getAccount(id);
  if (!account || account.partnerId !== p.partner.id) throw notFound('No such customer account.');
  return account;
}

async function cdrPage(req: FastifyRequest, ctx: ApiContext, domain: string, filter: CdrFilter, pathAuthId: string, base: string): Promise<Record<string, unknown>> {
  const q = queryObject(req);
  const r = await queryCdrs(req, ctx, domain, filter);
  const { page, perPage } = r;
  const qs = (p: number): string => {
    const u = new URLSearchParams();
    for (const [k, v] of Object.entries(q)) if (k !== 'page' && v !== undefined) u.set(k, String(v));
    u.set('page', String(p));
    return `${base}?${u.toString()}`;
  };
  return {
    api_id: req.id,
    meta: {
      page,
      per_page: perPage,
      total_count: r.total,
      next: page * perPage < r.total ? qs(page + 1) : null,
      previous: page > 1 ? qs(page - 1) : null,
    },
    objects: r.items.map((c) => cdrView(c, pathAuthId)),
  };
}

export function registerCdrRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const params = { type: 'object', properties: { auth_id: { type: 'string' }, call_uuid: { type: 'string', maxLength: 64 } } } as const;

  app.get('/api/v1/Account/:auth_id/CDR/', { schema: { params, querystring: cdrQuery }, config: { access: 'customer' as const } }, async (req) => {
    const c = customerOf(req);
    const filter = customerFilter(req, c);
    const pathAuthId = req.principal?.authId ?? c.account.authId;
    return cdrPage(req, ctx, c.account.sipDomain, filter, pathAuthId, `/api/v1/Account/${pathAuthId}/CDR/`);
  });

  app.get('/api/v1/Account/:auth_id/CDR/:call_uuid/', { schema: { params }, config: { access: 'customer' as const } }, async (req) => {
    const c = customerOf(req);
    const { call_uuid: id } = req.params as { call_uuid: string };
    const cdr = await ctx.calls.cdr(c.account.sipDomain, id);
    if (!cdr || (c.subAccount && cdr.sub_account !== c.subAccount.authId)) throw notFound('No such call record.');
    return { api_id: req.id, ...cdrView(cdr, req.principal?.authId ?? c.account.authId) };
  });

  const partnerParams = { type: 'object', properties: { customer_auth_id: { type: 'string', maxLength: 64 } } } as const;
  app.get('/api/v1/partner/accounts/:customer_auth_id/CDR/', { schema: { params: partnerParams, querystring: cdrQuery }, config: { access: 'partner' as const } }, async (req) => {
    const account = await partnerCustomer(req, ctx);
    return cdrPage(req, ctx, account.sipDomain, filterOf(queryObject(req)), account.authId, `/api/v1/partner/accounts/${account.authId}/CDR/`);
  });

  registerVendorCdrRoutes(app, ctx);

  app.post('/api/v1/Account/:auth_id/SigningSecret/', { schema: { params }, config: { access: 'account' as const } }, async (req, reply) => {
    const c = customerOf(req);
    const secret = newSigningSecret();
    await ctx.calls.setSigningSecret(c.account.sipDomain, secret);
    req.log.info({ account: c.account.authId }, 'callback signing secret replaced');
    reply.code(201);
    // Shown this once; callbacks signed from now on use it.
    return { api_id: req.id, message: 'created', callback_signing_secret: secret };
  });

  const deadQuery = { type: 'object', properties: { limit: { type: 'integer', minimum: 1, maximum: 1000, default: 100 } } } as const;
  app.get('/api/v1/Account/:auth_id/CallbackDeadLetter/', { schema: { params, querystring: deadQuery }, config: { access: 'account' as const } }, async (req) => {
    const c = customerOf(req);
    const q = queryObject(req);
    const dead = await ctx.calls.deadLetters(c.account.sipDomain, typeof q.limit === 'number' ? q.limit : 100);
    return {
      api_id: req.id,
      objects: dead.map((d) => ({
        callback_id: d.item.id,
        event: d.item.event,
        url: safeUrl(d.item.url),
        method: d.item.method,
        attempts: d.item.attempts,
        reason: d.reason,
        dead_at: new Date(d.at).toISOString(),
        created_at: new Date(d.item.createdAt).toISOString(),
        params: d.item.params,
      })),
    };
  });
}

const recentQuery = { type: 'object', properties: { limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 } } } as const;
/** The SDK's partner filters (`status` uses `no_answer` where call_status says `no-answer`), plus `page`. */
const partnerVendorQuery = {
  type: 'object',
  properties: {
    start_date: cdrQuery.properties.start_date,
    end_date: cdrQuery.properties.end_date,
    call_direction: cdrQuery.properties.call_direction,
    status: { type: 'string', enum: ['answered', 'busy', 'failed', 'no_answer', 'no-answer', 'cancelled'] },
    min_duration: cdrQuery.properties.min_duration,
    hangup_cause: cdrQuery.properties.hangup_cause,
    page: cdrQuery.properties.page,
    per_page: cdrQuery.properties.per_page,
  },
} as const;

/** The SDK's paths: the same query as the `CDR/` routes, the SDK's envelope. */
function registerVendorCdrRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const params = { type: 'object', properties: { auth_id: { type: 'string' }, call_id: { type: 'string', maxLength: 64 } } } as const;
  const customer = { access: 'customer' as const };
  const accountIdOf = (req: FastifyRequest, c: Customer): string => req.principal?.authId ?? c.account.authId;

  const list = async (req: FastifyRequest): Promise<Record<string, unknown>> => {
    const c = customerOf(req);
    const r = await queryCdrs(req, ctx, c.account.sipDomain, customerFilter(req, c));
    return {
      account_id: accountIdOf(req, c),
      count: r.items.length,
      data: r.items.map((x) => vendorCdr(x, c.account.authId)),
      pagination: vendorPagination(r.page, r.perPage, r.total),
      success: true,
      summary: vendorSummary(r.totals),
    };
  };
  app.get('/api/v1/Account/:auth_id/cdr', { schema: { params, querystring: cdrQuery }, config: customer }, list);

  app.get('/api/v1/Account/:auth_id/cdr/search', { schema: { params, querystring: cdrQuery }, config: customer }, async (req) => {
    const q = queryObject(req);
    const echo = (k: string): string => (typeof q[k] === 'string' ? (q[k] as string) : '');
    const body = await list(req);
    // The SDK's SearchCdrsResponse: the list plus the filters it understood ("" when not given).
    return { ...body, filters: { call_direction: echo('call_direction'), from_number: echo('from_number'), hangup_cause: echo('hangup_cause'), to_number: echo('to_number') } };
  });

  app.get('/api/v1/Account/:auth_id/cdr/recent', { schema: { params, querystring: recentQuery }, config: customer }, async (req) => {
    const c = customerOf(req);
    const q = queryObject(req);
    const limit = typeof q.limit === 'number' ? q.limit : 20;
    const filter: CdrFilter = c.subAccount ? { subAccount: c.subAccount.authId } : {};
    const r = await ctx.calls.cdrs(c.account.sipDomain, filter, { limit, offset: 0 });
    return { account_id: accountIdOf(req, c), count: r.items.length, data: r.items.map((x) => vendorCdr(x, c.account.authId)), success: true };
  });

  app.get('/api/v1/Account/:auth_id/cdr/export', { schema: { params, querystring: cdrQuery }, config: { ...customer, csv: true } }, async (req, reply) => {
    const c = customerOf(req);
    // Every match (the store keeps at most CDR_MAX per account), not a page.
    const r = await ctx.calls.cdrs(c.account.sipDomain, customerFilter(req, c), { limit: CDR_MAX, offset: 0 });
    const csv = stringify({ header: true, columns: [...VENDOR_CDR_FIELDS], cast: { string: csvSafe } });
    reply.header('content-type', 'text/csv; charset=utf-8');
    reply.header('content-disposition', `attachment; filename="cdr-${accountIdOf(req, c)}.csv"`);
    return reply.send(Readable.from(r.items.map((x) => vendorCdr(x, c.account.authId))).pipe(csv));
  });

  app.get('/api/v1/Account/:auth_id/cdr/:call_id', { schema: { params }, config: customer }, async (req) => {
    const c = customerOf(req);
    const { call_id: id } = req.params as { call_id: string };
    const cdr = await ctx.calls.cdr(c.account.sipDomain, id);
    if (!cdr || (c.subAccount && cdr.sub_account !== c.subAccount.authId)) throw notFound('No such call record.');
    return { data: vendorCdrDetail(cdr, c.account.authId), success: true };
  });

  const partnerParams = { type: 'object', properties: { customer_auth_id: { type: 'string', maxLength: 64 } } } as const;
  app.get('/api/v1/partner/accounts/:customer_auth_id/cdrs', { schema: { params: partnerParams, querystring: partnerVendorQuery }, config: { access: 'partner' as const } }, async (req) => {
    const account = await partnerCustomer(req, ctx);
    const q = queryObject(req);
    const filter = filterOf(q);
    if (typeof q.status === 'string') filter.callStatus = (q.status === 'no_answer' ? 'no-answer' : q.status) as CallStatus;
    const r = await queryCdrs(req, ctx, account.sipDomain, filter);
    return {
      account_id: account.authId,
      count: r.items.length,
      data: r.items.map((x) => vendorCdr(x, account.authId)),
      pagination: vendorPagination(r.page, r.perPage, r.total),
      success: true,
      // The partner's model types answerRate and total_cost as int.
      summary: vendorSummary(r.totals, true),
      account_auth_id: account.authId,
    };
  });
}

/** A callback URL without its credentials, query or fragment (they may hold secrets). */
function safeUrl(u: string): string {
  try {
    const x = new URL(u);
    return `${x.protocol}//${x.host}${x.pathname}`;
  } catch {
    return '(not a URL)';
  }
}
