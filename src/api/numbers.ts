/**
 * Phone numbers (docs/api.md "Phone numbers", docs/numbers.md): the inventory for sale,
 * the purchase, an account's numbers, their routes (trunk, application, endpoint) and
 * the hand-over to a sub-account. Paths follow the vendor's SDK (`phone_numbers`); the
 * `/endpoint` routes are an addition. An E.164 in a path is URL-encoded (`%2B91…`) and
 * accepted with or without its `+`.
 *
 * Who: an account reads and changes its numbers; a sub-account (its own credentials on
 * its own `/Account/<sub_auth_id>/` path) lists and reads only the numbers handed to it,
 * and changes none.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { amountNumber, formatAmount } from '../billing/amount.js';
import { normalizeCurrency } from '../billing/currency.js';
import { E164_PROBLEM, normalizeE164 } from '../numbers/e164.js';
import { NumbersError, type Numbers, type RouteKind, type Viewer } from '../numbers/index.js';
import type { NumberRecord } from '../store/numbers/numbers.js';
import { ApiError, badRequest, conflict, notFound, type Details } from './errors.js';
import { bodyObject, customerOf, optString, queryObject, validationDetails, type ApiContext } from './context.js';

/** The id of a number resource: `PN` and its digits. */
export function numberId(e164: string): string {
  return `PN${e164.replace(/^\+/, '')}`;
}

/** An InventoryNumber (spec) with the vendor's extra fields. Fees as numbers (spec), the rate as text. */
export function inventoryView(r: NumberRecord): Record<string, unknown> {
  return {
    id: numberId(r.e164),
    e164: r.e164,
    number: r.e164,
    country: r.country,
    region: r.region,
    number_type: r.numberType,
    status: 'available',
    provider: r.provider,
    setup_fee: amountNumber(r.setupFee),
    monthly_fee: amountNumber(r.monthlyFee),
    monthly_rental_rate: formatAmount(r.monthlyFee),
    currency: r.currency,
    voice_enabled: true,
    created_at: r.createdAt,
    updated_at: r.updatedAt,
  };
}

/** A PurchasedNumber (spec) + PhoneNumber fields + its routes and billing dates. */
export function ownedView(r: NumberRecord): Record<string, unknown> {
  const o = r.owner;
  if (!o) throw new Error(`number ${r.e164} is not owned`);
  return {
    id: numberId(r.e164),
    auth_id: o.authId,
    account_id: o.authId,
    e164: r.e164,
    number: r.e164,
    country: r.country,
    region: r.region,
    number_type: r.numberType,
    status: o.status,
    inactive_reason: o.inactiveReason,
    provider: r.provider,
    setup_fee: amountNumber(o.setupFee),
    monthly_fee: amountNumber(o.monthlyFee),
    monthly_rental_rate: formatAmount(o.monthlyFee),
    currency: o.currency,
    application_id: o.applicationId,
    trunk_group_id: o.trunkGroupId,
    endpoint_id: o.endpointId,
    sub_account_id: o.subAccount,
    voice_enabled: true,
    source: 'inventory',
    purchased_at: o.purchasedAt,
    last_billing_date: o.lastBillingDate,
    next_billing_date: o.nextBillingDate,
    created_at: o.purchasedAt,
    updated_at: r.updatedAt,
  };
}

/** A refusal of the numbers capability as the API answers it. */
export function numbersApiError(e: unknown): unknown {
  if (!(e instanceof NumbersError)) return e;
  switch (e.kind) {
    case 'invalid':
      return badRequest({ [e.field ?? 'body']: e.message });
    case 'not_found':
      return notFound(e.message);
    case 'conflict':
      return conflict(e.code, e.message);
    case 'payment_required':
      return new ApiError(402, e.code, e.message);
  }
}

async function mapped<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw numbersApiError(e);
  }
}

const authId = { type: 'string', maxLength: 128 } as const;
const params = { type: 'object', properties: { auth_id: authId } } as const;
const numberParams = { type: 'object', properties: { auth_id: authId, e164: { type: 'string', minLength: 1, maxLength: 40 } } } as const;
const search = { type: 'string', maxLength: 16 } as const;
const paging = {
  page: { type: 'integer', minimum: 1, maximum: 100_000, default: 1 },
  per_page: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
} as const;

