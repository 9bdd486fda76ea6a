/**
 * One messaging-store contract, three backends: MemoryMessagingStore, and
 * RedisMessagingStore on a real redis-server and on a 3-master Redis Cluster.
 * Channels with a platform-unique phone_number_id, messages recorded once per provider
 * id / idempotency key and counted in their conversation, compare-and-set replaces,
 * subscriptions, and the leased send queue.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../src/store/redis/client.js';
import { MemoryMessagingStore } from '../../src/store/messaging/memory.js';
import { RedisMessagingStore } from '../../src/store/messaging/redis.js';
import type { ChannelRecord, MessageRecord, MessagingStore } from '../../src/store/messaging/messaging.js';
import { redisBackends } from '../support/redis-backends.js';
import { RedisRateLimiter } from '../../src/messaging/rate-limit.js';

const rb = redisBackends();

const kinds: Array<{ name: string; redis: (() => RedisClient) | null; reset(): Promise<void> }> = [
  { name: 'memory', redis: null, reset: async () => {} },
  { name: 'Redis', redis: () => rb.connect(rb.server.url), reset: async () => void (await rb.admin.flushdb()) },
  { name: 'Redis Cluster (3 masters)', redis: () => rb.connectCluster(), reset: () => rb.flushCluster() },
];

const channel = (over: Partial<ChannelRecord> = {}): ChannelRecord => ({
  id: 'ch_00000000000000000001',
  authId: 'MA1',
  type: 'whatsapp',
  name: 'support',
  wabaId: '111',
  phoneNumberId: '222',
  displayPhoneNumber: '+15550001111',
  sealedAccessToken: 'enc:v1:k1:x',
  domain: null,
  createdAt: '2026-01-01T00:00:00.000Z',
  updatedAt: '2026-01-01T00:00:00.000Z',
  ...over,
});

let n = 0;
const message = (over: Partial<MessageRecord> = {}): MessageRecord => {
  n++;
  return {
    id: `msg_${String(n).padStart(24, '0')}`,
    authId: 'MA1',
    channelId: 'ch_00000000000000000001',
    conversationId: 'cv_a',
    direction: 'outbound',
    to: '+14155550100',
    from: '+15550001111',
    type: 'text',
    content: { text: { body: `hello ${n}` } },
    status: 'pending',
    statuses: [{ status: 'pending', at: '2026-01-01T00:00:00.000Z' }],
    providerMessageId: null,
    error: null,
    campaignId: null,
    attempts: 0,
    inFlight: false,
    version: 0,
    createdAt: '2026-01-01T00:00:00.000Z',
    updatedAt: '2026-01-01T00:00:00.000Z',
    ...over,
  };
};
const conv = (id = 'cv_a', contact = '+14155550100') => ({ id, channelId: 'ch_00000000000000000001', contact });

describe.each(kinds)('messaging store contract on $name', (kind) => {
  let s: MessagingStore;
  beforeEach(async () => {
    await kind.reset();
    s = kind.redis ? new RedisMessagingStore(kind.redis()) : new MemoryMessagingStore();
  });
  afterEach(async () => {
    await s.close();
  });

  it('channels: put, get, list oldest first, owner, by phone_number_id; the number is unique on the platform and freed by delete or change', async () => {
    expect(await s.putChannel(channel())).toBe('ok');
    expect(await s.putChannel(channel({ id: 'ch_00000000000000000002', phoneNumberId: null, type: 'sip', domain: 'ma1.sip.test', createdAt: '2026-01-02T00:00:00.000Z' }))).toBe('ok');
    expect((await s.getChannel('MA1', 'ch_00000000000000000001'))?.name).toBe('support');
    expect(await s.getChannel('MA2', 'ch_00000000000000000001')).toBe(null);
    expect((await s.listChannels('MA1')).map((c) => c.id)).toEqual(['ch_00000000000000000001', 'ch_00000000000000000002']);
    expect(await s.channelOwner('ch_00000000000000000002')).toBe('MA1');
    expect((await s.channelByPhoneNumberId('222'))?.id).toBe('ch_00000000000000000001');
    // Another account cannot take the number; the holder may keep it on update.
    expect(await s.putChannel(channel({ id: 'ch_00000000000000000003', authId: 'MA2' }))).toBe('phone_number_id_taken');
    expect(await s.channelOwner('ch_00000000000000000003')).toBe(null);
    expect(await s.putChannel(channel({ name: 'renamed' }))).toBe('ok');
    // Moving to another number frees the old one.
    expect(await s.putChannel(channel({ phoneNumberId: '333' }))).toBe('ok');
    expect(await s.channelByPhoneNumberId('222')).toBe(null);
    expect(await s.putChannel(channel({ id: 'ch_00000000000000000003', authId: 'MA2' }))).toBe('ok');
    expect(await s.deleteChannel('MA2', 'ch_00000000000000000001')).toBe(false);
    expect(await s.deleteChannel('MA1', 'ch_00000000000000000001')).toBe(true);
    expect(await s.channelByPhoneNumberId('333')).toBe(null);
    expect(await s.deleteChannel('MA1', 'ch_00000000000000000001')).toBe(false);
    expect((await s.listChannels('MA1')).map((c) => c.id)).toEqual(['ch_00000000000000000002']);
  });

  it('recordMessage: once per provider id and per idempotency key; counted in its conversation; inbound moves the window start', async () => {
    const a = message({ direction: 'inbound', providerMessageId: 'wamid.A', status: 'received' });
    expect((await s.recordMessage(a, conv(), 1_000)).created).toBe(true);
    const again = await s.recordMessage(message({ direction: 'inbound', providerMessageId: 'wamid.A' }), conv(), 2_000);
    expect(again.created).toBe(false);
    expect(again.message.id).toBe(a.id);
    const b = message();
    expect((await s.recordMessage(b, conv(), 3_000, 'campaign-1:+14155550100')).created).toBe(true);
    const dupKey = await s.recordMessage(message(), conv(), 4_000, 'campaign-1:+14155550100');
    expect(dupKey).toMatchObject({ created: false, message: { id: b.id } });
    expect(await s.getConversation('MA1', 'cv_a')).toEqual({ id: 'cv_a', authId: 'MA1', channelId: 'ch_00000000000000000001', contact: '+14155550100', createdAt: 1_000, lastMessageAt: 3_000, lastInboundAt: 1_000, messageCount: 2 });
    expect((await s.conversationMessages('MA1', 'cv_a', 10)).map((m) => m.id)).toEqual([a.id, b.id]);
    expect((await s.conversationMessages('MA1', 'cv_a', 1)).map((m) => m.id)).toEqual([b.id]);
    // A second conversation, more recent: listed first; pages.
    await s.recordMessage(message({ conversationId: 'cv_b', direction: 'inbound', providerMessageId: 'wamid.B' }), conv('cv_b', '+14155550199'), 5_000);
    const all = await s.listConversations('MA1', { limit: 10, offset: 0 });
    expect(all.total).toBe(2);
    expect(all.items.map((c) => c.id)).toEqual(['cv_b', 'cv_a']);
    expect((await s.listConversations('MA1', { limit: 1, offset: 1 })).items.map((c) => c.id)).toEqual(['cv_a']);
    expect((await s.listConversations('MA2', { limit: 10, offset: 0 })).total).toBe(0);
    expect((await s.messageByProviderId('MA1', 'wamid.B'))?.conversationId).toBe('cv_b');
    expect(await s.messageByProviderId('MA2', 'wamid.B')).toBe(null);
  });

  it('replaceMessage is a compare-and-set on version; linkProviderId finds the message', async () => {
    const m = message();
    await s.recordMessage(m, conv(), 1_000);
    expect(await s.replaceMessage(m, { ...m, status: 'sent' })).toBe(true);
    const stored = await s.getMessage('MA1', m.id);
    expect(stored).toMatchObject({ status: 'sent', version: 1 });
    expect(await s.replaceMessage(m, { ...m, status: 'failed' })).toBe(false);
    expect((await s.getMessage('MA1', m.id))?.status).toBe('sent');
    expect(await s.replaceMessage(stored as MessageRecord, { ...(stored as MessageRecord), status: 'read' })).toBe(true);
    expect(await s.getMessage('MA2', m.id)).toBe(null);
    await s.linkProviderId('MA1', 'wamid.X', m.id);
    expect((await s.messageByProviderId('MA1', 'wamid.X'))?.status).toBe('read');
  });

  it('subscriptions: put, get, list, delete per account', async () => {
    const sub = { id: 'wh_1', authId: 'MA1', url: 'https://hooks.example/a', events: ['message.inbound' as const], description: '', createdAt: '2026-01-01T00:00:00.000Z' };
    await s.putSubscription(sub);
    await s.putSubscription({ ...sub, id: 'wh_2', createdAt: '2026-01-02T00:00:00.000Z' });
    expect(await s.getSubscription('MA1', 'wh_1')).toEqual(sub);
    expect(await s.getSubscription('MA2', 'wh_1')).toBe(null);
    expect((await s.listSubscriptions('MA1')).map((x) => x.id)).toEqual(['wh_1', 'wh_2']);
    expect(await s.deleteSubscription('MA2', 'wh_1')).toBe(false);
    expect(await s.deleteSubscription('MA1', 'wh_1')).toBe(true);
    expect((await s.listSubscriptions('MA1')).map((x) => x.id)).toEqual(['wh_2']);
  });

  it('the send queue: due sends are leased to one claimer until the lease ends; finished sends are gone', async () => {
    await s.queueSend({ authId: 'MA1', messageId: 'm1' }, 1_000);
    await s.queueSend({ authId: 'MA1', messageId: 'm2' }, 5_000);
    expect(await s.claimSends(2_000, 10, 10_000)).toEqual([{ authId: 'MA1', messageId: 'm1' }]);
    expect(await s.claimSends(2_000, 10, 10_000)).toEqual([]);
    expect((await s.claimSends(6_000, 10, 10_000)).map((q) => q.messageId)).toEqual(['m2']);
    // m1's lease ends at 12 000: claimable again unless finished.
    expect((await s.claimSends(12_000, 10, 10_000)).map((q) => q.messageId)).toEqual(['m1']);
    await s.finishSend({ authId: 'MA1', messageId: 'm1' });
    await s.finishSend({ authId: 'MA1', messageId: 'm2' });
    expect(await s.claimSends(100_000, 10, 10_000)).toEqual([]);
  });
});

describe('the messaging rate limiter on a Redis Cluster', () => {
  it('one script over the three windows of a key (one hash slot): the sixth request of five a minute is refused, shared by two clients', async () => {
    await rb.flushCluster();
    const windows = [
      { name: 'minute', ms: 60_000, limit: 5 },
      { name: 'hour', ms: 3_600_000, limit: 100 },
      { name: 'day', ms: 86_400_000, limit: 1000 },
    ];
    const [one, two] = [new RedisRateLimiter(rb.connectCluster(), windows), new RedisRateLimiter(rb.connectCluster(), windows)];
    const t = Date.UTC(2026, 0, 1, 10, 0, 0);
    const verdicts = [];
    for (let i = 0; i < 5; i++) verdicts.push(await (i % 2 === 0 ? one : two).hit('key:abc', t + i));
    expect(verdicts.map((v) => v.allowed)).toEqual([true, true, true, true, true]);
    expect(verdicts[4]).toMatchObject({ limit: 5, remaining: 0, window: { name: 'minute' } });
    expect(await two.hit('key:abc', t + 30_000)).toMatchObject({ allowed: false, resetS: 30 });
    expect((await one.hit('key:other', t + 30_000)).allowed).toBe(true);
  });
});
