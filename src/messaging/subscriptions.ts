/**
 * Event subscriptions (docs/messaging.md "Webhooks"): an account's HTTPS URLs for
 * `message.inbound` and `message.status`. Each event is put in the account's signed
 * callback outbox (docs/callbacks.md: HTTPS only, retried, dead-lettered, one delivery
 * at a time per callback) and goes out form-encoded, signed with the account's callback
 * signing secret in `X-Webhook-Signature` (and `X-Sipedge-Signature`, the same value)
 * over `<X-Sipedge-Timestamp>.<body>`.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { OutboxItem } from '../store/calls/calls.js';
import type { MessagingStore, SubscriptionEvent, SubscriptionRecord } from '../store/messaging/messaging.js';
import { MessagingError } from './errors.js';

export const SUBSCRIPTION_EVENTS: readonly SubscriptionEvent[] = ['message.inbound', 'message.status'];

/** The header the messaging webhooks carry their signature in (besides the callbacks' own). */
export const WEBHOOK_SIGNATURE_HEADER = 'x-webhook-signature';

/** Where events are queued: the callback outbox (CallStore.enqueue). */
export interface Outbox {
  enqueue(item: OutboxItem): Promise<void>;
}

export interface SubscriptionInput {
  url: string;
  events?: SubscriptionEvent[];
  description?: string;
}

export class Subscriptions {
  constructor(
    private readonly store: MessagingStore,
    private readonly outbox: Outbox | null,
    private readonly onQueued: () => void,
    private readonly now: () => number,
  ) {}

  async create(authId: string, input: SubscriptionInput): Promise<SubscriptionRecord> {
    let u: URL;
    try {
      u = new URL(input.url);
    } catch {
      throw new MessagingError('invalid', 'must be an https:// URL', 'url');
    }
    if (u.protocol !== 'https:') throw new MessagingError('invalid', 'must be an https:// URL', 'url');
    const events = [...new Set(input.events ?? SUBSCRIPTION_EVENTS)];
    for (const e of events) if (!SUBSCRIPTION_EVENTS.includes(e)) throw new MessagingError('invalid', `must be ${SUBSCRIPTION_EVENTS.join(' or ')}`, 'events');
    const s: SubscriptionRecord = { id: `wh_${randomBytes(10).toString('hex')}`, authId, url: input.url, events, description: input.description ?? '', createdAt: new Date(this.now()).toISOString() };
    await this.store.putSubscription(s);
    return s;
  }

  async get(authId: string, id: string): Promise<SubscriptionRecord> {
    const s = await this.store.getSubscription(authId, id);
    if (!s) throw new MessagingError('not_found', `No webhook ${id} on this account.`, 'id', 'webhook_not_found');
    return s;
  }

  list(authId: string): Promise<SubscriptionRecord[]> {
    return this.store.listSubscriptions(authId);
  }

  async delete(authId: string, id: string): Promise<void> {
    if (!(await this.store.deleteSubscription(authId, id))) throw new MessagingError('not_found', `No webhook ${id} on this account.`, 'id', 'webhook_not_found');
  }

  /** Queue `event` for every subscription of the account that wants it; the number queued. */
  async emit(authId: string, domain: string, event: SubscriptionEvent, params: Record<string, string>): Promise<number> {
    if (!this.outbox) return 0;
    const subs = (await this.store.listSubscriptions(authId)).filter((s) => s.events.includes(event));
    for (const s of subs) await this.#queue(s, domain, event, { ...params, Event: event, WebhookId: s.id });
    if (subs.length > 0) this.onQueued();
    return subs.length;
  }

  /** Queue a `webhook.test` event to one subscription; its callback id. */
  async test(authId: string, domain: string, id: string): Promise<string> {
    const s = await this.get(authId, id);
    if (!this.outbox) throw new MessagingError('unavailable', 'Webhook delivery is not running on this server.');
    const cbId = await this.#queue(s, domain, 'webhook.test', { Event: 'webhook.test', WebhookId: s.id, Timestamp: new Date(this.now()).toISOString() });
    this.onQueued();
    return cbId;
  }

  async #queue(s: SubscriptionRecord, domain: string, event: string, params: Record<string, string>): Promise<string> {
    const id = randomUUID();
    await this.outbox?.enqueue({
      id,
      domain,
      authId: s.authId,
      event,
      url: s.url,
      method: 'POST',
      params,
      attempts: 0,
      fallback: null,
      createdAt: this.now(),
      signatureHeader: WEBHOOK_SIGNATURE_HEADER,
    });
    return id;
  }
}
