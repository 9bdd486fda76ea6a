/**
 * The messaging API (docs/messaging.md), `{base_url}/v1/messaging/`: channels, send,
 * messages, conversations, numbers, event subscriptions (`webhooks`) and Meta's own
 * WhatsApp webhook. The same credentials as the voice API (`X-Auth-ID`/`X-Auth-Token`)
 * of a main account; sub-account and partner credentials → 403. Meta's webhook
 * (`/v1/messaging/webhooks/whatsapp`) takes no credentials: it is verified by
 * `hub.verify_token` (GET) and `X-Hub-Signature-256` over the raw body (POST).
 *
 * Rate limit: every route here but Meta's webhook counts against the API key's
 * 1000/minute, 100 000/hour and 1 000 000/day (shared by the fleet through Redis), with
 * `X-RateLimit-Limit`/`-Remaining`/`-Reset` on every answer and 429 + `Retry-After`
 * past it; the server-wide limit does not apply on top.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { MessagingError, type Messaging } from '../messaging/index.js';
import type { SendInput, TemplateComponent } from '../messaging/send.js';
import { channelAddress } from '../messaging/sip-channel.js';
import { windowClosesAt, windowOpen } from '../messaging/conversations.js';
import type { ChannelRecord, ConversationRecord, MessageRecord, SubscriptionEvent, SubscriptionRecord } from '../store/messaging/messaging.js';
import { ApiError, badRequest } from './errors.js';
import { bodyObject, customerOf, pageOf, queryObject, validationDetails, type ApiContext } from './context.js';

const str = (max: number, min = 0) => ({ type: 'string', minLength: min, maxLength: max }) as const;
const digits = { type: 'string', pattern: '^[0-9]{1,32}$', maxLength: 32 } as const;

const channelProps = {
  type: { type: 'string', enum: ['whatsapp', 'sip'] },
  name: str(128),
  waba_id: digits,
  phone_number_id: digits,
  display_phone_number: { type: ['string', 'null'], maxLength: 32 },
  access_token: str(4096, 1),
} as const;
const channelBody = { type: 'object', additionalProperties: false, properties: channelProps } as const;

const mediaObj = { type: 'object', additionalProperties: false, properties: { link: str(2048, 1), caption: str(1024), filename: str(240) } } as const;
const sendBody = {
  type: 'object',
  additionalProperties: false,
  required: ['channel_id', 'to', 'type'],
  properties: {
    channel_id: str(64, 1),
    to: str(256, 1),
    type: str(32, 1),
    text: { type: 'object', additionalProperties: false, required: ['body'], properties: { body: str(4096), preview_url: { type: 'boolean' } } },
    template: {
      type: 'object',
      additionalProperties: false,
      required: ['name', 'language'],
      properties: {
        name: str(512, 1),
        language: {
          anyOf: [
            { type: 'string', maxLength: 16 },
            { type: 'object', additionalProperties: false, required: ['code'], properties: { code: str(16, 1), policy: str(16) } },
          ],
        },
        components: {
          type: 'array',
          maxItems: 20,
          items: {
            type: 'object',
            additionalProperties: false,
            required: ['type'],
            properties: {
              type: str(32, 1),
              sub_type: str(32),
              index: { type: ['string', 'integer'], maxLength: 4 },
              parameters: { type: 'array', maxItems: 100, items: { type: ['string', 'object'], maxLength: 4096 } },
            },
          },
        },
      },
    },
    media: mediaObj,
    image: mediaObj,
    video: mediaObj,
    audio: mediaObj,
    document: mediaObj,
    sticker: mediaObj,
    campaign_id: str(64),
  },
} as const;

const webhookBody = {
  type: 'object',
  additionalProperties: false,
  required: ['url'],
  properties: {
    url: str(2048, 1),
    events: { type: 'array', minItems: 1, maxItems: 2, items: { type: 'string', enum: ['message.inbound', 'message.status'] } },
    description: str(1024),
  },
} as const;

const listQuery = {
  type: 'object',
  additionalProperties: true,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    offset: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 },
  },
} as const;
const idParams = { type: 'object', properties: { id: str(64) } } as const;

export function channelView(c: ChannelRecord): Record<string, unknown> {
  return {
    id: c.id,
    channel_id: c.id,
    type: c.type,
    name: c.name,
    ...(c.type === 'whatsapp'
      ? { waba_id: c.wabaId, phone_number_id: c.phoneNumberId, display_phone_number: c.displayPhoneNumber, access_token_set: c.sealedAccessToken !== null }
      : { sip_address: channelAddress(c) }),
    created_at: c.createdAt,
    updated_at: c.updatedAt,
  };
}

export function messageView(m: MessageRecord): Record<string, unknown> {
  return {
    id: m.id,
    message_id: m.id,
    channel_id: m.channelId,
    conversation_id: m.conversationId,
    direction: m.direction,
    from: m.from,
    to: m.to,
    type: m.type,
    ...m.content,
    status: m.status,
    statuses: m.statuses.map((s) => ({ status: s.status, at: s.at, ...(s.errorCode !== undefined ? { error_code: s.errorCode, error_title: s.errorTitle } : {}) })),
    provider_message_id: m.providerMessageId,
    error: m.error,
    campaign_id: m.campaignId,
    created_at: m.createdAt,
    updated_at: m.updatedAt,
  };
}

export function conversationView(c: ConversationRecord, now: number): Record<string, unknown> {
  const closes = windowClosesAt(c);
  return {
    id: c.id,
    conversation_id: c.id,
    channel_id: c.channelId,
    contact: c.contact,
    message_count: c.messageCount,
    created_at: new Date(c.createdAt).toISOString(),
    last_message_at: new Date(c.lastMessageAt).toISOString(),
    last_inbound_at: c.lastInboundAt !== null ? new Date(c.lastInboundAt).toISOString() : null,
    window_open: windowOpen(c, now),
    window_expires_at: closes !== null ? new Date(closes).toISOString() : null,
  };
}

function webhookView(s: SubscriptionRecord): Record<string, unknown> {
  return { id: s.id, webhook_id: s.id, url: s.url, events: s.events, description: s.description, created_at: s.createdAt };
}

/** A MessagingError as the API answers it. */
function apiError(err: unknown): unknown {
  if (!(err instanceof MessagingError)) return err;
  switch (err.kind) {
    case 'not_found':
      return new ApiError(404, 'not_found', err.message);
    case 'invalid':
      return badRequest({ [err.field ?? 'body']: err.message });
    case 'window':
      return new ApiError(400, err.code ?? 'outside_customer_service_window', err.message, { rule: err.code, details: { [err.field ?? 'type']: err.message } });
    case 'conflict':
      return new ApiError(409, err.code ?? 'conflict', err.message);
    default:
      return new ApiError(503, 'service_unavailable', err.message);
  }
}

