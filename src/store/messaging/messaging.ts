/**
 * The messaging store service (docs/messaging.md): an account's messaging channels
 * (WhatsApp Cloud API numbers, SIP channels), the messages sent and received on them,
 * the conversations they make up, the account's event subscriptions, and the
 * provider-id index that makes inbound webhooks count once. Two implementations with
 * one contract (test/contract/messaging-store.test.ts): MemoryMessagingStore and
 * RedisMessagingStore.
 *
 * The store checks only what must be atomic: a phone_number_id belongs to one channel
 * of the platform; a message with a provider id (an inbound `wamid`) or an idempotency
 * key is recorded once; a message changes only from the version it was read at
 * (compare-and-set); a queued send is leased to one process at a time. Access tokens
 * reach it sealed by the server's SecretBox, never in the clear.
 */

export type ChannelType = 'whatsapp' | 'sip';

export interface ChannelRecord {
  id: string;
  authId: string;
  type: ChannelType;
  name: string;
  /** WhatsApp: the WhatsApp Business Account id. */
  wabaId: string | null;
  /** WhatsApp: the Cloud API phone number id (unique on the platform). */
  phoneNumberId: string | null;
  /** WhatsApp: the number as shown (`+15550001234`), when given. */
  displayPhoneNumber: string | null;
  /** WhatsApp: the access token sealed (`enc:v1:…`, bound to the channel id). */
  sealedAccessToken: string | null;
  /** SIP: the account's SIP domain the channel answers on (`sip:channel-<id>@<domain>`). */
  domain: string | null;
  createdAt: string;
  updatedAt: string;
}

export type MessageStatus = 'pending' | 'sent' | 'delivered' | 'read' | 'failed' | 'received';
export type MessageType = 'text' | 'template' | 'image' | 'video' | 'audio' | 'document' | 'sticker' | 'location' | 'contacts' | 'interactive' | 'reaction' | 'button' | 'unknown';

/** A status a message reached, in the order it reached them. */
export interface StatusChange {
  status: MessageStatus;
  at: string;
  /** failed: the provider's error code (`131047`), or ours (`provider_timeout`, `sip_404`). */
  errorCode?: string;
  errorTitle?: string;
}

export interface MessageRecord {
  id: string;
  authId: string;
  channelId: string;
  conversationId: string;
  direction: 'outbound' | 'inbound';
  /** Outbound: the recipient (E.164, an endpoint username or a sip URI). Inbound: our number / channel address. */
  to: string;
  from: string;
  type: MessageType;
  /** What was sent or received: `{text:{body}}`, `{template:{…}}`, `{image:{link, caption}}` … (the Cloud API's shapes). */
  content: Record<string, unknown>;
  status: MessageStatus;
  statuses: StatusChange[];
  /** The provider's message id (`wamid.…`) once known. */
  providerMessageId: string | null;
  error: { code: string; title: string } | null;
  campaignId: string | null;
  /** Provider attempts made (outbound). */
  attempts: number;
  /** An attempt was started and its outcome is not known yet (set before the request, cleared after). */
  inFlight: boolean;
  /** Compare-and-set version: every replace increments it. */
  version: number;
  createdAt: string;
  updatedAt: string;
}

export interface ConversationRecord {
  id: string;
  authId: string;
  channelId: string;
  /** The other party: an E.164 number (WhatsApp) or an endpoint username (SIP). */
  contact: string;
  createdAt: number;
  lastMessageAt: number;
  /** The last message from the contact (the 24-hour customer-service window starts here); null when none yet. */
  lastInboundAt: number | null;
  messageCount: number;
}

export type SubscriptionEvent = 'message.inbound' | 'message.status';

export interface SubscriptionRecord {
  id: string;
  authId: string;
  url: string;
  events: SubscriptionEvent[];
  description: string;
  createdAt: string;
}

/** A send leased to a worker. */
export interface QueuedSend {
  authId: string;
  messageId: string;
}

export type CreateChannelResult = 'ok' | 'phone_number_id_taken';

/** How a message was recorded: new, or the one already recorded under its provider id / idempotency key. */
export interface RecordResult {
  created: boolean;
  message: MessageRecord;
}

export interface MessagingStore {
  /** Create or replace a channel. A phone_number_id of another channel is refused. */
  putChannel(c: ChannelRecord): Promise<CreateChannelResult>;
  /** A channel of the account, or null. */
  getChannel(authId: string, id: string): Promise<ChannelRecord | null>;
  /** The account of a channel id (any account), or null. */
  channelOwner(id: string): Promise<string | null>;
  /** The channel holding a Cloud API phone_number_id, or null. */
  channelByPhoneNumberId(phoneNumberId: string): Promise<ChannelRecord | null>;
  /** The account's channels, oldest first. */
  listChannels(authId: string): Promise<ChannelRecord[]>;
  /** Delete a channel (its phone_number_id freed); false when there is none. Its messages stay. */
  deleteChannel(authId: string, id: string): Promise<boolean>;

  /**
   * Record a message and count it in its conversation (created on first use: `conv`
   * gives its id, channel and contact). Once only: when `m.providerMessageId` (inbound)
   * or `idempotencyKey` is already recorded on this account, nothing is written and
   * the recorded message is returned with `created: false`.
   */
  recordMessage(m: MessageRecord, conv: { id: string; channelId: string; contact: string }, at: number, idempotencyKey?: string): Promise<RecordResult>;
  getMessage(authId: string, id: string): Promise<MessageRecord | null>;
  /** Replace a message if it is still at `prev.version` (the stored copy gets `version + 1`); false when it changed meanwhile. */
  replaceMessage(prev: MessageRecord, next: MessageRecord): Promise<boolean>;
  /** Link a provider message id to a message of the account (status webhooks find it by it). */
  linkProviderId(authId: string, providerMessageId: string, messageId: string): Promise<void>;
  messageByProviderId(authId: string, providerMessageId: string): Promise<MessageRecord | null>;

  getConversation(authId: string, id: string): Promise<ConversationRecord | null>;
  /** The account's conversations, most recent message first. */
  listConversations(authId: string, page: { limit: number; offset: number }): Promise<{ total: number; items: ConversationRecord[] }>;
  /** A conversation's messages, oldest first (the newest `limit`). */
  conversationMessages(authId: string, conversationId: string, limit: number): Promise<MessageRecord[]>;

  putSubscription(s: SubscriptionRecord): Promise<void>;
  getSubscription(authId: string, id: string): Promise<SubscriptionRecord | null>;
  listSubscriptions(authId: string): Promise<SubscriptionRecord[]>;
  deleteSubscription(authId: string, id: string): Promise<boolean>;

  /** Queue a send, due at `at` (ms). */
  queueSend(q: QueuedSend, at: number): Promise<void>;
  /** Up to `max` sends due by `now`, each leased for `leaseMs` (due again after it unless finished). */
  claimSends(now: number, max: number, leaseMs: number): Promise<QueuedSend[]>;
  /** Finished: out of the queue. */
  finishSend(q: QueuedSend): Promise<void>;
  close(): Promise<void>;
}

/** How far each status is along; a change goes only forward (read and failed are both final). */
export const STATUS_RANK: Readonly<Record<MessageStatus, number>> = { pending: 0, received: 0, sent: 1, delivered: 2, read: 3, failed: 3 };

/** The conversation id of a channel and contact (the same on every node). */
export function conversationKey(channelId: string, contact: string): string {
  return `${channelId}\u0000${contact.toLowerCase()}`;
}
