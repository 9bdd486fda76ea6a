/**
 * Calls through the edge, their records (CDRs) and the callbacks they cause
 * (docs/events.md "Calls"): the call store. Two implementations with one
 * contract (test/contract/call-store.test.ts): RedisCallStore and MemoryCallStore.
 *
 * A call's state lives from its INVITE to its end. Every callback a change of it
 * causes (Ring, StartApp, Hangup) is put in the account's outbox in the same
 * atomic step as the change, and the CDR with the Hangup, so that a change the
 * edge acted on never loses its callback or its record. The outbox is delivered by
 * one process at a time per callback (a lease); a process that dies mid-delivery
 * leaves the callback to another when its lease runs out.
 */

/** How a call attempt ended (the spec's CallRecord `call_status`). */
export type CallStatus = 'answered' | 'busy' | 'failed' | 'no-answer' | 'cancelled';

/** Where a kind of callback goes (from the caller endpoint's application). */
export interface CallbackTarget {
  url: string;
  method: 'GET' | 'POST';
  /** answer_url only: fallback_answer_url, tried when every attempt on `url` failed. */
  fallback?: { url: string; method: 'GET' | 'POST' } | null;
}

/** A call as it starts (the proxy forwards its INVITE). */
export interface CallStart {
  /** Our id of the call (CallUUID of the callbacks, call_uuid of the CDR). */
  callUuid: string;
  /** The account (or sub-account) whose endpoint placed the call. */
  authId: string;
  /** The account's SIP domain (the store's partition). */
  domain: string;
  sipCallId: string;
  /** The caller's From tag: who sent a BYE (caller or callee). */
  fromTag: string;
  fromNumber: string;
  toNumber: string;
  direction: 'inbound' | 'outbound';
  /** What the call reached: `endpoint`, `phone` (the gateway), `app` (the application server). */
  context: string;
  /** The sub-account of the caller endpoint, or null. */
  subAccount: string | null;
  startedAt: number;
  /** `ring` (a call placed by the Calls API: its ring_url) takes the Ring callback instead of `answer` when present. */
  callbacks: { answer: CallbackTarget | null; hangup: CallbackTarget | null; ring?: CallbackTarget | null };
  /** The call placed by the Calls API this leg belongs to (its A leg's call_uuid): the CDR's bridge_uuid. */
  bridgeUuid?: string;
  /** The state is forgotten after this long even without an end (a call whose BYE never passed). */
  ttlMs: number;
  /** The price of a rated call (docs/billing.md "Calls"); absent for a free one. */
  charge?: StoredCharge;
  /**
   * A call to or from the phone network (docs/trunks.md): the trunk it used, the account's
   * number (the caller ID out, the dialled number in) and the carrier's address (the source
   * of an inbound INVITE, the gateway that answered an outbound one; null when none did).
   */
  pstn?: { trunkId: string; number: string; carrier: string | null };
}

/** A rated call's price as kept with its state (billing/calls.ts CallCharge). Minor units, seconds. */
export interface StoredCharge {
  payer: { authId: string; partnerId: string | null; accountType: 'PREPAID' | 'POSTPAID'; creditLimit?: number };
  currency: string;
  prefix: string;
  terms: { ratePerMinute: number; initialIncrement: number; subsequentIncrement: number; connectFee: number };
}

/** A call record as the API shows it (the spec's CallRecord and its filter fields). */
export interface CdrRecord {
  call_uuid: string;
  from_number: string;
  to_number: string;
  call_status: CallStatus;
  /** Seconds from answer to end; 0 when not answered. */
  duration: number;
  /** Seconds billed: the duration rounded up by the rate's increments (0 for a free call: its duration). */
  bill_duration: number;
  /** What the call cost, five decimals ("2.00000"; docs/billing.md "Calls"). */
  billed_amount: string;
  /** Per minute, of the deck line that priced the call; null for a free call. */
  total_rate?: string | null;
  /** The prefix of that line; null for a free call. */
  rate_prefix?: string | null;
  /** The currency of billed_amount (the payer's); absent for a free call. Not shown by the spec's CDR. */
  currency?: string;
  created_at: string;
  answered_at: string | null;
  ended_at: string;
  sip_call_id: string;
  hangup_cause: string;
  hangup_disposition: string;
  call_direction: 'inbound' | 'outbound';
  context: string;
  bridge_uuid: string | null;
  campaign_id: string | null;
  /** The final SIP status of the INVITE (200 for an answered call). */
  sip_status: number | null;
  /** Not shown by the API: the owning sub-account (filtering only). */
  sub_account?: string | null;
  /** A call to or from the phone network: its trunk, the account's number, the carrier's address (docs/trunks.md). */
  trunk_id?: string;
  phone_number?: string;
  carrier_address?: string | null;
}

