/**
 * What the edge records of the calls it proxies (docs/events.md "Calls"): each
 * INVITE placed by an endpoint is a call; its first 18x queues a Ring callback,
 * its answer a StartApp, its end (BYE from either side on any node, a refusal,
 * a CANCEL, the no-answer timeout) a CDR and a Hangup callback — each in the
 * store's atomic step with the change. Callbacks go to the caller endpoint's
 * application (else the account's default endpoint application).
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { ApplicationRecord, Directory, EndpointRecord } from '../store/directory/directory.js';
import type { CallStart, CallStatus, CallStore, CallbackTarget, CdrRecord, OutboxItem, StoredCharge } from '../store/calls/calls.js';
import { CallCharging, type CallBill } from '../billing/calls.js';
import { formatAmount } from '../billing/amount.js';
import type { OriginRecord } from '../routing/origin.js';

/** How a call ended before it was answered, as the proxy's response context saw it. */
export type Unanswered = { status: number; how: 'cancelled' | 'no-answer' | 'refused' | 'rejected-here' };

export interface CallTrackerOptions {
  store: CallStore;
  directory: Directory;
  log: Logger;
  /** A callback was queued (the dispatcher looks now rather than at its next poll). */
  onQueued?: () => void;
  /** Longest call whose state is kept without an end, ms. */
  maxCallMs: number;
  /**
   * A call ended, and this node wrote its CDR (once per call, whichever node saw the end):
   * its bill is settled (billing/calls.ts). `bill` null for a free call.
   */
  onEnded?: (s: CallStart, cdr: CdrRecord, bill: CallBill | null) => void;
}

/** What the proxy knows of a call as it forwards the INVITE. */
export interface CallInfo {
  domain: string;
  authId: string;
  subAccount: string | null;
  sipCallId: string;
  fromTag: string;
  fromNumber: string;
  toNumber: string;
  context: 'endpoint' | 'phone' | 'app' | 'trunk';
  /** The endpoint whose application gets the callbacks: the caller's, or for a call from the phone network the callee's. */
  endpoint: EndpointRecord | null;
  /** An application that gets the callbacks instead (a number routed to it). */
  appId?: string | null;
  /** `inbound` for a call from the phone network. @default 'outbound' */
  direction?: 'inbound' | 'outbound';
  /** The trunk, number and carrier of a call to or from the phone network (docs/trunks.md). */
  pstn?: CallStart['pstn'];
  /** Its price, when a rate applies (billing/calls.ts). */
  charge?: StoredCharge | null;
  /**
   * A leg of a call the edge placed itself (calls/, the Calls API): its call_uuid, its
   * callbacks (the API request's ring_url/hangup_url, not an application's) and the A leg's
   * call_uuid as bridge_uuid.
   */
  origin?: OriginRecord;
  /** A call to an application the edge runs itself: only its Hangup callback is sent (answer_url is fetched for XML). */
  runsApp?: boolean;
}

/** A MESSAGE an endpoint sent through the edge, as its final response left. */
export interface MessageInfo {
  domain: string;
  authId: string;
  subAccount: string | null;
  sipCallId: string;
  fromNumber: string;
  toNumber: string;
  endpoint: EndpointRecord;
  contentType: string | null;
  body: Buffer;
}

/** Longest message text carried in a Message callback (the rest is cut; `BodyBytes` has the real size). */
export const MESSAGE_TEXT_MAX = 4096;

/** One call in this process, between its INVITE and its final response. */
export interface TrackedCall {
  readonly callUuid: string;
  readonly domain: string;
  readonly sipCallId: string;
  /** Resolves once the call's state is stored (later changes are chained after it). */
  readonly ready: Promise<CallStart | null>;
}

