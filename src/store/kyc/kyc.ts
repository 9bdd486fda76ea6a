/**
 * The KYC store service (docs/kyc.md "Storage"): the verification rows of each
 * sub-account — one row per verification attempt (PAN, GST, CIN, Aadhaar) — and, per
 * sub-account and verification type, which row is the latest (the one that counts).
 *
 * A row never holds a PAN, GSTIN, CIN or Aadhaar number in full: `masked` keeps the
 * last 4 characters only (the caller masks before it writes; {@link maskValue}).
 */

export type VerificationType = 'pan' | 'gst' | 'cin' | 'aadhaar';
export const VERIFICATION_TYPES: readonly VerificationType[] = ['pan', 'gst', 'cin', 'aadhaar'];

/** The status of one verification row. */
export type RowStatus = 'pending' | 'verified' | 'failed';

export interface VerificationRow {
  id: string;
  subAuthId: string;
  parentAuthId: string;
  type: VerificationType;
  status: RowStatus;
  /** The checked value masked to its last 4 characters ("******234F"). */
  masked: string;
  /** Written by a test-mode endpoint (mock, never sent to a provider). */
  test: boolean;
  /** The provider's reference of an asynchronous check, null when none. */
  reference: string | null;
  /**
   * Only while a real-mode check that timed out waits for its retry: the checked fields,
   * sealed (AES-256-GCM, DATA_ENCRYPTION_KEY); null otherwise. Never the plain value.
   */
  sealed?: string | null;
  /** Provider attempts made for this row. */
  attempts?: number;
  createdAt: string;
  updatedAt: string;
}

export interface KycStore extends KycSessionStore {
  /** Write a row (new or changed) and make it the latest of its type for its sub-account. */
  put(row: VerificationRow): Promise<void>;
  /** The latest row of each type of a sub-account (types never verified are absent). */
  latest(subAuthId: string): Promise<Partial<Record<VerificationType, VerificationRow>>>;
  /** Every row of a sub-account, oldest first. */
  rows(subAuthId: string): Promise<VerificationRow[]>;
  /** When the row `id` of `subAuthId` is due for a retry (ms); replaces an earlier time. */
  scheduleRetry(subAuthId: string, id: string, at: number): Promise<void>;
  /** Remove a row from the retry schedule. */
  unscheduleRetry(subAuthId: string, id: string): Promise<void>;
  /**
   * Claim up to `limit` rows due at `now` for `leaseMs` (moved to now + leaseMs, so one
   * node of a fleet takes each, and a node that dies leaves it due again).
   */
  claimDueRetries(now: number, leaseMs: number, limit: number): Promise<Array<{ subAuthId: string; id: string }>>;
  /** One row of a sub-account. */
  row(subAuthId: string, id: string): Promise<VerificationRow | null>;
  /** Remove every row of a sub-account (sub-account deleted). */
  clear(subAuthId: string): Promise<void>;
  close(): Promise<void>;
}

/** `value` masked to its last 4 characters: every other character becomes `*`. */
export function maskValue(value: string): string {
  const v = value.trim();
  if (v.length <= 4) return '*'.repeat(v.length);
  return '*'.repeat(v.length - 4) + v.slice(-4);
}

/** Rows in creation order (id ties broken by id). */
export function byCreation(a: VerificationRow, b: VerificationRow): number {
  return a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** The status of a partner's KYC session (docs/kyc.md "KYC sessions"). */
export type SessionStatus = 'email_sent' | 'link_ready' | 'opened' | 'in_progress' | 'kyc_completed' | 'revoked' | 'expired';

/** Statuses after which a session does nothing more. */
export const TERMINAL_SESSION: ReadonlySet<SessionStatus> = new Set(['kyc_completed', 'revoked', 'expired']);

export interface KycSession {
  id: string;
  /** The owner: a partner's id, or `account:<auth_id>` for a parent account's session for its sub-account. */
  partnerId: string;
  /** Whose KYC: a customer account, or a sub-account (then {@link parentAuthId} is set). */
  accountAuthId: string;
  /** The parent account of a sub-account's session, null for a partner's. */
  parentAuthId?: string | null;
  flowType: 'email' | 'redirect';
  customerEmail: string | null;
  redirectUrl: string | null;
  webhookUrl: string | null;
  status: SessionStatus;
  /** The secret of the hosted page's URL (widget_url). */
  token: string;
  /** The business type the customer chose on the page (decides what is needed), null until then. */
  businessType: string | null;
  metadata: Record<string, unknown>;
  revokeReason: string | null;
  firstOpenedAt: string | null;
  completedAt: string | null;
  /** ms */
  expiresAt: number;
  /** When the link was last sent (create, resend), ms. */
  lastSentAt: number;
  createdAt: string;
  updatedAt: string;
}

/** A session that still counts as the account's active one at `now`. */
export function sessionActive(s: KycSession, now: number): boolean {
  return !TERMINAL_SESSION.has(s.status) && s.expiresAt > now;
}

/** The partner's KYC sessions; one active session per account. */
export interface KycSessionStore {
  /** Store a new session unless its account has an active one at `now` (then that one's id). */
  createSession(s: KycSession, now: number): Promise<{ ok: true } | { ok: false; activeId: string }>;
  getSession(id: string): Promise<KycSession | null>;
  sessionByToken(token: string): Promise<KycSession | null>;
  /** Replace `old` by `next` if the stored one is still `old` (compare-and-set); false when it changed. */
  replaceSession(old: KycSession, next: KycSession): Promise<boolean>;
  /** A partner's sessions, newest first. */
  partnerSessions(partnerId: string): Promise<KycSession[]>;
}
