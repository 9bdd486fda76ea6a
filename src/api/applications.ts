/**
 * The Application resource (spec "Application"): what an endpoint's calls are
 * handed to. Numeric app_id; at most one default_endpoint_app per owner (the main
 * account, or each sub-account): setting the flag moves it from the previous
 * holder. Deleting an application detaches it from its endpoints.
 */
import type { FastifyInstance } from 'fastify';
import { newNumericId, type ApplicationRecord, type ApplicationSettings } from '../store/directory/directory.js';
import { ApiError, badRequest, describedPattern, notFound } from './errors.js';
import {
  bodyObject,
  customerOf,
  isoNow,
  optString,
  pageOf,
  queryObject,
  validationDetails,
  type ApiContext,
  type Customer,
} from './context.js';

// Spec "Events", delivery rule 1: callback URLs must be HTTPS.
const URL_PATTERN = describedPattern('^https://[^\\s]+$', 'must be an https:// URL (callbacks are delivered over HTTPS only)');
const OPTIONAL_URL_PATTERN = describedPattern('^(https://[^\\s]+)?$', 'must be an https:// URL or empty (callbacks are delivered over HTTPS only)');

const url = { type: 'string', maxLength: 2048, pattern: OPTIONAL_URL_PATTERN } as const;
const method = { type: 'string', enum: ['GET', 'POST'] } as const;

const settingsProperties = {
  app_name: { type: 'string', minLength: 1, maxLength: 128 },
  application_type: { type: 'string', minLength: 1, maxLength: 32 },
  answer_url: { type: 'string', minLength: 1, maxLength: 2048, pattern: URL_PATTERN },
  answer_method: method,
  hangup_url: url,
  hangup_method: method,
  fallback_answer_url: url,
  fallback_method: method,
  message_url: url,
  message_method: method,
  sip_transfer_url: url,
  sip_transfer_method: method,
  default_number_app: { type: 'boolean' },
  default_endpoint_app: { type: 'boolean' },
  default_app: { type: 'boolean' },
  enabled: { type: 'boolean' },
  log_incoming_message: { type: 'boolean' },
  public_uri: { type: 'boolean' },
} as const;

const createBody = {
  type: 'object',
  additionalProperties: false,
  required: ['app_name', 'answer_url'],
  properties: { ...settingsProperties, sub_account: { type: 'string', minLength: 1, maxLength: 64 } },
} as const;

const updateBody = {
  type: 'object',
  additionalProperties: false,
  properties: settingsProperties,
} as const;

const FIXED_FIELDS = {
  app_id: 'cannot be changed',
  sub_account: 'cannot be changed after creation',
  sip_uri: 'is derived from the app_id and cannot be set',
  resource_uri: 'cannot be set',
} as const;

/** Unknown query parameters are ignored on lists (docs/api.md "Lists"). */
const listQuery = {
  type: 'object',
  additionalProperties: true,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    offset: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 },
    sub_account: { type: 'string', maxLength: 64 },
  },
} as const;

const params = { type: 'object', properties: { auth_id: { type: 'string' }, app_id: { type: 'string' } } } as const;

/** Spec defaults of an application. */
const DEFAULTS: ApplicationSettings = {
  app_name: '',
  application_type: 'XML',
  answer_url: '',
  answer_method: 'POST',
  hangup_url: '',
  hangup_method: 'POST',
  fallback_answer_url: '',
  fallback_method: 'POST',
  message_url: '',
  message_method: 'POST',
  sip_transfer_url: '',
  sip_transfer_method: 'POST',
  default_number_app: false,
  default_app: false,
  enabled: true,
  log_incoming_message: true,
  public_uri: false,
};

const SETTING_KEYS = Object.keys(DEFAULTS) as Array<keyof ApplicationSettings>;

/** The settings a body gives (validated), without defaults. */
function settingsFrom(body: Record<string, unknown>): Partial<ApplicationSettings> {
  const out: Partial<Record<keyof ApplicationSettings, unknown>> = {};
  for (const k of SETTING_KEYS) if (k in body) out[k] = body[k];
  return out as Partial<ApplicationSettings>;
}

/** The Application object of the spec's table. */
export function applicationView(c: Customer, pathAuthId: string, a: ApplicationRecord): Record<string, unknown> {
  return {
    app_id: a.appId,
    ...a.settings,
    default_endpoint_app: a.defaultEndpointApp,
    sip_uri: `sip:${a.appId}@app.${c.account.sipDomain}`,
    sub_account: a.subAccount,
    resource_uri: `/v1/Account/${pathAuthId}/Application/${a.appId}/`,
    created_at: a.createdAt,
    updated_at: a.updatedAt,
  };
}

