/**
 * The Endpoint resource (spec "SIP endpoint operations"), with live registration
 * state read from the location store on every request.
 *
 * An endpoint's AOR is `{domain: <account sip domain>, user: <username>}`. A
 * sub-account's endpoints live in the parent account's SIP domain: the
 * sub-account has no domain of its own, usernames are unique across the account
 * and its sub-accounts, and the digest realm stays the account's domain.
 */
import type { FastifyInstance } from 'fastify';
import { endpointAor } from '../provisioning/endpoints.js';
import { endpointView, resourceUri, sipUri } from './endpoint-view.js';
import type { ApplicationRecord, EndpointQuery, EndpointRecord } from '../store/directory/directory.js';
import type { Aor, Binding } from '../store/location/location.js';
import { aorKey } from '../store/location/location.js';
import { ApiError, badRequest, conflict, describedPattern, endpointNotFound, notFoundNoBody, type Details } from './errors.js';
import {
  bodyObject,
  customerOf,
  isoNow,
  optBool,
  optString,
  pageOf,
  queryObject,
  validationDetails,
  type ApiContext,
  type Customer,
} from './context.js';

const USERNAME_PATTERN = describedPattern('^[A-Za-z0-9]+$', 'must contain only letters and digits');
const ALIAS_PATTERN = describedPattern('^[A-Za-z0-9_-]+$', 'must contain only letters, digits, hyphens and underscores');
const PASSWORD_PATTERN = describedPattern('^[^\\u0000-\\u001f\\u007f]+$', 'must not contain control characters');
const APP_ID_PATTERN = describedPattern('^[1-9][0-9]{0,15}$', 'must be the numeric app_id of an application');

/** Longest username accepted (the spec gives none; 64 fits every SIP client tried). */
export const USERNAME_MAX = 64;

const ALLOW_DEFAULTS = {
  allow_voice: true,
  allow_message: true,
  allow_video: false,
  allow_same_domain: true,
  allow_other_domains: false,
  allow_phones: true,
  allow_apps: true,
} as const;

/**
 * `application` is an integer app_id (spec), or the app_id string an
 * Application resource shows, or null for none.
 */
const applicationSchema = {
  type: ['integer', 'string', 'null'],
  minimum: 1,
  maximum: Number.MAX_SAFE_INTEGER,
  pattern: APP_ID_PATTERN,
} as const;

const createBody = {
  type: 'object',
  additionalProperties: false,
  required: ['username', 'password'],
  properties: {
    username: { type: 'string', minLength: 1, maxLength: USERNAME_MAX, pattern: USERNAME_PATTERN },
    password: { type: 'string', minLength: 8, maxLength: 128, pattern: PASSWORD_PATTERN },
    alias: { type: 'string', minLength: 1, maxLength: 128, pattern: ALIAS_PATTERN },
    application: applicationSchema,
    allow_voice: { type: 'boolean' },
    allow_message: { type: 'boolean' },
    allow_video: { type: 'boolean' },
    allow_same_domain: { type: 'boolean' },
    allow_other_domains: { type: 'boolean' },
    allow_phones: { type: 'boolean' },
    allow_apps: { type: 'boolean' },
    sub_account: { type: 'string', minLength: 1, maxLength: 64 },
  },
} as const;

const LOCKED = 'is locked after creation; create a new endpoint and delete the old one';

/** Fields an update may not name, with why (docs/design.md: 400 naming each locked field). */
const LOCKED_FIELDS = {
  username: LOCKED,
  endpoint_id: LOCKED,
  domain: LOCKED,
  allow_same_domain: LOCKED,
  allow_other_domains: LOCKED,
  allow_phones: LOCKED,
  allow_apps: LOCKED,
  sub_account: LOCKED,
  sip_uri: 'is derived from the username and cannot be set',
} as const;

const updateBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    password: createBody.properties.password,
    alias: createBody.properties.alias,
    application: applicationSchema,
    allow_voice: { type: 'boolean' },
    allow_message: { type: 'boolean' },
    allow_video: { type: 'boolean' },
  },
} as const;

