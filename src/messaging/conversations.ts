/**
 * Conversations (docs/messaging.md "Conversations"): one per channel and contact (an
 * E.164 number on WhatsApp, an endpoint username on a SIP channel), made on the first
 * message either way, with the time of the contact's last message.
 *
 * WhatsApp's customer-service window: a business may send free-form messages (text,
 * media) only within 24 hours of the contact's last message to it; outside it, and for
 * the first message to a contact, only approved templates. The window is enforced here,
 * before anything reaches the provider (which would refuse with error 131047 anyway).
 */
import { createHash } from 'node:crypto';
import { conversationKey, type ConversationRecord, type MessageRecord, type MessagingStore } from '../store/messaging/messaging.js';
import { MessagingError } from './errors.js';

/** WhatsApp's customer-service window: 24 hours from the contact's last message. */
export const WINDOW_MS = 24 * 60 * 60 * 1000;

/** The rule a refused free-form send names (400 `outside_customer_service_window`). */
export const WINDOW_RULE = 'outside_customer_service_window';

/** The conversation id of a channel and contact: the same on every node, `cv_` + 24 hex. */
export function conversationId(channelId: string, contact: string): string {
  return `cv_${createHash('sha256').update(conversationKey(channelId, contact)).digest('hex').slice(0, 24)}`;
}

/** When the window closes (ms), or null when the contact never wrote. */
export function windowClosesAt(c: ConversationRecord | null): number | null {
  return c?.lastInboundAt != null ? c.lastInboundAt + WINDOW_MS : null;
}

/** Whether free-form messages may be sent now. */
export function windowOpen(c: ConversationRecord | null, now: number): boolean {
  const closes = windowClosesAt(c);
  return closes !== null && now < closes;
}

export class Conversations {
  constructor(private readonly store: MessagingStore) {}

  list(authId: string, page: { limit: number; offset: number }): Promise<{ total: number; items: ConversationRecord[] }> {
    return this.store.listConversations(authId, page);
  }

  async get(authId: string, id: string, limit = 100): Promise<{ conversation: ConversationRecord; messages: MessageRecord[] }> {
    const conversation = await this.store.getConversation(authId, id);
    if (!conversation) throw new MessagingError('not_found', `No conversation ${id} on this account.`, 'id', 'conversation_not_found');
    return { conversation, messages: await this.store.conversationMessages(authId, id, limit) };
  }

  /** Refuse a free-form WhatsApp message outside the window (templates always pass). */
  async checkWindow(authId: string, channelId: string, contact: string, type: string, now: number): Promise<void> {
    if (type === 'template') return;
    const c = await this.store.getConversation(authId, conversationId(channelId, contact));
    if (windowOpen(c, now)) return;
    const why = c?.lastInboundAt != null ? `the last message from ${contact} was more than 24 hours ago` : `${contact} has not written to this channel yet`;
    throw new MessagingError(
      'window',
      `WhatsApp's 24-hour customer-service window is closed (${why}): free-form ${type} messages may be sent only within 24 hours of the contact's last message; send an approved template (type: template) instead.`,
      'type',
      WINDOW_RULE,
    );
  }
}
