/**
 * Sending (docs/messaging.md "Send", "Statuses"): the {@link MessageSender} records a
 * message as `pending` and queues it; the {@link SendWorker} of any node makes the
 * provider request and moves the message on. Statuses then come from the provider
 * (status webhooks, inbound.ts) and only ever move forward:
 * `pending → sent → delivered → read`, or `failed` (with the provider's error code).
 *
 * Never sent twice: the Cloud API has no idempotency key, so an attempt is marked
 * in flight in the store before the request, and
 * - a request that cannot have reached the provider (no connection; an error answer,
 *   which carries no message id) is retried, at most {@link MAX_ATTEMPTS} times;
 * - a request whose outcome is unknown (sent, then no answer in time; or a process that
 *   died mid-attempt, found in flight by the next claimer) is not repeated: the message
 *   is `failed` with `provider_timeout`. Every request carries our message id as
 *   `biz_opaque_callback_data`, which the provider echoes in its status webhooks, so a
 *   message that did go out is linked and moved on (`sent`, …) by its first status.
 */
import { randomBytes } from 'node:crypto';
import { Poller } from '../events/poller.js';
import type { Logger } from '../logger.js';
import { STATUS_RANK, type ChannelRecord, type MessageRecord, type MessageStatus, type MessageType, type MessagingStore, type QueuedSend } from '../store/messaging/messaging.js';
import type { Channels } from './channels.js';
import { conversationId, type Conversations } from './conversations.js';
import { MessagingError } from './errors.js';
import { channelAddress, endpointOf, SIP_TEXT_MAX, type SipMessenger } from './sip-channel.js';
import type { CloudPayload, WhatsAppClient } from './whatsapp.js';

/** Provider attempts at most for one message (only attempts that cannot have sent count). */
export const MAX_ATTEMPTS = 5;
/** Delay before attempt n+1, ms. */
const RETRY_DELAYS_MS = [1_000, 5_000, 15_000, 60_000];

export const MEDIA_TYPES = ['image', 'video', 'audio', 'document', 'sticker'] as const;
export type MediaType = (typeof MEDIA_TYPES)[number];

/** One component of a template (header, body, button) with its parameters in order. */
export interface TemplateComponent {
  type: string;
  sub_type?: string;
  index?: string | number;
  /** In order: `{type:'text', text}`, `{type:'currency', …}`, `{type:'image', image:{link}}` …; a plain string is `{type:'text', text}`. */
  parameters?: Array<Record<string, unknown> | string>;
}

export interface SendInput {
  channelId: string;
  /** E.164 on a whatsapp channel; an endpoint username or `sip:<user>@<account domain>` on a sip channel. */
  to: string;
  type: string;
  text?: { body: string; previewUrl?: boolean };
  template?: { name: string; language: string; components?: TemplateComponent[] };
  /** For image, video, audio, document, sticker: a public https link. */
  media?: { link: string; caption?: string; filename?: string };
  /** The same key on the same account answers the message already recorded (a campaign's contact is sent once). */
  idempotencyKey?: string;
  campaignId?: string;
}

/** Who is sending: the account that owns the channel. */
export interface SendOwner {
  authId: string;
}

/** Send a message (what the API route and the campaigns call). Resolves once the message is recorded and queued. */
export type MessageSender = (owner: SendOwner, input: SendInput) => Promise<MessageRecord>;

export const E164 = /^\+[1-9][0-9]{6,14}$/;

/** A new message id: `msg_` and 24 hex. */
export function newMessageId(): string {
  return `msg_${randomBytes(12).toString('hex')}`;
}

/**
 * The message after `status`, or null when that would not be a step forward. A
 * `provider_timeout` failure gives way to the provider's own evidence (it did send).
 */
export function withStatus(m: MessageRecord, status: MessageStatus, at: number, err?: { code: string; title: string }): MessageRecord | null {
  const evidence = m.status === 'failed' && m.error?.code === 'provider_timeout' && status !== 'failed' && status !== 'pending';
  if (!evidence && STATUS_RANK[status] <= STATUS_RANK[m.status]) return null;
  const iso = new Date(at).toISOString();
  return {
    ...m,
    status,
    statuses: [...m.statuses, { status, at: iso, ...(err ? { errorCode: err.code, errorTitle: err.title } : {}) }],
    error: status === 'failed' ? (err ?? { code: 'unknown', title: 'Failed.' }) : evidence ? null : m.error,
    updatedAt: iso,
  };
}

