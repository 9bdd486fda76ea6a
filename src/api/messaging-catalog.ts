/**
 * The messaging catalog routes (docs/messaging-catalog.md) under `/v1/messaging/`:
 * contacts (6, with the multipart CSV import), templates (3), canned responses (3),
 * numbers (4), campaigns (7) and calls (3). Credentials are the account's or
 * sub-account's `X-Auth-ID`/`X-Auth-Token`, checked as on the voice API; the owner of
 * every record is the calling Auth ID.
 *
 * @remarks
 * The messaging paths carry no Auth ID, so the routes are declared `public` to the
 * server's guard (rate limit and Accept check still run first) and authenticate in
 * their own `preParsing` hook: 401/403 come after 429/406 and before any body is read
 * (415, 400), the order of docs/api.md.
 */
import multipart from '@fastify/multipart';
import type { FastifyInstance, FastifyReply, FastifyRequest, preParsingAsyncHookHandler } from 'fastify';
import { forbidden, ApiError, badRequest, notFound } from './errors.js';
import { bodyObject, customerOf, pageOf, queryObject, validationDetails, type ApiContext } from './context.js';
import { headerValue } from './auth.js';
import { E164_PROBLEM, normalizeE164 } from '../numbers/e164.js';
import {
  CatalogError,
  type CallRequestRecord,
  type CampaignInput,
  type CampaignProgress,
  type CampaignRecord,
  type CannedResponseRecord,
  type ContactInput,
  type ContactRecord,
  type MessagingCatalog,
  type NumberRecord,
  type TemplateRecord,
} from '../messaging/catalog/index.js';

export const MESSAGING_BASE = '/v1/messaging';

const str = (max: number, min = 0) => ({ type: 'string', minLength: min, maxLength: max }) as const;
const TAG = { type: 'string', minLength: 1, maxLength: 64 } as const;
const attributes = { type: 'object', maxProperties: 50, additionalProperties: str(1024), propertyNames: { maxLength: 64 } } as const;

const contactProps = {
  phone: str(32, 1),
  name: str(256),
  tags: { type: 'array', maxItems: 50, items: TAG },
  attributes,
} as const;
const contactCreate = { type: 'object', additionalProperties: false, required: ['phone'], properties: contactProps } as const;
const contactUpdate = { type: 'object', additionalProperties: false, properties: contactProps } as const;

const components = { type: 'array', maxItems: 20, items: { type: 'object' } } as const;
const templateCreate = {
  type: 'object',
  additionalProperties: false,
  required: ['channel_id', 'name', 'language', 'category', 'components'],
  properties: {
    channel_id: str(128, 1),
    name: { type: 'string', pattern: '^[a-z0-9_]{1,512}$' },
    language: { type: 'string', pattern: '^[a-z]{2,3}(_[A-Za-z]{2,4})?$' },
    category: { type: 'string', enum: ['MARKETING', 'UTILITY', 'AUTHENTICATION'] },
    components,
  },
} as const;

const cannedCreate = {
  type: 'object',
  additionalProperties: false,
  required: ['shortcut', 'text'],
  properties: { shortcut: { type: 'string', pattern: '^/?[A-Za-z0-9_.-]{1,64}$' }, text: str(4096, 1) },
} as const;

const numberCreate = {
  type: 'object',
  additionalProperties: false,
  required: ['channel_id', 'phone_number'],
  properties: { channel_id: str(128, 1), phone_number: str(32, 1), phone_number_id: str(64, 1), display_name: str(128) },
} as const;

const callCreate = {
  type: 'object',
  additionalProperties: false,
  required: ['channel_id', 'to'],
  properties: { channel_id: str(128, 1), to: str(32, 1), action: { type: 'string', enum: ['permission_request', 'connect'] } },
} as const;

const campaignTemplate = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'language'],
  properties: { name: str(512, 1), language: str(16, 2), components },
} as const;
const audience = {
  type: 'object',
  additionalProperties: false,
  properties: { contact_ids: { type: 'array', maxItems: 100_000, items: str(64, 1) }, tag: TAG },
} as const;
const campaignProps = {
  name: str(256, 1),
  channel_id: str(128, 1),
  template: campaignTemplate,
  audience,
  rate: { type: 'integer', minimum: 1, maximum: 1_000_000 },
} as const;
const campaignCreate = { type: 'object', additionalProperties: false, required: ['name', 'channel_id', 'template', 'audience'], properties: campaignProps } as const;
const campaignUpdate = {
  type: 'object',
  additionalProperties: false,
  properties: { ...campaignProps, status: { type: 'string', enum: ['cancelled'] } },
} as const;