/** The SIP status of an unanswered call → call_status, hangup cause (Q.850 names as in FreeSWITCH), disposition. */
export function unansweredOutcome(u: Unanswered): { status: Exclude<CallStatus, 'answered'>; cause: string; disposition: string } {
  if (u.how === 'cancelled') return { status: 'cancelled', cause: 'ORIGINATOR_CANCEL', disposition: 'recv_cancel' };
  if (u.how === 'no-answer') return { status: 'no-answer', cause: 'NO_ANSWER', disposition: 'send_cancel' };
  const d = 'send_refuse';
  switch (u.status) {
    case 486:
    case 600:
      return { status: 'busy', cause: 'USER_BUSY', disposition: d };
    case 408:
      return { status: 'no-answer', cause: 'NO_ANSWER', disposition: d };
    case 480:
      return { status: 'failed', cause: u.how === 'rejected-here' ? 'USER_NOT_REGISTERED' : 'NO_USER_RESPONSE', disposition: d };
    case 487:
      return { status: 'cancelled', cause: 'ORIGINATOR_CANCEL', disposition: d };
    case 404:
    case 484:
    case 604:
      return { status: 'failed', cause: 'UNALLOCATED_NUMBER', disposition: d };
    case 403:
    case 603:
      return { status: 'failed', cause: 'CALL_REJECTED', disposition: d };
    case 415:
    case 488:
    case 606:
      return { status: 'failed', cause: 'INCOMPATIBLE_DESTINATION', disposition: d };
    case 500:
    case 503:
      return { status: 'failed', cause: 'NORMAL_TEMPORARY_FAILURE', disposition: d };
    default:
      return { status: 'failed', cause: 'NORMAL_UNSPECIFIED', disposition: d };
  }
}

const iso = (ms: number): string => new Date(ms).toISOString();

/** The hangup cause of a call the edge ended because its payer's balance ran out (docs/billing.md). */
export const CREDIT_EXHAUSTED = 'CREDIT_EXHAUSTED';

export class CallTracker {
  constructor(private readonly o: CallTrackerOptions) {}

  /** The INVITE is forwarded: the call starts (stored in the background; later steps wait for it). */
  started(info: CallInfo): TrackedCall {
    const callUuid = info.origin?.callUuid ?? randomUUID();
    const ready = (async (): Promise<CallStart | null> => {
      let callbacks = info.origin ? info.origin.callbacks : await this.callbacksOf(info.endpoint, info.authId, info.subAccount, info.appId ?? null);
      if (info.runsApp) callbacks = { answer: null, hangup: callbacks.hangup };
      const start: CallStart = {
        callUuid,
        authId: info.authId,
        domain: info.domain,
        sipCallId: info.sipCallId,
        fromTag: info.fromTag,
        fromNumber: info.fromNumber,
        toNumber: info.toNumber,
        direction: info.direction ?? 'outbound',
        context: info.context,
        ...(info.pstn ? { pstn: info.pstn } : {}),
        subAccount: info.subAccount,
        startedAt: Date.now(),
        callbacks,
        ttlMs: this.o.maxCallMs,
        ...(info.charge ? { charge: info.charge } : {}),
        ...(info.origin?.bridgeUuid ? { bridgeUuid: info.origin.bridgeUuid } : {}),
      };
      await this.o.store.start(start);
      return start;
    })().catch((err: unknown) => {
      this.o.log.warn({ err: err instanceof Error ? err.message : String(err), callId: info.sipCallId }, 'call record not started: the store did not answer');
      return null;
    });
    return { callUuid, domain: info.domain, sipCallId: info.sipCallId, ready };
  }

  /** The first 18x went to the caller. */
  rang(call: TrackedCall): void {
    this.after(call, async (s) => {
      const at = Date.now();
      const target = s.callbacks.ring !== undefined ? s.callbacks.ring : s.callbacks.answer;
      const cb = target ? this.item(s, 'Ring', target, at, {}) : null;
      if ((await this.o.store.ring(s.domain, s.sipCallId, at, cb)) && cb) this.o.onQueued?.();
    });
  }

  /** The first 2xx went to the caller (`carrier`: the gateway that answered a call out to the phone network). */
  answered(call: TrackedCall, carrier?: string): void {
    this.after(call, async (s) => {
      const at = Date.now();
      const cb = s.callbacks.answer ? this.item(s, 'StartApp', s.callbacks.answer, at, {}) : null;
      if ((await this.o.store.answer(s.domain, s.sipCallId, at, cb, carrier)) && cb) this.o.onQueued?.();
    });
  }

  /** The INVITE's final response was not a 2xx: the call is over. */
  unanswered(call: TrackedCall, u: Unanswered): void {
    this.after(call, async (s) => {
      const o = unansweredOutcome(u);
      await this.end(s.domain, s.sipCallId, { at: Date.now(), status: o.status, sipStatus: u.status, cause: o.cause, disposition: o.disposition });
    });
  }

  /** The edge ended an answered call because its payer's balance ran out (BYE sent to both parties). */
  async cut(domain: string, sipCallId: string): Promise<void> {
    try {
      await this.end(domain, sipCallId, { at: Date.now(), cause: CREDIT_EXHAUSTED, disposition: 'send_bye' });
    } catch (err) {
      this.o.log.warn({ err: err instanceof Error ? err.message : String(err), callId: sipCallId }, 'call record not ended: the store did not answer');
    }
  }