/** Apply `f` to the stored message (compare-and-set, re-read and retried); the message after it and whether `f` changed it. */
export async function changeMessage(store: MessagingStore, m0: MessageRecord, f: (m: MessageRecord) => MessageRecord | null): Promise<{ m: MessageRecord; changed: boolean }> {
  let m = m0;
  for (let i = 0; i < 8; i++) {
    const next = f(m);
    if (!next) return { m, changed: false };
    if (await store.replaceMessage(m, next)) return { m: { ...next, version: m.version + 1 }, changed: true };
    const again = await store.getMessage(m.authId, m.id);
    if (!again) return { m, changed: false };
    m = again;
  }
  throw new Error(`message ${m.id}: too many concurrent changes`);
}

/** The message's content in the Cloud API's shape, checked; bad fields → MessagingError naming them. */
export function contentOf(input: SendInput, sip: boolean): { type: MessageType; content: Record<string, unknown> } {
  const type = input.type;
  if (type === 'text') {
    const body = input.text?.body;
    if (typeof body !== 'string' || body === '') throw new MessagingError('invalid', 'is required with type text', 'text.body');
    if (Buffer.byteLength(body) > (sip ? SIP_TEXT_MAX : 4096)) throw new MessagingError('invalid', `must be at most ${sip ? SIP_TEXT_MAX : 4096} bytes`, 'text.body');
    return { type, content: { text: { body, ...(input.text?.previewUrl !== undefined ? { preview_url: input.text.previewUrl } : {}) } } };
  }
  if (sip) throw new MessagingError('invalid', 'must be text on a sip channel', 'type');
  if (type === 'template') {
    const t = input.template;
    if (!t || typeof t.name !== 'string' || t.name === '') throw new MessagingError('invalid', 'is required with type template', 'template.name');
    if (typeof t.language !== 'string' || !/^[a-z]{2,3}(_[A-Z]{2})?$/.test(t.language)) throw new MessagingError('invalid', 'must be a language code such as en or en_US', 'template.language');
    const components = (t.components ?? []).map((c, i) => {
      if (typeof c?.type !== 'string') throw new MessagingError('invalid', 'must have a type (header, body, button)', `template.components[${i}].type`);
      const parameters = (c.parameters ?? []).map((p, j) => {
        if (typeof p === 'string') return { type: 'text', text: p };
        if (typeof p !== 'object' || p === null || typeof p.type !== 'string') throw new MessagingError('invalid', 'must be a string or an object with a type', `template.components[${i}].parameters[${j}]`);
        return p;
      });
      return { type: c.type.toLowerCase(), ...(c.sub_type !== undefined ? { sub_type: c.sub_type } : {}), ...(c.index !== undefined ? { index: String(c.index) } : {}), parameters };
    });
    return { type, content: { template: { name: t.name, language: { code: t.language }, ...(components.length > 0 ? { components } : {}) } } };
  }
  if ((MEDIA_TYPES as readonly string[]).includes(type)) {
    const link = input.media?.link;
    let ok = false;
    try {
      ok = typeof link === 'string' && new URL(link).protocol === 'https:';
    } catch {
      ok = false;
    }
    if (!ok) throw new MessagingError('invalid', `must be an https:// link with type ${type}`, 'media.link');
    const m = input.media as { link: string; caption?: string; filename?: string };
    const obj: Record<string, unknown> = { link: m.link };
    if (m.caption !== undefined && type !== 'audio' && type !== 'sticker') obj.caption = m.caption;
    if (m.filename !== undefined && type === 'document') obj.filename = m.filename;
    return { type: type as MediaType, content: { [type]: obj } };
  }
  throw new MessagingError('invalid', `must be text, template or ${MEDIA_TYPES.join(', ')}`, 'type');
}

export interface SenderDeps {
  store: MessagingStore;
  channels: Channels;
  conversations: Conversations;
  now: () => number;
  /** A message was queued: look at the queue now. */
  onQueued: () => void;
}

export function createMessageSender(d: SenderDeps): MessageSender {
  return async (owner, input) => {
    const channel = await d.channels.get(owner.authId, input.channelId);
    const sip = channel.type === 'sip';
    let contact: string;
    if (sip) contact = endpointOf(input.to, channel.domain ?? '');
    else {
      if (typeof input.to !== 'string' || !E164.test(input.to)) throw new MessagingError('invalid', 'must be an E.164 number such as +14155550100', 'to');
      contact = input.to;
    }
    const { type, content } = contentOf(input, sip);
    const now = d.now();
    if (!sip) await d.conversations.checkWindow(owner.authId, channel.id, contact, type, now);
    const iso = new Date(now).toISOString();
    const m: MessageRecord = {
      id: newMessageId(),
      authId: owner.authId,
      channelId: channel.id,
      conversationId: conversationId(channel.id, contact),
      direction: 'outbound',
      to: contact,
      from: sip ? channelAddress(channel) : (channel.displayPhoneNumber ?? channel.phoneNumberId ?? ''),
      type,
      content,
      status: 'pending',
      statuses: [{ status: 'pending', at: iso }],
      providerMessageId: null,
      error: null,
      campaignId: input.campaignId ?? null,
      attempts: 0,
      inFlight: false,
      version: 0,
      createdAt: iso,
      updatedAt: iso,
    };
    const r = await d.store.recordMessage(m, { id: m.conversationId, channelId: channel.id, contact }, now, input.idempotencyKey);
    if (r.created) {
      await d.store.queueSend({ authId: owner.authId, messageId: m.id }, now);
      d.onQueued();
    }
    return r.message;
  };
}

