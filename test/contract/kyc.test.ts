/**
 * One KYC-store contract, three backends: memory, a redis-server and a 3-master Redis
 * Cluster. Rows per sub-account, the latest of each type counts, a rewrite of a row
 * (finalize) stays the latest, clear removes everything; and the capability on each
 * store: concurrent PAN + GST verifications settle kyc_calls_blocked to false, a later
 * failed one sets it back, and no stored row holds the PAN.
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { KycSession, KycStore, VerificationRow } from '../../src/store/kyc/kyc.js';
import { MemoryKycStore } from '../../src/store/kyc/memory.js';
import { RedisKycStore } from '../../src/store/kyc/redis.js';
import { redisBackends } from '../support/redis-backends.js';
import { DEFAULTS, type Config } from '../../src/config.js';
import { MemoryDirectory } from '../../src/store/directory/memory.js';
import { hashToken, type AccountRecord, type SubAccountRecord } from '../../src/store/directory/directory.js';
import { createKyc } from '../../src/kyc/index.js';

const rb = redisBackends();

const kinds: Array<{ name: string; create(): KycStore; reset(): Promise<void> }> = [
  { name: 'memory', create: () => new MemoryKycStore(), reset: async () => {} },
  { name: 'redis-server', create: () => new RedisKycStore(rb.connect(rb.server.url), { closeConnection: true }), reset: async () => void (await rb.admin.flushdb()) },
  { name: '3-master Redis Cluster', create: () => new RedisKycStore(rb.connectCluster(), { closeConnection: true }), reset: () => rb.flushCluster() },
];

const AT = '2026-11-20T10:00:00.000Z';

function row(id: string, over: Partial<VerificationRow> = {}): VerificationRow {
  return { id, subAuthId: 'SA1', parentAuthId: 'MA1', type: 'pan', status: 'verified', masked: '******234F', test: false, reference: null, createdAt: AT, updatedAt: AT, ...over };
}

describe.each(kinds)('KYC store contract on $name', (kind) => {
  let store: KycStore;
  beforeEach(async () => {
    await kind.reset();
    store = kind.create();
  });
  afterEach(async () => {
    await store.close();
  });

  it('keeps every row of a sub-account, the latest of each type counting; other sub-accounts apart', async () => {
    expect(await store.latest('SA1')).toEqual({});
    await store.put(row('r1', { status: 'failed' }));
    await store.put(row('r2', { createdAt: '2026-11-20T10:00:01.000Z' }));
    await store.put(row('r3', { type: 'gst', status: 'pending', test: true, masked: '***********F1ZV' }));
    await store.put(row('r4', { subAuthId: 'SA2', type: 'aadhaar' }));
    const latest = await store.latest('SA1');
    expect(Object.keys(latest).sort()).toEqual(['gst', 'pan']);
    expect(latest.pan).toEqual(row('r2', { createdAt: '2026-11-20T10:00:01.000Z' }));
    expect(latest.gst).toMatchObject({ id: 'r3', status: 'pending', test: true });
    expect((await store.rows('SA1')).map((r) => r.id)).toEqual(['r1', 'r3', 'r2']);
    expect((await store.latest('SA2')).aadhaar?.id).toBe('r4');
  });

  it('a row rewritten (finalized) stays the latest; clear removes the sub-account only', async () => {
    await store.put(row('r1', { type: 'gst', status: 'pending' }));
    await store.put(row('r1', { type: 'gst', status: 'verified', updatedAt: '2026-11-20T10:05:00.000Z' }));
    expect((await store.latest('SA1')).gst).toMatchObject({ id: 'r1', status: 'verified', updatedAt: '2026-11-20T10:05:00.000Z' });
    expect(await store.rows('SA1')).toHaveLength(1);
    await store.put(row('r9', { subAuthId: 'SA2' }));
    await store.clear('SA1');
    expect(await store.rows('SA1')).toEqual([]);
    expect(await store.latest('SA1')).toEqual({});
    expect(await store.rows('SA2')).toHaveLength(1);
  });

  it('sessions: one active per account (completed, revoked or expired frees it), compare-and-set, by token, a partner\'s newest first', async () => {
    const T = Date.parse(AT);
    const sess = (id: string, over: Partial<KycSession> = {}): KycSession => ({
      id, partnerId: 'PT1', accountAuthId: 'MA1', flowType: 'redirect', customerEmail: null, redirectUrl: 'https://p.test/', webhookUrl: null, status: 'link_ready', token: `tok-${id}`,
      businessType: null, metadata: { a: 1 }, revokeReason: null, firstOpenedAt: null, completedAt: null, expiresAt: T + 86_400_000, lastSentAt: T, createdAt: AT, updatedAt: AT, ...over,
    });
    const s1 = sess('s1');
    expect(await store.createSession(s1, T)).toEqual({ ok: true });
    expect(await store.createSession(sess('s2'), T)).toEqual({ ok: false, activeId: 's1' });
    expect(await store.createSession(sess('s3', { accountAuthId: 'MA2', createdAt: '2026-11-20T10:00:01.000Z' }), T)).toEqual({ ok: true });
    // Expired by time: another may be created.
    expect(await store.createSession(sess('s4', { createdAt: '2026-11-20T10:00:02.000Z' }), T + 86_400_001)).toEqual({ ok: true });
    expect(await store.getSession('s1')).toEqual(s1);
    expect((await store.sessionByToken('tok-s4'))?.id).toBe('s4');
    expect(await store.sessionByToken('nope')).toBe(null);
    const s4 = (await store.getSession('s4')) as KycSession;
    const done = { ...s4, status: 'kyc_completed' as const };
    expect(await store.replaceSession(s4, done)).toBe(true);
    expect(await store.replaceSession(s4, { ...s4, status: 'revoked' })).toBe(false);
    expect((await store.getSession('s4'))?.status).toBe('kyc_completed');
    expect(await store.createSession(sess('s5', { createdAt: '2026-11-20T10:00:03.000Z' }), T)).toEqual({ ok: true });
    expect((await store.partnerSessions('PT1')).map((x) => x.id)).toEqual(['s5', 's4', 's3', 's1']);
    expect(await store.partnerSessions('PT2')).toEqual([]);
  });

  it('the retry schedule: due rows claimed once for the lease, due again after it; unschedule; one row by id', async () => {
    await store.scheduleRetry('SA1', 'r1', 1000);
    await store.scheduleRetry('SA2', 'r2', 2000);
    await store.scheduleRetry('SA1', 'r3', 5000);
    expect(await store.claimDueRetries(500, 100, 10)).toEqual([]);
    expect(await store.claimDueRetries(2000, 1000, 10)).toEqual([{ subAuthId: 'SA1', id: 'r1' }, { subAuthId: 'SA2', id: 'r2' }]);
    expect(await store.claimDueRetries(2500, 1000, 10)).toEqual([]);
    await store.unscheduleRetry('SA2', 'r2');
    expect(await store.claimDueRetries(3000, 1000, 1)).toEqual([{ subAuthId: 'SA1', id: 'r1' }]);
    expect(await store.claimDueRetries(9000, 1000, 10)).toEqual([{ subAuthId: 'SA1', id: 'r1' }, { subAuthId: 'SA1', id: 'r3' }]);
    await store.put(row('r7', { sealed: 'enc:v1:k1:x', attempts: 2 }));
    expect(await store.row('SA1', 'r7')).toMatchObject({ id: 'r7', sealed: 'enc:v1:k1:x', attempts: 2 });
    expect(await store.row('SA1', 'nope')).toBe(null);
  });

  it('the capability on this store: concurrent PAN + GST settle the block; a later failure blocks again; no row holds the PAN', async () => {
    const config = { ...DEFAULTS, partners: [], production: true, nodeId: 'n', dataEncryptionKeys: [], dataKeySource: 'random' } as unknown as Readonly<Config>;
    const directory = new MemoryDirectory();
    const acct: AccountRecord = {
      authId: 'MA1', tokenHash: hashToken('t'), passwordHash: null, name: 'n', email: 'e@x.test', country: 'IN', accountType: 'PREPAID', enabled: true, cpsLimit: 1, concurrentCallsLimit: 1, sipDomain: 'ma1.sip.test', partnerId: null, createdAt: AT, updatedAt: AT,
    };
    await directory.createAccount(acct);
    const sub: SubAccountRecord = { authId: 'SA1', parentAuthId: 'MA1', tokenHash: hashToken('s'), name: 's', enabled: true, kycMode: 'customer_use', businessType: 'private_limited', kycCallsBlocked: true, createdAt: AT, updatedAt: AT };
    expect(await directory.createSubAccount(sub)).toBe(true);
    const kyc = createKyc({ config, redis: null, directory, store, provider: null });
    expect(await kyc.status('MA1', 'SA1')).toMatchObject({ overall_status: 'not_started', kyc_calls_blocked: true });
    const [pan, gst] = await Promise.all([kyc.verify('MA1', 'SA1', { type: 'pan', pan: 'TESTSUCCESS0001' }, true), kyc.verify('MA1', 'SA1', { type: 'gst', gstin: 'TESTSUCCESS0001' }, true)]);
    expect(pan).toMatchObject({ verification_type: 'pan', status: 'verified', mock: true });
    expect(gst).toMatchObject({ verification_type: 'gst', status: 'verified', mock: true });
    expect((await directory.getSubAccount('MA1', 'SA1'))?.kycCallsBlocked).toBe(false);
    expect(await kyc.status('MA1', 'SA1')).toMatchObject({ overall_status: 'verified', kyc_calls_blocked: false, verifications: { pan: 'verified', gst: 'verified', cin: 'not_started', aadhaar: 'not_started' } });
    const again = await kyc.verify('MA1', 'SA1', { type: 'pan', pan: 'TESTFAIL0001' }, true);
    expect(again).toMatchObject({ status: 'failed', kyc_calls_blocked: true, overall_status: 'failed' });
    expect((await directory.getSubAccount('MA1', 'SA1'))?.kycCallsBlocked).toBe(true);
    // A real-mode PAN with no provider: 503 before any row.
    await expect(kyc.verify('MA1', 'SA1', { type: 'pan', pan: 'ABCPE1234F' }, false)).rejects.toMatchObject({ kind: 'unavailable' });
    const rows = await store.rows('SA1');
    expect(rows).toHaveLength(3);
    expect(rows.every((r) => r.test)).toBe(true);
    expect(JSON.stringify(rows)).not.toContain('TESTSUCCESS0001');
    expect(rows.map((r) => r.masked).sort()).toEqual(['***********0001', '***********0001', '********0001']);
  });
});
