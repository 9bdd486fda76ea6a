/**
 * The messaging capability (docs/messaging.md): channels, send, statuses, inbound
 * WhatsApp webhooks, conversations with the 24-hour window, event subscriptions and the
 * SIP channel, on its own store service (src/store/messaging/). Built once by the
 * composition root (or the API server when none is given) with {@link createMessaging}.
 */
import type { Config } from '../config.js';
import { createLogger, type Logger } from '../logger.js';
import type { SecretBox } from '../security/secret-box.js';
import type { RedisClient } from '../store/redis/client.js';
import { accountSipDomain } from '../store/directory/directory.js';
import type { MessageRecord, MessagingStore, ChannelRecord } from '../store/messaging/messaging.js';
import { MemoryMessagingStore } from '../store/messaging/memory.js';
import { RedisMessagingStore } from '../store/messaging/redis.js';
import { Channels } from './channels.js';
import { conversationId, Conversations } from './conversations.js';
import { MessagingError } from './errors.js';
import { processWebhook, signatureValid, verifyHandshake, type InboundOutcome } from './inbound.js';
import { MemoryRateLimiter, MESSAGING_RATE_WINDOWS, RedisRateLimiter, type RateLimiter, type RateWindow } from './rate-limit.js';
import { createMessageSender, newMessageId, SendWorker, type MessageSender } from './send.js';
import { channelAddress, channelIdOf, SIP_TEXT_MAX, type SipInbound, type SipMessenger } from './sip-channel.js';
import { Subscriptions, type Outbox } from './subscriptions.js';
import { createWhatsAppClient, type WhatsAppClient } from './whatsapp.js';

export { MessagingError } from './errors.js';
export type { MessageSender, SendInput, SendOwner, TemplateComponent } from './send.js';
export type { SipMessenger, SipInbound } from './sip-channel.js';
export { channelAddress } from './sip-channel.js';
export { signBody } from './inbound.js';

export interface MessagingDeps {
  config: Readonly<Config>;
  /** The shared Redis client; the embedded store (and per-process rate counters) when null. */
  redis: RedisClient | null;
  /** Seals channel access tokens (DATA_ENCRYPTION_KEY). */
  secretBox: SecretBox;
  /** The store; one on `redis` (or memory) when absent. */
  store?: MessagingStore;
  /** The signed callback outbox the subscription events go out on (CallStore); none = no events. */
  outbox?: Outbox | null;
  /** Events were queued: deliver now (CallbackDispatcher.wake). */
  onQueued?: () => void;
  /** The proxy's SIP MESSAGE sender; settable later with {@link Messaging.setSipMessenger}. */
  sip?: SipMessenger | null;
  /** The Cloud API client; one on WHATSAPP_API_BASE_URL when absent. */
  whatsapp?: WhatsAppClient;
  /** The rate limit's windows. @default MESSAGING_RATE_WINDOWS (1000/min, 100k/h, 1M/day) */
  rateWindows?: readonly RateWindow[];
  log?: Logger;
  now?: () => number;
  /** Send queue poll, ms. @default 250 */
  sendPollMs?: number;
}

/** What a verified WhatsApp webhook POST came to. */
export type WebhookResult = { status: 200; outcome: InboundOutcome } | { status: 401 | 503; reason: string };

export interface Messaging extends SipInbound {
  readonly store: MessagingStore;
  readonly channels: Channels;
  readonly conversations: Conversations;
  readonly subscriptions: Subscriptions;
  readonly rateLimiter: RateLimiter;
  /** Record and queue a message (the API's send and the campaigns use it). */
  readonly send: MessageSender;
  getMessage(authId: string, id: string): Promise<MessageRecord>;
  /** Meta's verification GET: the challenge to echo, or null (403). */
  verifyWhatsApp(query: Record<string, unknown>): string | null;
  /** Meta's webhook POST: the raw body and its `X-Hub-Signature-256`. Nothing is recorded unless the signature is right. */
  receiveWhatsApp(raw: Buffer, signature: string | undefined): Promise<WebhookResult>;
  /** The proxy's SIP MESSAGE sender (wired at merge, app.ts). */
  setSipMessenger(m: SipMessenger | null): void;
  /** Start the send worker (every node runs one). */
  start(): void;
  /** Look at the send queue now. */
  wake(): void;
  /** Wait until no send attempt is in flight (tests). */
  idle(): Promise<void>;
  stop(): Promise<void>;
  close(): Promise<void>;
}

/** The parameters of a message.inbound / message.status event (form-encoded by the outbox). */
function eventParams(m: MessageRecord): Record<string, string> {
  const p: Record<string, string> = {
    MessageId: m.id,
    ChannelId: m.channelId,
    ConversationId: m.conversationId,
    Direction: m.direction,
    From: m.from,
    To: m.to,
    Type: m.type,
    Status: m.status,
    Timestamp: m.updatedAt,
  };
  const text = (m.content.text as { body?: unknown } | undefined)?.body;
  if (typeof text === 'string') p.Text = text;
  if (m.providerMessageId !== null) p.ProviderMessageId = m.providerMessageId;
  if (m.error) p.ErrorCode = m.error.code;
  if (m.campaignId !== null) p.CampaignId = m.campaignId;
  return p;
}

