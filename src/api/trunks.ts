/**
 * SIP trunks and what belongs to them (docs/trunks.md): trunks, their credentials, IP
 * ACL entries and origination URIs, on the vendor SDK's paths (`trunks`, `credentials`,
 * `ip_access_control_list`, `origination_uri`). Fields carry the seed's names
 * (`trunk_type`, `enabled`, `max_concurrent_calls`) and the vendor's synonyms
 * (`trunk_direction`, `trunk_status`, `concurrent_calls_limit`); answers carry both.
 * Main accounts only (sub-account credentials → 403). A credential's password is
 * write-only: kept as HA1 and sealed, never answered, never logged.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { ApiError, badRequest, describedPattern, notFound, type Details } from './errors.js';
import { bodyObject, customerOf, pageOf, queryObject, validationDetails, type ApiContext } from './context.js';
import {
  parseCidr,
  TrunkError,
  type AclInput,
  type ChildKind,
  type CredentialInput,
  type IpAclRecord,
  type OriginationUriRecord,
  type TrunkCredentialRecord,
  type TrunkInput,
  type TrunkRecord,
  type Trunks,
  type TrunkType,
  type UriInput,
} from '../trunks/index.js';

const USERNAME = describedPattern('^[A-Za-z0-9._~+-]{1,64}$', 'must be 1-64 letters, digits or . _ ~ + -');
const str = (max: number, min = 0) => ({ type: 'string', minLength: min, maxLength: max }) as const;
const id = { type: ['string', 'null'], maxLength: 64 } as const;

const trunkProperties = {
  name: str(128, 1),
  trunk_type: str(16),
  trunk_direction: str(16),
  enabled: { type: 'boolean' },
  trunk_status: str(16),
  max_concurrent_calls: { type: 'integer', minimum: 0, maximum: 1_000_000 },
  concurrent_calls_limit: { type: 'integer', minimum: 0, maximum: 1_000_000 },
  cps_limit: { type: 'integer', minimum: 0, maximum: 100_000 },
  description: str(1024),
  transport: { type: 'string', enum: ['udp', 'tcp', 'tls'] },
  secure: { type: 'boolean' },
  inbound_destination: { type: ['string', 'null'], maxLength: 256 },
  credential_uuid: id,
  ipacl_uuid: id,
  primary_uri_uuid: id,
  fallback_uri_uuid: id,
  recording: { type: 'boolean' },
  enable_transcription: { type: 'boolean' },
  pii_redaction: { type: 'boolean' },
  pii_entity_types: str(512),
  webhook_url: str(2048),
  webhook_method: { type: 'string', enum: ['GET', 'POST'] },
  recording_webhook_enabled: { type: 'boolean' },
} as const;

const VENDOR_KEYS = ['recording', 'enable_transcription', 'pii_redaction', 'pii_entity_types', 'webhook_url', 'webhook_method', 'recording_webhook_enabled'] as const;

const trunkCreate = {
  type: 'object',
  additionalProperties: false,
  properties: {
    ...trunkProperties,
    // The vendor's inline create: one credential and IP ACL entries with the trunk.
    username: { type: 'string', pattern: USERNAME },
    password: str(128, 1),
    ip_whitelist: { type: 'array', maxItems: 100, items: str(64) },
  },
} as const;
const trunkUpdate = { type: 'object', additionalProperties: false, properties: trunkProperties } as const;

const TRUNK_FIXED = {
  trunk_id: 'cannot be changed',
  sip_domain: 'is derived from the trunk_id and cannot be set',
  trunk_domain: 'is derived from the trunk_id and cannot be set',
  account_id: 'cannot be set',
} as const;
const CHILD_FIXED = { trunk_id: 'cannot be changed (delete and create under the other trunk)', id: 'cannot be changed', account_id: 'cannot be set' } as const;

const credProps = { username: { type: 'string', pattern: USERNAME }, password: str(128, 1), enabled: { type: 'boolean' } } as const;
const aclProps = { name: str(128), ip_address: str(64, 1), description: str(1024), enabled: { type: 'boolean' } } as const;
const uriProps = {
  name: str(128),
  sip_uri: str(512, 1),
  uri: str(512, 1),
  priority: { type: 'integer', minimum: 0, maximum: 1000 },
  weight: { type: 'integer', minimum: 1, maximum: 1000 },
  enabled: { type: 'boolean' },
  description: str(1024),
} as const;
const trunkIdProp = { trunk_id: str(64, 1) } as const;

const bodies = {
  credential: {
    create: { type: 'object', additionalProperties: false, required: ['trunk_id', 'username', 'password'], properties: { ...trunkIdProp, ...credProps } },
    update: { type: 'object', additionalProperties: false, properties: credProps },
  },
  ipacl: {
    create: { type: 'object', additionalProperties: false, required: ['trunk_id', 'ip_address'], properties: { ...trunkIdProp, ...aclProps } },
    update: { type: 'object', additionalProperties: false, properties: aclProps },
  },
  uri: {
    create: { type: 'object', additionalProperties: false, required: ['trunk_id'], properties: { ...trunkIdProp, ...uriProps } },
    update: { type: 'object', additionalProperties: false, properties: uriProps },
  },
} as const;

const listQuery = {
  type: 'object',
  additionalProperties: true,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    offset: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 },
    trunk_id: { type: 'string', maxLength: 64 },
  },
} as const;

const params = {
  type: 'object',
  properties: { auth_id: { type: 'string' }, trunk_id: { type: 'string' }, credential_id: { type: 'string' }, ip_acl_id: { type: 'string' }, uri_id: { type: 'string' } },
} as const;

/** A Trunk as answered: the seed's fields and the vendor's, side by side. */
export function trunkBody(t: TrunkRecord, sipDomain: string): Record<string, unknown> {
  const domain = `${t.trunkId}.${sipDomain}`.toLowerCase();
  return {
    trunk_id: t.trunkId,
    id: t.trunkId,
    account_id: t.authId,
    name: t.name,
    trunk_type: t.trunkType,
    trunk_direction: t.trunkType.toLowerCase(),
    enabled: t.enabled,
    trunk_status: t.enabled ? 'active' : 'inactive',
    max_concurrent_calls: t.maxConcurrentCalls,
    concurrent_calls_limit: t.maxConcurrentCalls,
    cps_limit: t.cpsLimit,
    sip_domain: domain,
    trunk_domain: domain,
    secure: t.secure,
    transport: t.transport,
    description: t.description,
    inbound_destination: t.inboundDestination,
    credential_uuid: t.credentialUuid,
    ipacl_uuid: t.ipaclUuid,
    primary_uri_uuid: t.primaryUriUuid,
    fallback_uri_uuid: t.fallbackUriUuid,
    recording: false,
    enable_transcription: false,
    pii_redaction: false,
    pii_entity_types: null,
    webhook_url: null,
    webhook_method: 'POST',
    recording_webhook_enabled: false,
    ...t.vendor,
    created_at: t.createdAt,
    updated_at: t.updatedAt,
  };
}

