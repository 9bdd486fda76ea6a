/**
 * One messaging catalog store contract, three backends: MemoryMessagingCatalogStore,
 * RedisMessagingCatalogStore on a real redis-server and on a 3-master Redis Cluster
 * (every script's keys in one slot). What the capability relies on: contacts unique by
 * phone per owner (an upsert updates), unique shortcuts and numbers, campaigns that
 * change status only from the expected one, a contact of a campaign claimed at most
 * once (also by two clients at the same moment), outcomes counted once, orphaned
 * claims marked unconfirmed, and one lease holder at a time.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { CampaignRecord, ContactRecord, MessagingCatalogStore } from '../../src/store/messaging-catalog/catalog.js';
import { MemoryMessagingCatalogStore } from '../../src/store/messaging-catalog/memory.js';
import { RedisMessagingCatalogStore } from '../../src/store/messaging-catalog/redis.js';
import { redisBackends } from '../support/redis-backends.js';

const rb = redisBackends();

const kinds: Array<{ name: string; make: () => MessagingCatalogStore; reset(): Promise<void> }> = [
  { name: 'memory', make: () => new MemoryMessagingCatalogStore(), reset: async () => {} },
  { name: 'Redis', make: () => new RedisMessagingCatalogStore(rb.connect(rb.server.url)), reset: async () => void (await rb.admin.flushdb()) },
  { name: 'Redis Cluster (3 masters)', make: () => new RedisMessagingCatalogStore(rb.connectCluster()), reset: () => rb.flushCluster() },
];

const NOW = '2026-01-01T00:00:00.000Z';
let seq = 0;
const ids = (): ((i: number) => string) => () => `c${++seq}`;

function campaign(over: Partial<CampaignRecord> = {}): CampaignRecord {
  return {
    id: `camp-${++seq}`,
    owner: 'A1',
    name: 'Spring',
    channelId: 'ch1',
    template: { name: 'promo', language: 'en_US', components: [] },
    audience: { tag: 'vip' },
    rate: 20,
    status: 'draft',
    createdAt: NOW,
    updatedAt: NOW,
    startedAt: null,
    completedAt: null,
    ...over,
  };
}

describe.each(kinds)('messaging catalog store contract on $name', (kind) => {
  afterEach(() => kind.reset());

  describe('contacts', () => {
    it('upserts by phone: a known phone updates the contact (tags and attributes merged), a new one creates', async () => {
      const s = kind.make();
      const [a] = await s.upsertContacts('A1', [{ phone: '+14155550100', name: 'Ann', tags: ['vip'], attributes: { city: 'SF' } }], ids(), NOW);
      expect(a?.created).toBe(true);
      const res = await s.upsertContacts(
        'A1',
        [
          { phone: '+14155550100', tags: ['new', 'vip'], attributes: { plan: 'gold' } },
          { phone: '+14155550101' },
          { phone: '+14155550101', name: 'Bob' },
        ],
        ids(),
        '2026-01-02T00:00:00.000Z',
      );
      expect(res.map((r) => r.created)).toEqual([false, true, false]);
      expect(res[0]?.contact).toMatchObject({ id: a?.contact.id, name: 'Ann', tags: ['vip', 'new'], attributes: { city: 'SF', plan: 'gold' }, createdAt: NOW, updatedAt: '2026-01-02T00:00:00.000Z' });
      expect(res[2]?.contact).toMatchObject({ id: res[1]?.contact.id, name: 'Bob', tags: [], attributes: {} });
      const all = await s.listContacts('A1');
      expect(all.map((c) => c.phone)).toEqual(['+14155550100', '+14155550101']);
      expect(await s.listContacts('B2')).toEqual([]);
      // The same phone under another owner is another contact.
      const [other] = await s.upsertContacts('B2', [{ phone: '+14155550100' }], ids(), NOW);
      expect(other?.created).toBe(true);
      expect(other?.contact.id).not.toBe(a?.contact.id);
    });

    it('replaces a contact: another contact’s phone is refused, a changed phone frees the old one', async () => {
      const s = kind.make();
      const [a, b] = await s.upsertContacts('A1', [{ phone: '+14155550100' }, { phone: '+14155550101' }], ids(), NOW);
      const ca = a?.contact as ContactRecord;
      expect(await s.replaceContact({ ...ca, phone: '+14155550101' })).toBe('phone_taken');
      expect(await s.replaceContact({ ...ca, id: 'nope' })).toBe('not_found');
      expect(await s.replaceContact({ ...ca, phone: '+14155550102', name: 'Ann', tags: [] })).toBe('ok');
      expect(await s.getContact('A1', ca.id)).toMatchObject({ phone: '+14155550102', name: 'Ann', tags: [] });
      const [again] = await s.upsertContacts('A1', [{ phone: '+14155550100' }], ids(), NOW);
      expect(again?.created).toBe(true);
      expect(await s.getContacts('A1', [ca.id, 'nope', b?.contact.id as string])).toEqual([expect.objectContaining({ id: ca.id }), null, expect.objectContaining({ id: b?.contact.id })]);
      expect(await s.getContact('B2', ca.id)).toBeNull();
    });

    it('deletes a contact and frees its phone; another owner cannot delete it', async () => {
      const s = kind.make();
      const [a] = await s.upsertContacts('A1', [{ phone: '+14155550100' }], ids(), NOW);
      const id = a?.contact.id as string;
      expect(await s.deleteContact('B2', id)).toBe(false);
      expect(await s.deleteContact('A1', id)).toBe(true);
      expect(await s.deleteContact('A1', id)).toBe(false);
      expect(await s.getContact('A1', id)).toBeNull();
      const [b] = await s.upsertContacts('A1', [{ phone: '+14155550100' }], ids(), NOW);
      expect(b?.created).toBe(true);
    });
  });

  it('keeps canned shortcuts and numbers unique per owner, templates and call requests by id', async () => {
    const s = kind.make();
    expect(await s.createCanned({ id: 'k1', owner: 'A1', shortcut: '/hi', text: 'Hello', createdAt: NOW })).toBe('ok');
    expect(await s.createCanned({ id: 'k2', owner: 'A1', shortcut: '/hi', text: 'Other', createdAt: NOW })).toBe('taken');
    expect(await s.createCanned({ id: 'k3', owner: 'B2', shortcut: '/hi', text: 'B', createdAt: NOW })).toBe('ok');
    expect((await s.listCanned('A1')).map((c) => c.id)).toEqual(['k1']);
    expect(await s.deleteCanned('A1', 'k1')).toBe(true);
    expect(await s.createCanned({ id: 'k4', owner: 'A1', shortcut: '/hi', text: 'Again', createdAt: NOW })).toBe('ok');

    const n = { id: 'n1', owner: 'A1', channelId: 'ch1', phoneNumber: '+14155550100', phoneNumberId: 'PN1', displayName: 'Shop', createdAt: NOW };
    expect(await s.createNumber(n)).toBe('ok');
    expect(await s.createNumber({ ...n, id: 'n2' })).toBe('taken');
    expect(await s.getNumber('A1', 'n1')).toEqual(n);
    expect(await s.getNumber('B2', 'n1')).toBeNull();
    expect(await s.deleteNumber('A1', 'n1')).toBe(true);
    expect(await s.createNumber({ ...n, id: 'n3' })).toBe('ok');
    expect((await s.listNumbers('A1')).map((x) => x.id)).toEqual(['n3']);

    const t = { id: 't1', owner: 'A1', channelId: 'ch1', name: 'promo', language: 'en_US', category: 'MARKETING', components: [], status: 'PENDING' as const, providerId: '99', rejectedReason: null, createdAt: NOW, updatedAt: NOW };
    await s.putTemplate(t);
    await s.putTemplate({ ...t, status: 'APPROVED' });
    expect(await s.listTemplates('A1')).toEqual([{ ...t, status: 'APPROVED' }]);
    expect(await s.deleteTemplate('A1', 't1')).toBe(true);
    expect(await s.listTemplates('A1')).toEqual([]);

    const call = { id: 'x1', owner: 'A1', channelId: 'ch1', to: '+14155550100', action: 'permission_request' as const, status: 'recorded' as const, createdAt: NOW };
    await s.createCall(call);
    expect(await s.getCall('A1', 'x1')).toEqual(call);
    expect(await s.getCall('B2', 'x1')).toBeNull();
    expect(await s.listCalls('A1')).toEqual([call]);
  });

  it('changes a campaign only from the expected status and lists the running ones of every owner', async () => {
    const s = kind.make();
    const c = campaign();
    await s.createCampaign(c);
    await s.createCampaign(campaign({ owner: 'B2' }));
    expect(await s.getCampaign('A1', c.id)).toEqual(c);
    expect(await s.getCampaign('B2', c.id)).toBeNull();
    expect((await s.listCampaigns('A1')).map((x) => x.id)).toEqual([c.id]);
    expect(await s.updateCampaign({ ...c, status: 'paused' }, ['running'])).toEqual({ conflict: 'draft' });
    expect(await s.updateCampaign({ ...c, owner: 'B2', status: 'running' }, ['draft'])).toBeNull();
    expect(await s.updateCampaign({ ...c, status: 'running' }, ['draft', 'paused'])).toMatchObject({ status: 'running' });
    expect(await s.runningCampaigns()).toEqual([{ owner: 'A1', id: c.id }]);
    await s.updateCampaign({ ...c, status: 'paused' }, ['running']);
    expect(await s.runningCampaigns()).toEqual([]);
    await s.setRecipients(c.id, ['a', 'b']);
    expect(await s.claim(c.id, 0, 'a', 'm', 'n1')).toBe(true);
    expect(await s.deleteCampaign('B2', c.id)).toBe(false);
    expect(await s.deleteCampaign('A1', c.id)).toBe(true);
    expect(await s.getCampaign('A1', c.id)).toBeNull();
    expect(await s.progress(c.id)).toEqual({ total: 0, sent: 0, failed: 0, unconfirmed: 0, inFlight: 0, cursor: 0 });
    expect(await s.getClaim(c.id, 'a')).toBeNull();
  });

  it('claims each contact of a campaign once, even when two runners claim it at the same moment', async () => {
    const s1 = kind.make();
    const s2 = kind.name === 'memory' ? s1 : kind.make();
    expect(await s1.setRecipients('cp', ['a', 'b', 'c', 'd'])).toBe(4);
    expect(await s2.setRecipients('cp', ['x'])).toBe(4);
    expect(await s1.recipients('cp', 1, 2)).toEqual(['b', 'c']);
    const results = await Promise.all(['a', 'a', 'b', 'b', 'a'].map((id, i) => (i % 2 ? s2 : s1).claim('cp', id === 'a' ? 0 : 1, id, `k-${id}`, i % 2 ? 'n2' : 'n1')));
    expect(results.filter(Boolean)).toHaveLength(2);
    expect(await s1.progress('cp')).toEqual({ total: 4, sent: 0, failed: 0, unconfirmed: 0, inFlight: 2, cursor: 2 });
    expect(await s1.settle('cp', 'a', { state: 'sent', sentId: 'wamid.1' })).toBe(true);
    expect(await s2.settle('cp', 'a', { state: 'sent', sentId: 'wamid.2' })).toBe(false);
    expect(await s1.settle('cp', 'c', { state: 'failed', error: 'x' })).toBe(false);
    expect(await s1.getClaim('cp', 'a')).toMatchObject({ state: 'sent', sentId: 'wamid.1', messageId: 'k-a' });
    // 'b' was claimed and never settled: its runner is gone.
    expect(await s2.markUnconfirmed('cp')).toBe(1);
    expect(await s1.getClaim('cp', 'b')).toMatchObject({ state: 'unconfirmed' });
    expect(await s1.claim('cp', 1, 'b', 'k-b', 'n3')).toBe(false);
    expect(await s1.progress('cp')).toEqual({ total: 4, sent: 1, failed: 0, unconfirmed: 1, inFlight: 0, cursor: 2 });
    // The vanished runner's late confirmation still counts, once.
    expect(await s1.settle('cp', 'b', { state: 'failed', error: 'provider 400' })).toBe(true);
    expect(await s1.progress('cp')).toEqual({ total: 4, sent: 1, failed: 1, unconfirmed: 0, inFlight: 0, cursor: 2 });
  });

  it('lets one runner at a time hold a campaign lease; a lapsed lease can be taken', async () => {
    const s1 = kind.make();
    const s2 = kind.name === 'memory' ? s1 : kind.make();
    expect(await s1.acquireLease('cp', 'n1', 5_000)).toBe(true);
    expect(await s2.acquireLease('cp', 'n2', 5_000)).toBe(false);
    expect(await s1.acquireLease('cp', 'n1', 5_000)).toBe(true);
    expect(await s1.renewLease('cp', 'n1', 5_000)).toBe(true);
    expect(await s2.renewLease('cp', 'n2', 5_000)).toBe(false);
    await s2.releaseLease('cp', 'n2');
    expect(await s2.acquireLease('cp', 'n2', 5_000)).toBe(false);
    await s1.releaseLease('cp', 'n1');
    expect(await s2.acquireLease('cp', 'n2', 60)).toBe(true);
    await new Promise((r) => setTimeout(r, 120));
    expect(await s2.renewLease('cp', 'n2', 60)).toBe(false);
    expect(await s1.acquireLease('cp', 'n1', 5_000)).toBe(true);
  });
});
