/**
 * Which verifications a sub-account needs (docs/kyc.md "The rule"), and what its
 * verification rows make of `overall_status` and `kyc_calls_blocked`. Pure.
 *
 * - individual, proprietorship (sole_proprietorship), huf — and an empty or unknown
 *   business_type — need PAN **and** Aadhaar;
 * - companies and other entities (private_limited, public_limited, llp, opc,
 *   partnership, trust, society, company) need PAN **and** (GST **or** CIN).
 *
 * Only the latest row of each type counts. A requirement is met when one of its
 * alternatives is verified. overall_status: verified when every requirement is met;
 * otherwise pending when any required verification is pending or some requirement is
 * already met (KYC under way); failed when a required verification failed and none is
 * pending; not_started when nothing required was tried. kyc_calls_blocked: a
 * customer_use sub-account whose overall_status is not verified (personal_use rides on
 * the parent's KYC and is never blocked).
 */
import type { RowStatus, VerificationType } from '../store/kyc/kyc.js';

export type OverallStatus = 'not_started' | 'pending' | 'verified' | 'failed';
export type KycModeName = 'personal_use' | 'customer_use';

/** A list of requirements, each met by any one of its alternatives. */
export type Requirement = readonly VerificationType[];

export const INDIVIDUAL_TYPES = ['individual', 'proprietorship', 'sole_proprietorship', 'huf'] as const;
export const ENTITY_TYPES = ['private_limited', 'public_limited', 'llp', 'opc', 'partnership', 'trust', 'society', 'company'] as const;

const ENTITY = new Set<string>(ENTITY_TYPES);

/** The requirements of a business_type (case and spaces/hyphens ignored). */
export function requirementsFor(businessType: string): Requirement[] {
  const t = businessType.trim().toLowerCase().replace(/[\s-]+/g, '_');
  return ENTITY.has(t) ? [['pan'], ['gst', 'cin']] : [['pan'], ['aadhaar']];
}

/** The status of one requirement: its best alternative. */
function requirementStatus(req: Requirement, s: Partial<Record<VerificationType, RowStatus>>): OverallStatus {
  const v = req.map((t) => s[t] ?? 'not_started');
  if (v.includes('verified')) return 'verified';
  if (v.includes('pending')) return 'pending';
  if (v.includes('failed')) return 'failed';
  return 'not_started';
}

/** overall_status from the latest status of each verification type. */
export function overallStatus(businessType: string, s: Partial<Record<VerificationType, RowStatus>>): OverallStatus {
  const per = requirementsFor(businessType).map((r) => requirementStatus(r, s));
  if (per.every((x) => x === 'verified')) return 'verified';
  if (per.includes('pending')) return 'pending';
  if (per.includes('failed')) return 'failed';
  if (per.includes('verified')) return 'pending';
  return 'not_started';
}

/** Whether calls to phones are blocked (the flag the edge and the Calls API check). */
export function callsBlocked(mode: KycModeName, overall: OverallStatus): boolean {
  return mode === 'customer_use' && overall !== 'verified';
}