/** A credential as answered: never its password or hashes. */
export function credentialBody(c: TrunkCredentialRecord, realm: string): Record<string, unknown> {
  return { id: c.id, credential_id: c.id, account_id: c.authId, trunk_id: c.trunkId, username: c.username, realm, enabled: c.enabled, created_at: c.createdAt, updated_at: c.updatedAt };
}

export function aclBody(a: IpAclRecord): Record<string, unknown> {
  return { id: a.id, account_id: a.authId, trunk_id: a.trunkId, name: a.name, ip_address: a.ipAddress, description: a.description, enabled: a.enabled, created_at: a.createdAt, updated_at: a.updatedAt };
}

export function uriBody(u: OriginationUriRecord): Record<string, unknown> {
  return {
    id: u.id,
    account_id: u.authId,
    trunk_id: u.trunkId,
    name: u.name,
    uri: u.uri,
    sip_uri: u.uri,
    priority: u.priority,
    weight: u.weight,
    enabled: u.enabled,
    transport: u.transport,
    description: u.description,
    created_at: u.createdAt,
    updated_at: u.updatedAt,
  };
}

/** A TrunkError as the API answers it. */
function apiError(err: unknown): unknown {
  if (!(err instanceof TrunkError)) return err;
  if (err.kind === 'not_found') return notFound(err.message);
  if (err.kind === 'invalid') return badRequest({ [err.field ?? 'body']: err.message });
  return new ApiError(409, err.code, err.message, err.extra);
}

