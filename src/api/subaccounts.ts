/**
 * The SubAccount resource (spec "SubAccount"): managed with the main account's
 * credentials only. A sub-account has its own Auth ID and Auth Token (returned
 * once, at creation) and manages only its own endpoints and applications under
 * `/api/v1/Account/<sub_auth_id>/`.
 *
 * KYC: a customer_use sub-account must complete its own KYC before placing
 * calls, so it starts with kyc_calls_blocked true until its verifications meet the
 * rule of docs/kyc.md (src/kyc/); personal_use rides on the parent's KYC (false).
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { hashToken, newAuthId, newAuthToken, type KycMode, type SubAccountRecord } from '../store/directory/directory.js';
import { ApiError, badRequest, conflict, notFound, type ForbiddenFieldMessages } from './errors.js';
import { bodyObject, customerOf, isoNow, optBool, optString, pageOf, queryObject, validationDetails, type ApiContext, type Customer } from './context.js';

const KYC_MODES = ['personal_use', 'customer_use'] as const;

const createBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 128 },
    enabled: { type: 'boolean' },
    kyc_mode: { type: 'string', enum: KYC_MODES },
    business_type: { type: 'string', maxLength: 64 },
  },
} as const;

const updateBody = {
  type: 'object',
  additionalProperties: false,
  properties: createBody.properties,
} as const;

const FIXED_FIELDS = {
  auth_id: 'cannot be changed',
  auth_token: 'cannot be changed here; create a new sub-account to get new credentials',
  kyc_calls_blocked: 'is set by KYC verification, not by update',
} as const;

/** Unknown query parameters are ignored on lists (docs/api.md "Lists"). */
const listQuery = {
  type: 'object',
  additionalProperties: true,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    offset: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 },
  },
} as const;

const deleteQuery = {
  type: 'object',
  additionalProperties: false,
  properties: { cascade: { type: 'boolean', default: false } },
} as const;

const params = { type: 'object', properties: { auth_id: { type: 'string' }, sub_auth_id: { type: 'string' } } } as const;

const blockedFor = (mode: KycMode): boolean => mode === 'customer_use';

/** The SubAccount object (no auth_token: only its hash is kept). */
export function subAccountView(s: SubAccountRecord): Record<string, unknown> {
  return {
    auth_id: s.authId,
    name: s.name,
    enabled: s.enabled,
    kyc_mode: s.kycMode,
    business_type: s.businessType,
    kyc_calls_blocked: s.kycCallsBlocked,
    account: s.parentAuthId,
    resource_uri: `/v1/Account/${s.parentAuthId}/Subaccount/${s.authId}/`,
    created_at: s.createdAt,
    updated_at: s.updatedAt,
  };
}

/** The SDK's create body: ours plus `email` and `password`, accepted and not kept (no console login for sub-accounts). */
const vendorCreateBody = {
  ...createBody,
  properties: { ...createBody.properties, email: { type: ['string', 'null'], maxLength: 254 }, password: { type: ['string', 'null'], maxLength: 128 } },
} as const;

const vendorListQuery = {
  type: 'object',
  additionalProperties: true,
  properties: {
    page: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 1 },
    size: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
  },
} as const;

/**
 * A SubAccount as the vendor SDK's model (Retrieve/Update/CreateSubaccountResponse,
 * the list item): exactly its fields, as that model refuses others. `auth_token` is ""
 * except in the create answer: only the token's hash is kept. The spec's kyc_mode,
 * business_type and kyc_calls_blocked are on `…/Subaccount/` (the SDK's model has no
 * place for them).
 */
export function vendorSubAccountView(s: SubAccountRecord, apiId: string, rateLimit: number, token = ''): Record<string, unknown> {
  return {
    name: s.name,
    email: null,
    phone: null,
    description: null,
    permissions: null,
    rate_limit: rateLimit,
    id: s.authId,
    parent_account_id: s.parentAuthId,
    parent_auth_id: s.parentAuthId,
    auth_id: s.authId,
    auth_token: token,
    api_id: apiId,
    email_verified: false,
    enabled: s.enabled,
    created: s.createdAt,
    modified: s.updatedAt,
    is_active: s.enabled,
    created_at: s.createdAt,
    updated_at: s.updatedAt,
    last_used: null,
    account: s.parentAuthId,
    resource_uri: `/api/v1/accounts/${s.parentAuthId}/sub-accounts/${s.authId}/`,
  };
}

