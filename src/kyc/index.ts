/**
 * The KYC capability (docs/kyc.md): sub-account verifications (PAN, GST, CIN,
 * Aadhaar via DigiLocker), their test mode with the vendor's magic inputs, the rule
 * that turns them into `overall_status` and `kyc_calls_blocked` — built by
 * {@link createKyc}, the one builder the composition root calls.
 *
 * `kyc_calls_blocked` lives on the sub-account record and is written through the
 * directory's own update path (Directory.updateSubAccount): the edge's policy reads
 * the sub-account from the directory on every INVITE (no cache), so a change is seen
 * by every node of a fleet at once.
 *
 * Numbers checked here are never logged and never stored in full (masked to the last 4).
 */
import { randomUUID } from 'node:crypto';
import type { Config } from '../config.js';
import { createLogger, type Logger } from '../logger.js';
import type { RedisClient } from '../store/redis/client.js';
import type { Directory, SubAccountRecord } from '../store/directory/directory.js';
import { maskValue, VERIFICATION_TYPES, type KycStore, type RowStatus, type VerificationRow, type VerificationType } from '../store/kyc/kyc.js';
import { MemoryKycStore } from '../store/kyc/memory.js';
import { RedisKycStore } from '../store/kyc/redis.js';
import { callsBlocked, overallStatus, requirementsFor, type OverallStatus } from './rules.js';
import { cinProblem, gstinProblem, panProblem } from './validate.js';
import { httpKycProvider, ProviderFailedError, ProviderTimeoutError, type CinMatch, type KycProvider } from './provider.js';
import { createKycSessions, type KycSessions } from './sessions.js';
import type { OutboxItem } from '../store/calls/calls.js';
import { createSecretBox, type SecretBox } from '../security/secret-box.js';

/** After a provider timeout, the retries of a verification: delays from the previous attempt, ms. */
export const RETRY_DELAYS_MS = [30_000, 120_000, 600_000, 3_600_000, 21_600_000];

export type { VerificationType } from '../store/kyc/kyc.js';
export { requirementsFor, overallStatus, callsBlocked } from './rules.js';
export { httpKycProvider, type KycProvider } from './provider.js';
export { SessionError, sessionView, RESEND_COOLDOWN_MS, type KycSessions } from './sessions.js';

/** Why a KYC operation was refused; the API maps `kind` to a status. */
export class KycError extends Error {
  constructor(
    /** not_found 404, invalid 400 (naming `field`), conflict 409, unavailable 503, provider_error 500 (mock) / 502. */
    readonly kind: 'not_found' | 'invalid' | 'conflict' | 'unavailable' | 'provider_error',
    message: string,
    readonly field: string | null = null,
  ) {
    super(message);
    this.name = 'KycError';
  }
}

/** The vendor's magic inputs of test mode (pan, gstin, and the others where they fit). */
export const MAGIC = {
  TESTSUCCESS0001: 'verified',
  TESTFAIL0001: 'failed',
  TESTERROR0001: 'error',
  TESTPENDING001: 'pending',
  TESTPENDING_FAIL: 'pending',
} as const;
/** Test-mode CIN that confirms (a selected_cin starting with it). */
export const MOCK_CIN = 'U72900KA2024PTC123456';
export const MOCK_AR_SUCCESS = 'MOCK_AR_SUCCESS';
export const MOCK_AR_FAIL = 'MOCK_AR_FAIL';

/** SubAccountKycStatus (spec), in its API field names. */
export interface KycStatus {
  sub_account_id: string;
  kyc_mode: string;
  business_type: string;
  overall_status: OverallStatus;
  kyc_calls_blocked: boolean;
  verifications: Record<VerificationType, OverallStatus>;
}

/** KycVerificationResult (spec); `mock` on test-mode answers. */
export interface KycResult {
  verification_type: VerificationType;
  status: RowStatus;
  kyc_calls_blocked: boolean;
  overall_status: OverallStatus;
  mock?: true;
}

export type VerifyInput =
  | { type: 'pan'; pan: string }
  | { type: 'gst'; gstin: string }
  | { type: 'cin'; companyName: string; cin: string }
  | { type: 'aadhaar'; accessRequestId: string };