async function run<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    throw apiError(err);
  }
}

/** The trunk fields of a validated body, synonyms folded; conflicts and bad values go to `details`. */
function trunkInput(body: Record<string, unknown>, details: Details): TrunkInput {
  const input: TrunkInput = {};
  const pick = <T>(seed: string, vendor: string, convert: (v: unknown) => T | undefined, what: string): T | undefined => {
    const a = seed in body ? convert(body[seed]) : undefined;
    const b = vendor in body ? convert(body[vendor]) : undefined;
    if (seed in body && a === undefined && !(seed in details)) details[seed] = what;
    if (vendor in body && b === undefined && !(vendor in details)) details[vendor] = what;
    if (a !== undefined && b !== undefined && a !== b) details[vendor] = `contradicts ${seed}`;
    return a ?? b;
  };
  const type = (v: unknown): TrunkType | undefined => {
    const s = typeof v === 'string' ? v.toUpperCase() : '';
    return s === 'INBOUND' || s === 'OUTBOUND' ? s : undefined;
  };
  input.trunkType = pick('trunk_type', 'trunk_direction', type, 'must be INBOUND or OUTBOUND');
  const status = (v: unknown): boolean | undefined => {
    if (typeof v === 'boolean') return v;
    const s = typeof v === 'string' ? v.toLowerCase() : '';
    return s === 'active' || s === 'enabled' ? true : s === 'inactive' || s === 'disabled' ? false : undefined;
  };
  input.enabled = pick('enabled', 'trunk_status', status, 'must be active or inactive');
  const int = (v: unknown): number | undefined => (typeof v === 'number' ? v : undefined);
  input.maxConcurrentCalls = pick('max_concurrent_calls', 'concurrent_calls_limit', int, 'must be an integer');
  if (typeof body.name === 'string') input.name = body.name;
  if (typeof body.cps_limit === 'number') input.cpsLimit = body.cps_limit;
  if (typeof body.description === 'string') input.description = body.description;
  if (typeof body.transport === 'string') input.transport = body.transport as TrunkInput['transport'];
  if (typeof body.secure === 'boolean') input.secure = body.secure;
  if ('inbound_destination' in body) input.inboundDestination = (body.inbound_destination as string | null) ?? null;
  if ('credential_uuid' in body) input.credentialUuid = body.credential_uuid as string | null;
  if ('ipacl_uuid' in body) input.ipaclUuid = body.ipacl_uuid as string | null;
  if ('primary_uri_uuid' in body) input.primaryUriUuid = body.primary_uri_uuid as string | null;
  if ('fallback_uri_uuid' in body) input.fallbackUriUuid = body.fallback_uri_uuid as string | null;
  const vendor: Record<string, string | boolean> = {};
  for (const k of VENDOR_KEYS) if (typeof body[k] === 'string' || typeof body[k] === 'boolean') vendor[k] = body[k] as string | boolean;
  if (Object.keys(vendor).length > 0) input.vendor = vendor;
  for (const k of Object.keys(input) as Array<keyof TrunkInput>) if (input[k] === undefined) delete input[k];
  return input;
}

function page<T>(req: FastifyRequest, items: T[], view: (x: T) => Record<string, unknown>): Record<string, unknown> {
  const p = pageOf(queryObject(req));
  return {
    api_id: req.id,
    meta: { limit: p.limit, offset: p.offset, total: items.length, total_count: items.length },
    objects: items.slice(p.offset, p.offset + p.limit).map(view),
  };
}