/** How a call ended, as the proxy saw it. */
export interface CallEnd {
  at: number;
  /** For a call that was not answered: its outcome and final SIP status. */
  status?: Exclude<CallStatus, 'answered'>;
  sipStatus?: number | null;
  cause: string;
  disposition: string;
}

/** One callback waiting in an account's outbox. */
export interface OutboxItem {
  /** The CallbackId: the same across retries (receivers drop duplicates by it). */
  id: string;
  domain: string;
  authId: string;
  event: string;
  url: string;
  method: 'GET' | 'POST';
  params: Record<string, string>;
  /** Attempts made on `url` so far. */
  attempts: number;
  /** Where to go once every attempt on `url` failed (answer_url → fallback_answer_url). */
  fallback: { url: string; method: 'GET' | 'POST' } | null;
  createdAt: number;
  /**
   * Another header the signature is sent in as well (the messaging webhooks':
   * `x-webhook-signature`, docs/messaging.md "Webhooks"); absent: only x-sipedge-signature.
   */
  signatureHeader?: string;
}

/** A callback that was given up on. */
export interface DeadLetter {
  item: OutboxItem;
  reason: string;
  at: number;
}

/** CDR filters (the spec's "CDR filter parameters"). */
export interface CdrFilter {
  fromNumber?: string;
  toNumber?: string;
  /** Inclusive, ms since the epoch (start of start_date … end of end_date, UTC). */
  from?: number;
  to?: number;
  callDirection?: string;
  minDuration?: number;
  sipCallId?: string;
  bridgeUuid?: string;
  hangupCause?: string;
  hangupDisposition?: string;
  context?: string;
  campaignId?: string;
  search?: string;
  /** The call's outcome (`call_status`). */
  callStatus?: CallStatus;
  /** A sub-account sees its own calls only. */
  subAccount?: string;
}

/** Sums over every CDR that passed a filter (the vendor's list `summary`). */
export interface CdrTotals {
  count: number;
  answered: number;
  /** Seconds, summed `duration` / `bill_duration`. */
  durationSeconds: number;
  billSeconds: number;
  /** `created_at` of the newest match, or null when there is none. */
  lastCallAt: string | null;
}

/** One page of a CDR query. */
export interface CdrPage {
  total: number;
  items: CdrRecord[];
  totals: CdrTotals;
}

/** The totals of the CDRs that matched, newest first (both stores sum with this one function). */
export function cdrTotals(newestFirst: readonly CdrRecord[]): CdrTotals {
  const t: CdrTotals = { count: newestFirst.length, answered: 0, durationSeconds: 0, billSeconds: 0, lastCallAt: newestFirst[0]?.created_at ?? null };
  for (const c of newestFirst) {
    if (c.call_status === 'answered') t.answered++;
    t.durationSeconds += c.duration;
    t.billSeconds += c.bill_duration;
  }
  return t;
}

/** Kept per account: the newest this many CDRs, none older than CDR_RETENTION_MS. */
export const CDR_MAX = 100_000;
export const CDR_RETENTION_MS = 90 * 86400 * 1000;
/** Dead letters kept per account (newest first). */
export const DEAD_LETTER_MAX = 1000;