export interface Kyc {
  readonly store: KycStore;
  /** Partner KYC sessions and their hosted page (docs/kyc.md "KYC sessions"). */
  readonly sessions: KycSessions;
  /** Whether real-mode checks have a provider. */
  readonly providerConfigured: boolean;
  /** SubAccountKycStatus of a sub-account of `parent` (KycError not_found). */
  status(parent: string, sub: string): Promise<KycStatus>;
  /** Run one verification, record its row, recompute the block. */
  verify(parent: string, sub: string, input: VerifyInput, test: boolean): Promise<KycResult>;
  cinSearch(parent: string, sub: string, companyName: string, test: boolean): Promise<CinMatch[]>;
  digilockerInitiate(parent: string, sub: string, redirectUrl: string, test: boolean): Promise<{ authorization_url: string; access_request_id: string }>;
  /** Test mode: the latest pending test row of `type` becomes `outcome`. */
  finalizePending(parent: string, sub: string, type: VerificationType, outcome: 'verified' | 'failed'): Promise<KycResult>;
  /** Recompute overall_status and write kyc_calls_blocked when it changed (after a kyc_mode or business_type update). */
  recompute(parent: string, sub: string): Promise<{ overall: OverallStatus; blocked: boolean } | null>;
  /**
   * Retry the verifications whose provider timed out and that are due (a fleet shares the
   * schedule; each row is claimed by one node). Returns how many were tried.
   */
  retryPending(): Promise<number>;
  /** Run {@link retryPending} every `intervalMs` until {@link stop}. */
  startRetries(intervalMs?: number): void;
  stop(): void;
  /** Drop the rows of a deleted sub-account. */
  forget(sub: string): Promise<void>;
  close(): Promise<void>;
}

export interface KycDeps {
  config: Readonly<Config>;
  redis: RedisClient | null;
  directory: Directory;
  log?: Logger;
  /** A store in place of the one `redis` selects (tests). */
  store?: KycStore;
  /** A provider in place of the one the config names (tests); null = none. */
  provider?: KycProvider | null;
  /** The signed callback outbox the session webhooks go out on; none = no session webhooks. */
  outbox?: { enqueue(item: OutboxItem): Promise<void> } | null;
  /** Seals the fields of a timed-out verification until its retry; one from DATA_ENCRYPTION_KEY when absent. */
  secretBox?: SecretBox;
  now?: () => number;
}

const NO_PROVIDER =
  'No KYC verification provider is configured on this server (KYC_PROVIDER_URL and KYC_PROVIDER_SECRET); real verifications are unavailable. The test-mode paths under /api/v1/sub-accounts/test/ work without one.';

