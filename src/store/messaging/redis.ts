import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { jsonObject } from '../redis/json.js';
import { LuaScript } from '../redis/script.js';
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

/**
 * Messaging on Redis (single server, Sentinel master or Cluster). What belongs to one
 * account shares the hash tag `{a:<auth_id>}`, so recording a message and counting it in
 * its conversation is one script in one slot:
 *
 *     <p>msg:{a:<auth>}:ch            hash  channel id → JSON
 *     <p>msg:{a:<auth>}:m             hash  message id → JSON (compare-and-set on `version`)
 *     <p>msg:{a:<auth>}:pid           hash  provider message id (wamid) → message id
 *     <p>msg:{a:<auth>}:idem          hash  idempotency key → message id
 *     <p>msg:{a:<auth>}:cv            hash  conversation id → JSON
 *     <p>msg:{a:<auth>}:cvz           zset  conversation ids by last message (ms)
 *     <p>msg:{a:<auth>}:cvm:<cv id>   zset  message ids of a conversation by arrival (seq)
 *     <p>msg:{a:<auth>}:seq           counter
 *     <p>msg:{a:<auth>}:sub           hash  subscription id → JSON
 *
 * and three platform-wide keys, each written by single-key commands or scripts:
 *
 *     <p>msg:chowner                  hash  channel id → auth id
 *     <p>msg:pnid                     hash  phone_number_id → "<auth id> <channel id>"
 *     <p>msg:sendq                    zset  "<auth id> <message id>" → due (ms), leased by claim
 */

/** KEYS: pnid. ARGV: phoneNumberId, "auth id". Reply: 'ok' | 'taken'. */
const CLAIM_PNID = new LuaScript(`
local h = redis.call('HGET', KEYS[1], ARGV[1])
if h and h ~= ARGV[2] then return 'taken' end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 'ok'`);

/** KEYS: pnid. ARGV: phoneNumberId, "auth id". Deletes only its own claim. */
const RELEASE_PNID = new LuaScript(`
if redis.call('HGET', KEYS[1], ARGV[1]) == ARGV[2] then redis.call('HDEL', KEYS[1], ARGV[1]) end
return 1`);

/**
 * KEYS: base (`msg:{a:<auth>}`). ARGV: message id, message JSON, provider id or '',
 * idempotency key or '', conversation id, channel id, contact, at (ms), inbound 1/0, auth id.
 * Reply: ['new', json] | ['dup', json].
 */
const RECORD = new LuaScript(`
local b = KEYS[1]
local prior = false
if ARGV[3] ~= '' then prior = redis.call('HGET', b .. ':pid', ARGV[3]) end
if not prior and ARGV[4] ~= '' then prior = redis.call('HGET', b .. ':idem', ARGV[4]) end
if prior then
  local m = redis.call('HGET', b .. ':m', prior)
  if m then return {'dup', m} end
end
redis.call('HSET', b .. ':m', ARGV[1], ARGV[2])
if ARGV[3] ~= '' then redis.call('HSET', b .. ':pid', ARGV[3], ARGV[1]) end
if ARGV[4] ~= '' then redis.call('HSET', b .. ':idem', ARGV[4], ARGV[1]) end
local at = tonumber(ARGV[8])
local raw = redis.call('HGET', b .. ':cv', ARGV[5])
local c
if raw then c = cjson.decode(raw) else
  c = {id = ARGV[5], authId = ARGV[10], channelId = ARGV[6], contact = ARGV[7], createdAt = at, lastMessageAt = at, lastInboundAt = cjson.null, messageCount = 0}
end
if at > c.lastMessageAt then c.lastMessageAt = at end
if ARGV[9] == '1' then
  if c.lastInboundAt == cjson.null or at > c.lastInboundAt then c.lastInboundAt = at end
end
c.messageCount = c.messageCount + 1
redis.call('HSET', b .. ':cv', ARGV[5], cjson.encode(c))
redis.call('ZADD', b .. ':cvz', c.lastMessageAt, ARGV[5])
local s = redis.call('INCR', b .. ':seq')
redis.call('ZADD', b .. ':cvm:' .. ARGV[5], s, ARGV[1])
return {'new', ARGV[2]}`);

/** KEYS: base. ARGV: id, expected version, new JSON. */
const REPLACE = new LuaScript(`
local cur = redis.call('HGET', KEYS[1] .. ':m', ARGV[1])
if not cur then return 0 end
if tostring(cjson.decode(cur).version) ~= ARGV[2] then return 0 end
redis.call('HSET', KEYS[1] .. ':m', ARGV[1], ARGV[3])
return 1`);