const idBody = (field: string) =>
  ({
    type: 'object',
    additionalProperties: false,
    required: [field],
    properties: { [field]: { type: 'string', minLength: 1, maxLength: 128 } },
  }) as const;

/** The page of a validated list query. */
function pageQuery(req: FastifyRequest): { limit: number; offset: number; page: number; perPage: number } {
  const q = queryObject(req);
  const page = typeof q.page === 'number' ? q.page : 1;
  const perPage = typeof q.per_page === 'number' ? q.per_page : 20;
  return { page, perPage, limit: perPage, offset: (page - 1) * perPage };
}

/** A `search` query: digits of an E.164 (a leading `+` allowed). */
function searchOf(req: FastifyRequest, details: Details): string | undefined {
  const s = optString(queryObject(req), 'search');
  if (s === undefined || s === '') return undefined;
  if (!/^\+?\d{1,15}$/.test(s)) details.search = 'must be digits of an E.164 number (a leading + allowed)';
  return s;
}

function viewerOf(req: FastifyRequest): Viewer {
  const c = customerOf(req);
  return { authId: c.account.authId, subAccount: c.subAccount?.authId ?? null };
}

/** Register the phone number routes. */
export function registerNumberRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const numbers: Numbers = ctx.numbers;
  const base = '/api/v1/Account/:auth_id/numbers';
  const one = `${base}/:e164`;
  const customer = { access: 'customer' as const };
  const account = { access: 'account' as const };

  app.get(
    '/api/v1/Account/:auth_id/inventory/numbers',
    {
      schema: {
        params,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: { country: { type: 'string', maxLength: 8 }, search, exclude: { type: 'array', maxItems: 20, items: { type: 'string', maxLength: 200 } }, ...paging },
        },
      },
      attachValidation: true,
      config: customer,
    },
    async (req) => {
      const details = validationDetails(req);
      const q = queryObject(req);
      const country = optString(q, 'country');
      if (country !== undefined && !/^[A-Za-z]{2}$/.test(country)) details.country = 'must be an ISO 3166-1 alpha-2 country code such as IN';
      const s = searchOf(req, details);
      // The vendor's `exclude`: E.164 prefixes, comma-separated and/or repeated.
      const exclude = [...new Set((Array.isArray(q.exclude) ? (q.exclude as string[]) : []).flatMap((x) => x.split(',')).map((x) => x.trim()).filter((x) => x !== ''))];
      if (exclude.some((x) => !/^\+?\d{1,15}$/.test(x))) details.exclude = 'must be E.164 prefixes (digits, a leading + allowed), comma-separated';
      if (Object.keys(details).length > 0) throw badRequest(details);
      const p = pageQuery(req);
      const r = await numbers.listInventory({ ...(country ? { country } : {}), ...(s ? { search: s } : {}), ...(exclude.length > 0 ? { exclude } : {}) }, p);
      return { api_id: req.id, items: r.items.map(inventoryView), page: p.page, per_page: p.perPage, total: r.total };
    },
  );

  app.post(
    `${base}/purchase-from-inventory`,
    {
      schema: {
        params,
        body: { type: 'object', additionalProperties: false, required: ['e164'], properties: { e164: { type: 'string', maxLength: 40 }, currency: { type: 'string', maxLength: 8 } } },
      },
      attachValidation: true,
      config: account,
    },
    async (req, reply) => {
      const details = validationDetails(req);
      const body = bodyObject(req);
      const c = customerOf(req);
      let currency: string | null = null;
      if (body.currency !== undefined && details.currency === undefined) {
        currency = normalizeCurrency(body.currency);
        if (currency === null) details.currency = 'must be an ISO 4217 currency code such as USD';
      }
      if (details.e164 === undefined && normalizeE164(body.e164) === null) details.e164 = E164_PROBLEM;
      if (Object.keys(details).length > 0) throw badRequest(details);
      const r = await mapped(() => numbers.purchase(c.account, String(body.e164), currency));
      req.log.info({ e164: r.e164 }, 'number purchased');
      const o = r.owner;
      reply.code(201);
      return { api_id: req.id, message: 'Number purchased.', charged: formatAmount((o?.setupFee ?? 0) + (o?.monthlyFee ?? 0)), ...ownedView(r) };
    },
  );

  app.get(
    base,
    {
      schema: { params, querystring: { type: 'object', additionalProperties: false, properties: { search, ...paging } } },
      attachValidation: true,
      config: customer,
    },
    async (req) => {
      const details = validationDetails(req);
      const s = searchOf(req, details);
      if (Object.keys(details).length > 0) throw badRequest(details);
      const p = pageQuery(req);
      const r = await numbers.list(viewerOf(req), s ? { search: s } : {}, p);
      return { api_id: req.id, items: r.items.map(ownedView), page: p.page, per_page: p.perPage, total: r.total };
    },
  );

  const e164Param = (req: FastifyRequest): string => (req.params as { e164: string }).e164;

  app.get(one, { schema: { params: numberParams }, config: customer }, async (req) => {
    const r = await mapped(() => numbers.get(viewerOf(req), e164Param(req)));
    return { api_id: req.id, ...ownedView(r) };
  });

  // `immediate` (the SDK's): accepted; a release here is always immediate (no cooldown).
  app.delete(one, { schema: { params: numberParams, querystring: { type: 'object', properties: { immediate: { type: 'boolean' } } } }, config: account }, async (req) => {
    const r = await mapped(() => numbers.release(customerOf(req).account.authId, e164Param(req)));
    req.log.info({ e164: r.e164 }, 'number released to the inventory');
    return { api_id: req.id, message: 'Number released to the inventory.', e164: r.e164, status: 'available' };
  });

  const routeRoutes = (suffix: string, kind: RouteKind, field: string): void => {
    app.post(`${one}/${suffix}`, { schema: { params: numberParams, body: idBody(field) }, attachValidation: true, config: account }, async (req) => {
      const details = validationDetails(req);
      if (Object.keys(details).length > 0) throw badRequest(details);
      const id = String(bodyObject(req)[field]);
      const r = await mapped(() => numbers.setRoute(customerOf(req).account.authId, e164Param(req), kind, id));
      return { api_id: req.id, message: `Number routed to ${kind} ${id}.`, ...ownedView(r) };
    });
    app.delete(`${one}/${suffix}`, { schema: { params: numberParams }, config: account }, async (req) => {
      const r = await mapped(() => numbers.setRoute(customerOf(req).account.authId, e164Param(req), kind, null));
      return { api_id: req.id, message: `Number no longer routed to a ${kind}.`, ...ownedView(r) };
    });
  };
  routeRoutes('assign', 'trunk', 'trunk_group_id');
  routeRoutes('application', 'application', 'application_id');
  routeRoutes('endpoint', 'endpoint', 'endpoint_id');

  // The SDK spells this one with a lower-case `account`.
  const sub = '/api/v1/account/:auth_id/numbers/:e164/assign-subaccount';
  app.post(sub, { schema: { params: numberParams, body: idBody('sub_account_id') }, attachValidation: true, config: account }, async (req) => {
    const details = validationDetails(req);
    if (Object.keys(details).length > 0) throw badRequest(details);
    const id = String(bodyObject(req).sub_account_id);
    const r = await mapped(() => numbers.setSubAccount(customerOf(req).account.authId, e164Param(req), id));
    return { api_id: req.id, message: `Number handed to sub-account ${id}.`, ...ownedView(r) };
  });
  app.delete(
    sub,
    { schema: { params: numberParams, querystring: { type: 'object', properties: { force: { type: 'boolean' } } } }, config: account },
    async (req) => {
      const r = await mapped(() => numbers.setSubAccount(customerOf(req).account.authId, e164Param(req), null));
      return { api_id: req.id, message: 'Number taken back from its sub-account.', ...ownedView(r) };
    },
  );
}
