/**
 * Messaging channels (docs/messaging.md "Channels"): where messages leave from and
 * arrive at. A `whatsapp` channel is one WhatsApp Cloud API number (`waba_id`,
 * `phone_number_id` and its `access_token`, which is write-only and kept sealed with
 * DATA_ENCRYPTION_KEY, bound to the channel id); a `sip` channel talks to the account's
 * own SIP endpoints by SIP MESSAGE from the address `sip:channel-<id>@<account domain>`.
 */
import { randomBytes } from 'node:crypto';
import type { SecretBox } from '../security/secret-box.js';
import type { ChannelRecord, ChannelType, MessagingStore } from '../store/messaging/messaging.js';
import { MessagingError } from './errors.js';

export interface ChannelInput {
  type?: ChannelType;
  name?: string;
  wabaId?: string;
  phoneNumberId?: string;
  displayPhoneNumber?: string | null;
  accessToken?: string;
}

/** What an access token is sealed to: it opens for this channel only. */
export function tokenContext(channelId: string): string {
  return `messaging_channel_access_token:${channelId}`;
}

/** A new channel id: `ch_` and 20 lowercase letters/digits (fits a SIP user part). */
export function newChannelId(): string {
  return `ch_${randomBytes(10).toString('hex')}`;
}

const DIGITS = /^[0-9]{1,32}$/;

export class Channels {
  constructor(
    private readonly store: MessagingStore,
    private readonly box: SecretBox,
    private readonly now: () => number,
  ) {}

  async create(authId: string, domain: string, input: ChannelInput): Promise<ChannelRecord> {
    const type = input.type ?? 'whatsapp';
    const at = new Date(this.now()).toISOString();
    const id = newChannelId();
    const c: ChannelRecord = {
      id,
      authId,
      type,
      name: input.name ?? '',
      wabaId: null,
      phoneNumberId: null,
      displayPhoneNumber: null,
      sealedAccessToken: null,
      domain: type === 'sip' ? domain : null,
      createdAt: at,
      updatedAt: at,
    };
    if (type === 'whatsapp') {
      for (const [k, f] of [['wabaId', 'waba_id'], ['phoneNumberId', 'phone_number_id'], ['accessToken', 'access_token']] as const) {
        if (input[k] === undefined || input[k] === '') throw new MessagingError('invalid', 'is required for a whatsapp channel', f);
      }
      this.#whatsAppFields(c, input);
    } else if (input.wabaId !== undefined || input.phoneNumberId !== undefined || input.accessToken !== undefined) {
      throw new MessagingError('invalid', 'is for whatsapp channels only', input.accessToken !== undefined ? 'access_token' : input.wabaId !== undefined ? 'waba_id' : 'phone_number_id');
    }
    await this.#put(c);
    return c;
  }

  async update(authId: string, id: string, input: ChannelInput): Promise<ChannelRecord> {
    const c = await this.get(authId, id);
    if (input.type !== undefined && input.type !== c.type) throw new MessagingError('invalid', 'cannot be changed (delete the channel and create another)', 'type');
    if (c.type === 'sip' && (input.wabaId !== undefined || input.phoneNumberId !== undefined || input.accessToken !== undefined)) {
      throw new MessagingError('invalid', 'is for whatsapp channels only', 'access_token');
    }
    const next: ChannelRecord = { ...c, updatedAt: new Date(this.now()).toISOString() };
    if (input.name !== undefined) next.name = input.name;
    if (c.type === 'whatsapp') this.#whatsAppFields(next, input);
    await this.#put(next);
    return next;
  }

  #whatsAppFields(c: ChannelRecord, input: ChannelInput): void {
    if (input.phoneNumberId !== undefined) {
      if (!DIGITS.test(input.phoneNumberId)) throw new MessagingError('invalid', 'must be the Cloud API phone number id (digits)', 'phone_number_id');
      c.phoneNumberId = input.phoneNumberId;
    }
    if (input.wabaId !== undefined) {
      if (!DIGITS.test(input.wabaId)) throw new MessagingError('invalid', 'must be the WhatsApp Business Account id (digits)', 'waba_id');
      c.wabaId = input.wabaId;
    }
    if (input.displayPhoneNumber !== undefined) c.displayPhoneNumber = input.displayPhoneNumber;
    if (input.accessToken !== undefined) c.sealedAccessToken = this.box.encrypt(input.accessToken, tokenContext(c.id));
  }

  async #put(c: ChannelRecord): Promise<void> {
    const r = await this.store.putChannel(c);
    if (r === 'phone_number_id_taken') throw new MessagingError('conflict', 'This phone_number_id is already a channel.', 'phone_number_id', 'phone_number_id_taken');
  }

  async get(authId: string, id: string): Promise<ChannelRecord> {
    const c = await this.store.getChannel(authId, id);
    if (!c) throw new MessagingError('not_found', `No channel ${id} on this account.`, 'channel_id', 'channel_not_found');
    return c;
  }

  list(authId: string): Promise<ChannelRecord[]> {
    return this.store.listChannels(authId);
  }

  async delete(authId: string, id: string): Promise<void> {
    if (!(await this.store.deleteChannel(authId, id))) throw new MessagingError('not_found', `No channel ${id} on this account.`, 'channel_id', 'channel_not_found');
  }

  /** The channel's access token in the clear (for the provider request only). */
  accessToken(c: ChannelRecord): string | null {
    return c.sealedAccessToken === null ? null : this.box.decrypt(c.sealedAccessToken, tokenContext(c.id));
  }
}
