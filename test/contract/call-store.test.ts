/**
 * One contract, three backends: MemoryCallStore, RedisCallStore on a real
 * redis-server and on a 3-master Redis Cluster. Calls (start, first ring, first
 * answer, one end), CDRs with every filter of the spec, and the callback outbox
 * (lease, retry, dead letter) must behave identically.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { CallStart, CallStore, CdrRecord, OutboxItem } from '../../src/store/calls/calls.js';
import { MemoryCallStore } from '../../src/store/calls/memory.js';
import { RedisCallStore } from '../../src/store/calls/redis.js';
import { redisBackends } from '../support/redis-backends.js';

const rb = redisBackends();
const D = 'ma1.sip.localhost';
const OTHER = 'ma2.sip.localhost';

const kinds: Array<{ name: string; create(): CallStore; reset(): Promise<void> }> = [
  { name: 'MemoryCallStore', create: () => new MemoryCallStore(), reset: async () => {} },
  { name: 'RedisCallStore', create: () => new RedisCallStore(rb.connect(rb.server.url), { closeConnection: true }), reset: async () => void (await rb.admin.flushdb()) },
  { name: 'RedisCallStore on a 3-master Redis Cluster', create: () => new RedisCallStore(rb.connectCluster(), { closeConnection: true }), reset: () => rb.flushCluster() },
];

function call(sipCallId: string, over: Partial<CallStart> = {}): CallStart {
  return {
    callUuid: `uuid-${sipCallId}`,
    authId: 'MA1',
    domain: D,
    sipCallId,
    fromTag: 'ft',
    fromNumber: 'alice',
    toNumber: 'bob',
    direction: 'outbound',
    context: 'endpoint',
    subAccount: null,
    startedAt: Date.now(),
    callbacks: { answer: null, hangup: null },
    ttlMs: 60_000,
    ...over,
  };
}

function item(id: string, over: Partial<OutboxItem> = {}): OutboxItem {
  return { id, domain: D, authId: 'MA1', event: 'Ring', url: 'https://cb.example/answer', method: 'POST', params: { Event: 'Ring' }, attempts: 0, fallback: null, createdAt: Date.now(), ...over };
}

function cdrOf(s: CallStart, over: Partial<CdrRecord> = {}): CdrRecord {
  return {
    call_uuid: s.callUuid,
    from_number: s.fromNumber,
    to_number: s.toNumber,
    call_status: 'answered',
    duration: 5,
    bill_duration: 5,
    billed_amount: '0.00000',
    created_at: new Date(s.startedAt).toISOString(),
    answered_at: null,
    ended_at: new Date().toISOString(),
    sip_call_id: s.sipCallId,
    hangup_cause: 'NORMAL_CLEARING',
    hangup_disposition: 'recv_bye',
    call_direction: s.direction,
    context: s.context,
    bridge_uuid: null,
    campaign_id: null,
    sip_status: 200,
    sub_account: s.subAccount,
    ...over,
  };
}

describe.each(kinds)('$name (CallStore contract)', (kind) => {
  let store: CallStore;
  beforeEach(async () => {
    await kind.reset();
    store = kind.create();
  });
  afterEach(async () => {
    await store.close();
  });

  it('a call rings once, is answered once, ends once (the second end of a BYE seen twice is null)', async () => {
    await store.start(call('c1'));
    await store.start(call('c1', { fromNumber: 'mallory' })); // the same Call-ID again: ignored
    expect(await store.ring(D, 'c1', 1000, item('ring-1'))).toBe(true);
    expect(await store.ring(D, 'c1', 1001, item('ring-2'))).toBe(false);
    expect(await store.answer(D, 'c1', 2000, item('start-1'))).toBe(true);
    expect(await store.answer(D, 'c1', 2001, null)).toBe(false);
    expect(await store.ring(D, 'unknown', 1, null)).toBe(false);
    const st = await store.get(D, 'c1');
    expect(st).toMatchObject({ fromNumber: 'alice', ringAt: 1000, answerAt: 2000 });
    const built: string[] = [];
    const end = (): Promise<CdrRecord | null> =>
      store.end(D, 'c1', (s) => {
        built.push(s.callUuid);
        return { cdr: cdrOf(s), callback: item('hangup-1', { event: 'Hangup' }) };
      });
    const [a, b] = await Promise.all([end(), end()]);
    expect([a, b].filter((x) => x !== null)).toHaveLength(1);
    expect(await store.get(D, 'c1')).toBe(null);
    expect(await store.cdr(D, 'uuid-c1')).toMatchObject({ call_status: 'answered', from_number: 'alice' });
    // Ring, StartApp and one Hangup queued; the second Ring and the second Hangup were not.
    const claimed = await store.claim(Date.now() + 10, 10, 30_000);
    expect(claimed.map((i) => i.id).sort()).toEqual(['hangup-1', 'ring-1', 'start-1']);
  });

  it('an answer without a ring (200 straight away) and a ring after an answer', async () => {
    await store.start(call('c2'));
    expect(await store.answer(D, 'c2', 10, null)).toBe(true);
    expect(await store.ring(D, 'c2', 11, item('late-ring'))).toBe(false);
    expect(await store.claim(Date.now(), 10, 1000)).toEqual([]);
  });

  it('the outbox: a claimed callback is leased (invisible to others) until complete, retry or the lease ends', async () => {
    const now = Date.now();
    await store.enqueue(item('a', { createdAt: now }));
    await store.enqueue(item('b', { createdAt: now, domain: OTHER }));
    await store.enqueue(item('later', { createdAt: now + 60_000 }));
    const first = await store.claim(now, 10, 400);
    expect(first.map((i) => i.id).sort()).toEqual(['a', 'b']);
    expect(await store.claim(now + 1, 10, 400)).toEqual([]); // leased
    // The lease ends (the claimer died): another claim gets them again.
    await new Promise((r) => setTimeout(r, 500));
    const again = await store.claim(Date.now(), 10, 10_000);
    expect(again.map((i) => i.id).sort()).toEqual(['a', 'b']);
    await store.complete(again.find((i) => i.id === 'a') as OutboxItem);
    const b = again.find((i) => i.id === 'b') as OutboxItem;
    await store.retry({ ...b, attempts: 1 }, Date.now() + 200);
    expect(await store.claim(Date.now(), 10, 10_000)).toEqual([]);
    await new Promise((r) => setTimeout(r, 300));
    const retried = await store.claim(Date.now(), 10, 10_000);
    expect(retried).toMatchObject([{ id: 'b', attempts: 1 }]);
    await store.deadLetter(retried[0] as OutboxItem, 'http 500 after 4 attempts', 123);
    expect(await store.deadLetters(OTHER, 10)).toMatchObject([{ item: { id: 'b', attempts: 1 }, reason: 'http 500 after 4 attempts', at: 123 }]);
    expect(await store.deadLetters(D, 10)).toEqual([]);
    // A completed callback cannot be retried back into the outbox.
    await store.retry(again.find((i) => i.id === 'a') as OutboxItem, Date.now());
    expect((await store.claim(Date.now() + 61_000, 10, 1000)).map((i) => i.id)).toEqual(['later']);
  });

  it('CDRs: newest first, one page at a time, every filter of the spec', async () => {
    const day = (d: string): number => Date.parse(`${d}T12:00:00Z`);
    const rows: Array<[string, Partial<CallStart>, Partial<CdrRecord>]> = [
      ['k1', { startedAt: day('2026-11-01'), fromNumber: 'alice', toNumber: 'bob' }, { call_status: 'answered', duration: 30, hangup_cause: 'NORMAL_CLEARING', hangup_disposition: 'recv_bye' }],
      ['k2', { startedAt: day('2026-11-02'), fromNumber: 'alice', toNumber: '+14155550100', context: 'phone' }, { call_status: 'busy', duration: 0, hangup_cause: 'USER_BUSY', hangup_disposition: 'send_refuse', sip_status: 486 }],
      ['k3', { startedAt: day('2026-11-03'), fromNumber: 'carol', toNumber: 'bob', subAccount: 'SA1' }, { call_status: 'cancelled', duration: 0, hangup_cause: 'ORIGINATOR_CANCEL', hangup_disposition: 'recv_cancel', campaign_id: 'spring' }],
      ['k4', { startedAt: day('2026-11-04'), fromNumber: 'bob', toNumber: 'alice', direction: 'inbound' }, { call_status: 'no-answer', duration: 0, hangup_cause: 'NO_ANSWER', hangup_disposition: 'send_cancel', bridge_uuid: 'br-9' }],
    ];
    for (const [id, s, c] of rows) {
      await store.start(call(id, s));
      await store.end(D, id, (st) => ({ cdr: cdrOf(st, c), callback: null }));
    }
    const ids = async (f: Parameters<CallStore['cdrs']>[1], page = { limit: 20, offset: 0 }): Promise<string[]> => (await store.cdrs(D, f, page)).items.map((c) => c.sip_call_id);
    expect(await ids({})).toEqual(['k4', 'k3', 'k2', 'k1']);
    expect(await ids({}, { limit: 2, offset: 1 })).toEqual(['k3', 'k2']);
    expect((await store.cdrs(D, {}, { limit: 1, offset: 0 })).total).toBe(4);
    expect(await ids({ fromNumber: 'alice' })).toEqual(['k2', 'k1']);
    expect(await ids({ toNumber: 'bob' })).toEqual(['k3', 'k1']);
    expect(await ids({ from: Date.parse('2026-11-02T00:00:00Z'), to: Date.parse('2026-11-03T23:59:59.999Z') })).toEqual(['k3', 'k2']);
    expect(await ids({ callDirection: 'inbound' })).toEqual(['k4']);
    expect(await ids({ minDuration: 1 })).toEqual(['k1']);
    expect(await ids({ sipCallId: 'k2' })).toEqual(['k2']);
    expect(await ids({ bridgeUuid: 'br-9' })).toEqual(['k4']);
    expect(await ids({ hangupCause: 'user_busy' })).toEqual(['k2']);
    expect(await ids({ hangupDisposition: 'recv_cancel' })).toEqual(['k3']);
    expect(await ids({ context: 'phone' })).toEqual(['k2']);
    expect(await ids({ campaignId: 'spring' })).toEqual(['k3']);
    expect(await ids({ search: '4155550' })).toEqual(['k2']);
    expect(await ids({ subAccount: 'SA1' })).toEqual(['k3']);
    expect(await store.cdrs(OTHER, {}, { limit: 20, offset: 0 })).toEqual({ total: 0, items: [], totals: { count: 0, answered: 0, durationSeconds: 0, billSeconds: 0, lastCallAt: null } });
    // Totals are over every match, not the page.
    expect((await store.cdrs(D, {}, { limit: 1, offset: 0 })).totals).toEqual({ count: 4, answered: 1, durationSeconds: 30, billSeconds: 20, lastCallAt: new Date(day('2026-11-04')).toISOString() });
    expect(await store.cdr(D, 'uuid-k2')).toMatchObject({ call_status: 'busy', sip_status: 486 });
    expect(await store.cdr(OTHER, 'uuid-k2')).toBe(null);
  });

  it('keeps the account signing secret', async () => {
    expect(await store.signingSecret(D)).toBe(null);
    await store.setSigningSecret(D, 's1');
    await store.setSigningSecret(D, 's2');
    expect(await store.signingSecret(D)).toBe('s2');
    expect(await store.signingSecret(OTHER)).toBe(null);
  });
});