/** Register the trunk routes. */
export function registerTrunkRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const trunks: Trunks = ctx.trunks;
  const sipDomain = ctx.config.sipDomain;
  const config = { access: 'account' as const };
  const acct = '/api/v1/Account/:auth_id';
  const authOf = (req: FastifyRequest): string => customerOf(req).account.authId;

  // ---- trunks ----
  app.post(`${acct}/trunks`, { schema: { params, body: trunkCreate }, attachValidation: true, config }, async (req, reply) => {
    const authId = authOf(req);
    await ctx.idempotency.run(req, reply, { scope: authId, caller: authId, operation: 'trunk.create' }, () => createTrunk(req, authId));
  });

  const createTrunk = async (req: FastifyRequest, authId: string): Promise<{ status: number; body: Record<string, unknown> }> => {
    const body = bodyObject(req);
    const details = validationDetails(req, TRUNK_FIXED);
    const input = trunkInput(body, details);
    const whitelist = Array.isArray(body.ip_whitelist) ? (body.ip_whitelist as unknown[]) : [];
    whitelist.forEach((x, i) => {
      if (typeof x === 'string' && !parseCidr(x)) details[`ip_whitelist/${i}`] ??= 'must be an IPv4 or IPv6 address or CIDR';
    });
    const hasUser = typeof body.username === 'string';
    if (hasUser !== (typeof body.password === 'string') && !('username' in details) && !('password' in details)) {
      details[hasUser ? 'password' : 'username'] = 'is required with ' + (hasUser ? 'username' : 'password');
    }
    if (Object.keys(details).length > 0) throw badRequest(details);
    const t = await run(() => trunks.createTrunk(authId, input));
    try {
      if (hasUser) await trunks.createCredential(authId, { trunkId: t.trunkId, username: body.username as string, password: body.password as string });
      for (const x of whitelist) await trunks.createAcl(authId, { trunkId: t.trunkId, ipAddress: x as string });
    } catch (err) {
      // All or nothing: the inline children failed (a taken username), so no trunk either.
      await trunks.deleteTrunk(authId, t.trunkId).catch(() => undefined);
      throw apiError(err);
    }
    return { status: 201, body: { api_id: req.id, message: 'created', ...trunkBody(await trunks.getTrunk(authId, t.trunkId), sipDomain) } };
  };

  app.get(`${acct}/trunks`, { schema: { params, querystring: listQuery }, config }, async (req) => page(req, await trunks.listTrunks(authOf(req)), (t) => trunkBody(t, sipDomain)));

  const one = `${acct}/trunks/:trunk_id`;
  app.get(one, { schema: { params }, config }, async (req) => {
    const t = await run(() => trunks.getTrunk(authOf(req), (req.params as { trunk_id: string }).trunk_id));
    return { api_id: req.id, ...trunkBody(t, sipDomain) };
  });

  app.put(one, { schema: { params, body: trunkUpdate }, attachValidation: true, config }, async (req) => {
    const authId = authOf(req);
    const trunkId = (req.params as { trunk_id: string }).trunk_id;
    await run(() => trunks.getTrunk(authId, trunkId));
    const details = validationDetails(req, TRUNK_FIXED);
    const input = trunkInput(bodyObject(req), details);
    if (Object.keys(details).length > 0) throw badRequest(details);
    const t = await run(() => trunks.updateTrunk(authId, trunkId, input));
    return { api_id: req.id, message: 'changed', ...trunkBody(t, sipDomain) };
  });

  app.delete(one, { schema: { params }, config }, async (req, reply) => {
    await run(() => trunks.deleteTrunk(authOf(req), (req.params as { trunk_id: string }).trunk_id));
    await reply.code(204).send();
  });

  // ---- children: credentials, IP ACL entries, origination URIs ----
  const children: Array<{
    kind: ChildKind;
    path: string;
    param: string;
    view: (x: never) => Record<string, unknown>;
    create: (authId: string, b: Record<string, unknown>) => Promise<unknown>;
    update: (authId: string, id: string, b: Record<string, unknown>) => Promise<unknown>;
    check?: (b: Record<string, unknown>, details: Details, creating: boolean) => void;
  }> = [
    {
      kind: 'credential',
      path: 'credentials',
      param: 'credential_id',
      view: (c: TrunkCredentialRecord) => credentialBody(c, trunks.realm),
      create: (a, b) => trunks.createCredential(a, credInput(b)),
      update: (a, i, b) => trunks.updateCredential(a, i, credInput(b)),
    },
    {
      kind: 'ipacl',
      path: 'ip-acl',
      param: 'ip_acl_id',
      view: aclBody,
      create: (a, b) => trunks.createAcl(a, aclInput(b)),
      update: (a, i, b) => trunks.updateAcl(a, i, aclInput(b)),
      check: (b, details) => {
        if (typeof b.ip_address === 'string' && !parseCidr(b.ip_address)) details.ip_address ??= 'must be an IPv4 or IPv6 address or CIDR (e.g. 192.0.2.0/24, 2001:db8::/32)';
      },
    },
    {
      kind: 'uri',
      path: 'origination-uris',
      param: 'uri_id',
      view: uriBody,
      create: (a, b) => trunks.createUri(a, uriInput(b)),
      update: (a, i, b) => trunks.updateUri(a, i, uriInput(b)),
      check: (b, details, creating) => {
        if (typeof b.sip_uri === 'string' && typeof b.uri === 'string' && b.sip_uri !== b.uri) details.uri ??= 'contradicts sip_uri';
        if (creating && !('sip_uri' in b) && !('uri' in b)) details.sip_uri ??= 'is required';
      },
    },
  ];

  for (const c of children) {
    app.post(`${acct}/${c.path}`, { schema: { params, body: bodies[c.kind].create }, attachValidation: true, config }, async (req, reply) => {
      const authId = authOf(req);
      await ctx.idempotency.run(req, reply, { scope: authId, caller: authId, operation: `trunk.${c.kind}.create` }, async () => {
        const body = bodyObject(req);
        const details = validationDetails(req);
        c.check?.(body, details, true);
        if (Object.keys(details).length > 0) throw badRequest(details);
        const rec = await run(() => c.create(authId, body));
        return { status: 201, body: { api_id: req.id, message: 'created', ...c.view(rec as never) } };
      });
    });
    app.get(`${acct}/trunks/${c.path}`, { schema: { params, querystring: listQuery }, config }, async (req) => {
      const wanted = queryObject(req).trunk_id;
      const all = await trunks.listChildren(c.kind, authOf(req));
      return page(req, typeof wanted === 'string' ? all.filter((x) => x.trunkId === wanted) : all, (x) => c.view(x as never));
    });
    const child = `${acct}/${c.path}/:${c.param}`;
    const childId = (req: FastifyRequest): string => String((req.params as Record<string, unknown>)[c.param] ?? '');
    app.get(child, { schema: { params }, config }, async (req) => {
      const rec = await run(() => trunks.getChild(c.kind, authOf(req), childId(req)));
      return { api_id: req.id, ...c.view(rec as never) };
    });
    app.put(child, { schema: { params, body: bodies[c.kind].update }, attachValidation: true, config }, async (req) => {
      const authId = authOf(req);
      const cid = childId(req);
      await run(() => trunks.getChild(c.kind, authId, cid));
      const body = bodyObject(req);
      const details = validationDetails(req, CHILD_FIXED);
      c.check?.(body, details, false);
      if (Object.keys(details).length > 0) throw badRequest(details);
      const rec = await run(() => c.update(authId, cid, body));
      return { api_id: req.id, message: 'changed', ...c.view(rec as never) };
    });
    app.delete(child, { schema: { params }, config }, async (req, reply) => {
      await run(() => trunks.deleteChild(c.kind, authOf(req), childId(req)));
      await reply.code(204).send();
    });
  }
}