export interface CallStore {
  /** A call starts (its INVITE is forwarded). Ignored when the Call-ID already has a call. */
  start(call: CallStart): Promise<void>;
  /** The first 18x: true when this was it (its Ring callback, if any, is queued with it). */
  ring(domain: string, sipCallId: string, at: number, callback: OutboxItem | null): Promise<boolean>;
  /** The first 2xx: true when this was it (its StartApp callback, if any, is queued with it). */
  /** `carrier`: the address of the gateway that answered a call out to the phone network (its CDR's carrier_address). */
  answer(domain: string, sipCallId: string, at: number, callback: OutboxItem | null, carrier?: string): Promise<boolean>;
  /** The state of a call in progress (null when there is none: ended, or never seen). */
  get(domain: string, sipCallId: string): Promise<(CallStart & { ringAt: number | null; answerAt: number | null }) | null>;
  /**
   * The call ended: its state goes, its CDR is written and its Hangup callback (if
   * any) queued, all at once. Null when it had already ended (a BYE on two nodes).
   * `build` makes the CDR and the callback from the state as it was.
   */
  end(domain: string, sipCallId: string, build: (state: CallStart & { ringAt: number | null; answerAt: number | null }) => { cdr: CdrRecord; callback: OutboxItem | null }): Promise<CdrRecord | null>;

  /** One CDR of the account. */
  cdr(domain: string, callUuid: string): Promise<CdrRecord | null>;
  /** CDRs of the account, newest first, filtered, one page; `totals` are over every match, not the page. */
  cdrs(domain: string, filter: CdrFilter, page: { limit: number; offset: number }): Promise<CdrPage>;

  /** Queue a callback that no call state change carries (a MESSAGE's). */
  enqueue(item: OutboxItem): Promise<void>;
  /** Up to `max` callbacks due by `now`, each leased to the caller for `leaseMs` (another process gets it after). */
  claim(now: number, max: number, leaseMs: number): Promise<OutboxItem[]>;
  /** Delivered: gone from the outbox. */
  complete(item: OutboxItem): Promise<void>;
  /** Failed: back in the outbox, due at `at` (the item carries its new attempt count / URL). */
  retry(item: OutboxItem, at: number): Promise<void>;
  /** Given up: out of the outbox, into the account's dead letters. */
  deadLetter(item: OutboxItem, reason: string, at: number): Promise<void>;
  deadLetters(domain: string, limit: number): Promise<DeadLetter[]>;

  /** The account's callback signing secret (null before one was set). */
  signingSecret(domain: string): Promise<string | null>;
  setSigningSecret(domain: string, secret: string): Promise<void>;
  close(): Promise<void>;
}

/** Whether a CDR passes a filter (both stores filter with this one function). */
export function cdrMatches(c: CdrRecord, f: CdrFilter): boolean {
  const at = Date.parse(c.created_at);
  if (f.from !== undefined && at < f.from) return false;
  if (f.to !== undefined && at > f.to) return false;
  if (f.fromNumber !== undefined && c.from_number !== f.fromNumber) return false;
  if (f.toNumber !== undefined && c.to_number !== f.toNumber) return false;
  if (f.callDirection !== undefined && c.call_direction !== f.callDirection) return false;
  if (f.minDuration !== undefined && c.duration < f.minDuration) return false;
  if (f.sipCallId !== undefined && c.sip_call_id !== f.sipCallId) return false;
  if (f.bridgeUuid !== undefined && c.bridge_uuid !== f.bridgeUuid) return false;
  if (f.hangupCause !== undefined && c.hangup_cause.toLowerCase() !== f.hangupCause.toLowerCase()) return false;
  if (f.hangupDisposition !== undefined && c.hangup_disposition !== f.hangupDisposition) return false;
  if (f.context !== undefined && c.context !== f.context) return false;
  if (f.campaignId !== undefined && c.campaign_id !== f.campaignId) return false;
  if (f.subAccount !== undefined && c.sub_account !== f.subAccount) return false;
  if (f.callStatus !== undefined && c.call_status !== f.callStatus) return false;
  if (f.search !== undefined) {
    const needle = f.search.toLowerCase();
    const hay = [c.call_uuid, c.from_number, c.to_number, c.call_status, c.sip_call_id, c.hangup_cause, c.hangup_disposition, c.context, c.bridge_uuid ?? '', c.campaign_id ?? '']
      .join('\n')
      .toLowerCase();
    if (!hay.includes(needle)) return false;
  }
  return true;
}