export interface SendWorkerOptions {
  store: MessagingStore;
  channels: Channels;
  whatsapp: WhatsAppClient;
  sip: () => SipMessenger | null;
  log: Logger;
  now: () => number;
  /** An outbound message changed status (fires `message.status`). */
  onStatus: (m: MessageRecord) => Promise<void>;
  /** @default 250 */
  pollMs?: number;
  /** How long a claimed send is this node's, ms (longer than a provider request). @default 30000 */
  leaseMs?: number;
  /** Sends in flight at most. @default 32 */
  concurrency?: number;
}

/** Makes the provider requests of queued messages, on every node, each send leased to one. */
export class SendWorker {
  readonly #o: SendWorkerOptions & Required<Pick<SendWorkerOptions, 'pollMs' | 'leaseMs' | 'concurrency'>>;
  readonly #poller: Poller;
  #inFlight = 0;
  readonly #running = new Set<Promise<void>>();
  /** Messages this node is attempting now (a lease that ran out under a slow attempt does not start a second one here). */
  readonly #mine = new Set<string>();

  constructor(o: SendWorkerOptions) {
    this.#o = { ...o, pollMs: o.pollMs ?? 250, leaseMs: o.leaseMs ?? 30_000, concurrency: o.concurrency ?? 32 };
    this.#poller = new Poller(() => this.#tick(), this.#o.pollMs);
  }

  start(): void {
    this.#poller.start();
  }