  /** A BYE for the dialog of a call (any node): `byCaller` when its From tag is the caller's. */
  async bye(domain: string, sipCallId: string, fromTag: string | null, cause: string | null = null): Promise<void> {
    try {
      const s = await this.o.store.get(domain, sipCallId);
      if (!s) return;
      const byCaller = fromTag !== null && fromTag === s.fromTag;
      await this.end(domain, sipCallId, { at: Date.now(), cause: cause ?? 'NORMAL_CLEARING', disposition: byCaller ? 'recv_bye' : 'send_bye' });
    } catch (err) {
      this.o.log.warn({ err: err instanceof Error ? err.message : String(err), callId: sipCallId }, 'call record not ended: the store did not answer');
    }
  }

  /**
   * A MESSAGE got its final response: a Message callback to the sender endpoint's
   * application (else the default endpoint application) when it logs incoming
   * messages and has a message_url. Best effort: a store that does not answer
   * loses the callback, never the MESSAGE (it was already answered).
   */
  message(m: MessageInfo, status: number): void {
    void (async () => {
      let app: ApplicationRecord | null = null;
      if (m.endpoint.appId) app = await this.o.directory.getApplication(m.authId, m.endpoint.appId);
      app ??= await this.o.directory.getDefaultEndpointApp(m.authId, m.subAccount);
      const target = messageTarget(app);
      if (!target) return;
      const at = Date.now();
      const uuid = randomUUID();
      const text = isText(m.contentType) ? truncateUtf8(m.body, MESSAGE_TEXT_MAX) : null;
      const item: OutboxItem = {
        id: randomUUID(),
        domain: m.domain,
        authId: m.authId,
        event: 'Message',
        url: target.url,
        method: target.method,
        params: {
          Event: 'Message',
          timestamp: iso(at),
          auth_id: m.authId,
          CallUUID: uuid,
          MessageUUID: uuid,
          From: m.fromNumber,
          To: m.toNumber,
          Direction: 'outbound',
          Status: status < 300 ? 'delivered' : 'failed',
          SipStatus: String(status),
          SipCallId: m.sipCallId,
          ContentType: m.contentType ?? '',
          BodyBytes: String(m.body.length),
          ...(text !== null ? { Text: text } : {}),
          ...(m.subAccount ? { SubAccount: m.subAccount } : {}),
        },
        attempts: 0,
        fallback: null,
        createdAt: at,
      };
      await this.o.store.enqueue(item);
      this.o.onQueued?.();
    })().catch((err: unknown) => this.o.log.warn({ err: err instanceof Error ? err.message : String(err), callId: m.sipCallId }, 'message callback not queued: the store did not answer'));
  }

  private async end(domain: string, sipCallId: string, e: { at: number; status?: Exclude<CallStatus, 'answered'>; sipStatus?: number; cause: string; disposition: string }): Promise<void> {
    let queued = false;
    let ended: { s: CallStart; bill: CallBill | null } | null = null;
    const cdr = await this.o.store.end(domain, sipCallId, (s) => {
      const answered = s.answerAt !== null;
      const duration = answered ? Math.max(0, Math.round((e.at - (s.answerAt as number)) / 1000)) : 0;
      const status: CallStatus = answered ? 'answered' : (e.status ?? 'failed');
      const bill = s.charge && answered ? CallCharging.bill(s.charge, duration) : null;
      ended = { s, bill };
      const cdr: CdrRecord = {
        call_uuid: s.callUuid,
        from_number: s.fromNumber,
        to_number: s.toNumber,
        call_status: status,
        duration,
        bill_duration: bill ? bill.billDuration : duration,
        billed_amount: bill ? bill.billedAmount : '0.00000',
        total_rate: s.charge ? formatAmount(s.charge.terms.ratePerMinute) : null,
        rate_prefix: s.charge?.prefix ?? null,
        ...(s.charge ? { currency: s.charge.currency } : {}),
        created_at: iso(s.startedAt),
        answered_at: answered ? iso(s.answerAt as number) : null,
        ended_at: iso(e.at),
        sip_call_id: s.sipCallId,
        hangup_cause: e.cause,
        hangup_disposition: e.disposition,
        call_direction: s.direction,
        context: s.context,
        bridge_uuid: s.bridgeUuid ?? null,
        campaign_id: null,
        sip_status: answered ? 200 : (e.sipStatus ?? null),
        sub_account: s.subAccount,
        ...(s.pstn ? { trunk_id: s.pstn.trunkId, phone_number: s.pstn.number, carrier_address: s.pstn.carrier } : {}),
      };
      const hangup = s.callbacks.hangup;
      const callback = hangup
        ? this.item(s, 'Hangup', hangup, e.at, {
            Status: status,
            Duration: String(duration),
            BillDuration: String(bill ? bill.billDuration : duration),
            BillRate: bill ? bill.rate : '0.00000',
            TotalCost: bill ? bill.billedAmount : '0.00000',
            StartTime: iso(s.startedAt),
            AnswerTime: answered ? iso(s.answerAt as number) : '',
            EndTime: iso(e.at),
            HangupCause: e.cause,
            HangupDisposition: e.disposition,
          })
        : null;
      queued = callback !== null;
      return { cdr, callback };
    });
    if (queued) this.o.onQueued?.();
    const done = ended as { s: CallStart; bill: CallBill | null } | null;
    if (cdr && done && (done.s.charge || done.bill)) this.o.onEnded?.(done.s, cdr, done.bill);
  }

