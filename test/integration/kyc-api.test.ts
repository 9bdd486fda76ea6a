/**
 * The sub-account KYC routes in process over real HTTP, on the embedded stores and on a
 * redis-server: status, every test-mode magic value with `mock: true`, finalize-pending
 * both ways, the rule deciding kyc_calls_blocked (also on the sub-account resource),
 * who may call (parent only: sub-account 403, another account 404), bad input → 400
 * naming the field, real mode without a provider → 503, real mode through the local
 * provider stub (secret and body checked, timeout → pending), and the captured logs
 * never holding a PAN.
 */
import { Writable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { STORE_KINDS, startHarness, stopRedisServer, type Creds, type Harness } from '../support/api-harness.js';
import { startKycProviderStub, type KycProviderStub } from '../support/kyc-provider-stub.js';
import { createLogger } from '../../src/logger.js';
import { createKyc, httpKycProvider } from '../../src/kyc/index.js';
import { MemoryDirectory } from '../../src/store/directory/memory.js';
import { DEFAULTS, type Config } from '../../src/config.js';
import { hashToken } from '../../src/store/directory/directory.js';
import { modelProblems } from '../support/vendor-sdk-models.js';

const REAL_PAN = 'ABCPE1234F';
const REAL_GSTIN = '27AAPFU0939F1ZV';

let stub: KycProviderStub;
beforeAll(async () => {
  stub = await startKycProviderStub();
});
afterAll(async () => {
  await stub.close();
  await stopRedisServer();
});

describe.each(STORE_KINDS)('KYC API on %s', (kind) => {
  let h: Harness;
  let real: Harness;
  const logs: string[] = [];
  const sink = new Writable({
    write(chunk: Buffer, _enc, done) {
      logs.push(chunk.toString('utf8'));
      done();
    },
  });
  beforeAll(async () => {
    h = await startHarness(kind, {}, { logger: createLogger('trace', sink) });
    real = await startHarness(kind, { kycProviderUrl: stub.url, kycProviderSecret: stub.secret }, { logger: createLogger('trace', sink) });
  });
  afterAll(async () => {
    await h.close();
    await real.close();
  });

  const sub = async (hh: Harness, parent: Creds, businessType: string, mode = 'customer_use'): Promise<Creds> => {
    const s = await hh.newSubAccount(parent, mode);
    const r = await hh.request('POST', `/api/v1/Account/${parent.id}/Subaccount/${s.id}/`, { auth: parent, body: { business_type: businessType } });
    expect(r.status).toBe(202);
    return s;
  };
  const kyc = (hh: Harness, parent: Creds, s: Creds, path: string, body?: unknown, test = true) =>
    hh.request(body === undefined ? 'GET' : 'POST', `/api/v1/sub-accounts/${test ? 'test/' : ''}${s.id}/kyc/${path}`, { auth: parent, ...(body === undefined ? {} : { body }) });
  const blocked = async (hh: Harness, parent: Creds, s: Creds): Promise<unknown> =>
    (await hh.request('GET', `/api/v1/Account/${parent.id}/Subaccount/${s.id}/`, { auth: parent })).json.kyc_calls_blocked;

  it('a new customer_use company: not_started and blocked; PAN + GST verified in test mode unblock it (also on the SubAccount resource)', async () => {
    const a = await h.newAccount();
    const s = await sub(h, a, 'private_limited');
    const st = await kyc(h, a, s, 'status', undefined, false);
    expect(st.status).toBe(200);
    expect(st.json).toMatchObject({ sub_account_id: s.id, kyc_mode: 'customer_use', business_type: 'private_limited', overall_status: 'not_started', kyc_calls_blocked: true, verifications: { pan: 'not_started', gst: 'not_started', cin: 'not_started', aadhaar: 'not_started' } });
    expect(st.json.mock).toBeUndefined();
    const pan = await kyc(h, a, s, 'verify-pan', { pan: 'TESTSUCCESS0001' });
    expect(pan.status).toBe(200);
    expect(pan.json).toMatchObject({ verification_type: 'pan', status: 'verified', kyc_calls_blocked: true, mock: true });
    expect(await blocked(h, a, s)).toBe(true);
    const gst = await kyc(h, a, s, 'verify-gst', { gstin: 'TESTSUCCESS0001' });
    expect(gst.json).toEqual({ verification_type: 'gst', status: 'verified', kyc_calls_blocked: false, mock: true });
    expect(modelProblems('KycVerificationResult', gst.json)).toEqual([]);
    expect(await blocked(h, a, s)).toBe(false);
    const st2 = await kyc(h, a, s, 'status', undefined, false);
    expect(st2.json).toMatchObject({ overall_status: 'verified', kyc_calls_blocked: false, verifications: { pan: 'verified', gst: 'verified' } });
    expect(modelProblems('SubAccountKycStatus', st2.json)).toEqual([]);
    expect(modelProblems('SubAccountKycStatus', st.json)).toEqual([]);
    // Revoked: a later failed PAN blocks again.
    expect((await kyc(h, a, s, 'verify-pan', { pan: 'TESTFAIL0001' })).json).toMatchObject({ status: 'failed', kyc_calls_blocked: true });
    expect(await blocked(h, a, s)).toBe(true);
    // The business type decides: as an individual it needs Aadhaar instead.
    expect((await kyc(h, a, s, 'verify-pan', { pan: 'TESTSUCCESS0001' })).json).toMatchObject({ kyc_calls_blocked: false });
    await h.request('POST', `/api/v1/Account/${a.id}/Subaccount/${s.id}/`, { auth: a, body: { business_type: 'individual' } });
    expect(await blocked(h, a, s)).toBe(true);
    expect((await kyc(h, a, s, 'digilocker/verify', { access_request_id: 'MOCK_AR_SUCCESS' })).json).toMatchObject({ verification_type: 'aadhaar', status: 'verified', kyc_calls_blocked: false, mock: true });
    expect(await blocked(h, a, s)).toBe(false);
  });

  it('every magic value gives its documented outcome with mock true; TESTERROR0001 is 500 and records nothing', async () => {
    const a = await h.newAccount();
    const s = await sub(h, a, 'individual');
    for (const [field, path] of [['pan', 'verify-pan'], ['gstin', 'verify-gst']] as const) {
      expect((await kyc(h, a, s, path, { [field]: 'TESTSUCCESS0001' })).json).toMatchObject({ status: 'verified', mock: true });
      expect((await kyc(h, a, s, path, { [field]: 'TESTFAIL0001' })).json).toMatchObject({ status: 'failed', mock: true });
      expect((await kyc(h, a, s, path, { [field]: 'TESTPENDING001' })).json).toMatchObject({ status: 'pending', mock: true });
      expect((await kyc(h, a, s, path, { [field]: 'TESTPENDING_FAIL' })).json).toMatchObject({ status: 'pending', mock: true });
      const err = await kyc(h, a, s, path, { [field]: 'TESTERROR0001' });
      expect(err.status).toBe(500);
      expect(err.json).toMatchObject({ error: 'kyc_provider_error', mock: true });
    }
    // Still pending after the error (nothing recorded).
    expect((await kyc(h, a, s, 'status', undefined, false)).json).toMatchObject({ verifications: { pan: 'pending', gst: 'pending' } });
    const search = await kyc(h, a, s, 'cin/search', { company_name: 'Acme' });
    expect(search.json).toMatchObject({ mock: true, matches: [{ cin: 'U72900KA2024PTC123456', company_name: 'ACME PRIVATE LIMITED' }, { cin: 'U72900KA2024PTC654321' }] });
    expect((await kyc(h, a, s, 'cin/confirm', { company_name: 'Acme', selected_cin: 'U72900KA2024PTC123456' })).json).toMatchObject({ verification_type: 'cin', status: 'verified', mock: true });
    expect((await kyc(h, a, s, 'cin/confirm', { company_name: 'Acme', selected_cin: 'U72900KA2024PTC654321' })).json).toMatchObject({ status: 'failed', mock: true });
    const init = await kyc(h, a, s, 'digilocker/initiate', { redirect_url: 'https://app.example.test/back' });
    expect(init.json).toMatchObject({ access_request_id: 'MOCK_AR_SUCCESS', mock: true });
    expect((await kyc(h, a, s, 'digilocker/verify', { access_request_id: 'MOCK_AR_FAIL' })).json).toMatchObject({ verification_type: 'aadhaar', status: 'failed', mock: true });
    expect((await kyc(h, a, s, 'digilocker/verify', { access_request_id: 'MOCK_AR_SUCCESS' })).json).toMatchObject({ status: 'verified', mock: true });
  });

  it('finalize-pending works both ways; with nothing pending it is 409', async () => {
    const a = await h.newAccount();
    const s = await sub(h, a, 'llp');
    expect((await kyc(h, a, s, 'verify-pan', { pan: 'TESTPENDING001' })).json).toMatchObject({ status: 'pending', kyc_calls_blocked: true });
    expect((await kyc(h, a, s, 'verify-gst', { gstin: 'TESTPENDING_FAIL' })).json).toMatchObject({ status: 'pending' });
    expect((await kyc(h, a, s, 'status', undefined, false)).json).toMatchObject({ overall_status: 'pending', kyc_calls_blocked: true });
    const f1 = await kyc(h, a, s, 'finalize-pending', { verification_type: 'pan', outcome: 'verified' });
    expect(f1.status).toBe(200);
    expect(f1.json).toMatchObject({ verification_type: 'pan', status: 'verified', kyc_calls_blocked: true, mock: true });
    const f2 = await kyc(h, a, s, 'finalize-pending', { verification_type: 'gst', outcome: 'failed' });
    expect(f2.json).toEqual({ verification_type: 'gst', status: 'failed', kyc_calls_blocked: true, mock: true });
    expect((await kyc(h, a, s, 'status', undefined, false)).json.overall_status).toBe('failed');
    const none = await kyc(h, a, s, 'finalize-pending', { verification_type: 'gst', outcome: 'verified' });
    expect(none.status).toBe(409);
    expect((await kyc(h, a, s, 'verify-gst', { gstin: 'TESTPENDING001' })).json).toMatchObject({ status: 'pending' });
    expect((await kyc(h, a, s, 'finalize-pending', { verification_type: 'gst', outcome: 'verified' })).json).toMatchObject({ status: 'verified', kyc_calls_blocked: false });
    const bad = await kyc(h, a, s, 'finalize-pending', { verification_type: 'passport', outcome: 'maybe' });
    expect(bad.status).toBe(400);
    expect(Object.keys(bad.json.details as object).sort()).toEqual(['outcome', 'verification_type']);
  });

  it('personal_use is never blocked; its status still follows the verifications', async () => {
    const a = await h.newAccount();
    const s = await sub(h, a, 'individual', 'personal_use');
    expect((await kyc(h, a, s, 'status', undefined, false)).json).toMatchObject({ kyc_mode: 'personal_use', overall_status: 'not_started', kyc_calls_blocked: false });
    expect((await kyc(h, a, s, 'verify-pan', { pan: 'TESTFAIL0001' })).json).toMatchObject({ status: 'failed', kyc_calls_blocked: false });
  });

  it('parent only: the sub-account itself → 403, another account → 404, a partner → 403, no credentials → 401', async () => {
    const a = await h.newAccount();
    const b = await h.newAccount();
    const s = await sub(h, a, 'individual');
    for (const test of [false, true]) {
      const own = await h.request('POST', `/api/v1/sub-accounts/${test ? 'test/' : ''}${s.id}/kyc/verify-pan`, { auth: s, body: { pan: 'TESTSUCCESS0001' } });
      expect(own.status).toBe(403);
      expect((await h.request('GET', `/api/v1/sub-accounts/${s.id}/kyc/status`, { auth: s })).status).toBe(403);
      expect((await kyc(h, b, s, 'status', undefined, false)).status).toBe(404);
      expect((await kyc(h, b, s, 'verify-pan', { pan: 'nonsense' }, test)).status).toBe(404);
      expect((await kyc(h, a, { id: 'SANOSUCHSUBACCOUNT00', token: '' }, 'verify-gst', { gstin: 'TESTSUCCESS0001' }, test)).status).toBe(404);
      expect((await h.request('GET', `/api/v1/sub-accounts/${s.id}/kyc/status`, { auth: null })).status).toBe(401);
    }
    expect((await kyc(h, a, s, 'status', undefined, false)).json.verifications).toMatchObject({ pan: 'not_started' });
  });

  it('bad input → 400 naming the field; real mode without a provider → 503 with a clear message', async () => {
    const a = await h.newAccount();
    const s = await sub(h, a, 'private_limited');
    const cases: Array<[string, Record<string, unknown>, string, boolean]> = [
      ['verify-pan', { pan: 'ABCPE1234' }, 'pan', false],
      ['verify-pan', { pan: 'abcpe1234f' }, 'pan', false],
      ['verify-pan', {}, 'pan', false],
      ['verify-pan', { pan: 12 }, 'pan', true],
      ['verify-pan', { pan: 'ABCPE1234' }, 'pan', true],
      ['verify-gst', { gstin: '27AAPFU0939F1ZW' }, 'gstin', false],
      ['verify-gst', { gstin: '27AAPFU0939F1Z' }, 'gstin', true],
      ['cin/confirm', { company_name: 'Acme', selected_cin: 'U7290' }, 'selected_cin', false],
      ['cin/search', {}, 'company_name', true],
      ['digilocker/initiate', { redirect_url: 'not a url' }, 'redirect_url', false],
      ['digilocker/verify', { access_request_id: 'whatever' }, 'access_request_id', true],
    ];
    for (const [path, body, field, test] of cases) {
      const r = await kyc(h, a, s, path, body, test);
      expect(r.status, `${path} ${JSON.stringify(body)}`).toBe(400);
      expect(Object.keys(r.json.details as object), path).toContain(field);
      expect(r.text).not.toContain('ABCPE1234');
    }
    const none = await kyc(h, a, s, 'verify-pan', { pan: REAL_PAN }, false);
    expect(none.status).toBe(503);
    expect(none.json.error).toBe('kyc_provider_not_configured');
    expect(String(none.json.message)).toMatch(/KYC_PROVIDER_URL/);
    expect(none.text).not.toContain(REAL_PAN);
    for (const [path, body] of [['verify-gst', { gstin: REAL_GSTIN }], ['cin/search', { company_name: 'Acme' }], ['digilocker/initiate', { redirect_url: 'https://x.test/' }]] as const) {
      expect((await kyc(h, a, s, path, body, false)).status, path).toBe(503);
    }
  });

  it('real mode through the provider stub: the secret and body reach it; verified unblocks; a provider failure is 502 and records nothing', async () => {
    const a = await real.newAccount();
    const s = await sub(real, a, 'private_limited');
    const before = stub.calls.length;
    const pan = await kyc(real, a, s, 'verify-pan', { pan: REAL_PAN }, false);
    expect(pan.status).toBe(200);
    expect(pan.json).toMatchObject({ verification_type: 'pan', status: 'verified', kyc_calls_blocked: true });
    expect(pan.json.mock).toBeUndefined();
    const call = stub.calls[before];
    expect(call).toMatchObject({ op: 'verify-pan', authorized: true, body: { sub_account_id: s.id, pan: REAL_PAN } });
    const search = await kyc(real, a, s, 'cin/search', { company_name: 'Reliance' }, false);
    expect(search.json).toMatchObject({ matches: [{ cin: 'L17110MH1973PLC019786', company_name: 'RELIANCE' }] });
    const cin = await kyc(real, a, s, 'cin/confirm', { company_name: 'Reliance', selected_cin: 'L17110MH1973PLC019786' }, false);
    expect(cin.json).toEqual({ verification_type: 'cin', status: 'verified', kyc_calls_blocked: false });
    expect(modelProblems('KycVerificationResult', cin.json)).toEqual([]);
    expect(stub.calls.at(-1)).toMatchObject({ op: 'cin/confirm', authorized: true, body: { sub_account_id: s.id, company_name: 'Reliance', cin: 'L17110MH1973PLC019786' } });
    expect((await kyc(real, a, s, 'verify-gst', { gstin: '29AAGCB7383J1Z4' }, false)).json).toMatchObject({ status: 'failed', kyc_calls_blocked: false });
    const init = await kyc(real, a, s, 'digilocker/initiate', { redirect_url: 'https://app.example.test/back' }, false);
    expect(init.json).toMatchObject({ access_request_id: 'AR-STUB-1', authorization_url: expect.stringContaining('https://') });
    expect((await kyc(real, a, s, 'digilocker/verify', { access_request_id: 'AR-STUB-1' }, false)).json).toMatchObject({ verification_type: 'aadhaar', status: 'verified' });
    stub.failWith = 500;
    try {
      const down = await kyc(real, a, s, 'verify-pan', { pan: 'AAACR5055K' }, false);
      expect(down.status).toBe(502);
      expect(down.text).not.toContain('AAACR5055K');
    } finally {
      stub.failWith = null;
    }
    expect((await kyc(real, a, s, 'status', undefined, false)).json).toMatchObject({ verifications: { pan: 'verified', cin: 'verified' }, kyc_calls_blocked: false });
  });

  it('the captured logs never hold a PAN, GSTIN or a test value checked', () => {
    const text = logs.join('');
    expect(text.length).toBeGreaterThan(1000);
    expect(text).toContain('KYC verification recorded');
    for (const v of [REAL_PAN, 'AAACR5055K', REAL_GSTIN, '29AAGCB7383J1Z4', 'ABCPE1234', 'abcpe1234f', 'TESTSUCCESS0001', 'TESTPENDING001', stub.secret]) expect(text, v).not.toContain(v);
  });
});

describe('the HTTP provider adapter', () => {
  it('a provider that does not answer in time leaves the verification pending (never verified), retried on schedule until it answers; a wrong secret is a provider error', async () => {
    const config = { ...DEFAULTS, partners: [], production: true, nodeId: 'n', dataEncryptionKeys: [], dataKeySource: 'random' } as unknown as Readonly<Config>;
    const directory = new MemoryDirectory();
    const at = new Date().toISOString();
    await directory.createAccount({ authId: 'MA1', tokenHash: hashToken('t'), passwordHash: null, name: 'n', email: 'e@x.test', country: 'IN', accountType: 'PREPAID', enabled: true, cpsLimit: 1, concurrentCallsLimit: 1, sipDomain: 'ma1.sip.test', partnerId: null, createdAt: at, updatedAt: at });
    await directory.createSubAccount({ authId: 'SA1', parentAuthId: 'MA1', tokenHash: hashToken('s'), name: 's', enabled: true, kycMode: 'customer_use', businessType: 'individual', kycCallsBlocked: true, createdAt: at, updatedAt: at });
    let now = Date.now();
    const kyc = createKyc({ config: { ...config, dataEncryptionKeys: [{ kid: 'k1', key: Buffer.alloc(32, 7).toString('base64') }] }, redis: null, directory, now: () => now, provider: httpKycProvider({ url: stub.url, secret: stub.secret, timeoutMs: 300 }) });
    stub.delayMs = 2000;
    try {
      const r = await kyc.verify('MA1', 'SA1', { type: 'pan', pan: REAL_PAN }, false);
      expect(r).toMatchObject({ status: 'pending', kyc_calls_blocked: true });
      // Sealed until its retry: the stored row never holds the PAN in clear.
      const [row] = await kyc.store.rows('SA1');
      expect(row).toMatchObject({ status: 'pending', masked: '******234F', attempts: 1 });
      expect(String(row?.sealed)).toMatch(/^enc:v1:k1:/);
      expect(JSON.stringify(row)).not.toContain(REAL_PAN);
      // Not due yet; then due, and the provider times out again: rescheduled, still pending.
      expect(await kyc.retryPending()).toBe(0);
      now += 30_001;
      expect(await kyc.retryPending()).toBe(1);
      expect((await kyc.store.rows('SA1'))[0]).toMatchObject({ status: 'pending', attempts: 2 });
    } finally {
      stub.delayMs = 0;
    }
    expect((await kyc.status('MA1', 'SA1')).verifications.pan).toBe('pending');
    expect(await kyc.retryPending()).toBe(0);
    now += 120_001;
    const calls = stub.calls.length;
    expect(await kyc.retryPending()).toBe(1);
    expect(stub.calls[calls]).toMatchObject({ op: 'verify-pan', authorized: true, body: { sub_account_id: 'SA1', pan: REAL_PAN } });
    const [done] = await kyc.store.rows('SA1');
    expect(done).toMatchObject({ status: 'verified', attempts: 3, sealed: null });
    expect((await kyc.status('MA1', 'SA1')).verifications.pan).toBe('verified');
    now += 10_000_000;
    expect(await kyc.retryPending()).toBe(0);
    const wrong = createKyc({ config, redis: null, directory, provider: httpKycProvider({ url: stub.url, secret: 'not-the-secret-0123456789' }) });
    await expect(wrong.verify('MA1', 'SA1', { type: 'pan', pan: REAL_PAN }, false)).rejects.toMatchObject({ kind: 'provider_error' });
    expect(stub.calls.at(-1)).toMatchObject({ authorized: false });
  });
});