  /** Look at the queue now (a no-op until started: a node that does not run the worker leaves sends to those that do). */
  wake(): void {
    if (this.#poller.started) this.#poller.wake();
  }

  async stop(): Promise<void> {
    this.#poller.stop();
    await Promise.all([...this.#running]);
  }

  /** Wait until nothing is in flight (tests). */
  async idle(): Promise<void> {
    while (this.#running.size > 0) await Promise.all([...this.#running]);
  }

  async #tick(): Promise<void> {
    const room = this.#o.concurrency - this.#inFlight;
    if (room <= 0) return;
    let due: QueuedSend[];
    try {
      due = await this.#o.store.claimSends(this.#o.now(), room, this.#o.leaseMs);
    } catch (err) {
      this.#o.log.debug({ err: err instanceof Error ? err.message : String(err) }, 'messaging: send queue not readable; retried at the next poll');
      return;
    }
    for (const q of due) {
      const key = `${q.authId} ${q.messageId}`;
      if (this.#mine.has(key)) continue;
      this.#mine.add(key);
      this.#inFlight++;
      const p = this.#attempt(q)
        .catch((err: unknown) => this.#o.log.warn({ messageId: q.messageId, err: err instanceof Error ? err.message : String(err) }, 'messaging: send attempt failed; retried when its lease ends'))
        .finally(() => {
          this.#mine.delete(key);
          this.#inFlight--;
          this.#running.delete(p);
        });
      this.#running.add(p);
    }
  }

  async #fail(m: MessageRecord, q: QueuedSend, code: string, title: string): Promise<void> {
    const r = await changeMessage(this.#o.store, m, (x) => {
      const n = withStatus(x, 'failed', this.#o.now(), { code, title });
      return n ? { ...n, inFlight: false } : x.inFlight ? { ...x, inFlight: false } : null;
    });
    await this.#o.store.finishSend(q);
    if (r.changed && r.m.status === 'failed') await this.#o.onStatus(r.m);
  }

  async #attempt(q: QueuedSend): Promise<void> {
    const { store, log } = this.#o;
    const m0 = await store.getMessage(q.authId, q.messageId);
    if (!m0 || m0.status !== 'pending' || m0.providerMessageId !== null) {
      await store.finishSend(q);
      return;
    }
    if (m0.inFlight) {
      // A node died (or lost its store) mid-attempt: the provider may have it. Not repeated.
      await this.#fail(m0, q, 'provider_timeout', 'The provider request was interrupted; the outcome is unknown and the message is not sent again.');
      return;
    }
    const channel = await store.getChannel(q.authId, m0.channelId);
    if (!channel) {
      await this.#fail(m0, q, 'channel_deleted', 'The channel was deleted before the message was sent.');
      return;
    }
    const started = await changeMessage(store, m0, (x) => (x.status === 'pending' && !x.inFlight ? { ...x, inFlight: true, attempts: x.attempts + 1 } : null));
    if (!started.changed) return; // changed meanwhile: looked at again when the lease ends
    const m = started.m;
    const where = { messageId: m.id, channel: channel.id, attempt: m.attempts };
    if (channel.type === 'sip') {
      await this.#sendSip(m, q, channel);
      return;
    }
    let token: string | null;
    try {
      token = this.#o.channels.accessToken(channel);
    } catch {
      log.error(where, 'messaging: the channel access token cannot be decrypted with DATA_ENCRYPTION_KEY (update the channel with its token)');
      await this.#fail(m, q, 'access_token_unreadable', 'The channel access token cannot be decrypted by the server; update the channel with its token.');
      return;
    }
    if (token === null || channel.phoneNumberId === null) {
      await this.#fail(m, q, 'channel_incomplete', 'The channel has no phone_number_id or access_token.');
      return;
    }
    const payload: CloudPayload = { messaging_product: 'whatsapp', recipient_type: 'individual', to: m.to.replace(/^\+/, ''), type: m.type, ...m.content, biz_opaque_callback_data: m.id };
    const out = await this.#o.whatsapp.send(channel.phoneNumberId, token, payload);
    if (out.kind === 'ok') {
      // Linked first: a status webhook may overtake this write (it also finds the message by biz_opaque_callback_data).
      await store.linkProviderId(m.authId, out.providerMessageId, m.id);
      await changeMessage(store, m, (x) => ({ ...x, providerMessageId: x.providerMessageId ?? out.providerMessageId, inFlight: false }));
      await store.finishSend(q);
      log.debug(where, 'messaging: accepted by the provider');
    } else if (out.kind === 'rejected') {
      log.info({ ...where, status: out.status, code: out.code }, 'messaging: refused by the provider');
      await this.#fail(m, q, out.code, out.title);
    } else if (out.kind === 'unknown') {
      log.warn({ ...where, why: out.detail }, 'messaging: provider outcome unknown; not sent again');
      await this.#fail(m, q, 'provider_timeout', `The provider did not answer (${out.detail}); the message is not sent again.`);
    } else if (m.attempts >= MAX_ATTEMPTS) {
      log.warn({ ...where, why: out.detail }, 'messaging: provider unreachable; giving up');
      await this.#fail(m, q, 'provider_unavailable', `The provider could not be reached after ${m.attempts} attempts (${out.detail}).`);
    } else {
      const delay = RETRY_DELAYS_MS[Math.min(m.attempts - 1, RETRY_DELAYS_MS.length - 1)] as number;
      log.info({ ...where, why: out.detail, retryInMs: delay }, 'messaging: provider not reached; will retry');
      await changeMessage(store, m, (x) => (x.inFlight ? { ...x, inFlight: false } : null));
      await store.queueSend(q, this.#o.now() + delay);
    }
  }

  async #sendSip(m: MessageRecord, q: QueuedSend, channel: ChannelRecord): Promise<void> {
    const messenger = this.#o.sip();
    if (!messenger) {
      await this.#fail(m, q, 'sip_unavailable', 'SIP messaging is not available on this server.');
      return;
    }
    const domain = channel.domain ?? '';
    const body = String((m.content.text as { body?: unknown } | undefined)?.body ?? '');
    let status: number;
    try {
      ({ status } = await messenger.send(domain, channelAddress(channel), `sip:${m.to}@${domain}`, 'text/plain;charset=UTF-8', body));
    } catch (err) {
      this.#o.log.warn({ messageId: m.id, err: err instanceof Error ? err.message : String(err) }, 'messaging: SIP MESSAGE failed');
      await this.#fail(m, q, 'sip_error', 'The SIP MESSAGE could not be sent.');
      return;
    }
    if (status >= 200 && status < 300) {
      const at = this.#o.now();
      // 200: the endpoint has it (delivered); 202: a server accepted it for later (sent).
      const r = await changeMessage(this.#o.store, m, (x) => {
        const sent = withStatus({ ...x, inFlight: false }, 'sent', at);
        if (!sent) return null;
        return status === 202 ? sent : (withStatus(sent, 'delivered', at) ?? sent);
      });
      await this.#o.store.finishSend(q);
      if (r.changed) await this.#o.onStatus(r.m);
    } else {
      await this.#fail(m, q, `sip_${status}`, status === 404 || status === 480 ? 'The endpoint is not registered.' : `The SIP MESSAGE was answered ${status}.`);
    }
  }
}
