/**
 * The vendor SDK's shape of a call record (docs/api.md "Compatibility"): the
 * `data`/`pagination`/`summary` envelope of `GET /api/v1/Account/<auth_id>/cdr…` and
 * of the partner's `…/partner/accounts/<id>/cdrs`, made from the same CdrRecord the
 * `CDR/` routes show. The SDK's pydantic models refuse unknown fields, so every
 * object here has exactly the model's fields; what the edge does not know is null
 * where the model allows it, else "" or 0.
 */
import { createHash } from 'node:crypto';
import type { CdrRecord, CdrTotals } from '../store/calls/calls.js';

/** The currency of a CDR that no rate priced (a free call): the partner profile's. */
export const CDR_CURRENCY = 'INR';

/** Q.850 cause values of the causes the proxy writes (FreeSWITCH's numbering for the two SIP-only ones). */
const CAUSE_CODE: Readonly<Record<string, number>> = Object.freeze({
  UNALLOCATED_NUMBER: 1,
  NORMAL_CLEARING: 16,
  USER_BUSY: 17,
  NO_USER_RESPONSE: 18,
  NO_ANSWER: 19,
  CALL_REJECTED: 21,
  NORMAL_UNSPECIFIED: 31,
  NORMAL_TEMPORARY_FAILURE: 41,
  INCOMPATIBLE_DESTINATION: 88,
  ORIGINATOR_CANCEL: 487,
  USER_NOT_REGISTERED: 606,
});

/** Columns of a vendor CDR, in the SDK model's order (also the CSV export's columns). */
export const VENDOR_CDR_FIELDS = [
  'account_id', 'answer_time', 'billsec', 'bridge_uuid', 'call_direction', 'caller_id_name', 'caller_id_number',
  'campaign_id', 'carrier_ip', 'codec', 'context', 'cost', 'created_at', 'currency', 'customer_endpoint',
  'destination_number', 'duration', 'end_time', 'failure_code', 'failure_reason', 'hangup_cause',
  'hangup_cause_code', 'hangup_cause_name', 'hangup_disposition', 'hangup_source', 'id', 'jitter', 'mos',
  'network_addr', 'origination_region', 'packet_loss', 'progress_time', 'region', 'ring_time', 'sip_call_id',
  'sip_user_agent', 'start_time', 'streaming_cost', 'terminated_to', 'total_cost', 'trunk_id', 'updated_at', 'uuid',
] as const;

export type VendorCdr = Record<(typeof VENDOR_CDR_FIELDS)[number], string | number | null>;

/**
 * The SDK's CDR `id` is an integer; ours is the call_uuid. A stable number from it:
 * the first 48 bits of its SHA-256 (a JSON-safe integer; a collision needs ~16 million
 * calls in one account and only makes two records share an `id`, never a `uuid`).
 */
export function vendorCdrId(callUuid: string): number {
  return createHash('sha256').update(callUuid).digest().readUIntBE(0, 6);
}

/** A CdrRecord as the SDK's list item (`ListCdrsResponseDataItem`). */
export function vendorCdr(c: CdrRecord, accountAuthId: string): VendorCdr {
  const cost = Number(c.billed_amount) || 0;
  const answered = c.call_status === 'answered';
  return {
    account_id: c.sub_account ?? accountAuthId,
    answer_time: c.answered_at,
    billsec: c.bill_duration,
    bridge_uuid: c.bridge_uuid,
    call_direction: c.call_direction,
    caller_id_name: '',
    caller_id_number: c.from_number,
    campaign_id: c.campaign_id,
    carrier_ip: null,
    codec: null,
    context: c.context,
    cost,
    created_at: c.created_at,
    currency: c.currency ?? CDR_CURRENCY,
    customer_endpoint: null,
    destination_number: c.to_number,
    duration: c.duration,
    end_time: c.ended_at,
    failure_code: answered || c.sip_status === null ? null : String(c.sip_status),
    failure_reason: answered ? null : c.call_status,
    hangup_cause: c.hangup_cause,
    hangup_cause_code: CAUSE_CODE[c.hangup_cause] ?? null,
    hangup_cause_name: c.hangup_cause,
    hangup_disposition: c.hangup_disposition,
    hangup_source: null,
    id: vendorCdrId(c.call_uuid),
    jitter: null,
    mos: null,
    network_addr: null,
    origination_region: '',
    packet_loss: null,
    progress_time: null,
    region: '',
    ring_time: 0,
    sip_call_id: c.sip_call_id,
    sip_user_agent: null,
    start_time: c.created_at,
    streaming_cost: 0,
    terminated_to: null,
    total_cost: cost,
    trunk_id: null,
    updated_at: c.ended_at,
    uuid: c.call_uuid,
  };
}

// GetCdrResponseData declares these without Optional: null would fail its validation.
const DETAIL_STRINGS = ['answer_time', 'bridge_uuid', 'codec', 'hangup_source', 'network_addr', 'progress_time', 'sip_user_agent'] as const;
const DETAIL_NUMBERS = ['hangup_cause_code', 'jitter', 'mos', 'packet_loss'] as const;

/** A CdrRecord as the SDK's single record (`GetCdrResponseData`): unknown strings "" and numbers 0, not null. */
export function vendorCdrDetail(c: CdrRecord, accountAuthId: string): VendorCdr {
  const v = vendorCdr(c, accountAuthId);
  for (const k of DETAIL_STRINGS) v[k] ??= '';
  for (const k of DETAIL_NUMBERS) v[k] ??= 0;
  return v;
}

/** The SDK's `pagination`. */
export function vendorPagination(page: number, perPage: number, total: number): Record<string, number | boolean> {
  const pages = Math.ceil(total / perPage);
  return { page, per_page: perPage, total, pages, has_next: page < pages, has_prev: page > 1 };
}

/**
 * The SDK's `summary` over every matching record. `answerRate` is a percentage
 * (two decimals; a whole number for the partner's model, which types it int);
 * `avgCallDuration` the mean `duration` of the answered calls in whole seconds, as a
 * string; `last_call_at` "" when nothing matched.
 */
export function vendorSummary(t: CdrTotals, wholeRate = false): Record<string, string | number> {
  const rate = t.count === 0 ? 0 : (t.answered * 100) / t.count;
  return {
    answerRate: wholeRate ? Math.round(rate) : Math.round(rate * 100) / 100,
    answeredCalls: t.answered,
    avgCallDuration: String(t.answered === 0 ? 0 : Math.round(t.durationSeconds / t.answered)),
    last_call_at: t.lastCallAt ?? '',
    totalCalls: t.count,
    total_billable_seconds: t.billSeconds,
    total_cost: 0,
    total_duration_seconds: t.durationSeconds,
  };
}

/**
 * A CSV cell that a spreadsheet would run as a formula (`=`, `@`, a tab or CR first, or
 * `+`/`-` first but not a plain number such as +14155550100) is prefixed with `'`
 * (OWASP "CSV injection"): From numbers come from the network.
 */
export function csvSafe(v: string): string {
  if (v === '') return v;
  const first = v[0];
  if (first === '=' || first === '@' || first === '\t' || first === '\r') return `'${v}`;
  if ((first === '+' || first === '-') && !/^[+-][\d\s().-]*$/.test(v)) return `'${v}`;
  return v;
}