/**
 * List filters. Unknown query parameters are ignored (docs/api.md "Lists"): a
 * cache-buster such as `_=1700000000` must not turn a list into a 400.
 */
const listQuery = {
  type: 'object',
  additionalProperties: true,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    offset: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 },
    username__contains: { type: 'string', maxLength: USERNAME_MAX },
    username__exact: { type: 'string', maxLength: USERNAME_MAX },
    username__startswith: { type: 'string', maxLength: USERNAME_MAX },
    alias__contains: { type: 'string', maxLength: 128 },
    alias__exact: { type: 'string', maxLength: 128 },
    application_id__exact: { type: 'integer', minimum: 1, maximum: Number.MAX_SAFE_INTEGER },
    application_id__isnull: { type: 'boolean' },
    sub_account: { type: 'string', maxLength: 64 },
    // An addition to the spec: who is online (docs/api.md "Lists").
    sip_registered: { type: 'string', enum: ['true', 'false'] },
  },
} as const;

const UPDATABLE = Object.keys(updateBody.properties);

/** Endpoints walked per batch when a list filters on live registration state. */
const REGISTRATION_FILTER_BATCH = 500;

/**
 * A list filtered on `sip_registered`: the state is live (in the location
 * store), not in the directory, so the account's endpoints that pass the other
 * filters are walked in batches with one lookupMany each, and only the page is
 * kept — O(endpoints of the account), like the substring filters (docs/api.md).
 */
async function listByRegistration(
  ctx: ApiContext,
  c: Customer,
  query: EndpointQuery,
  registered: boolean,
  page: { limit: number; offset: number },
): Promise<{ result: { total: number; items: EndpointRecord[] }; live: Map<string, Binding[]> }> {
  const items: EndpointRecord[] = [];
  const live = new Map<string, Binding[]>();
  let total = 0;
  for (let offset = 0; ; offset += REGISTRATION_FILTER_BATCH) {
    const batch = await ctx.directory.listEndpoints(c.account.authId, query, { limit: REGISTRATION_FILTER_BATCH, offset });
    const aors = batch.items.map((e) => endpointAor(c.account, e));
    const state = await ctx.location.lookupMany(aors);
    batch.items.forEach((e, i) => {
      const key = aorKey(aors[i] as Aor);
      const bindings = state.get(key) ?? [];
      if ((bindings.length > 0) !== registered) return;
      if (total >= page.offset && items.length < page.limit) {
        items.push(e);
        live.set(key, bindings);
      }
      total++;
    });
    if (batch.items.length < REGISTRATION_FILTER_BATCH) break;
  }
  return { result: { total, items }, live };
}

const params = {
  type: 'object',
  properties: { auth_id: { type: 'string' }, endpoint_id: { type: 'string' } },
} as const;

/** The endpoint if it exists and the caller may see it (a sub-account sees only its own). */
async function visibleEndpoint(ctx: ApiContext, c: Customer, endpointId: string): Promise<EndpointRecord | null> {
  const e = await ctx.directory.getEndpoint(c.account.authId, endpointId);
  if (!e) return null;
  if (c.subAccount && e.subAccount !== c.subAccount.authId) return null;
  return e;
}

/**
 * Check `application` against the account: it must name an application owned by
 * the same owner as the endpoint (main account or that sub-account), so a
 * sub-account never sees another owner's application through its endpoints.
 * Returns the app id, null (explicitly none) or undefined (not given).
 */
async function checkApplication(
  ctx: ApiContext,
  c: Customer,
  body: Record<string, unknown>,
  owner: string | null,
  details: Details,
): Promise<string | null | undefined> {
  if (!('application' in body) || 'application' in details) return undefined;
  const v = body.application;
  if (v === null) return null;
  const id = String(v);
  const app = await ctx.directory.getApplication(c.account.authId, id);
  if (!app || app.subAccount !== owner) {
    details.application = owner
      ? 'is not an application of this sub-account'
      : 'is not an application of this account (sub-account applications cannot be used by main-account endpoints)';
    return undefined;
  }
  return id;
}

