/**
 * The WhatsApp webhook (docs/messaging.md "Inbound"): what Meta calls, without account
 * credentials.
 *
 * - `GET …/webhooks/whatsapp?hub.mode=subscribe&hub.verify_token=…&hub.challenge=…`:
 *   the challenge is echoed when the token is WHATSAPP_VERIFY_TOKEN (compared in
 *   constant time), else 403.
 * - `POST`: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256(WHATSAPP_APP_SECRET, raw body)>`
 *   is checked over the bytes as received (never a re-serialised body), in constant
 *   time; a missing or wrong signature is 401 and nothing is recorded. Then every
 *   `entry[].changes[].value` is read: `messages[]` become inbound messages (once: the
 *   provider's `wamid` is their key) and `statuses[]` move outbound messages forward
 *   (once: a status that is not a step forward changes nothing).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { ChannelRecord, MessageRecord, MessageStatus, MessageType, MessagingStore } from '../store/messaging/messaging.js';
import { conversationId } from './conversations.js';
import { changeMessage, newMessageId, withStatus } from './send.js';

/** Compare two strings in constant time (lengths leak; the values do not). */
export function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a, 'utf8');
  const y = Buffer.from(b, 'utf8');
  if (x.length !== y.length) {
    timingSafeEqual(x, x);
    return false;
  }
  return timingSafeEqual(x, y);
}

/** Meta's verification handshake: the challenge to echo, or null (403). */
export function verifyHandshake(q: Record<string, unknown>, verifyToken: string | null): string | null {
  if (verifyToken === null) return null;
  const mode = q['hub.mode'];
  const token = q['hub.verify_token'];
  const challenge = q['hub.challenge'];
  if (mode !== 'subscribe' || typeof token !== 'string' || typeof challenge !== 'string' || challenge === '') return null;
  return safeEqual(token, verifyToken) ? challenge : null;
}

/** Whether `header` is `sha256=<hex HMAC-SHA256(secret, raw)>`. */
export function signatureValid(raw: Buffer, header: string | undefined, secret: string): boolean {
  if (typeof header !== 'string') return false;
  const m = /^sha256=([0-9a-fA-F]{64})$/.exec(header.trim());
  if (!m) return false;
  const want = createHmac('sha256', secret).update(raw).digest();
  return timingSafeEqual(want, Buffer.from(m[1] as string, 'hex'));
}

/** Sign a body as Meta does (tests and the stub). */
export function signBody(raw: Buffer | string, secret: string): string {
  return `sha256=${createHmac('sha256', secret).update(raw).digest('hex')}`;
}

const PROVIDER_STATUSES: ReadonlySet<string> = new Set(['sent', 'delivered', 'read', 'failed']);
const KNOWN_TYPES: ReadonlySet<string> = new Set(['text', 'image', 'video', 'audio', 'document', 'sticker', 'location', 'contacts', 'interactive', 'reaction', 'button']);

export interface InboundDeps {
  store: MessagingStore;
  log: Logger;
  now: () => number;
  /** A new inbound message was recorded (fires `message.inbound`). */
  onInbound: (m: MessageRecord, channel: ChannelRecord) => Promise<void>;
  /** An outbound message moved on (fires `message.status`). */
  onStatus: (m: MessageRecord) => Promise<void>;
}

/** What one webhook POST came to (for logs and tests). */
export interface InboundOutcome {
  messages: number;
  duplicates: number;
  statuses: number;
  ignored: number;
}

type Obj = Record<string, unknown>;
const obj = (v: unknown): Obj | null => (typeof v === 'object' && v !== null && !Array.isArray(v) ? (v as Obj) : null);
const arr = (v: unknown): unknown[] => (Array.isArray(v) ? v : []);
const str = (v: unknown): string | null => (typeof v === 'string' && v !== '' ? v : typeof v === 'number' ? String(v) : null);

/** Seconds since the epoch (Meta's `timestamp`) → ms; `now` when absent or absurd. */
function whenOf(v: unknown, now: number): number {
  const s = Number(str(v));
  return Number.isFinite(s) && s > 1_000_000_000 && s * 1000 < now + 300_000 ? s * 1000 : now;
}

