/**
 * Partner KYC sessions (docs/kyc.md "KYC sessions"; the SDK's `partner_api` kyc-sessions):
 * a partner asks its customer account to complete KYC through a hosted page (the
 * session's `widget_url`). One active session per account; statuses
 * email_sent | link_ready → opened → in_progress → kyc_completed | revoked | expired.
 * The account's verifications are rows of the KYC store keyed by the account's Auth ID,
 * under the same rule as a sub-account's. Session webhooks (kyc.completed, kyc.failed,
 * kyc.session_revoked, kyc.session_expired) go out on the account's signed callback outbox.
 */
import { randomBytes, randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { OutboxItem } from '../store/calls/calls.js';
import type { AccountRecord, Directory } from '../store/directory/directory.js';
import { maskValue, sessionActive, TERMINAL_SESSION, type KycSession, type KycStore, type RowStatus, type SessionStatus, type VerificationType } from '../store/kyc/kyc.js';
import { overallStatus, requirementsFor, type OverallStatus } from './rules.js';
import { gstinProblem, panProblem } from './validate.js';
import type { KycProvider } from './provider.js';

/** Resend at most once in this many ms (the SDK: once per 30 minutes). */
export const RESEND_COOLDOWN_MS = 30 * 60_000;
const DAY_MS = 86_400_000;

export class SessionError extends Error {
  constructor(
    readonly kind: 'not_found' | 'invalid' | 'conflict' | 'cooldown' | 'gone' | 'unavailable' | 'provider_error',
    message: string,
    readonly field: string | null = null,
    readonly retryAfterS = 0,
  ) {
    super(message);
    this.name = 'SessionError';
  }
}

export interface SessionCreate {
  accountAuthId: string;
  flowType: 'email' | 'redirect';
  customerEmail: string | null;
  redirectUrl: string | null;
  webhookUrl: string | null;
  expiresInDays: number;
  metadata: Record<string, unknown>;
}

export interface SessionsDeps {
  store: KycStore;
  directory: Directory;
  /** The callback outbox (the account's signed webhooks). */
  outbox: { enqueue(item: OutboxItem): Promise<void> } | null;
  /** The real provider, or null: then the page runs in test mode (magic inputs) unless `production`. */
  provider: KycProvider | null;
  production: boolean;
  log: Logger;
  now: () => number;
  /** After a sub-account session's verifications: recompute the sub-account's block. */
  recompute?: (parent: string, sub: string) => Promise<unknown>;
}

/** What the hosted page submits. */
export interface PageSubmit {
  businessType: string;
  pan: string;
  gstin: string;
  accessRequestId: string;
}

export interface PageState {
  session: KycSession;
  overall: OverallStatus;
  verifications: Record<VerificationType, OverallStatus>;
  needs: string;
  mock: boolean;
}

export interface KycSessions {
  create(partnerId: string, c: SessionCreate): Promise<KycSession>;
  /** A parent account's session for one of its sub-accounts (its owner is `account:<parent>`). */
  createForSubAccount(parent: string, c: SessionCreate): Promise<KycSession>;
  list(partnerId: string, q: { status?: string; accountAuthId?: string }): Promise<KycSession[]>;
  get(partnerId: string, id: string): Promise<KycSession>;
  revoke(partnerId: string, id: string, reason: string | null): Promise<KycSession>;
  resend(partnerId: string, id: string): Promise<KycSession>;
  /** The hosted page opened (status opened on the first visit). */
  open(token: string): Promise<PageState>;
  /** The hosted page's form: run its verifications, complete when the rule is met. */
  submit(token: string, form: PageSubmit): Promise<PageState>;
}

const MAGIC: Record<string, RowStatus> = { TESTSUCCESS0001: 'verified', TESTFAIL0001: 'failed', TESTPENDING001: 'pending', MOCK_AR_SUCCESS: 'verified', MOCK_AR_FAIL: 'failed' };

export function createKycSessions(d: SessionsDeps): KycSessions {
  const iso = (ms = d.now()): string => new Date(ms).toISOString();

  const accountOf = async (id: string): Promise<AccountRecord | null> => d.directory.getAccount(id);

  const webhook = async (s: KycSession, event: string, extra: Record<string, string> = {}): Promise<void> => {
    if (!s.webhookUrl || !d.outbox) return;
    // A sub-account's session is signed and delivered as its parent account's callbacks.
    const a = await accountOf(s.parentAuthId ?? s.accountAuthId);
    if (!a) return;
    await d.outbox.enqueue({
      id: randomUUID(),
      domain: a.sipDomain,
      authId: a.authId,
      event,
      url: s.webhookUrl,
      method: 'POST',
      params: { Event: event, SessionId: s.id, AccountAuthId: s.accountAuthId, Status: s.status, Timestamp: iso(), ...extra },
      attempts: 0,
      fallback: null,
      createdAt: d.now(),
    });
    d.log.info({ session: s.id, event }, 'KYC session webhook queued');
  };

  /** Apply `f` to the stored session (compare-and-set, retried); the session after it. */
  const change = async (s0: KycSession, f: (s: KycSession) => KycSession | null): Promise<{ s: KycSession; changed: boolean }> => {
    let s = s0;
    for (let i = 0; i < 5; i++) {
      const next = f(s);
      if (!next) return { s, changed: false };
      if (await d.store.replaceSession(s, next)) return { s: next, changed: true };
      const again = await d.store.getSession(s.id);
      if (!again) throw new SessionError('not_found', 'No such KYC session.');
      s = again;
    }
    throw new SessionError('conflict', 'The session changed under this request; retry.');
  };

  /** Expire a session past its time (once, with its webhook). */
  const fresh = async (s: KycSession): Promise<KycSession> => {
    if (TERMINAL_SESSION.has(s.status) || s.expiresAt > d.now()) return s;
    const r = await change(s, (x) => (TERMINAL_SESSION.has(x.status) ? null : { ...x, status: 'expired', updatedAt: iso() }));
    if (r.changed) await webhook(r.s, 'kyc.session_expired');
    return r.s;
  };

  const owned = async (partnerId: string, id: string): Promise<KycSession> => {
    const s = await d.store.getSession(id);
    if (!s || s.partnerId !== partnerId) throw new SessionError('not_found', 'No KYC session with this id for this partner.');
    return fresh(s);
  };

  const byToken = async (token: string): Promise<KycSession> => {
    const s = await d.store.sessionByToken(token);
    if (!s) throw new SessionError('not_found', 'This KYC link is not valid.');
    return fresh(s);
  };

  const state = async (s: KycSession): Promise<PageState> => {
    const latest = await d.store.latest(s.accountAuthId);
    const per: Partial<Record<VerificationType, RowStatus>> = {};
    for (const t of ['pan', 'gst', 'cin', 'aadhaar'] as const) if (latest[t]) per[t] = latest[t].status;
    const bt = s.businessType ?? 'individual';
    const verifications = Object.fromEntries((['pan', 'gst', 'cin', 'aadhaar'] as const).map((t) => [t, per[t] ?? 'not_started'])) as Record<VerificationType, OverallStatus>;
    const needs = requirementsFor(bt).map((r) => r.join(' or ')).join(' and ');
    return { session: s, overall: overallStatus(bt, per), verifications, needs, mock: d.provider === null };
  };

  const verifyOne = async (s: KycSession, type: VerificationType, value: string): Promise<RowStatus> => {
    let status: RowStatus;
    if (d.provider) {
      const op = type === 'pan' ? 'verify-pan' : type === 'gst' ? 'verify-gst' : 'digilocker/verify';
      const field = type === 'pan' ? 'pan' : type === 'gst' ? 'gstin' : 'access_request_id';
      try {
        status = (await d.provider.verify(op, s.accountAuthId, { [field]: value })).status;
      } catch {
        status = 'pending';
      }
    } else {
      if (d.production) throw new SessionError('unavailable', 'KYC verification is not available on this server (no provider configured).');
      status = MAGIC[value] ?? 'failed';
    }
    const at = iso();
    await d.store.put({ id: randomUUID(), subAuthId: s.accountAuthId, parentAuthId: s.parentAuthId ?? s.accountAuthId, type, status, masked: maskValue(value), test: d.provider === null, reference: null, createdAt: at, updatedAt: at });
    d.log.info({ session: s.id, account: s.accountAuthId, verification: type, status }, 'KYC session verification recorded');
    return status;
  };

  const make = async (owner: string, parentAuthId: string | null, c: SessionCreate): Promise<KycSession> => {
      if (c.flowType === 'email' && !c.customerEmail) throw new SessionError('invalid', 'required when flow_type is email', 'customer_email');
      if (c.flowType === 'redirect' && !c.redirectUrl) throw new SessionError('invalid', 'required when flow_type is redirect', 'redirect_url');
      const now = d.now();
      const s: KycSession = {
        id: `kyc_sess_${randomBytes(12).toString('hex')}`,
        partnerId: owner,
        accountAuthId: c.accountAuthId,
        parentAuthId,
        flowType: c.flowType,
        customerEmail: c.flowType === 'email' ? c.customerEmail : null,
        redirectUrl: c.redirectUrl,
        webhookUrl: c.webhookUrl,
        status: c.flowType === 'email' ? 'email_sent' : 'link_ready',
        token: randomBytes(24).toString('base64url'),
        businessType: null,
        metadata: c.metadata,
        revokeReason: null,
        firstOpenedAt: null,
        completedAt: null,
        expiresAt: now + c.expiresInDays * DAY_MS,
        lastSentAt: now,
        createdAt: iso(now),
        updatedAt: iso(now),
      };
      const r = await d.store.createSession(s, now);
      if (!r.ok) throw new SessionError('conflict', `The account already has an active KYC session (${r.activeId}); revoke it first.`);
      d.log.info({ session: s.id, account: s.accountAuthId, flow: s.flowType }, 'KYC session created');
      return s;
  };

  return {
    async create(partnerId, c) {
      const a = await accountOf(c.accountAuthId);
      if (!a || a.partnerId !== partnerId) throw new SessionError('invalid', 'no customer account of this partner has this auth_id', 'account_auth_id');
      return make(partnerId, null, c);
    },

    async createForSubAccount(parent, c) {
      const sub = await d.directory.getSubAccount(parent, c.accountAuthId);
      if (!sub) throw new SessionError('not_found', 'No sub-account with this Auth ID on this account.');
      return make(`account:${parent}`, parent, c);
    },

    async list(partnerId, q) {
      const all = await Promise.all((await d.store.partnerSessions(partnerId)).map(fresh));
      return all.filter((s) => (q.status === undefined || s.status === q.status) && (q.accountAuthId === undefined || s.accountAuthId === q.accountAuthId));
    },

    get: owned,

    async revoke(partnerId, id, reason) {
      const s = await owned(partnerId, id);
      if (TERMINAL_SESSION.has(s.status)) throw new SessionError('gone', `The session is already ${s.status}.`);
      const r = await change(s, (x) => (TERMINAL_SESSION.has(x.status) ? null : { ...x, status: 'revoked', revokeReason: reason, updatedAt: iso() }));
      if (r.changed) await webhook(r.s, 'kyc.session_revoked');
      return r.s;
    },

    async resend(partnerId, id) {
      const s = await owned(partnerId, id);
      if (TERMINAL_SESSION.has(s.status)) throw new SessionError('gone', `The session is ${s.status}; create a new one.`);
      const wait = s.lastSentAt + RESEND_COOLDOWN_MS - d.now();
      if (wait > 0) throw new SessionError('cooldown', `The link was sent less than 30 minutes ago; resend in ${Math.ceil(wait / 1000)} s.`, null, Math.ceil(wait / 1000));
      const r = await change(s, (x) => ({ ...x, lastSentAt: d.now(), updatedAt: iso() }));
      d.log.info({ session: s.id }, 'KYC session link re-sent');
      return r.s;
    },

    async open(token) {
      let s = await byToken(token);
      if (s.status === 'email_sent' || s.status === 'link_ready') {
        s = (await change(s, (x) => (x.status === 'email_sent' || x.status === 'link_ready' ? { ...x, status: 'opened', firstOpenedAt: x.firstOpenedAt ?? iso(), updatedAt: iso() } : null))).s;
      }
      return state(s);
    },

    async submit(token, form) {
      let s = await byToken(token);
      if (TERMINAL_SESSION.has(s.status)) throw new SessionError('gone', `This KYC session is ${s.status}.`);
      if (!sessionActive(s, d.now())) throw new SessionError('gone', 'This KYC session has expired.');
      const bt = form.businessType.trim() || 'individual';
      const company = requirementsFor(bt).some((r) => r.includes('gst'));
      const magic = (v: string): boolean => d.provider === null && v in MAGIC;
      const pp = magic(form.pan) ? null : panProblem(form.pan);
      if (pp) throw new SessionError('invalid', pp, 'pan');
      if (company) {
        const gp = magic(form.gstin) ? null : gstinProblem(form.gstin);
        if (gp) throw new SessionError('invalid', gp, 'gstin');
      } else if (!form.accessRequestId) throw new SessionError('invalid', 'required for this business type (Aadhaar through DigiLocker)', 'access_request_id');
      s = (await change(s, (x) => ({ ...x, businessType: bt, status: x.status === 'kyc_completed' ? x.status : 'in_progress', firstOpenedAt: x.firstOpenedAt ?? iso(), updatedAt: iso() }))).s;
      // A sub-account's business type is what its customer states here (the rule reads it from the sub-account).
      if (s.parentAuthId) await d.directory.updateSubAccount(s.parentAuthId, s.accountAuthId, { businessType: bt, updatedAt: iso() });
      await verifyOne(s, 'pan', form.pan);
      if (company) await verifyOne(s, 'gst', form.gstin);
      else await verifyOne(s, 'aadhaar', form.accessRequestId);
      if (s.parentAuthId && d.recompute) await d.recompute(s.parentAuthId, s.accountAuthId);
      const st = await state(s);
      if (st.overall === 'verified') {
        const r = await change(s, (x) => (x.status === 'kyc_completed' ? null : { ...x, status: 'kyc_completed', completedAt: iso(), updatedAt: iso() }));
        if (r.changed) await webhook(r.s, 'kyc.completed', { KycType: company ? 'company' : 'individual' });
        return { ...st, session: r.s };
      }
      if (st.overall === 'failed') await webhook(s, 'kyc.failed');
      return st;
    },
  };
}

/** The session as the SDK's ListKycSessionsResponseSessionsItem. */
export function sessionView(s: KycSession): Record<string, unknown> {
  return {
    id: s.id,
    account_auth_id: s.accountAuthId,
    customer_email: s.customerEmail,
    kyc_type: s.businessType === null ? null : requirementsFor(s.businessType).some((r) => r.includes('gst')) ? 'company' : 'individual',
    status: s.status satisfies SessionStatus,
    expires_at: new Date(s.expiresAt).toISOString(),
    first_opened_at: s.firstOpenedAt,
    completed_at: s.completedAt,
    webhook_url: s.webhookUrl,
    redirect_url: s.redirectUrl,
    reminder_schedule: [],
    metadata: s.metadata,
    verified_data: {},
    created_at: s.createdAt,
    updated_at: s.updatedAt,
  };
}