  private after(call: TrackedCall, f: (s: CallStart) => Promise<void>): void {
    void call.ready
      .then((s) => (s ? f(s) : undefined))
      .catch((err: unknown) => this.o.log.warn({ err: err instanceof Error ? err.message : String(err), callId: call.sipCallId }, 'call record not updated: the store did not answer'));
  }

  private item(s: CallStart, event: string, target: CallbackTarget, at: number, extra: Record<string, string>): OutboxItem {
    return {
      id: randomUUID(),
      domain: s.domain,
      authId: s.authId,
      event,
      url: target.url,
      method: target.method,
      params: {
        Event: event,
        timestamp: iso(at),
        auth_id: s.authId,
        CallUUID: s.callUuid,
        From: s.fromNumber,
        To: s.toNumber,
        Direction: s.direction,
        CallStatus: event === 'Ring' ? 'ringing' : event === 'StartApp' ? 'in-progress' : 'completed',
        ...(s.subAccount ? { SubAccount: s.subAccount } : {}),
        ...extra,
      },
      attempts: 0,
      fallback: target.fallback ?? null,
      createdAt: at,
    };
  }

  /**
   * Where the call's callbacks go: the application named (a number's), else the endpoint's
   * application, else the owner's default endpoint application.
   */
  private async callbacksOf(e: EndpointRecord | null, authId: string, sub: string | null, appId: string | null): Promise<CallStart['callbacks']> {
    let app: ApplicationRecord | null = null;
    const named = appId ?? e?.appId ?? null;
    if (named) app = await this.o.directory.getApplication(authId, named);
    app ??= await this.o.directory.getDefaultEndpointApp(authId, sub);
    return callbackTargets(app);
  }
}

/** The answer and hangup targets of an application (none when disabled or without URLs). */
export function callbackTargets(app: ApplicationRecord | null): CallStart['callbacks'] {
  if (!app || !app.settings.enabled) return { answer: null, hangup: null };
  const st = app.settings;
  return {
    answer: st.answer_url
      ? { url: st.answer_url, method: st.answer_method, fallback: st.fallback_answer_url ? { url: st.fallback_answer_url, method: st.fallback_method } : null }
      : null,
    hangup: st.hangup_url ? { url: st.hangup_url, method: st.hangup_method } : null,
  };
}

/** Where an application's Message callbacks go: none when disabled, not logging incoming messages or without message_url. */
export function messageTarget(app: ApplicationRecord | null): CallbackTarget | null {
  if (!app || !app.settings.enabled || !app.settings.log_incoming_message || !app.settings.message_url) return null;
  return { url: app.settings.message_url, method: app.settings.message_method };
}

function isText(contentType: string | null): boolean {
  if (!contentType) return false;
  const t = contentType.split(';')[0].trim().toLowerCase();
  return t.startsWith('text/') || t === 'application/json' || t === 'message/cpim';
}

/** The first `max` bytes of a UTF-8 body, cut at a character boundary. */
function truncateUtf8(body: Buffer, max: number): string {
  if (body.length <= max) return body.toString('utf8');
  let end = max;
  while (end > 0 && (body[end] & 0xc0) === 0x80) end--;
  return body.subarray(0, end).toString('utf8');
}
