/**
 * KYC sessions on a clock of the test's own (src/kyc/sessions.ts): expiry applied on
 * read once with its webhook, revoke and failed submits queue their webhooks, resend
 * after the 30-minute cooldown, one active session per account until closed, and no
 * PAN in a stored row.
 */
import { describe, expect, it } from 'vitest';
import { createKycSessions, RESEND_COOLDOWN_MS, SessionError } from '../../../src/kyc/sessions.js';
import { MemoryKycStore } from '../../../src/store/kyc/memory.js';
import { MemoryDirectory } from '../../../src/store/directory/memory.js';
import { hashToken } from '../../../src/store/directory/directory.js';
import type { OutboxItem } from '../../../src/store/calls/calls.js';
import { createLogger } from '../../../src/logger.js';

const AT = '2026-11-20T10:00:00.000Z';

async function setup() {
  let now = Date.parse(AT);
  const directory = new MemoryDirectory();
  await directory.createAccount({ authId: 'MA1', tokenHash: hashToken('t'), passwordHash: null, name: 'n', email: 'e@x.test', country: 'IN', accountType: 'PREPAID', enabled: true, cpsLimit: 1, concurrentCallsLimit: 1, sipDomain: 'ma1.sip.test', partnerId: 'PT1', createdAt: AT, updatedAt: AT });
  const store = new MemoryKycStore();
  const sent: OutboxItem[] = [];
  const sessions = createKycSessions({ store, directory, outbox: { enqueue: async (i) => void sent.push(i) }, provider: null, production: false, log: createLogger('silent'), now: () => now });
  const create = () => sessions.create('PT1', { accountAuthId: 'MA1', flowType: 'redirect', customerEmail: null, redirectUrl: 'https://p.test/done', webhookUrl: 'https://p.test/hook', expiresInDays: 7, metadata: {} });
  return { sessions, store, sent, create, advance: (ms: number) => void (now += ms) };
}

describe('KYC sessions', () => {
  it('expire after expires_in_days, once, with kyc.session_expired; then a new one may be created', async () => {
    const t = await setup();
    const s = await t.create();
    await expect(t.create()).rejects.toMatchObject({ kind: 'conflict' });
    t.advance(7 * 86_400_000 + 1);
    expect((await t.sessions.get('PT1', s.id)).status).toBe('expired');
    expect((await t.sessions.list('PT1', {}))[0]?.status).toBe('expired');
    expect(t.sent.map((i) => i.event)).toEqual(['kyc.session_expired']);
    expect(t.sent[0]).toMatchObject({ authId: 'MA1', url: 'https://p.test/hook', method: 'POST', params: { SessionId: s.id, Status: 'expired' } });
    await expect(t.sessions.open(s.token)).resolves.toMatchObject({ session: { status: 'expired' } });
    await expect(t.sessions.submit(s.token, { businessType: 'individual', pan: 'TESTSUCCESS0001', gstin: '', accessRequestId: 'MOCK_AR_SUCCESS' })).rejects.toMatchObject({ kind: 'gone' });
    expect((await t.create()).status).toBe('link_ready');
  });

  it('revoke and a failed submit queue their webhooks; resend waits out the cooldown', async () => {
    const t = await setup();
    const s = await t.create();
    await expect(t.sessions.resend('PT1', s.id)).rejects.toBeInstanceOf(SessionError);
    t.advance(RESEND_COOLDOWN_MS - 5000);
    await expect(t.sessions.resend('PT1', s.id)).rejects.toMatchObject({ kind: 'cooldown', retryAfterS: 5 });
    t.advance(5000);
    expect((await t.sessions.resend('PT1', s.id)).lastSentAt).toBe(Date.parse(AT) + RESEND_COOLDOWN_MS);
    const st = await t.sessions.submit(s.token, { businessType: 'individual', pan: 'TESTFAIL0001', gstin: '', accessRequestId: 'MOCK_AR_SUCCESS' });
    expect(st).toMatchObject({ overall: 'failed', session: { status: 'in_progress' } });
    await t.sessions.revoke('PT1', s.id, 'customer left');
    expect(t.sent.map((i) => i.event)).toEqual(['kyc.failed', 'kyc.session_revoked']);
    await expect(t.sessions.revoke('PT1', s.id, null)).rejects.toMatchObject({ kind: 'gone' });
    await expect(t.sessions.get('PT2', s.id)).rejects.toMatchObject({ kind: 'not_found' });
  });

  it('an individual completes with PAN + Aadhaar; kyc.completed once; rows masked', async () => {
    const t = await setup();
    const s = await t.create();
    await expect(t.sessions.submit(s.token, { businessType: 'individual', pan: 'TESTSUCCESS0001', gstin: '', accessRequestId: '' })).rejects.toMatchObject({ kind: 'invalid', field: 'access_request_id' });
    const st = await t.sessions.submit(s.token, { businessType: 'individual', pan: 'TESTSUCCESS0001', gstin: '', accessRequestId: 'MOCK_AR_SUCCESS' });
    expect(st).toMatchObject({ overall: 'verified', session: { status: 'kyc_completed' }, verifications: { pan: 'verified', aadhaar: 'verified' } });
    expect(t.sent.map((i) => [i.event, i.params.KycType])).toEqual([['kyc.completed', 'individual']]);
    const rows = await t.store.rows('MA1');
    expect(rows).toHaveLength(2);
    expect(JSON.stringify(rows)).not.toContain('TESTSUCCESS0001');
  });
});