/** Build the KYC capability. */
export function createKyc(d: KycDeps): Kyc {
  const log = d.log ?? createLogger('silent');
  const now = d.now ?? Date.now;
  const iso = (): string => new Date(now()).toISOString();
  const store = d.store ?? (d.redis ? new RedisKycStore(d.redis) : new MemoryKycStore());
  const provider: KycProvider | null =
    d.provider !== undefined ? d.provider : d.config.kycProviderUrl && d.config.kycProviderSecret ? httpKycProvider({ url: d.config.kycProviderUrl, secret: d.config.kycProviderSecret }) : null;

  let box: SecretBox | null = d.secretBox ?? null;
  const boxOf = (): SecretBox => {
    if (!box) box = createSecretBox(d.config.dataEncryptionKeys.map((k) => ({ kid: k.kid, key: Buffer.from(k.key, 'base64') })));
    return box;
  };
  let timer: NodeJS.Timeout | null = null;

  const subOf = async (parent: string, sub: string): Promise<SubAccountRecord> => {
    const s = await d.directory.getSubAccount(parent, sub);
    if (!s) throw new KycError('not_found', 'No sub-account with this Auth ID on this account.');
    return s;
  };

  const compute = async (s: SubAccountRecord): Promise<{ overall: OverallStatus; blocked: boolean; per: Partial<Record<VerificationType, RowStatus>> }> => {
    const latest = await store.latest(s.authId);
    const per: Partial<Record<VerificationType, RowStatus>> = {};
    for (const t of VERIFICATION_TYPES) if (latest[t]) per[t] = (latest[t] as VerificationRow).status;
    const overall = overallStatus(s.businessType, per);
    return { overall, blocked: callsBlocked(s.kycMode, overall), per };
  };

  /**
   * Bring the record's kyc_calls_blocked in line with the rows. Two verifications
   * recorded at once may each compute before the other's row is there; the loop
   * reads again after its write until what it wrote matches what it reads.
   */
  const settle = async (parent: string, sub: string): Promise<{ overall: OverallStatus; blocked: boolean; per: Partial<Record<VerificationType, RowStatus>> } | null> => {
    for (let i = 0; i < 5; i++) {
      const s = await d.directory.getSubAccount(parent, sub);
      if (!s) return null;
      const c = await compute(s);
      if (s.kycCallsBlocked === c.blocked) return c;
      await d.directory.updateSubAccount(parent, sub, { kycCallsBlocked: c.blocked, updatedAt: iso() });
      log.info({ subAccount: sub, overall: c.overall, kycCallsBlocked: c.blocked }, 'sub-account KYC block changed');
    }
    const s = await subOf(parent, sub);
    return compute(s);
  };

  const result = async (parent: string, row: VerificationRow): Promise<KycResult> => {
    const c = await settle(parent, row.subAuthId);
    if (!c) throw new KycError('not_found', 'No sub-account with this Auth ID on this account.');
    return { verification_type: row.type, status: row.status, kyc_calls_blocked: c.blocked, overall_status: c.overall, ...(row.test ? { mock: true as const } : {}) };
  };

  const record = async (
    s: SubAccountRecord,
    type: VerificationType,
    status: RowStatus,
    value: string,
    test: boolean,
    reference: string | null,
    retry: { sealed: string; attempts: number } | null = null,
  ): Promise<VerificationRow> => {
    const at = iso();
    const row: VerificationRow = { id: randomUUID(), subAuthId: s.authId, parentAuthId: s.parentAuthId, type, status, masked: maskValue(value), test, reference, createdAt: at, updatedAt: at, ...(retry ?? {}) };
    await store.put(row);
    log.info({ subAccount: s.authId, verification: type, status, test }, 'KYC verification recorded');
    return row;
  };

  /** The checked value and its format problem, by type (field names as the API's). */
  const inputOf = (input: VerifyInput): { value: string; field: string; problem: (v: string) => string | null } => {
    switch (input.type) {
      case 'pan':
        return { value: input.pan, field: 'pan', problem: panProblem };
      case 'gst':
        return { value: input.gstin, field: 'gstin', problem: gstinProblem };
      case 'cin':
        return { value: input.cin, field: 'selected_cin', problem: cinProblem };
      case 'aadhaar':
        return { value: input.accessRequestId, field: 'access_request_id', problem: (v) => (v.length >= 1 && v.length <= 128 ? null : 'must be 1 to 128 characters') };
    }
  };

  /** The outcome of a test-mode verification: the magic inputs, then each type's own mock values. */
  const mockOutcome = (input: VerifyInput, value: string, field: string, problem: (v: string) => string | null): RowStatus | 'error' => {
    const magic = (MAGIC as Record<string, RowStatus | 'error'>)[value];
    if (magic) return magic;
    if (input.type === 'cin' && value.startsWith(MOCK_CIN)) return 'verified';
    if (input.type === 'aadhaar') {
      if (value === MOCK_AR_SUCCESS) return 'verified';
      if (value === MOCK_AR_FAIL) return 'failed';
      throw new KycError('invalid', `test mode knows ${MOCK_AR_SUCCESS}, ${MOCK_AR_FAIL} and the TEST… magic values`, field);
    }
    const p = problem(value);
    if (p) throw new KycError('invalid', `${p} (or a test-mode magic value such as TESTSUCCESS0001)`, field);
    // A well-formed value that is not a magic one: not in the test registry.
    return 'failed';
  };

  const providerCall = async <T>(f: (p: KycProvider) => Promise<T>): Promise<T> => {
    if (!provider) throw new KycError('unavailable', NO_PROVIDER);
    return f(provider);
  };

  const sessions = createKycSessions({ store, directory: d.directory, outbox: d.outbox ?? null, provider, production: d.config.production, log, now, recompute: (parent, sub) => settle(parent, sub) });

  return {
    store,
    sessions,
    providerConfigured: provider !== null,

    async status(parent, sub) {
      await subOf(parent, sub);
      const c = await settle(parent, sub);
      const s = await subOf(parent, sub);
      if (!c) throw new KycError('not_found', 'No sub-account with this Auth ID on this account.');
      const verifications = Object.fromEntries(VERIFICATION_TYPES.map((t) => [t, c.per[t] ?? 'not_started'])) as Record<VerificationType, OverallStatus>;
      return { sub_account_id: s.authId, kyc_mode: s.kycMode, business_type: s.businessType, overall_status: c.overall, kyc_calls_blocked: c.blocked, verifications };
    },

    async verify(parent, sub, input, test) {
      const s = await subOf(parent, sub);
      const { value, field, problem } = inputOf(input);
      if (test) {
        const outcome = mockOutcome(input, value, field, problem);
        if (outcome === 'error') throw new KycError('provider_error', 'The mock verification provider failed (TESTERROR0001); nothing was recorded.');
        return result(parent, await record(s, input.type, outcome, value, true, null));
      }
      const p = problem(value);
      if (p) throw new KycError('invalid', p, field);
      const op = input.type === 'pan' ? 'verify-pan' : input.type === 'gst' ? 'verify-gst' : input.type === 'cin' ? 'cin/confirm' : 'digilocker/verify';
      const fields: Record<string, string> =
        input.type === 'pan'
          ? { pan: input.pan }
          : input.type === 'gst'
            ? { gstin: input.gstin }
            : input.type === 'cin'
              ? { company_name: input.companyName, cin: input.cin }
              : { access_request_id: input.accessRequestId };
      let verdict: { status: RowStatus; reference: string | null };
      try {
        verdict = await providerCall((pr) => pr.verify(op, s.authId, fields));
      } catch (err) {
        if (err instanceof ProviderTimeoutError) {
          // Never reported verified on a timeout: the row stays pending and is retried
          // (its fields sealed until then; docs/kyc.md "Providers").
          log.warn({ subAccount: s.authId, verification: input.type }, 'KYC provider timed out; verification left pending, retry scheduled');
          const row = await record(s, input.type, 'pending', value, false, null, { sealed: boxOf().encrypt(JSON.stringify({ op, fields }), `kyc:${s.authId}`), attempts: 1 });
          await store.scheduleRetry(s.authId, row.id, now() + (RETRY_DELAYS_MS[0] as number));
          return result(parent, row);
        } else if (err instanceof ProviderFailedError) {
          log.warn({ subAccount: s.authId, verification: input.type, providerStatus: err.status }, 'KYC provider failed');
          throw new KycError('provider_error', 'The KYC verification provider failed; nothing was recorded. Retry later.');
        } else throw err;
      }
      return result(parent, await record(s, input.type, verdict.status, value, false, verdict.reference));
    },

    async cinSearch(parent, sub, companyName, test) {
      await subOf(parent, sub);
      if (test) {
        const name = companyName.trim().toUpperCase();
        return [
          { cin: MOCK_CIN, company_name: `${name} PRIVATE LIMITED` },
          { cin: 'U72900KA2024PTC654321', company_name: `${name} SERVICES PRIVATE LIMITED` },
        ];
      }
      try {
        return await providerCall((pr) => pr.cinSearch(sub, companyName));
      } catch (err) {
        if (err instanceof ProviderTimeoutError || err instanceof ProviderFailedError) throw new KycError('provider_error', 'The KYC verification provider failed; retry later.');
        throw err;
      }
    },

    async digilockerInitiate(parent, sub, redirectUrl, test) {
      await subOf(parent, sub);
      if (test) {
        return { authorization_url: `https://digilocker.mock.invalid/authorize?access_request_id=${MOCK_AR_SUCCESS}&redirect_url=${encodeURIComponent(redirectUrl)}`, access_request_id: MOCK_AR_SUCCESS };
      }
      try {
        return await providerCall((pr) => pr.digilockerInitiate(sub, redirectUrl));
      } catch (err) {
        if (err instanceof ProviderTimeoutError || err instanceof ProviderFailedError) throw new KycError('provider_error', 'The KYC verification provider failed; retry later.');
        throw err;
      }
    },

    async finalizePending(parent, sub, type, outcome) {
      await subOf(parent, sub);
      const row = (await store.latest(sub))[type];
      if (!row || row.status !== 'pending' || !row.test) {
        throw new KycError('conflict', `No pending test-mode ${type} verification to finalize on this sub-account.`);
      }
      const next: VerificationRow = { ...row, status: outcome, updatedAt: iso() };
      await store.put(next);
      log.info({ subAccount: sub, verification: type, status: outcome, test: true }, 'KYC verification finalized');
      return result(parent, next);
    },

    async recompute(parent, sub) {
      const c = await settle(parent, sub);
      return c ? { overall: c.overall, blocked: c.blocked } : null;
    },

    async retryPending() {
      if (!provider) return 0;
      const due = await store.claimDueRetries(now(), 60_000, 20);
      for (const { subAuthId, id } of due) {
        const row = await store.row(subAuthId, id);
        if (!row || row.status !== 'pending' || !row.sealed) {
          await store.unscheduleRetry(subAuthId, id);
          continue;
        }
        const latest = (await store.latest(subAuthId))[row.type];
        let job: { op: 'verify-pan' | 'verify-gst' | 'cin/confirm' | 'digilocker/verify'; fields: Record<string, string> };
        try {
          job = JSON.parse(boxOf().decrypt(row.sealed, `kyc:${subAuthId}`)) as typeof job;
        } catch {
          log.warn({ subAccount: subAuthId, verification: row.type }, 'KYC retry: the sealed fields cannot be opened; left pending');
          await store.put({ ...row, sealed: null, updatedAt: iso() });
          await store.unscheduleRetry(subAuthId, id);
          continue;
        }
        const attempts = (row.attempts ?? 1) + 1;
        let status: RowStatus | null = null;
        let reference: string | null = null;
        try {
          const v = await provider.verify(job.op, subAuthId, job.fields);
          status = v.status;
          reference = v.reference;
        } catch (err) {
          log.warn({ subAccount: subAuthId, verification: row.type, attempts, err: err instanceof Error ? err.name : 'error' }, 'KYC retry failed');
        }
        const next: VerificationRow = { ...row, attempts, updatedAt: iso() };
        if (status !== null) {
          Object.assign(next, { status, reference, sealed: null });
          await store.unscheduleRetry(subAuthId, id);
        } else if (attempts > RETRY_DELAYS_MS.length) {
          // Given up: stays pending (never verified by default); verify again to retry.
          next.sealed = null;
          await store.unscheduleRetry(subAuthId, id);
        } else {
          await store.scheduleRetry(subAuthId, id, now() + (RETRY_DELAYS_MS[attempts - 1] as number));
        }
        // A newer verification of the type since: this row is history, written without becoming the latest again.
        if (latest && latest.id !== row.id) {
          await store.put({ ...next });
          await store.put(latest);
        } else await store.put(next);
        log.info({ subAccount: subAuthId, verification: row.type, status: next.status, attempts }, 'KYC verification retried');
        await settle(row.parentAuthId, subAuthId);
      }
      return due.length;
    },

    startRetries(intervalMs = 5000) {
      if (timer || !provider) return;
      timer = setInterval(() => {
        this.retryPending().catch((err: unknown) => log.warn({ err: err instanceof Error ? err.message : String(err) }, 'KYC retry sweep failed'));
      }, intervalMs);
      timer.unref();
    },

    stop() {
      if (timer) clearInterval(timer);
      timer = null;
    },

    forget: (sub) => store.clear(sub),
    close: () => store.close(),
  };
}

/** The requirement list of a business type as the API shows it (docs). */
export function requirementText(businessType: string): string {
  return requirementsFor(businessType)
    .map((r) => r.join(' or '))
    .join(' and ');
}