/** Register the Application routes. */
export function registerApplicationRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const base = '/api/v1/Account/:auth_id/Application/';
  const one = '/api/v1/Account/:auth_id/Application/:app_id/';
  const config = { access: 'customer' as const };

  /** The application if it exists and the caller may see it. */
  const visible = async (c: Customer, appId: string): Promise<ApplicationRecord | null> => {
    const a = await ctx.directory.getApplication(c.account.authId, appId);
    if (!a || (c.subAccount && a.subAccount !== c.subAccount.authId)) return null;
    return a;
  };

  app.post(base, { schema: { params, body: createBody }, attachValidation: true, config }, async (req, reply) => {
    const c = customerOf(req);
    const pathAuthId = c.subAccount?.authId ?? c.account.authId;
    await ctx.idempotency.run(req, reply, { scope: c.account.authId, caller: pathAuthId, operation: 'application.create' }, async () => {
      const body = bodyObject(req);
      const details = validationDetails(req);
      let owner: string | null = c.subAccount?.authId ?? null;
      const sub = optString(body, 'sub_account');
      if (sub !== undefined && !('sub_account' in details)) {
        if (c.subAccount) {
          if (sub !== c.subAccount.authId) details.sub_account = 'must be the Auth ID of the sub-account making the request';
        } else if (!(await ctx.directory.getSubAccount(c.account.authId, sub))) {
          details.sub_account = 'is not a sub-account of this account';
        } else {
          owner = sub;
        }
      }
      if (Object.keys(details).length > 0) throw badRequest(details);

      const now = isoNow();
      for (let attempt = 0; attempt < 5; attempt++) {
        const rec: ApplicationRecord = {
          appId: newNumericId(),
          accountAuthId: c.account.authId,
          subAccount: owner,
          settings: { ...DEFAULTS, ...settingsFrom(body) },
          defaultEndpointApp: body.default_endpoint_app === true,
          createdAt: now,
          updatedAt: now,
        };
        const r = await ctx.directory.createApplication(rec);
        if (r === 'no_subaccount') throw badRequest({ sub_account: 'is not a sub-account of this account' });
        if (r === 'ok') {
          return {
            status: 201,
            body: {
              api_id: req.id,
              message: 'created',
              // Exactly the SDK's CreateApplicationResponse (it refuses other fields); the
              // resource_uri is that of the retrieve.
              app_id: rec.appId,
            },
          };
        }
      }
      throw new ApiError(503, 'service_unavailable', 'Could not allocate an app_id; retry.');
    });
  });

  app.get(base, { schema: { params, querystring: listQuery }, config }, async (req) => {
    const c = customerOf(req);
    const q = queryObject(req);
    const page = pageOf(q);
    const wanted = optString(q, 'sub_account');
    let result = { total: 0, items: [] as ApplicationRecord[] };
    if (c.subAccount) {
      if (wanted === undefined || wanted === c.subAccount.authId) {
        result = await ctx.directory.listApplications(c.account.authId, { subAccount: c.subAccount.authId }, page);
      }
    } else {
      result = await ctx.directory.listApplications(c.account.authId, wanted === undefined ? {} : { subAccount: wanted }, page);
    }
    const pathAuthId = req.principal?.authId ?? c.account.authId;
    return {
      api_id: req.id,
      meta: { limit: page.limit, offset: page.offset, total_count: result.total },
      objects: result.items.map((a) => applicationView(c, pathAuthId, a)),
    };
  });

  app.get(one, { schema: { params }, config }, async (req) => {
    const c = customerOf(req);
    const { app_id: id } = req.params as { app_id: string };
    const a = await visible(c, id);
    if (!a) throw notFound('No application with this app_id on this account.');
    return { api_id: req.id, ...applicationView(c, req.principal?.authId ?? c.account.authId, a) };
  });

  app.post(one, { schema: { params, body: updateBody }, attachValidation: true, config }, async (req, reply) => {
    const c = customerOf(req);
    const { app_id: id } = req.params as { app_id: string };
    if (!(await visible(c, id))) throw notFound('No application with this app_id on this account.');
    const details = validationDetails(req, FIXED_FIELDS);
    if (Object.keys(details).length > 0) throw badRequest(details);
    const body = bodyObject(req);
    const flag = body.default_endpoint_app;
    const updated = await ctx.directory.updateApplication(c.account.authId, id, {
      settings: settingsFrom(body),
      defaultEndpointApp: typeof flag === 'boolean' ? flag : undefined,
      updatedAt: isoNow(),
    });
    if (!updated) throw notFound('No application with this app_id on this account.');
    // The SDK's UpdateApplicationResponse: it parses a body, so an empty one fails it.
    reply.code(202);
    return { api_id: req.id, message: 'changed' };
  });

  app.delete(one, { schema: { params }, config }, async (req, reply) => {
    const c = customerOf(req);
    const { app_id: id } = req.params as { app_id: string };
    if (!(await visible(c, id)) || !(await ctx.directory.deleteApplication(c.account.authId, id))) {
      throw notFound('No application with this app_id on this account.');
    }
    req.log.info({ appId: id }, 'application deleted');
    await reply.code(204).send();
  });
}
