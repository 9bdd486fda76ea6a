import type {
  ChannelRecord,
  ConversationRecord,
  CreateChannelResult,
  MessageRecord,
  MessagingStore,
  QueuedSend,
  RecordResult,
  SubscriptionRecord,
} from './messaging.js';

const copy = <T>(v: T): T => structuredClone(v);

interface Account {
  channels: Map<string, ChannelRecord>;
  messages: Map<string, MessageRecord>;
  conversations: Map<string, ConversationRecord>;
  /** conversation id → message ids, oldest first */
  convMessages: Map<string, string[]>;
  subscriptions: Map<string, SubscriptionRecord>;
  providerIds: Map<string, string>;
  idempotency: Map<string, string>;
}

/** The embedded messaging store: Maps per account, gone at exit. */
export class MemoryMessagingStore implements MessagingStore {
  readonly #accounts = new Map<string, Account>();
  readonly #channelOwner = new Map<string, string>();
  readonly #phoneNumberIds = new Map<string, { authId: string; id: string }>();
  /** `authId messageId` → due ms */
  readonly #queue = new Map<string, number>();

  #acct(authId: string): Account {
    let a = this.#accounts.get(authId);
    if (!a) {
      a = { channels: new Map(), messages: new Map(), conversations: new Map(), convMessages: new Map(), subscriptions: new Map(), providerIds: new Map(), idempotency: new Map() };
      this.#accounts.set(authId, a);
    }
    return a;
  }

  async putChannel(c: ChannelRecord): Promise<CreateChannelResult> {
    const a = this.#acct(c.authId);
    if (c.phoneNumberId !== null) {
      const holder = this.#phoneNumberIds.get(c.phoneNumberId);
      if (holder && holder.id !== c.id) return 'phone_number_id_taken';
    }
    const old = a.channels.get(c.id);
    if (old?.phoneNumberId && old.phoneNumberId !== c.phoneNumberId) this.#phoneNumberIds.delete(old.phoneNumberId);
    if (c.phoneNumberId !== null) this.#phoneNumberIds.set(c.phoneNumberId, { authId: c.authId, id: c.id });
    a.channels.set(c.id, copy(c));
    this.#channelOwner.set(c.id, c.authId);
    return 'ok';
  }

  async getChannel(authId: string, id: string): Promise<ChannelRecord | null> {
    const c = this.#accounts.get(authId)?.channels.get(id);
    return c ? copy(c) : null;
  }

  async channelOwner(id: string): Promise<string | null> {
    return this.#channelOwner.get(id) ?? null;
  }

  async channelByPhoneNumberId(phoneNumberId: string): Promise<ChannelRecord | null> {
    const h = this.#phoneNumberIds.get(phoneNumberId);
    return h ? this.getChannel(h.authId, h.id) : null;
  }

  async listChannels(authId: string): Promise<ChannelRecord[]> {
    return [...(this.#accounts.get(authId)?.channels.values() ?? [])].map(copy);
  }

  async deleteChannel(authId: string, id: string): Promise<boolean> {
    const a = this.#accounts.get(authId);
    const c = a?.channels.get(id);
    if (!a || !c) return false;
    a.channels.delete(id);
    this.#channelOwner.delete(id);
    if (c.phoneNumberId !== null && this.#phoneNumberIds.get(c.phoneNumberId)?.id === id) this.#phoneNumberIds.delete(c.phoneNumberId);
    return true;
  }

  async recordMessage(m: MessageRecord, conv: { id: string; channelId: string; contact: string }, at: number, idempotencyKey?: string): Promise<RecordResult> {
    const a = this.#acct(m.authId);
    const prior = (m.providerMessageId !== null ? a.providerIds.get(m.providerMessageId) : undefined) ?? (idempotencyKey !== undefined ? a.idempotency.get(idempotencyKey) : undefined);
    const existing = prior !== undefined ? a.messages.get(prior) : undefined;
    if (existing) return { created: false, message: copy(existing) };
    a.messages.set(m.id, copy(m));
    if (m.providerMessageId !== null) a.providerIds.set(m.providerMessageId, m.id);
    if (idempotencyKey !== undefined) a.idempotency.set(idempotencyKey, m.id);
    let c = a.conversations.get(conv.id);
    if (!c) {
      c = { id: conv.id, authId: m.authId, channelId: conv.channelId, contact: conv.contact, createdAt: at, lastMessageAt: at, lastInboundAt: null, messageCount: 0 };
      a.conversations.set(conv.id, c);
    }
    c.lastMessageAt = Math.max(c.lastMessageAt, at);
    if (m.direction === 'inbound') c.lastInboundAt = Math.max(c.lastInboundAt ?? 0, at);
    c.messageCount++;
    const list = a.convMessages.get(conv.id) ?? [];
    list.push(m.id);
    a.convMessages.set(conv.id, list);
    return { created: true, message: copy(m) };
  }

  async getMessage(authId: string, id: string): Promise<MessageRecord | null> {
    const m = this.#accounts.get(authId)?.messages.get(id);
    return m ? copy(m) : null;
  }

  async replaceMessage(prev: MessageRecord, next: MessageRecord): Promise<boolean> {
    const a = this.#accounts.get(prev.authId);
    const cur = a?.messages.get(prev.id);
    if (!a || !cur || cur.version !== prev.version) return false;
    a.messages.set(prev.id, copy({ ...next, version: prev.version + 1 }));
    return true;
  }

  async linkProviderId(authId: string, providerMessageId: string, messageId: string): Promise<void> {
    this.#acct(authId).providerIds.set(providerMessageId, messageId);
  }

  async messageByProviderId(authId: string, providerMessageId: string): Promise<MessageRecord | null> {
    const id = this.#accounts.get(authId)?.providerIds.get(providerMessageId);
    return id === undefined ? null : this.getMessage(authId, id);
  }

  async getConversation(authId: string, id: string): Promise<ConversationRecord | null> {
    const c = this.#accounts.get(authId)?.conversations.get(id);
    return c ? copy(c) : null;
  }

  async listConversations(authId: string, page: { limit: number; offset: number }): Promise<{ total: number; items: ConversationRecord[] }> {
    const all = [...(this.#accounts.get(authId)?.conversations.values() ?? [])].sort((x, y) => y.lastMessageAt - x.lastMessageAt);
    return { total: all.length, items: all.slice(page.offset, page.offset + page.limit).map(copy) };
  }

  async conversationMessages(authId: string, conversationId: string, limit: number): Promise<MessageRecord[]> {
    const a = this.#accounts.get(authId);
    const ids = a?.convMessages.get(conversationId) ?? [];
    return ids
      .slice(-limit)
      .map((id) => a?.messages.get(id))
      .filter((m): m is MessageRecord => m !== undefined)
      .map(copy);
  }

  async putSubscription(s: SubscriptionRecord): Promise<void> {
    this.#acct(s.authId).subscriptions.set(s.id, copy(s));
  }

  async getSubscription(authId: string, id: string): Promise<SubscriptionRecord | null> {
    const s = this.#accounts.get(authId)?.subscriptions.get(id);
    return s ? copy(s) : null;
  }

  async listSubscriptions(authId: string): Promise<SubscriptionRecord[]> {
    return [...(this.#accounts.get(authId)?.subscriptions.values() ?? [])].map(copy);
  }

  async deleteSubscription(authId: string, id: string): Promise<boolean> {
    return this.#accounts.get(authId)?.subscriptions.delete(id) ?? false;
  }

  async queueSend(q: QueuedSend, at: number): Promise<void> {
    this.#queue.set(`${q.authId} ${q.messageId}`, at);
  }

  async claimSends(now: number, max: number, leaseMs: number): Promise<QueuedSend[]> {
    const out: QueuedSend[] = [];
    const due = [...this.#queue].filter(([, at]) => at <= now).sort((x, y) => x[1] - y[1]);
    for (const [k] of due.slice(0, max)) {
      this.#queue.set(k, now + leaseMs);
      const [authId = '', messageId = ''] = k.split(' ');
      out.push({ authId, messageId });
    }
    return out;
  }

  async finishSend(q: QueuedSend): Promise<void> {
    this.#queue.delete(`${q.authId} ${q.messageId}`);
  }

  async close(): Promise<void> {
    // Kept: a closed embedded store is simply no longer used.
  }
}