const listQuery = {
  type: 'object',
  additionalProperties: true,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    offset: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 },
    tag: TAG,
    search: str(128),
    channel_id: str(128),
    refresh: { type: 'boolean', default: false },
  },
} as const;

const idParams = { type: 'object', properties: { id: str(128), name: str(512) } } as const;

const FIXED = { id: 'cannot be set', owner: 'cannot be set', created_at: 'cannot be set', updated_at: 'cannot be set' } as const;

export function contactBody(c: ContactRecord): Record<string, unknown> {
  return { id: c.id, contact_id: c.id, phone: c.phone, name: c.name, tags: c.tags, attributes: c.attributes, created_at: c.createdAt, updated_at: c.updatedAt };
}
export function templateBody(t: TemplateRecord): Record<string, unknown> {
  return {
    id: t.id,
    template_id: t.id,
    channel_id: t.channelId,
    name: t.name,
    language: t.language,
    category: t.category,
    components: t.components,
    status: t.status,
    provider_template_id: t.providerId,
    rejected_reason: t.rejectedReason,
    created_at: t.createdAt,
    updated_at: t.updatedAt,
  };
}
const cannedBody = (c: CannedResponseRecord): Record<string, unknown> => ({ id: c.id, shortcut: c.shortcut, text: c.text, created_at: c.createdAt });
const numberBody = (n: NumberRecord): Record<string, unknown> => ({
  id: n.id,
  number_id: n.id,
  channel_id: n.channelId,
  phone_number: n.phoneNumber,
  phone_number_id: n.phoneNumberId,
  display_name: n.displayName,
  created_at: n.createdAt,
});
const callBody = (c: CallRequestRecord): Record<string, unknown> => ({
  id: c.id,
  call_id: c.id,
  channel_id: c.channelId,
  to: c.to,
  action: c.action,
  status: c.status,
  created_at: c.createdAt,
});
export function campaignBody(c: CampaignRecord, p: CampaignProgress | null): Record<string, unknown> {
  const progress = p ? { total: p.total, sent: p.sent, failed: p.failed, unconfirmed: p.unconfirmed, pending: Math.max(0, p.total - p.sent - p.failed - p.unconfirmed) } : undefined;
  return {
    id: c.id,
    campaign_id: c.id,
    name: c.name,
    channel_id: c.channelId,
    template: c.template,
    audience: c.audience.contactIds ? { contact_ids: c.audience.contactIds } : { tag: c.audience.tag },
    rate: c.rate,
    status: c.status,
    ...(progress ? { progress } : {}),
    created_at: c.createdAt,
    updated_at: c.updatedAt,
    started_at: c.startedAt,
    completed_at: c.completedAt,
  };
}

/** A CatalogError as the API answers it. */
function apiError(err: unknown): unknown {
  if (!(err instanceof CatalogError)) return err;
  switch (err.kind) {
    case 'not_found':
      return err.code === 'not_found' ? notFound(err.message) : new ApiError(404, err.code, err.message);
    case 'invalid':
      return badRequest({ [err.field ?? 'body']: err.message });
    case 'conflict':
      return new ApiError(409, err.code, err.message);
    case 'too_large':
      return new ApiError(413, err.code, err.message);
    case 'provider': {
      const extra = { provider_status: err.providerStatus ?? null, provider_error_code: err.providerCode ?? null };
      return err.providerStatus !== undefined && err.providerStatus < 500 ? new ApiError(400, err.code, err.message, extra) : new ApiError(502, err.code, err.message, extra);
    }
  }
}

async function run<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    throw apiError(err);
  }
}

/** Multipart refusals (busboy limits, not multipart) as the API answers them. */
function multipartError(err: unknown, maxBytes: number): unknown {
  const code = (err as { code?: unknown }).code;
  if (code === 'FST_REQ_FILE_TOO_LARGE') return new ApiError(413, 'import_too_large', `The CSV file exceeds ${maxBytes} bytes; nothing was imported.`);
  if (code === 'FST_FILES_LIMIT' || code === 'FST_PARTS_LIMIT' || code === 'FST_FIELDS_LIMIT') return badRequest({ file: 'send one file part named file (and nothing else)' });
  if (code === 'FST_INVALID_MULTIPART_CONTENT_TYPE') return new ApiError(415, 'unsupported_media_type', 'Content-Type must be multipart/form-data.');
  return err;
}