/** Register the Endpoint routes. */
export function registerEndpointRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const base = '/api/v1/Account/:auth_id/Endpoint/';
  const one = '/api/v1/Account/:auth_id/Endpoint/:endpoint_id/';
  const config = { access: 'customer' as const };

  // 1. Create
  app.post(base, { schema: { params, body: createBody }, attachValidation: true, config }, async (req, reply) => {
    const c = customerOf(req);
    const pathAuthId = c.subAccount?.authId ?? c.account.authId;
    await ctx.idempotency.run(
      req,
      reply,
      { scope: c.account.authId, caller: pathAuthId, operation: 'endpoint.create' },
      async () => {
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
        let appId = await checkApplication(ctx, c, body, owner, details);
        if (Object.keys(details).length > 0) throw badRequest(details);

        const username = optString(body, 'username') ?? '';
        const password = optString(body, 'password') ?? '';
        // Spec: when application is omitted, the owner's default endpoint application applies.
        if (appId === undefined) appId = (await ctx.directory.getDefaultEndpointApp(c.account.authId, owner))?.appId ?? null;

        const now = isoNow();
        const flag = (k: keyof typeof ALLOW_DEFAULTS): boolean => optBool(body, k) ?? ALLOW_DEFAULTS[k];
        const made = await ctx.provisioning.create(
          c.account,
          {
            username,
            alias: optString(body, 'alias') ?? username,
            appId,
            subAccount: owner,
            allowVoice: flag('allow_voice'),
            allowMessage: flag('allow_message'),
            allowVideo: flag('allow_video'),
            allowSameDomain: flag('allow_same_domain'),
            allowOtherDomains: flag('allow_other_domains'),
            allowPhones: flag('allow_phones'),
            allowApps: flag('allow_apps'),
            createdAt: now,
            updatedAt: now,
          },
          password,
        );
        if (!made.ok) {
          switch (made.reason) {
            case 'username_taken':
              throw conflict('username_taken', `The username "${username}" is already taken on this account.`);
            case 'username_retired':
              throw conflict(
                'username_taken',
                `The username "${username}" belonged to a deleted endpoint; its SIP URI is permanently unavailable.`,
              );
            case 'no_application':
              throw badRequest({ application: 'is not an application of this account' });
            case 'no_subaccount':
              throw badRequest({ sub_account: 'is not a sub-account of this account' });
            case 'no_id':
              throw new ApiError(503, 'service_unavailable', 'Could not allocate an endpoint id; retry.');
          }
        }
        const rec = made.endpoint;
        req.log.info({ endpointId: rec.endpointId, aor: aorKey(endpointAor(c.account, rec)) }, 'endpoint created');
        return {
          status: 201,
          body: {
            api_id: req.id,
            message: 'created',
            endpoint_id: rec.endpointId,
            sip_uri: sipUri(c, username),
            resource_uri: resourceUri(pathAuthId, rec.endpointId),
          },
        };
      },
    );
  });

  // 2. List
  app.get(base, { schema: { params, querystring: listQuery }, config }, async (req) => {
    const c = customerOf(req);
    const q = queryObject(req);
    const page = pageOf(q);
    const query: EndpointQuery = {
      usernameContains: optString(q, 'username__contains'),
      usernameExact: optString(q, 'username__exact'),
      usernameStartswith: optString(q, 'username__startswith'),
      aliasContains: optString(q, 'alias__contains'),
      aliasExact: optString(q, 'alias__exact'),
      appIdExact: typeof q.application_id__exact === 'number' ? String(q.application_id__exact) : undefined,
      appIdIsNull: optBool(q, 'application_id__isnull'),
      subAccount: optString(q, 'sub_account'),
    };
    const registered = q.sip_registered === 'true' ? true : q.sip_registered === 'false' ? false : undefined;
    let result: { total: number; items: EndpointRecord[] } = { total: 0, items: [] };
    let live: Map<string, Binding[]> | null = null;
    // A sub-account sees only its own endpoints; asking for another's yields none.
    const visible = c.subAccount
      ? query.subAccount === undefined || query.subAccount === c.subAccount.authId
        ? { ...query, subAccount: c.subAccount.authId }
        : null
      : query;
    if (visible && registered !== undefined) {
      ({ result, live } = await listByRegistration(ctx, c, visible, registered, page));
    } else if (visible) {
      result = await ctx.directory.listEndpoints(c.account.authId, visible, page);
    }

    // One round trip for the live state of the whole page, and one (only when some
    // endpoint has an application) for the page's applications; both at once.
    const aors = result.items.map((e) => endpointAor(c.account, e));
    const appIds = [...new Set(result.items.map((e) => e.appId).filter((id): id is string => id !== null))];
    const [state, apps] = await Promise.all([
      live ?? ctx.location.lookupMany(aors),
      appIds.length > 0 ? ctx.directory.getApplications(c.account.authId, appIds) : new Map<string, ApplicationRecord>(),
    ]);
    const pathAuthId = req.principal?.authId ?? c.account.authId;
    const objects = result.items.map((e, i) =>
      endpointView(c, pathAuthId, e, e.appId ? apps.get(e.appId) ?? null : null, state.get(aorKey(aors[i] as Aor)) ?? [], false),
    );
    return {
      api_id: req.id,
      meta: { limit: page.limit, offset: page.offset, total_count: result.total },
      objects,
    };
  });

  // 3. Retrieve
  app.get(one, { schema: { params }, config: { ...config, notFound: 'endpoint' } }, async (req) => {
    const c = customerOf(req);
    const { endpoint_id: id } = req.params as { endpoint_id: string };
    const e = await visibleEndpoint(ctx, c, id);
    if (!e) throw endpointNotFound(id);
    const [bindings, app] = await Promise.all([
      ctx.location.lookup(endpointAor(c.account, e)),
      e.appId ? ctx.directory.getApplication(c.account.authId, e.appId) : Promise.resolve(null),
    ]);
    return { api_id: req.id, ...endpointView(c, req.principal?.authId ?? c.account.authId, e, app, bindings, true) };
  });

  // 4. Update
  app.post(one, { schema: { params, body: updateBody }, attachValidation: true, config: { ...config, notFound: 'empty' } }, async (req, reply) => {
    const c = customerOf(req);
    const { endpoint_id: id } = req.params as { endpoint_id: string };
    const e = await visibleEndpoint(ctx, c, id);
    if (!e) throw notFoundNoBody();

    const body = bodyObject(req);
    if (Object.keys(body).length === 0) {
      // No body, an empty one, or `{}`: nothing to change is a mistake worth naming.
      throw badRequest({ body: `names no field to change (updatable: ${UPDATABLE.join(', ')})` });
    }
    const details = validationDetails(req, LOCKED_FIELDS);
    const appId = await checkApplication(ctx, c, body, e.subAccount, details);
    if (Object.keys(details).length > 0) throw badRequest(details);

    const password = optString(body, 'password');
    const r = await ctx.provisioning.update(
      c.account,
      e,
      {
        alias: optString(body, 'alias'),
        appId,
        allowVoice: optBool(body, 'allow_voice'),
        allowMessage: optBool(body, 'allow_message'),
        allowVideo: optBool(body, 'allow_video'),
        updatedAt: isoNow(),
      },
      password,
      req.log,
    );
    if (!r.ok) {
      if (r.reason === 'no_application') throw badRequest({ application: 'is not an application of this account' });
      throw notFoundNoBody();
    }
    await reply.code(202).send();
  });

  // 5. Delete
  app.delete(one, { schema: { params }, config: { ...config, notFound: 'empty' } }, async (req, reply) => {
    const c = customerOf(req);
    const { endpoint_id: id } = req.params as { endpoint_id: string };
    const e = await visibleEndpoint(ctx, c, id);
    if (!e) throw notFoundNoBody();
    // Credential first, so no REGISTER succeeds from here on (src/provisioning/endpoints.ts).
    if (!(await ctx.provisioning.delete(c.account, e, req.log))) throw notFoundNoBody();
    req.log.info({ endpointId: id, aor: aorKey(endpointAor(c.account, e)) }, 'endpoint deleted');
    await reply.code(204).send();
  });
}