/** Record what a (verified) webhook body reports. */
export async function processWebhook(d: InboundDeps, body: unknown): Promise<InboundOutcome> {
  const out: InboundOutcome = { messages: 0, duplicates: 0, statuses: 0, ignored: 0 };
  for (const entry of arr(obj(body)?.entry)) {
    for (const change of arr(obj(entry)?.changes)) {
      const value = obj(obj(change)?.value);
      const pnid = str(obj(value?.metadata)?.phone_number_id);
      if (!value || pnid === null) continue;
      const channel = await d.store.channelByPhoneNumberId(pnid);
      if (!channel) {
        out.ignored += arr(value.messages).length + arr(value.statuses).length;
        d.log.debug({ phoneNumberId: pnid }, 'messaging: webhook for a phone_number_id that is no channel; ignored');
        continue;
      }
      for (const raw of arr(value.messages)) {
        const r = await inboundMessage(d, channel, obj(raw));
        if (r === 'new') out.messages++;
        else if (r === 'dup') out.duplicates++;
        else out.ignored++;
      }
      for (const raw of arr(value.statuses)) {
        if (await statusUpdate(d, channel, obj(raw))) out.statuses++;
        else out.duplicates++;
      }
    }
  }
  return out;
}

async function inboundMessage(d: InboundDeps, channel: ChannelRecord, msg: Obj | null): Promise<'new' | 'dup' | 'bad'> {
  const wamid = str(msg?.id);
  const from = str(msg?.from);
  if (!msg || wamid === null || from === null || !/^\+?[0-9]{6,15}$/.test(from)) return 'bad';
  const contact = from.startsWith('+') ? from : `+${from}`;
  const now = d.now();
  const at = whenOf(msg.timestamp, now);
  const rawType = str(msg.type) ?? 'unknown';
  const type = (KNOWN_TYPES.has(rawType) ? rawType : 'unknown') as MessageType;
  const iso = new Date(at).toISOString();
  const m: MessageRecord = {
    id: newMessageId(),
    authId: channel.authId,
    channelId: channel.id,
    conversationId: conversationId(channel.id, contact),
    direction: 'inbound',
    to: channel.displayPhoneNumber ?? channel.phoneNumberId ?? '',
    from: contact,
    type,
    content: { [rawType]: msg[rawType] ?? null, ...(msg.context !== undefined ? { context: msg.context } : {}) },
    status: 'received',
    statuses: [{ status: 'received', at: iso }],
    providerMessageId: wamid,
    error: null,
    campaignId: null,
    attempts: 0,
    inFlight: false,
    version: 0,
    createdAt: iso,
    updatedAt: iso,
  };
  const r = await d.store.recordMessage(m, { id: m.conversationId, channelId: channel.id, contact }, at);
  if (!r.created) return 'dup';
  await d.onInbound(r.message, channel);
  return 'new';
}

async function statusUpdate(d: InboundDeps, channel: ChannelRecord, st: Obj | null): Promise<boolean> {
  const wamid = str(st?.id);
  const status = str(st?.status);
  if (!st || wamid === null || status === null || !PROVIDER_STATUSES.has(status)) return false;
  let m = await d.store.messageByProviderId(channel.authId, wamid);
  if (!m) {
    // Our id, echoed: the status overtook the send's own write, or the send timed out after Meta took it.
    const ours = str(st.biz_opaque_callback_data);
    const cand = ours !== null && /^msg_[0-9a-f]{24}$/.test(ours) ? await d.store.getMessage(channel.authId, ours) : null;
    if (!cand || cand.direction !== 'outbound' || cand.channelId !== channel.id || (cand.providerMessageId !== null && cand.providerMessageId !== wamid)) {
      d.log.debug({ channel: channel.id }, 'messaging: status for a message that is not ours; ignored');
      return false;
    }
    await d.store.linkProviderId(channel.authId, wamid, cand.id);
    m = cand;
  }
  const e = obj(arr(st.errors)[0]);
  const err = status === 'failed' ? { code: str(e?.code) ?? 'unknown', title: (str(e?.title) ?? str(e?.message) ?? 'Failed.').slice(0, 300) } : undefined;
  const at = whenOf(st.timestamp, d.now());
  const r = await changeMessage(d.store, m, (x) => {
    const n = withStatus(x, status as MessageStatus, at, err);
    return n ? { ...n, providerMessageId: x.providerMessageId ?? wamid } : null;
  });
  if (r.changed) await d.onStatus(r.m);
  return r.changed;
}