/** Register the messaging catalog routes. */
export function registerMessagingCatalogRoutes(app: FastifyInstance, ctx: ApiContext, catalog: MessagingCatalog, limit?: (req: FastifyRequest, reply: FastifyReply) => Promise<void>): void {
  // The messaging paths name no account: authenticate here, after the guard's 429/406 and before the body.
  const authenticate: preParsingAsyncHookHandler = async (req, _reply, payload) => {
    const p = await ctx.auth.authenticate(req);
    if (p.kind === 'partner') throw forbidden("A partner token cannot drive a customer's resources; use the customer's own credentials.");
    if (!p.account.enabled) throw forbidden('The account is disabled.');
    if (p.kind === 'subaccount' && !p.subAccount.enabled) throw forbidden('The sub-account is disabled.');
    req.principal = p;
    return payload;
  };
  // The messaging rate limit (shared with the core's routes) when given; else the server's own.
  const config = limit ? { access: 'public' as const, rateLimit: false as const } : { access: 'public' as const };
  const opts = limit ? { config, preParsing: authenticate, onRequest: limit } : { config, preParsing: authenticate };
  const B = MESSAGING_BASE;
  const owner = (req: FastifyRequest): string => customerOf(req).subAccount?.authId ?? customerOf(req).account.authId;
  const idOf = (req: FastifyRequest): string => String((req.params as Record<string, unknown>).id ?? '');
  /** The validated body; `e164` names fields that must hold a phone number, so one 400 names every bad field. */
  const checked = (req: FastifyRequest, e164: readonly string[] = []): Record<string, unknown> => {
    const details = validationDetails(req, FIXED);
    const body = bodyObject(req);
    for (const f of e164) if (typeof body[f] === 'string' && !(f in details) && normalizeE164(body[f]) === null) details[f] = E164_PROBLEM;
    if (Object.keys(details).length > 0) throw badRequest(details);
    return body;
  };
  const creating = (operation: string, make: (req: FastifyRequest) => Promise<Record<string, unknown>>) =>
    async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
      const c = customerOf(req);
      const caller = c.subAccount?.authId ?? c.account.authId;
      await ctx.idempotency.run(req, reply, { scope: c.account.authId, caller, operation: `messaging.${operation}` }, async () => ({
        status: 201,
        body: { api_id: req.id, message: 'created', ...(await run(() => make(req))) },
      }));
    };
  const page = <T>(req: FastifyRequest, items: T[], view: (x: T) => Record<string, unknown>): Record<string, unknown> => {
    const p = pageOf(queryObject(req));
    return { api_id: req.id, meta: { limit: p.limit, offset: p.offset, total_count: items.length }, objects: items.slice(p.offset, p.offset + p.limit).map(view) };
  };
  const s = (b: Record<string, unknown>, k: string): string | undefined => (typeof b[k] === 'string' ? (b[k] as string) : undefined);

  // ---- contacts ----
  const contactInput = (b: Record<string, unknown>): ContactInput => ({
    phone: s(b, 'phone'),
    name: s(b, 'name'),
    tags: Array.isArray(b.tags) ? (b.tags as string[]) : undefined,
    attributes: typeof b.attributes === 'object' && b.attributes !== null ? (b.attributes as Record<string, string>) : undefined,
  });
  app.post(`${B}/contacts`, { ...opts, schema: { body: contactCreate }, attachValidation: true }, creating('contact.create', async (req) =>
    contactBody(await catalog.createContact(owner(req), contactInput(checked(req, ['phone']))))));
  app.get(`${B}/contacts`, { ...opts, schema: { querystring: listQuery } }, async (req) => {
    const q = queryObject(req);
    return page(req, await catalog.listContacts(owner(req), { tag: s(q, 'tag'), search: s(q, 'search') }), contactBody);
  });
  app.get(`${B}/contacts/:id`, { ...opts, schema: { params: idParams } }, async (req) => ({ api_id: req.id, ...contactBody(await run(() => catalog.getContact(owner(req), idOf(req)))) }));
  app.put(`${B}/contacts/:id`, { ...opts, schema: { params: idParams, body: contactUpdate }, attachValidation: true }, async (req) => {
    const o = owner(req);
    await run(() => catalog.getContact(o, idOf(req)));
    const c = await run(() => catalog.updateContact(o, idOf(req), contactInput(checked(req, ['phone']))));
    return { api_id: req.id, message: 'changed', ...contactBody(c) };
  });
  app.delete(`${B}/contacts/:id`, { ...opts, schema: { params: idParams } }, async (req, reply) => {
    await run(() => catalog.deleteContact(owner(req), idOf(req)));
    await reply.code(204).send();
  });

  // The CSV import: multipart/form-data with one file part (`file`), parsed as it streams in.
  const maxBytes = catalog.settings.importMaxBytes;
  app.register(async (sub) => {
    await sub.register(multipart, { limits: { fileSize: maxBytes, files: 1, fields: 5, fieldSize: 1024, parts: 6 } });
    sub.post(`${B}/contacts/import`, opts, async (req) => {
      if (!req.isMultipart()) throw new ApiError(415, 'unsupported_media_type', 'Content-Type must be multipart/form-data with a file part named file.');
      const declared = Number(headerValue(req, 'content-length') ?? NaN);
      // A declared length far past the cap is refused before reading it (64 KiB for the multipart framing).
      if (Number.isFinite(declared) && declared > maxBytes + 64 * 1024) throw new ApiError(413, 'import_too_large', `The CSV file exceeds ${maxBytes} bytes; nothing was imported.`);
      let part;
      try {
        part = await req.file();
      } catch (err) {
        throw multipartError(err, maxBytes);
      }
      if (!part) throw badRequest({ file: 'is required (a multipart file part with the CSV)' });
      const file = part.file;
      const report = await run(() => catalog.importContacts(owner(req), file, () => file.truncated)).catch((err: unknown) => {
        throw multipartError(err, maxBytes);
      });
      return { api_id: req.id, imported: report.imported, updated: report.updated, failed: report.failed };
    });
  });

  // ---- templates ----
  app.post(`${B}/templates`, { ...opts, schema: { body: templateCreate }, attachValidation: true }, creating('template.create', async (req) => {
    const b = checked(req);
    const t = await catalog.createTemplate(owner(req), {
      channelId: b.channel_id as string,
      name: b.name as string,
      language: b.language as string,
      category: b.category as string,
      components: b.components as unknown[],
    });
    return templateBody(t);
  }));
  app.get(`${B}/templates`, { ...opts, schema: { querystring: listQuery } }, async (req) => {
    const q = queryObject(req);
    const ts = await run(() => catalog.listTemplates(owner(req), { channelId: s(q, 'channel_id'), refresh: q.refresh === true }));
    return page(req, ts, templateBody);
  });
  app.delete(`${B}/templates/:name`, { ...opts, schema: { params: idParams, querystring: listQuery } }, async (req, reply) => {
    const name = String((req.params as Record<string, unknown>).name ?? '');
    await run(() => catalog.deleteTemplate(owner(req), name, s(queryObject(req), 'channel_id')));
    await reply.code(204).send();
  });

  // ---- canned responses ----
  app.post(`${B}/canned-responses`, { ...opts, schema: { body: cannedCreate }, attachValidation: true }, creating('canned.create', async (req) => {
    const b = checked(req);
    return cannedBody(await catalog.createCanned(owner(req), { shortcut: b.shortcut as string, text: b.text as string }));
  }));
  app.get(`${B}/canned-responses`, { ...opts, schema: { querystring: listQuery } }, async (req) => page(req, await run(() => catalog.listCanned(owner(req))), cannedBody));
  app.delete(`${B}/canned-responses/:id`, { ...opts, schema: { params: idParams } }, async (req, reply) => {
    await run(() => catalog.deleteCanned(owner(req), idOf(req)));
    await reply.code(204).send();
  });

  // ---- numbers ----
  app.post(`${B}/numbers`, { ...opts, schema: { body: numberCreate }, attachValidation: true }, creating('number.create', async (req) => {
    const b = checked(req, ['phone_number']);
    const n = await catalog.createNumber(owner(req), { channelId: b.channel_id as string, phoneNumber: b.phone_number as string, phoneNumberId: s(b, 'phone_number_id'), displayName: s(b, 'display_name') });
    return numberBody(n);
  }));
  app.get(`${B}/numbers`, { ...opts, schema: { querystring: listQuery } }, async (req) => page(req, await run(() => catalog.listNumbers(owner(req))), numberBody));
  app.get(`${B}/numbers/:id`, { ...opts, schema: { params: idParams } }, async (req) => ({ api_id: req.id, ...numberBody(await run(() => catalog.getNumber(owner(req), idOf(req)))) }));
  app.delete(`${B}/numbers/:id`, { ...opts, schema: { params: idParams } }, async (req, reply) => {
    await run(() => catalog.deleteNumber(owner(req), idOf(req)));
    await reply.code(204).send();
  });

  // ---- calls (recorded, not placed: docs/messaging-catalog.md "Calls") ----
  app.post(`${B}/calls`, { ...opts, schema: { body: callCreate }, attachValidation: true }, creating('call.create', async (req) => {
    const b = checked(req, ['to']);
    const action = b.action === 'connect' ? 'connect' : 'permission_request';
    return callBody(await catalog.createCall(owner(req), { channelId: b.channel_id as string, to: b.to as string, action }));
  }));
  app.get(`${B}/calls`, { ...opts, schema: { querystring: listQuery } }, async (req) => page(req, await run(() => catalog.listCalls(owner(req))), callBody));
  app.get(`${B}/calls/:id`, { ...opts, schema: { params: idParams } }, async (req) => ({ api_id: req.id, ...callBody(await run(() => catalog.getCall(owner(req), idOf(req)))) }));

  // ---- campaigns ----
  const campaignInput = (b: Record<string, unknown>): CampaignInput => {
    const a = b.audience as Record<string, unknown> | undefined;
    const t = b.template as Record<string, unknown> | undefined;
    return {
      name: s(b, 'name'),
      channelId: s(b, 'channel_id'),
      template: t ? { name: t.name as string, language: t.language as string, components: Array.isArray(t.components) ? t.components : [] } : undefined,
      audience: a ? { ...(Array.isArray(a.contact_ids) ? { contactIds: a.contact_ids as string[] } : {}), ...(typeof a.tag === 'string' ? { tag: a.tag } : {}) } : undefined,
      rate: typeof b.rate === 'number' ? b.rate : undefined,
      status: b.status === 'cancelled' ? 'cancelled' : undefined,
    };
  };
  const withProgress = async (c: CampaignRecord): Promise<Record<string, unknown>> => campaignBody(c, await catalog.progress(c.id));
  app.post(`${B}/campaigns`, { ...opts, schema: { body: campaignCreate }, attachValidation: true }, creating('campaign.create', async (req) =>
    withProgress(await catalog.createCampaign(owner(req), campaignInput(checked(req))))));
  app.get(`${B}/campaigns`, { ...opts, schema: { querystring: listQuery } }, async (req) => {
    const all = await run(() => catalog.listCampaigns(owner(req)));
    const p = pageOf(queryObject(req));
    const objects = await Promise.all(all.slice(p.offset, p.offset + p.limit).map(withProgress));
    return { api_id: req.id, meta: { limit: p.limit, offset: p.offset, total_count: all.length }, objects };
  });
  app.get(`${B}/campaigns/:id`, { ...opts, schema: { params: idParams } }, async (req) => ({ api_id: req.id, ...(await withProgress(await run(() => catalog.getCampaign(owner(req), idOf(req))))) }));
  app.put(`${B}/campaigns/:id`, { ...opts, schema: { params: idParams, body: campaignUpdate }, attachValidation: true }, async (req) => {
    const o = owner(req);
    await run(() => catalog.getCampaign(o, idOf(req)));
    const c = await run(() => catalog.updateCampaign(o, idOf(req), campaignInput(checked(req))));
    return { api_id: req.id, message: 'changed', ...(await withProgress(c)) };
  });
  app.delete(`${B}/campaigns/:id`, { ...opts, schema: { params: idParams } }, async (req, reply) => {
    await run(() => catalog.deleteCampaign(owner(req), idOf(req)));
    await reply.code(204).send();
  });
  app.post(`${B}/campaigns/:id/start`, { ...opts, schema: { params: idParams } }, async (req) => ({
    api_id: req.id,
    message: 'started',
    ...(await withProgress(await run(() => catalog.startCampaign(owner(req), idOf(req))))),
  }));
  app.post(`${B}/campaigns/:id/pause`, { ...opts, schema: { params: idParams } }, async (req) => ({
    api_id: req.id,
    message: 'paused',
    ...(await withProgress(await run(() => catalog.pauseCampaign(owner(req), idOf(req))))),
  }));
}