async function run<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    throw apiError(err);
  }
}

/** The send body (snake_case, Cloud API shapes) as the sender's input. */
function sendInput(b: Record<string, unknown>): SendInput {
  const type = String(b.type);
  const text = b.text as { body: string; preview_url?: boolean } | undefined;
  const tpl = b.template as { name: string; language: string | { code: string }; components?: TemplateComponent[] } | undefined;
  const media = (b.media ?? b[type]) as SendInput['media'] | undefined;
  return {
    channelId: String(b.channel_id),
    to: String(b.to),
    type,
    ...(text ? { text: { body: text.body, ...(text.preview_url !== undefined ? { previewUrl: text.preview_url } : {}) } } : {}),
    ...(tpl ? { template: { name: tpl.name, language: typeof tpl.language === 'string' ? tpl.language : tpl.language.code, ...(tpl.components ? { components: tpl.components } : {}) } } : {}),
    ...(media ? { media } : {}),
    ...(typeof b.campaign_id === 'string' ? { campaignId: b.campaign_id } : {}),
  };
}

/**
 * Register the messaging routes.
 *
 * @param rateKey the API key a request counts against (server.ts rateLimitKey).
 */
export async function registerMessagingRoutes(app: FastifyInstance, ctx: ApiContext, messaging: Messaging, rateKey: (req: FastifyRequest) => string, o: { numbers?: boolean } = {}): Promise<void> {
  const m = messaging;
  const limit = messagingRateLimit(m, rateKey);
  const config = { access: 'parent' as const, rateLimit: false as const };
  const opts = { config, onRequest: limit };
  const authOf = (req: FastifyRequest): string => customerOf(req).account.authId;
  const base = '/v1/messaging';

  // ---- channels ----
  app.post(`${base}/channels`, { ...opts, schema: { body: channelBody }, attachValidation: true }, async (req, reply) => {
    const c = customerOf(req);
    await ctx.idempotency.run(req, reply, { scope: c.account.authId, caller: c.account.authId, operation: 'messaging.channel.create' }, async () => {
      const details = validationDetails(req);
      if (Object.keys(details).length > 0) throw badRequest(details);
      const b = bodyObject(req);
      const ch = await run(() =>
        m.channels.create(c.account.authId, c.account.sipDomain, {
          type: b.type as ChannelRecord['type'] | undefined,
          name: b.name as string | undefined,
          wabaId: b.waba_id as string | undefined,
          phoneNumberId: b.phone_number_id as string | undefined,
          displayPhoneNumber: b.display_phone_number as string | null | undefined,
          accessToken: b.access_token as string | undefined,
        }),
      );
      req.log.info({ channel: ch.id, type: ch.type }, 'messaging channel created');
      return { status: 201, body: { api_id: req.id, message: 'created', ...channelView(ch) } };
    });
  });
  app.get(`${base}/channels`, { ...opts, schema: { querystring: listQuery } }, async (req) => {
    const all = await m.channels.list(authOf(req));
    const p = pageOf(queryObject(req));
    return { api_id: req.id, meta: { limit: p.limit, offset: p.offset, total: all.length }, objects: all.slice(p.offset, p.offset + p.limit).map(channelView) };
  });
  const oneChannel = `${base}/channels/:id`;
  const idOf = (req: FastifyRequest): string => (req.params as { id: string }).id;
  app.get(oneChannel, { ...opts, schema: { params: idParams } }, async (req) => ({ api_id: req.id, ...channelView(await run(() => m.channels.get(authOf(req), idOf(req)))) }));
  app.put(oneChannel, { ...opts, schema: { params: idParams, body: channelBody }, attachValidation: true }, async (req) => {
    const authId = authOf(req);
    await run(() => m.channels.get(authId, idOf(req)));
    const details = validationDetails(req);
    if (Object.keys(details).length > 0) throw badRequest(details);
    const b = bodyObject(req);
    const ch = await run(() =>
      m.channels.update(authId, idOf(req), {
        type: b.type as ChannelRecord['type'] | undefined,
        name: b.name as string | undefined,
        wabaId: b.waba_id as string | undefined,
        phoneNumberId: b.phone_number_id as string | undefined,
        displayPhoneNumber: b.display_phone_number as string | null | undefined,
        accessToken: b.access_token as string | undefined,
      }),
    );
    return { api_id: req.id, message: 'changed', ...channelView(ch) };
  });
  app.delete(oneChannel, { ...opts, schema: { params: idParams } }, async (req, reply) => {
    await run(() => m.channels.delete(authOf(req), idOf(req)));
    await reply.code(204).send();
  });

  // ---- send, messages ----
  app.post(`${base}/send`, { ...opts, schema: { body: sendBody }, attachValidation: true }, async (req, reply) => {
    const authId = authOf(req);
    await ctx.idempotency.run(req, reply, { scope: authId, caller: authId, operation: 'messaging.send' }, async () => {
      const details = validationDetails(req);
      if (Object.keys(details).length > 0) throw badRequest(details);
      const msg = await run(() => m.send({ authId }, sendInput(bodyObject(req))));
      return { status: 201, body: { api_id: req.id, message: 'queued', ...messageView(msg) } };
    });
  });
  app.get(`${base}/messages/:id`, { ...opts, schema: { params: idParams } }, async (req) => ({ api_id: req.id, ...messageView(await run(() => m.getMessage(authOf(req), idOf(req)))) }));

  // ---- conversations ----
  app.get(`${base}/conversations`, { ...opts, schema: { querystring: listQuery } }, async (req) => {
    const p = pageOf(queryObject(req));
    const r = await m.conversations.list(authOf(req), p);
    const now = Date.now();
    return { api_id: req.id, meta: { limit: p.limit, offset: p.offset, total: r.total }, objects: r.items.map((c) => conversationView(c, now)) };
  });
  app.get(`${base}/conversations/:id`, { ...opts, schema: { params: idParams } }, async (req) => {
    const r = await run(() => m.conversations.get(authOf(req), idOf(req)));
    return { api_id: req.id, ...conversationView(r.conversation, Date.now()), messages: r.messages.map(messageView) };
  });

  // ---- numbers: the account's WhatsApp numbers (its whatsapp channels); with the catalog
  // present its numbers group (4 operations, docs/messaging-catalog.md) has this path instead ----
  if (o.numbers !== false) app.get(`${base}/numbers`, { ...opts, schema: { querystring: listQuery } }, async (req) => {
    const all = (await m.channels.list(authOf(req))).filter((c) => c.type === 'whatsapp');
    const p = pageOf(queryObject(req));
    return {
      api_id: req.id,
      meta: { limit: p.limit, offset: p.offset, total: all.length },
      objects: all.slice(p.offset, p.offset + p.limit).map((c) => ({ number: c.displayPhoneNumber, phone_number_id: c.phoneNumberId, waba_id: c.wabaId, channel_id: c.id, name: c.name, whatsapp: true })),
    };
  });

  // ---- event subscriptions ----
  app.post(`${base}/webhooks`, { ...opts, schema: { body: webhookBody }, attachValidation: true }, async (req, reply) => {
    const authId = authOf(req);
    await ctx.idempotency.run(req, reply, { scope: authId, caller: authId, operation: 'messaging.webhook.create' }, async () => {
      const details = validationDetails(req);
      if (Object.keys(details).length > 0) throw badRequest(details);
      const b = bodyObject(req);
      const s = await run(() => m.subscriptions.create(authId, { url: String(b.url), events: b.events as SubscriptionEvent[] | undefined, description: b.description as string | undefined }));
      return { status: 201, body: { api_id: req.id, message: 'created', ...webhookView(s) } };
    });
  });
  app.get(`${base}/webhooks`, { ...opts, schema: { querystring: listQuery } }, async (req) => {
    const all = await m.subscriptions.list(authOf(req));
    const p = pageOf(queryObject(req));
    return { api_id: req.id, meta: { limit: p.limit, offset: p.offset, total: all.length }, objects: all.slice(p.offset, p.offset + p.limit).map(webhookView) };
  });
  const oneHook = `${base}/webhooks/:id`;
  app.get(oneHook, { ...opts, schema: { params: idParams } }, async (req) => ({ api_id: req.id, ...webhookView(await run(() => m.subscriptions.get(authOf(req), idOf(req)))) }));
  app.delete(oneHook, { ...opts, schema: { params: idParams } }, async (req, reply) => {
    await run(() => m.subscriptions.delete(authOf(req), idOf(req)));
    await reply.code(204).send();
  });
  app.post(`${oneHook}/test`, { ...opts, schema: { params: idParams } }, async (req, reply) => {
    const c = customerOf(req);
    const cb = await run(() => m.subscriptions.test(c.account.authId, c.account.sipDomain, idOf(req)));
    await reply.code(202).send({ api_id: req.id, message: 'queued', callback_id: cb, event: 'webhook.test' });
  });

  // ---- Meta's webhook: no credentials, the raw body for the signature ----
  await app.register(async (meta) => {
    // Scoped to this plugin: the raw bytes reach the handler (the signature is over them).
    meta.removeContentTypeParser('application/json');
    meta.addContentTypeParser('application/json', { parseAs: 'buffer', bodyLimit: 1024 * 1024 }, (_req, body, done) => done(null, body));
    const hook = `${base}/webhooks/whatsapp`;
    const metaConfig = { access: 'public' as const, rateLimit: false as const, anyAccept: true };
    meta.get(hook, { config: metaConfig }, async (req, reply) => {
      const challenge = m.verifyWhatsApp(queryObject(req));
      if (challenge === null) throw new ApiError(403, 'forbidden', 'hub.mode or hub.verify_token is wrong.');
      await reply.code(200).type('text/plain; charset=utf-8').send(challenge);
    });
    meta.post(hook, { config: metaConfig, bodyLimit: 1024 * 1024 }, async (req, reply) => {
      const raw = Buffer.isBuffer(req.body) ? req.body : Buffer.alloc(0);
      const sig = req.headers['x-hub-signature-256'];
      const r = await m.receiveWhatsApp(raw, typeof sig === 'string' ? sig : undefined);
      if (r.status !== 200) {
        if (r.status === 401) throw new ApiError(401, 'invalid_signature', 'X-Hub-Signature-256 is missing or does not match the body.');
        throw new ApiError(503, 'service_unavailable', 'WhatsApp webhooks are not configured on this server.');
      }
      await reply.code(200).send({ api_id: req.id, received: r.outcome.messages, statuses: r.outcome.statuses, duplicates: r.outcome.duplicates });
    });
  });
}

/**
 * The messaging rate limit (1,000/min, 100k/h, 1M/day per API key, shared by the fleet) as an
 * onRequest hook: X-RateLimit-* on every answer, 429 + Retry-After past it. Every
 * `/v1/messaging/*` route takes it (the catalog's too), except Meta's webhook.
 */
export function messagingRateLimit(m: Messaging, rateKey: (req: FastifyRequest) => string): (req: FastifyRequest, reply: FastifyReply) => Promise<void> {
  return async (req: FastifyRequest, reply: FastifyReply): Promise<void> => {
    let v;
    try {
      v = await m.rateLimiter.hit(rateKey(req));
    } catch (err) {
      // Redis down: serve (the stores answer 503 on their own) rather than refuse everyone.
      req.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'messaging rate limit not checked');
      return;
    }
    reply.header('x-ratelimit-limit', String(v.limit));
    reply.header('x-ratelimit-remaining', String(v.remaining));
    reply.header('x-ratelimit-reset', String(v.resetS));
    if (!v.allowed) {
      throw new ApiError(429, 'rate_limited', `Messaging rate limit of ${v.limit} requests per ${v.window.name} exceeded; retry in ${v.resetS} seconds.`, {}, false, { 'retry-after': String(v.resetS) });
    }
  };
}