/** Register the SubAccount routes. */
export function registerSubAccountRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const base = '/api/v1/Account/:auth_id/Subaccount/';
  const one = '/api/v1/Account/:auth_id/Subaccount/:sub_auth_id/';
  const config = { access: 'account' as const };
  const missing = (): ApiError => notFound('No sub-account with this Auth ID on this account.');

  /** A new sub-account from a validated body; its token is returned this once (only its hash is stored). */
  const create = async (req: FastifyRequest, c: Customer): Promise<{ rec: SubAccountRecord; token: string }> => {
    const details = validationDetails(req);
    if (Object.keys(details).length > 0) throw badRequest(details);
    const body = bodyObject(req);
    const kycMode = (optString(body, 'kyc_mode') ?? 'personal_use') as KycMode;
    const now = isoNow();
    for (let attempt = 0; attempt < 5; attempt++) {
      const token = newAuthToken();
      const rec: SubAccountRecord = {
        authId: newAuthId('SA'),
        parentAuthId: c.account.authId,
        tokenHash: hashToken(token),
        name: optString(body, 'name') ?? '',
        enabled: optBool(body, 'enabled') ?? true,
        kycMode,
        businessType: optString(body, 'business_type') ?? '',
        kycCallsBlocked: blockedFor(kycMode),
        createdAt: now,
        updatedAt: now,
      };
      if (ctx.config.partners.some((p) => p.authId === rec.authId)) continue;
      if (await ctx.directory.createSubAccount(rec)) {
        req.log.info({ subAccount: rec.authId }, 'sub-account created');
        return { rec, token };
      }
    }
    throw new ApiError(503, 'service_unavailable', 'Could not allocate an Auth ID; retry.');
  };

  app.post(base, { schema: { params, body: createBody }, attachValidation: true, config }, async (req, reply) => {
    const c = customerOf(req);
    await ctx.idempotency.run(req, reply, { scope: c.account.authId, caller: c.account.authId, operation: 'subaccount.create' }, async () => {
      const { rec, token } = await create(req, c);
      return { status: 201, body: { api_id: req.id, message: 'created', ...subAccountView(rec), auth_token: token } };
    });
  });

  app.get(base, { schema: { params, querystring: listQuery }, config }, async (req) => {
    const c = customerOf(req);
    const page = pageOf(queryObject(req));
    const r = await ctx.directory.listSubAccounts(c.account.authId, page);
    return {
      api_id: req.id,
      meta: { limit: page.limit, offset: page.offset, total_count: r.total },
      objects: r.items.map(subAccountView),
    };
  });

  app.get(one, { schema: { params }, config }, async (req) => {
    const c = customerOf(req);
    const { sub_auth_id: id } = req.params as { sub_auth_id: string };
    const s = await ctx.directory.getSubAccount(c.account.authId, id);
    if (!s) throw missing();
    return { api_id: req.id, ...subAccountView(s) };
  });

  /** Apply a validated update; the record after it. */
  const update = async (req: FastifyRequest, c: Customer, id: string, fixed: ForbiddenFieldMessages): Promise<SubAccountRecord> => {
    const before = await ctx.directory.getSubAccount(c.account.authId, id);
    if (!before) throw missing();
    const details = validationDetails(req, fixed);
    if (Object.keys(details).length > 0) throw badRequest(details);
    const body = bodyObject(req);
    const kycMode = optString(body, 'kyc_mode') as KycMode | undefined;
    const s = await ctx.directory.updateSubAccount(c.account.authId, id, {
      name: optString(body, 'name'),
      enabled: optBool(body, 'enabled'),
      businessType: optString(body, 'business_type'),
      kycMode,
      kycCallsBlocked: kycMode === undefined ? undefined : blockedFor(kycMode),
      updatedAt: isoNow(),
    });
    if (!s) throw missing();
    // A new kyc_mode or business_type changes what KYC requires: the block follows the verifications.
    const after = kycMode !== undefined || optString(body, 'business_type') !== undefined ? await ctx.kyc.recompute(c.account.authId, id) : null;
    const rec = after && after.blocked !== s.kycCallsBlocked ? { ...s, kycCallsBlocked: after.blocked } : s;
    // Disabled means offline: its endpoints' REGISTERs get 403 and their devices are unregistered now.
    const enabled = optBool(body, 'enabled');
    if (enabled !== undefined && enabled !== before.enabled) {
      const n = await ctx.provisioning.setSubAccountDisabled(c.account, id, !enabled, req.log);
      req.log.info({ subAccount: id, enabled, endpoints: n }, enabled ? 'sub-account enabled' : 'sub-account disabled');
    }
    return rec;
  };

  app.post(one, { schema: { params, body: updateBody }, attachValidation: true, config }, async (req, reply) => {
    const c = customerOf(req);
    const { sub_auth_id: id } = req.params as { sub_auth_id: string };
    await update(req, c, id, FIXED_FIELDS);
    await reply.code(202).send();
  });

  /** Delete a sub-account (with its endpoints and applications when `cascade`). */
  const remove = async (req: FastifyRequest, c: Customer, id: string, cascade: boolean): Promise<void> => {
    if (!(await ctx.directory.getSubAccount(c.account.authId, id))) throw missing();
    if (cascade) {
      // Endpoints first (unregistered at once, usernames retired), then applications.
      await ctx.provisioning.deleteSubAccountEndpoints(c.account, id, req.log);
      for (;;) {
        const apps = await ctx.directory.listApplications(c.account.authId, { subAccount: id }, { limit: 100, offset: 0 });
        if (apps.items.length === 0) break;
        for (const a of apps.items) await ctx.directory.deleteApplication(c.account.authId, a.appId);
      }
    }
    const r = await ctx.directory.deleteSubAccount(c.account.authId, id);
    if (r === 'not_found') throw missing();
    if (r === 'not_empty') {
      throw conflict(
        'subaccount_not_empty',
        'The sub-account still owns endpoints or applications; delete them first, or pass cascade=true to delete them with it.',
      );
    }
    await ctx.kyc.forget(id);
    req.log.info({ subAccount: id }, 'sub-account deleted');
  };

  app.delete(one, { schema: { params, querystring: deleteQuery }, config }, async (req, reply) => {
    const c = customerOf(req);
    const { sub_auth_id: id } = req.params as { sub_auth_id: string };
    await remove(req, c, id, queryObject(req).cascade === true);
    await reply.code(204).send();
  });

  // The vendor SDK's paths (client.sub_accounts): the same operations, the SDK's shapes.
  const vbase = '/api/v1/accounts/:auth_id/sub-accounts/';
  const vone = '/api/v1/accounts/:auth_id/sub-accounts/:sub_auth_id';
  const view = (req: FastifyRequest, s: SubAccountRecord, token = ''): Record<string, unknown> => vendorSubAccountView(s, req.id, ctx.config.apiRateLimit, token);

  app.post(vbase, { schema: { params, body: vendorCreateBody }, attachValidation: true, config }, async (req, reply) => {
    const c = customerOf(req);
    await ctx.idempotency.run(req, reply, { scope: c.account.authId, caller: c.account.authId, operation: 'subaccount.create' }, async () => {
      const { rec, token } = await create(req, c);
      return {
        status: 201,
        body: {
          message: 'Sub-account created successfully',
          sub_account: view(req, rec, token),
          auth_credentials: { auth_id: rec.authId, auth_token: token },
          // No bearer sessions for sub-accounts here: they use X-Auth-ID/X-Auth-Token (docs/api.md "Compatibility").
          tokens: { access_token: '', refresh_token: '', token_type: 'Bearer', expires_in: 0 },
        },
      };
    });
  });

  app.get(vbase, { schema: { params, querystring: vendorListQuery }, config }, async (req) => {
    const c = customerOf(req);
    const q = queryObject(req);
    const page = typeof q.page === 'number' ? q.page : 1;
    const size = typeof q.size === 'number' ? q.size : 20;
    const r = await ctx.directory.listSubAccounts(c.account.authId, { limit: size, offset: (page - 1) * size });
    return { sub_accounts: r.items.map((s) => view(req, s)), total: r.total, page, size };
  });

  app.get(vone, { schema: { params }, config }, async (req) => {
    const c = customerOf(req);
    const { sub_auth_id: id } = req.params as { sub_auth_id: string };
    const s = await ctx.directory.getSubAccount(c.account.authId, id);
    if (!s) throw missing();
    return view(req, s);
  });

  app.put(vone, { schema: { params, body: updateBody }, attachValidation: true, config }, async (req) => {
    const c = customerOf(req);
    const { sub_auth_id: id } = req.params as { sub_auth_id: string };
    return view(req, await update(req, c, id, FIXED_FIELDS));
  });

  app.delete(vone, { schema: { params, querystring: deleteQuery }, config }, async (req) => {
    const c = customerOf(req);
    const { sub_auth_id: id } = req.params as { sub_auth_id: string };
    await remove(req, c, id, queryObject(req).cascade === true);
    return { message: 'Sub-account deleted successfully' };
  });
}