export function createMessaging(d: MessagingDeps): Messaging {
  const log = d.log ?? createLogger('silent');
  const now = d.now ?? Date.now;
  const store = d.store ?? (d.redis ? new RedisMessagingStore(d.redis) : new MemoryMessagingStore());
  const channels = new Channels(store, d.secretBox, now);
  const conversations = new Conversations(store);
  const subscriptions = new Subscriptions(store, d.outbox ?? null, d.onQueued ?? (() => undefined), now);
  const windows = d.rateWindows ?? MESSAGING_RATE_WINDOWS;
  const rateLimiter: RateLimiter = d.redis ? new RedisRateLimiter(d.redis, windows) : new MemoryRateLimiter(windows);
  const whatsapp = d.whatsapp ?? createWhatsAppClient(d.config.whatsappApiBaseUrl);
  let sip: SipMessenger | null = d.sip ?? null;

  // Events are signed as the account's callbacks: its SIP domain names its signing secret.
  const domainOf = (authId: string): string => accountSipDomain(authId, d.config.sipDomain);
  const emit = async (m: MessageRecord, event: 'message.inbound' | 'message.status'): Promise<void> => {
    try {
      await subscriptions.emit(m.authId, domainOf(m.authId), event, eventParams(m));
    } catch (err) {
      log.warn({ messageId: m.id, event, err: err instanceof Error ? err.message : String(err) }, 'messaging: event not queued');
    }
  };
  const onStatus = (m: MessageRecord): Promise<void> => emit(m, 'message.status');
  const onInbound = (m: MessageRecord): Promise<void> => emit(m, 'message.inbound');

  const worker = new SendWorker({ store, channels, whatsapp, sip: () => sip, log, now, onStatus, pollMs: d.sendPollMs });
  const send = createMessageSender({ store, channels, conversations, now, onQueued: () => worker.wake() });

  return {
    store,
    channels,
    conversations,
    subscriptions,
    rateLimiter,
    send,
    async getMessage(authId, id) {
      const m = await store.getMessage(authId, id);
      if (!m) throw new MessagingError('not_found', `No message ${id} on this account.`, 'id', 'message_not_found');
      return m;
    },
    verifyWhatsApp: (q) => verifyHandshake(q, d.config.whatsappVerifyToken),
    async receiveWhatsApp(raw, signature) {
      const secret = d.config.whatsappAppSecret;
      if (secret === null) return { status: 503, reason: 'WHATSAPP_APP_SECRET is not set: webhooks cannot be verified' };
      if (!signatureValid(raw, signature, secret)) return { status: 401, reason: 'X-Hub-Signature-256 is missing or wrong' };
      let body: unknown;
      try {
        body = JSON.parse(raw.toString('utf8'));
      } catch {
        // Signed but not JSON: answered 200 so Meta does not retry it for days; nothing recorded.
        log.warn('messaging: a signed WhatsApp webhook body is not JSON; ignored');
        return { status: 200, outcome: { messages: 0, duplicates: 0, statuses: 0, ignored: 1 } };
      }
      const outcome = await processWebhook({ store, log, now, onInbound, onStatus }, body);
      log.debug(outcome, 'messaging: WhatsApp webhook');
      return { status: 200, outcome };
    },
    async fromEndpoint(domain, endpointUsername, toChannelUri, body, contentType) {
      const id = channelIdOf(toChannelUri, domain);
      const authId = id === null ? null : await store.channelOwner(id);
      const channel = id !== null && authId !== null ? await store.getChannel(authId, id) : null;
      if (!channel || channel.type !== 'sip' || (channel.domain ?? '').toLowerCase() !== domain.toLowerCase()) return { status: 404 };
      if (contentType !== undefined && !/^text\/plain\b/i.test(contentType.trim())) return { status: 415 };
      const buf = typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
      if (buf.length > SIP_TEXT_MAX) return { status: 413 };
      const at = now();
      const iso = new Date(at).toISOString();
      const m: MessageRecord = {
        id: newMessageId(),
        authId: channel.authId,
        channelId: channel.id,
        conversationId: conversationId(channel.id, endpointUsername),
        direction: 'inbound',
        to: channelAddress(channel),
        from: endpointUsername,
        type: 'text',
        content: { text: { body: buf.toString('utf8') } },
        status: 'received',
        statuses: [{ status: 'received', at: iso }],
        providerMessageId: null,
        error: null,
        campaignId: null,
        attempts: 0,
        inFlight: false,
        version: 0,
        createdAt: iso,
        updatedAt: iso,
      };
      const r = await store.recordMessage(m, { id: m.conversationId, channelId: channel.id, contact: endpointUsername }, at);
      await onInbound(r.message);
      return { status: 200, messageId: r.message.id };
    },
    setSipMessenger(m) {
      sip = m;
    },
    start: () => worker.start(),
    wake: () => worker.wake(),
    idle: () => worker.idle(),
    stop: () => worker.stop(),
    async close() {
      await worker.stop();
      whatsapp.close();
      await store.close();
    },
  };
}

export type { ChannelRecord };
