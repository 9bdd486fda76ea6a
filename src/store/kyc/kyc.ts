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
  createdAt: string;
  updatedAt: string;
}

export interface KycStore {
  /** Write a row (new or changed) and make it the latest of its type for its sub-account. */
  put(row: VerificationRow): Promise<void>;
  /** The latest row of each type of a sub-account (types never verified are absent). */
  latest(subAuthId: string): Promise<Partial<Record<VerificationType, VerificationRow>>>;
  /** Every row of a sub-account, oldest first. */
  rows(subAuthId: string): Promise<VerificationRow[]>;
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