/** KEYS: sendq. ARGV: now, lease ms, max. */
const CLAIM = new LuaScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
local until_ = tonumber(ARGV[1]) + tonumber(ARGV[2])
for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], until_, m) end
return due`);

function parse<T>(text: unknown): T | null {
  return jsonObject(text) as T | null;
}

export class RedisMessagingStore extends RedisBacked implements MessagingStore {
  readonly #p: string;

  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
    this.#p = `${this.prefix}msg:`;
  }

  #b(authId: string): string {
    return `${this.#p}{a:${authId}}`;
  }

  async putChannel(c: ChannelRecord): Promise<CreateChannelResult> {
    const b = this.#b(c.authId);
    const old = parse<ChannelRecord>(await this.guard('channel get', () => this.redis.hget(`${b}:ch`, c.id)));
    const holder = `${c.authId} ${c.id}`;
    if (c.phoneNumberId !== null) {
      const r = await this.guard('channel claim', () => this.evalScript(CLAIM_PNID, [`${this.#p}pnid`], [c.phoneNumberId as string, holder]));
      if (r === 'taken') return 'phone_number_id_taken';
    }
    await this.guard('channel put', () => this.redis.hset(`${b}:ch`, c.id, JSON.stringify(c)));
    await this.guard('channel put', () => this.redis.hset(`${this.#p}chowner`, c.id, c.authId));
    if (old?.phoneNumberId && old.phoneNumberId !== c.phoneNumberId) {
      await this.guard('channel release', () => this.evalScript(RELEASE_PNID, [`${this.#p}pnid`], [old.phoneNumberId as string, holder]));
    }
    return 'ok';
  }

  async getChannel(authId: string, id: string): Promise<ChannelRecord | null> {
    return parse<ChannelRecord>(await this.guard('channel get', () => this.redis.hget(`${this.#b(authId)}:ch`, id)));
  }

  async channelOwner(id: string): Promise<string | null> {
    return this.guard('channel owner', () => this.redis.hget(`${this.#p}chowner`, id));
  }

  async channelByPhoneNumberId(phoneNumberId: string): Promise<ChannelRecord | null> {
    const h = await this.guard('channel by number', () => this.redis.hget(`${this.#p}pnid`, phoneNumberId));
    if (h === null) return null;
    const [authId = '', id = ''] = h.split(' ');
    return this.getChannel(authId, id);
  }

  async listChannels(authId: string): Promise<ChannelRecord[]> {
    const all = await this.guard('channel list', () => this.redis.hvals(`${this.#b(authId)}:ch`));
    return all
      .map((v) => parse<ChannelRecord>(v))
      .filter((c): c is ChannelRecord => c !== null)
      .sort((x, y) => (x.createdAt < y.createdAt ? -1 : x.createdAt > y.createdAt ? 1 : x.id < y.id ? -1 : 1));
  }

  async deleteChannel(authId: string, id: string): Promise<boolean> {
    const c = await this.getChannel(authId, id);
    if (!c) return false;
    const n = await this.guard('channel delete', () => this.redis.hdel(`${this.#b(authId)}:ch`, id));
    await this.guard('channel delete', () => this.redis.hdel(`${this.#p}chowner`, id));
    if (c.phoneNumberId !== null) {
      await this.guard('channel release', () => this.evalScript(RELEASE_PNID, [`${this.#p}pnid`], [c.phoneNumberId as string, `${authId} ${id}`]));
    }
    return n === 1;
  }

  async recordMessage(m: MessageRecord, conv: { id: string; channelId: string; contact: string }, at: number, idempotencyKey?: string): Promise<RecordResult> {
    const r = (await this.guard('message record', () =>
      this.evalScript(RECORD, [this.#b(m.authId)], [m.id, JSON.stringify(m), m.providerMessageId ?? '', idempotencyKey ?? '', conv.id, conv.channelId, conv.contact, at, m.direction === 'inbound' ? 1 : 0, m.authId]),
    )) as [string, string];
    const message = parse<MessageRecord>(r[1]);
    if (!message) throw new Error('message record: unreadable reply');
    return { created: r[0] === 'new', message };
  }

  async getMessage(authId: string, id: string): Promise<MessageRecord | null> {
    return parse<MessageRecord>(await this.guard('message get', () => this.redis.hget(`${this.#b(authId)}:m`, id)));
  }

  async replaceMessage(prev: MessageRecord, next: MessageRecord): Promise<boolean> {
    const json = JSON.stringify({ ...next, version: prev.version + 1 });
    return (await this.guard('message replace', () => this.evalScript(REPLACE, [this.#b(prev.authId)], [prev.id, String(prev.version), json]))) === 1;
  }

  async linkProviderId(authId: string, providerMessageId: string, messageId: string): Promise<void> {
    await this.guard('message link', () => this.redis.hset(`${this.#b(authId)}:pid`, providerMessageId, messageId));
  }

  async messageByProviderId(authId: string, providerMessageId: string): Promise<MessageRecord | null> {
    const id = await this.guard('message by provider id', () => this.redis.hget(`${this.#b(authId)}:pid`, providerMessageId));
    return id === null ? null : this.getMessage(authId, id);
  }

  async getConversation(authId: string, id: string): Promise<ConversationRecord | null> {
    return parse<ConversationRecord>(await this.guard('conversation get', () => this.redis.hget(`${this.#b(authId)}:cv`, id)));
  }

  async listConversations(authId: string, page: { limit: number; offset: number }): Promise<{ total: number; items: ConversationRecord[] }> {
    const b = this.#b(authId);
    const total = await this.guard('conversation list', () => this.redis.zcard(`${b}:cvz`));
    const ids = await this.guard('conversation list', () => this.redis.zrevrange(`${b}:cvz`, page.offset, page.offset + page.limit - 1));
    if (ids.length === 0) return { total, items: [] };
    const vals = await this.guard('conversation list', () => this.redis.hmget(`${b}:cv`, ...ids));
    return { total, items: vals.map((v) => parse<ConversationRecord>(v)).filter((c): c is ConversationRecord => c !== null) };
  }

  async conversationMessages(authId: string, conversationId: string, limit: number): Promise<MessageRecord[]> {
    const b = this.#b(authId);
    const ids = await this.guard('conversation messages', () => this.redis.zrange(`${b}:cvm:${conversationId}`, -limit, -1));
    if (ids.length === 0) return [];
    const vals = await this.guard('conversation messages', () => this.redis.hmget(`${b}:m`, ...ids));
    return vals.map((v) => parse<MessageRecord>(v)).filter((m): m is MessageRecord => m !== null);
  }

  async putSubscription(s: SubscriptionRecord): Promise<void> {
    await this.guard('subscription put', () => this.redis.hset(`${this.#b(s.authId)}:sub`, s.id, JSON.stringify(s)));
  }

  async getSubscription(authId: string, id: string): Promise<SubscriptionRecord | null> {
    return parse<SubscriptionRecord>(await this.guard('subscription get', () => this.redis.hget(`${this.#b(authId)}:sub`, id)));
  }

  async listSubscriptions(authId: string): Promise<SubscriptionRecord[]> {
    const all = await this.guard('subscription list', () => this.redis.hvals(`${this.#b(authId)}:sub`));
    return all
      .map((v) => parse<SubscriptionRecord>(v))
      .filter((s): s is SubscriptionRecord => s !== null)
      .sort((x, y) => (x.createdAt < y.createdAt ? -1 : x.createdAt > y.createdAt ? 1 : x.id < y.id ? -1 : 1));
  }

  async deleteSubscription(authId: string, id: string): Promise<boolean> {
    return (await this.guard('subscription delete', () => this.redis.hdel(`${this.#b(authId)}:sub`, id))) === 1;
  }

  async queueSend(q: QueuedSend, at: number): Promise<void> {
    await this.guard('send queue', () => this.redis.zadd(`${this.#p}sendq`, at, `${q.authId} ${q.messageId}`));
  }

  async claimSends(now: number, max: number, leaseMs: number): Promise<QueuedSend[]> {
    const due = (await this.guard('send claim', () => this.evalScript(CLAIM, [`${this.#p}sendq`], [now, leaseMs, max]))) as string[];
    return due.map((k) => {
      const [authId = '', messageId = ''] = k.split(' ');
      return { authId, messageId };
    });
  }

  async finishSend(q: QueuedSend): Promise<void> {
    await this.guard('send finish', () => this.redis.zrem(`${this.#p}sendq`, `${q.authId} ${q.messageId}`));
  }
}