const s = (b: Record<string, unknown>, k: string): string | undefined => (typeof b[k] === 'string' ? (b[k] as string) : undefined);
const bool = (b: Record<string, unknown>, k: string): boolean | undefined => (typeof b[k] === 'boolean' ? (b[k] as boolean) : undefined);
const num = (b: Record<string, unknown>, k: string): number | undefined => (typeof b[k] === 'number' ? (b[k] as number) : undefined);

function credInput(b: Record<string, unknown>): CredentialInput {
  return { trunkId: s(b, 'trunk_id'), username: s(b, 'username'), password: s(b, 'password'), enabled: bool(b, 'enabled') };
}
function aclInput(b: Record<string, unknown>): AclInput {
  return { trunkId: s(b, 'trunk_id'), name: s(b, 'name'), ipAddress: s(b, 'ip_address'), description: s(b, 'description'), enabled: bool(b, 'enabled') };
}
function uriInput(b: Record<string, unknown>): UriInput {
  return {
    trunkId: s(b, 'trunk_id'),
    name: s(b, 'name'),
    uri: s(b, 'sip_uri') ?? s(b, 'uri'),
    priority: num(b, 'priority'),
    weight: num(b, 'weight'),
    enabled: bool(b, 'enabled'),
    description: s(b, 'description'),
  };
}
