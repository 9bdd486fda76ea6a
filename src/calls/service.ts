/**
 * The Calls API's side of the B2BUA (docs/calls.md): places calls, runs their voice
 * application, keeps their live state in the store, and carries commands for a call to
 * the process that runs it. Any node answers the API: a command for a call another
 * process runs goes to it as a fleet notice; a call whose process died is ended from
 * here (BYE to each leg from its stored dialog, its record removed) — never a ghost.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import type { OriginatedCall } from '../routing/origin.js';
import type { CredentialStore } from '../store/credentials/credentials.js';
import type { AccountRecord, Directory, EndpointRecord, SubAccountRecord } from '../store/directory/directory.js';
import type { LiveCallRecord, LiveCallStore } from '../store/live-calls/live-calls.js';
import type { RtpengineClient } from '../media/rtpengine.js';
import type { NumberLookup } from '../numbers/lookup.js';
import { normalizeE164 } from '../numbers/e164.js';
import { accountOfDomain } from '../routing/targets.js';
import { parseUri } from '../sip/uri.js';
import {
  CallRefusedError,
  type CallControl,
  type CallOwner,
  type CallView,
  type DtmfRequest,
  type PlaceCallRequest,
  type PlacedCall as Placed,
  type PlayRequest,
  type RecordingView,
  type RecordRequest,
  type SpeakRequest,
  type StartedRecording,
  type TransferRequest,
  type UrlTarget,
} from './control.js';
import { PlacedCall, type DialTarget, type LegPlan } from './placed-call.js';
import { byeFor, UserAgent, type UaHost } from './ua.js';
import type { DtmfEvent } from './media.js';
import { getHeader, parseNameAddr } from '../sip/headers.js';
import type { SipRequest } from '../sip/message.js';
import { CALL_UUID_HEADER } from '../routing/origin.js';
import type { Recorder } from './recorder.js';
import type { RecordingRecord, RecordingStore } from '../store/recordings/recordings.js';

/** Runs a placed call's voice application once it is answered (wired to voicexml/ in index.ts). */
export type ApplicationRunner = (call: PlacedCall, app: { answer: UrlTarget; fallback: UrlTarget | null; params: () => Record<string, string> }) => Promise<string>;

/** Files rtpengine can play: a downloaded audio URL, a rendered text. */
export interface Prompts {
  audio(url: string): Promise<{ path: string } | { error: string }>;
  speech(text: string, voice: string, language: string): Promise<string>;
}

/** A fleet notice: a command for the process that runs a call. */
export interface CallNotices {
  publish(topic: string, message: string): Promise<void>;
  on(topic: string, handler: (message: string) => void): void;
}

export interface CallServiceOptions {
  ua: UaHost;
  processId: string;
  sipDomain: string;
  directory: Directory;
  credentials: CredentialStore;
  numbers: NumberLookup | null;
  live: LiveCallStore;
  rtpengine: RtpengineClient | null;
  notices: CallNotices | null;
  /** Processes of the fleet that are alive (null: this process alone). */
  alive: (() => Promise<Set<string>>) | null;
  run: ApplicationRunner;
  /** Audio and text-to-speech files for the Play and Speak APIs (voicexml/). */
  prompts: Prompts | null;
  log: Logger;
  /** Default ring timeout, s. */
  ringTimeoutS?: number;
  /** Call recording (CALLS_RECORDING_DIR); absent: the Record API answers 503. */
  recording?: { recorder: Recorder; store: RecordingStore } | null;
}

const TOPIC = 'calls.cmd';
/** The hangup cause of a call whose process died (docs/calls.md "Node failure"). */
export const NODE_FAILURE = 'NODE_FAILURE';
const DEFAULT_RING_TIMEOUT_S = 60;

type Command = { to: string; op: 'hangup'; domain: string; callUuid: string } | { to: string; op: 'transfer'; domain: string; callUuid: string; req: TransferRequest } | { to: string; op: 'play'; domain: string; callUuid: string; req: PlayRequest } | { to: string; op: 'speak'; domain: string; callUuid: string; req: SpeakRequest } | { to: string; op: 'dtmf'; domain: string; callUuid: string; req: DtmfRequest } | { to: string; op: 'stop-media'; domain: string; callUuid: string } | { to: string; op: 'digit'; domain: string; callUuid: string; digit: string } | RecordCommand;

/** The Record API's commands (docs/calls.md "Recording"). */
type RecordCommand = { to: string; op: 'record'; domain: string; callUuid: string; recordingId: string; req: RecordRequest } | { to: string; op: 'stop-record'; domain: string; callUuid: string };

const RECORDING_OFF = 'call recording is not configured on this server (CALLS_RECORDING_DIR; docs/calls.md "Recording")';

export class CallService implements CallControl {
  readonly ua: UserAgent;
  private readonly calls = new Map<string, PlacedCall>();
  private readonly origins = new Map<string, OriginatedCall>();
  private readonly byNgCall = new Map<string, PlacedCall>();
  /** Transfers of running calls: the run of each generation, the next document, who to wake. */
  private readonly transfers = new Map<string, { gen: number; next: UrlTarget | null; wake: (() => void) | null }>();
  private stopped = false;

  constructor(private readonly o: CallServiceOptions) {
    this.ua = new UserAgent(o.ua, o.log);
    this.ua.onInvite = (legId, invite) => {
      void this.inbound(legId, invite).catch((err: unknown) => this.o.log.error({ err, leg: legId }, 'application call failed'));
    };
    o.notices?.on(TOPIC, (m) => this.onNotice(m));
  }

  /** The proxy's `originated` hook: the leg whose INVITE this is. */
  originated(callId: string): OriginatedCall | null {
    return this.origins.get(callId) ?? null;
  }

  // --- CallControl ---------------------------------------------------------------------

  async place(owner: CallOwner, req: PlaceCallRequest): Promise<Placed> {
    if (this.stopped) throw new CallRefusedError(503, 'shutting_down', 'this server is shutting down');
    const { account, sub } = await this.parties(owner);
    if (!account.enabled) throw new CallRefusedError(403, 'account_disabled', 'the account is disabled');
    if (sub && !sub.enabled) throw new CallRefusedError(403, 'subaccount_disabled', 'the sub-account is disabled');
    if (!this.o.rtpengine) throw new CallRefusedError(503, 'media_unavailable', 'placing calls needs rtpengine (RTPENGINE_NG); none is configured');
    const from = await this.fromOf(owner, account, req.from);
    // The call is the sub-account's when its number or endpoint places it (its KYC block, its limits' records).
    const payer = from.subAccount && from.subAccount !== sub?.authId ? await this.o.directory.getSubAccount(account.authId, from.subAccount) : sub;
    if (payer && !payer.enabled) throw new CallRefusedError(403, 'subaccount_disabled', 'the sub-account is disabled');
    const requestUuid = randomUUID();
    const placed: PlacedCall[] = [];
    const refusals: CallRefusedError[] = [];
    for (const to of req.to) {
      let plan: LegPlan;
      try {
        plan = await this.planTo(owner, account, to, from, req);
      } catch (err) {
        if (err instanceof CallRefusedError && req.to.length === 1) throw err;
        if (err instanceof CallRefusedError) refusals.push(err);
        continue;
      }
      const call = new PlacedCall(this.host(), { account, sub: payer, domain: owner.domain }, requestUuid, { from: from.shown, to: plan.to, callerName: req.callerName ?? '', direction: 'outbound' }, { ring: req.ring ?? null, hangup: req.hangup ?? null }, { client: this.o.rtpengine });
      call.placedFrom = from;
      this.calls.set(call.callUuid, call);
      this.byNgCall.set(call.media.ngCallId, call);
      await this.o.live.put(call.record(this.o.processId));
      try {
        await call.start(plan, { ringTimeoutS: req.ringTimeout ?? this.o.ringTimeoutS ?? DEFAULT_RING_TIMEOUT_S, hangupOnRingS: req.hangupOnRing ?? null, timeLimitS: req.timeLimit ?? null });
      } catch (err) {
        this.o.log.warn({ call: call.callUuid, err: err instanceof Error ? err.message : String(err) }, 'call not started: media failed');
        await call.hangup('MEDIA_FAILED');
        if (req.to.length === 1) throw new CallRefusedError(503, 'media_unavailable', 'rtpengine did not take the call');
        continue;
      }
      // Refused by the proxy's checks (limits, credit, KYC, policy) before anything was sent?
      const verdict = await Promise.race([call.admitted, new Promise<null>((r) => setTimeout(() => r(null), 5000).unref())]);
      if (verdict && !verdict.ok) {
        const refusal = refusalOf(verdict.status, verdict.warning);
        if (refusal && req.to.length === 1) throw refusal;
        if (refusal) refusals.push(refusal);
      }
      placed.push(call);
      void this.runWhenAnswered(call, req);
    }
    if (placed.length === 0) throw refusals[0] ?? new CallRefusedError(400, 'invalid_to', 'no destination could be called');
    return { requestUuid, callUuids: placed.map((c) => c.callUuid) };
  }

  async list(owner: CallOwner, which: 'live' | 'queued'): Promise<CallView[]> {
    const all = await this.o.live.list(owner.domain);
    return all.filter((r) => visible(r, owner) && (which === 'queued' ? r.status === 'queued' : r.status !== 'queued')).map(viewOf);
  }

  async get(owner: CallOwner, callUuid: string, which: 'live' | 'queued'): Promise<CallView | null> {
    const r = await this.o.live.get(owner.domain, callUuid);
    if (!r || !visible(r, owner)) return null;
    if ((which === 'queued') !== (r.status === 'queued')) return null;
    return viewOf(r);
  }

  async hangup(owner: CallOwner, callUuid: string): Promise<boolean> {
    const r = await this.find(owner, callUuid);
    if (!r) return false;
    await this.command({ to: r.owner, op: 'hangup', domain: r.domain, callUuid: r.callUuid }, r);
    return true;
  }

  async transfer(owner: CallOwner, callUuid: string, req: TransferRequest): Promise<boolean> {
    const r = await this.find(owner, callUuid);
    if (!r || r.status !== 'in-progress') return false;
    await this.command({ to: r.owner, op: 'transfer', domain: r.domain, callUuid: r.callUuid, req }, r);
    return true;
  }

  async play(owner: CallOwner, callUuid: string, req: PlayRequest): Promise<boolean> {
    return this.inCall(owner, callUuid, (r) => ({ to: r.owner, op: 'play', domain: r.domain, callUuid: r.callUuid, req }));
  }

  async stopPlay(owner: CallOwner, callUuid: string): Promise<boolean> {
    return this.inCall(owner, callUuid, (r) => ({ to: r.owner, op: 'stop-media', domain: r.domain, callUuid: r.callUuid }));
  }

  async speak(owner: CallOwner, callUuid: string, req: SpeakRequest): Promise<boolean> {
    return this.inCall(owner, callUuid, (r) => ({ to: r.owner, op: 'speak', domain: r.domain, callUuid: r.callUuid, req }));
  }

  async stopSpeak(owner: CallOwner, callUuid: string): Promise<boolean> {
    return this.stopPlay(owner, callUuid);
  }

  async dtmf(owner: CallOwner, callUuid: string, req: DtmfRequest): Promise<boolean> {
    return this.inCall(owner, callUuid, (r) => ({ to: r.owner, op: 'dtmf', domain: r.domain, callUuid: r.callUuid, req }));
  }

  /** The Record API: the recording's id and URL at once; it is stored when it ends (time_limit, DELETE …/Record/, the call's end). */
  async record(owner: CallOwner, callUuid: string, req: RecordRequest): Promise<StartedRecording | null> {
    const rec = this.o.recording;
    if (!rec) throw new CallRefusedError(503, 'recording_unavailable', RECORDING_OFF);
    const r = await this.find(owner, callUuid);
    if (!r || r.status !== 'in-progress') return null;
    if (this.calls.get(r.callUuid)?.isRecording) throw new CallRefusedError(400, 'recording_in_progress', 'this call is being recorded already; DELETE …/Record/ stops it');
    const recordingId = rec.recorder.newId();
    await this.command({ to: r.owner, op: 'record', domain: r.domain, callUuid: r.callUuid, recordingId, req }, r);
    return { recordingId, url: rec.recorder.urlOf(r.subAccount ?? r.authId, recordingId) };
  }

  async stopRecord(owner: CallOwner, callUuid: string): Promise<boolean> {
    if (!this.o.recording) throw new CallRefusedError(503, 'recording_unavailable', RECORDING_OFF);
    return this.inCall(owner, callUuid, (r) => ({ to: r.owner, op: 'stop-record', domain: r.domain, callUuid: r.callUuid }));
  }

  async recordings(owner: CallOwner, filter: { callUuid?: string; limit: number; offset: number }): Promise<{ total: number; items: RecordingView[] }> {
    const rec = this.o.recording;
    if (!rec) return { total: 0, items: [] };
    const r = await rec.store.list(owner.domain, { subAccount: owner.subAccount, ...(filter.callUuid !== undefined ? { callUuid: filter.callUuid } : {}), limit: filter.limit, offset: filter.offset });
    return { total: r.total, items: r.items.map((x) => recordingView(x, rec.recorder)) };
  }

  async recording(owner: CallOwner, recordingId: string): Promise<RecordingView | null> {
    const rec = this.o.recording;
    const r = rec ? await this.ownRecording(owner, recordingId) : null;
    return r && rec ? recordingView(r, rec.recorder) : null;
  }

  async recordingAudio(owner: CallOwner, recordingId: string): Promise<{ contentType: string; data: Buffer } | null> {
    const rec = this.o.recording;
    if (!rec || !(await this.ownRecording(owner, recordingId))) return null;
    const data = await rec.store.audio(owner.domain, recordingId);
    return data ? { contentType: 'audio/wav', data } : null;
  }

  async deleteRecording(owner: CallOwner, recordingId: string): Promise<boolean> {
    const rec = this.o.recording;
    if (!rec || !(await this.ownRecording(owner, recordingId))) return false;
    return rec.store.delete(owner.domain, recordingId);
  }

  private async ownRecording(owner: CallOwner, recordingId: string): Promise<RecordingRecord | null> {
    const r = await this.o.recording?.store.get(owner.domain, recordingId);
    return r && (!owner.subAccount || r.subAccount === owner.subAccount) ? r : null;
  }

  /** Runs a Record API recording of a call this process runs; its callback when it is stored. */
  private runRecording(call: PlacedCall, c: Extract<RecordCommand, { op: 'record' }>): void {
    const rec = this.o.recording;
    if (!rec) return;
    const limitS = c.req.timeLimit ?? 60;
    void call
      .recordLeg({ maxLengthMs: limitS * 1000, finishOnKey: '', silenceTimeoutMs: 0, beep: false }, rec.recorder, { recordingId: c.recordingId, source: 'call' })
      .then(async (r) => {
        if (!r) return;
        const stored = await rec.store.get(call.owner.domain, r.recordingId);
        if (stored && c.req.callback) await rec.recorder.notify(c.req.callback, stored, r.url);
      })
      .catch((err: unknown) => this.o.log.warn({ call: call.callUuid, err: err instanceof Error ? err.message : String(err) }, 'Record API: recording not finished'));
  }

  // --- transfers (the application runner's side) ----------------------------------------

  /** Called once when the call's running document is replaced (or the call ends). */
  onTransfer(callUuid: string, wake: () => void): void {
    this.transferOf(callUuid).wake = wake;
  }

  /** The current run's generation (0 until the first transfer). */
  generation(callUuid: string): number {
    return this.transfers.get(callUuid)?.gen ?? 0;
  }

  /** The document a transfer asked for (once). */
  takeTransfer(callUuid: string): UrlTarget | null {
    const st = this.transfers.get(callUuid);
    const next = st?.next ?? null;
    if (st) st.next = null;
    return next;
  }

  private transferOf(callUuid: string): { gen: number; next: UrlTarget | null; wake: (() => void) | null } {
    let st = this.transfers.get(callUuid);
    if (!st) {
      st = { gen: 0, next: null, wake: null };
      this.transfers.set(callUuid, st);
    }
    return st;
  }

  // --- SIP MESSAGE for the messaging API's sip channel ------------------------------------

  /** Sends a MESSAGE from a channel's address to an endpoint's AOR through the proxy; its final status. */
  async sendMessage(domain: string, fromUri: string, toAor: string, contentType: string, body: string): Promise<{ status: number }> {
    const parent = accountOfDomain(domain, this.o.sipDomain);
    const account = parent ? await this.o.directory.getAccount(parent) : null;
    if (!account) return { status: 404 };
    const user = parseUri(fromUri)?.user ?? 'channel';
    const status = await this.ua.message({
      from: fromUri,
      to: toAor,
      contentType,
      body,
      timeoutMs: 32_000,
      register: (callId) => void this.origins.set(callId, { account, sub: null, endpoint: null, user, callerId: null, record: { callUuid: callId, callbacks: { answer: null, hangup: null }, bridgeUuid: null }, admitted: () => undefined }),
      forget: (callId) => void this.origins.delete(callId),
    });
    return { status };
  }

  // --- fleet ----------------------------------------------------------------------------

  /** A digit from rtpengine's DTMF log: to the call here, or to the process that runs it. */
  dtmfEvent(e: DtmfEvent): void {
    this.o.log.debug({ call: e.ngCallId, party: e.party, digit: e.digit }, 'digit from rtpengine');
    if (e.party !== 'a') return;
    const call = this.byNgCall.get(e.ngCallId);
    if (call) {
      call.digit(e.digit);
      return;
    }
    // Another process of this node runs it (one process holds the DTMF socket): to all, its runner takes it.
    if (!this.o.notices || !e.ngCallId.startsWith('b2b-')) return;
    void this.o.notices.publish(TOPIC, JSON.stringify({ to: '*', op: 'digit', domain: '', callUuid: e.ngCallId.slice(4), digit: e.digit })).catch(() => undefined);
  }

  /** Every call of a dead process ends from here (docs/calls.md "Node failure"); returns how many. */
  async reap(deadProcess: string): Promise<number> {
    let n = 0;
    for (const r of await this.o.live.ofOwner(deadProcess)) if (await this.reapOne(r)) n++;
    return n;
  }

  /** Ends every call this process runs (graceful stop). */
  async stop(): Promise<void> {
    this.stopped = true;
    await Promise.all([...this.calls.values()].map((c) => c.hangup('SERVER_SHUTDOWN')));
  }

  // --- inside ---------------------------------------------------------------------------

  private host() {
    return {
      ua: this.ua,
      log: this.o.log,
      originate: (callId: string, o: OriginatedCall) => void this.origins.set(callId, o),
      forgetOrigin: (callId: string) => void this.origins.delete(callId),
      changed: (c: PlacedCall) => {
        if (!c.isGone) void this.o.live.put(c.record(this.o.processId)).catch((err: unknown) => this.o.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'live call not stored'));
      },
      ended: (c: PlacedCall, cause: string) => {
        this.calls.delete(c.callUuid);
        this.byNgCall.delete(c.media.ngCallId);
        this.transfers.get(c.callUuid)?.wake?.();
        this.transfers.delete(c.callUuid);
        this.o.log.info({ call: c.callUuid, cause }, 'call ended');
        void this.o.live.remove(c.owner.domain, c.callUuid).catch((err: unknown) => this.o.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'live call not removed'));
      },
    };
  }

  /**
   * A call the proxy routed to an application (a number routed to it, or an endpoint calling
   * it) when APP_SERVER_URI is not set: this process answers it and runs the application's
   * answer_url (docs/calls.md "Inbound").
   */
  private async inbound(legId: string, invite: SipRequest): Promise<void> {
    const authId = getHeader(invite, 'x-account-id') ?? '';
    const appId = getHeader(invite, 'x-application-id') ?? '';
    const account = authId ? await this.o.directory.getAccount(authId) : null;
    const app = account && appId ? await this.o.directory.getApplication(account.authId, appId) : null;
    const answerUrl = app?.settings.enabled ? app.settings.answer_url : null;
    if (!account || !app || !answerUrl || !this.o.rtpengine || this.stopped) {
      const leg = this.ua.leg({}, legId);
      leg.accept(invite);
      leg.respond(this.stopped ? 503 : 480, this.stopped ? 'Service Unavailable' : 'Temporarily Unavailable', null);
      this.ua.forget(leg);
      this.o.log.info({ account: authId, app: appId, why: !app ? 'no application' : !answerUrl ? 'no answer_url' : 'no rtpengine' }, 'application call refused');
      return;
    }
    const sub = app.subAccount ? await this.o.directory.getSubAccount(account.authId, app.subAccount) : null;
    const from = parseNameAddr(getHeader(invite, 'from') ?? '');
    const to = parseNameAddr(getHeader(invite, 'to') ?? '');
    const domain = `${account.authId.toLowerCase()}.${this.o.sipDomain}`;
    const call = new PlacedCall(
      this.host(),
      { account, sub, domain },
      randomUUID(),
      { from: from?.uri.user ?? from?.uri.raw ?? '', to: to?.uri.user ?? to?.uri.raw ?? '', callerName: from?.displayName ?? '', direction: 'inbound' },
      { ring: null, hangup: null },
      { client: this.o.rtpengine },
      getHeader(invite, CALL_UUID_HEADER) ?? undefined,
    );
    call.placedFrom = { user: from?.uri.user ?? '', shown: from?.uri.user ?? '', endpoint: null, callerId: null };
    this.calls.set(call.callUuid, call);
    this.byNgCall.set(call.media.ngCallId, call);
    await this.o.live.put(call.record(this.o.processId));
    await call.startInbound(legId, invite);
    if (call.isGone) return;
    const st = app.settings;
    void this.runApp(call, { url: answerUrl, method: st.answer_method }, st.fallback_answer_url ? { url: st.fallback_answer_url, method: st.fallback_method } : null);
  }

  private async runWhenAnswered(call: PlacedCall, req: PlaceCallRequest): Promise<void> {
    if (!(await call.answeredOrFailed())) return;
    await this.runApp(call, req.answer, req.fallback ?? null);
  }

  private async runApp(call: PlacedCall, answer: UrlTarget, fallback: UrlTarget | null): Promise<void> {
    let cause: string;
    try {
      cause = await this.o.run(call, { answer, fallback, params: () => this.params(call) });
    } catch (err) {
      this.o.log.error({ call: call.callUuid, err }, 'voice application failed');
      cause = 'APPLICATION_ERROR';
    }
    if (!call.isGone) await call.hangup(cause);
  }

  /** The parameters every answer_url/action request of a call carries. */
  params(call: PlacedCall): Record<string, string> {
    return {
      CallUUID: call.callUuid,
      RequestUUID: call.requestUuid,
      ALegUUID: call.callUuid,
      ALegRequestUUID: call.requestUuid,
      From: call.view.from,
      To: call.view.to,
      CallerName: call.view.callerName,
      Direction: call.view.direction,
      CallStatus: call.isGone ? 'completed' : call.status,
      Event: 'StartApp',
      auth_id: call.owner.sub?.authId ?? call.owner.account.authId,
      timestamp: new Date().toISOString(),
    };
  }

  /** A Dial target's leg plan, placed for the same account. */
  dialPlan(call: PlacedCall, callerId: string | null): (t: DialTarget) => Promise<LegPlan> {
    return async (t) => {
      const owner: CallOwner = { authId: call.owner.sub?.authId ?? call.owner.account.authId, domain: call.owner.domain, subAccount: call.owner.sub?.authId ?? null };
      // A Dial's callerId (a number of the account) when given, else the A leg's own `from`.
      const e164 = callerId ? normalizeE164(callerId) : null;
      const from = e164 ? { user: e164, shown: e164, endpoint: null, callerId: e164 } : call.placedFrom;
      return this.planTo(owner, call.owner.account, t.kind === 'number' ? t.value : t.value, from, { sipHeaders: null, callerName: null } as unknown as PlaceCallRequest);
    };
  }

  private async command(c: Command, r: LiveCallRecord): Promise<void> {
    if (c.to === this.o.processId) return this.execute(c);
    const alive = this.o.alive ? await this.o.alive() : new Set([this.o.processId]);
    if (!alive.has(c.to)) {
      // Its process is gone: the call ends from here.
      if (c.op === 'hangup') await this.reapOne(r);
      return;
    }
    if (!this.o.notices) return;
    await this.o.notices.publish(TOPIC, JSON.stringify(c));
  }

  /** Ends a call whose process is gone: BYE to each leg from its stored dialog, its media deleted. */
  private async reapOne(r: LiveCallRecord): Promise<boolean> {
    if (!(await this.o.live.remove(r.domain, r.callUuid))) return false;
    for (const d of r.dialogs) this.o.ua.inject(byeFor(d, this.o.ua, NODE_FAILURE), this.ua.flowOf(`reap-${d.legId}`));
    if (r.media && this.o.rtpengine) await this.o.rtpengine.command('delete', { 'call-id': r.media.ngCallId }, r.media.engine).catch(() => undefined);
    this.o.log.info({ call: r.callUuid, process: r.owner, legs: r.dialogs.length }, 'call of a dead process ended');
    return true;
  }

  private onNotice(m: string): void {
    let c: Command;
    try {
      c = JSON.parse(m) as Command;
    } catch {
      return;
    }
    if (c.to !== this.o.processId && c.to !== '*') return;
    void this.execute(c).catch((err: unknown) => this.o.log.warn({ err: err instanceof Error ? err.message : String(err), op: c.op }, 'call command failed'));
  }

  private async execute(c: Command): Promise<void> {
    const call = this.calls.get(c.callUuid);
    if (!call) return;
    switch (c.op) {
      case 'hangup':
        await call.hangup('API_HANGUP');
        return;
      case 'transfer': {
        const t = c.req.aleg ?? null;
        if (!t) return;
        const st = this.transferOf(call.callUuid);
        st.gen++;
        st.next = t;
        const wake = st.wake;
        st.wake = null;
        wake?.();
        await call.stopMedia();
        return;
      }
      case 'play': {
        const prompts = this.o.prompts;
        if (!prompts) return;
        void (async () => {
          for (const url of c.req.urls) {
            const a = await prompts.audio(url);
            if ('error' in a) this.o.log.warn({ call: call.callUuid, error: a.error }, 'Play API: audio not played');
            else await call.play(a.path, { loop: c.req.loop ? 0 : 1 });
          }
        })().catch(() => undefined);
        return;
      }
      case 'speak': {
        const prompts = this.o.prompts;
        if (!prompts) return;
        void prompts
          .speech(c.req.text, c.req.voice ?? 'WOMAN', c.req.language ?? 'en-US')
          .then((file) => call.play(file, { loop: c.req.loop ? 0 : 1 }))
          .catch((err: unknown) => this.o.log.warn({ call: call.callUuid, err: err instanceof Error ? err.message : String(err) }, 'Speak API: not spoken'));
        return;
      }
      case 'dtmf':
        await call.sendDigits(c.req.digits);
        return;
      case 'stop-media':
        await call.stopMedia();
        return;
      case 'digit':
        call.digit(c.digit);
        return;
      case 'record':
        this.runRecording(call, c);
        return;
      case 'stop-record':
        call.stopRecording();
        return;
    }
  }

  private async inCall(owner: CallOwner, callUuid: string, make: (r: LiveCallRecord) => Command): Promise<boolean> {
    const r = await this.find(owner, callUuid);
    if (!r || r.status !== 'in-progress') return false;
    await this.command(make(r), r);
    return true;
  }

  private async find(owner: CallOwner, callUuid: string): Promise<LiveCallRecord | null> {
    const r = await this.o.live.get(owner.domain, callUuid);
    if (r && visible(r, owner)) return r;
    // A request_uuid names the calls of one request (a queued call is known by it).
    for (const x of await this.o.live.list(owner.domain)) if (x.requestUuid === callUuid && visible(x, owner)) return x;
    return null;
  }

  private async parties(owner: CallOwner): Promise<{ account: AccountRecord; sub: SubAccountRecord | null }> {
    const parent = accountOfDomain(owner.domain, this.o.sipDomain);
    const account = parent ? await this.o.directory.getAccount(parent) : null;
    if (!account) throw new CallRefusedError(404, 'not_found', 'account not found');
    const sub = owner.subAccount ? await this.o.directory.getSubAccount(account.authId, owner.subAccount) : null;
    return { account, sub };
  }

  /** `from`: a number the account owns, or one of its endpoints (its username or sip: URI). */
  private async fromOf(owner: CallOwner, account: AccountRecord, text: string): Promise<PlacedFrom> {
    const trimmed = text.trim();
    const uri = trimmed.startsWith('sip:') ? parseUri(trimmed) : null;
    if (!uri) {
      const e164 = normalizeE164(trimmed.startsWith('+') ? trimmed : `+${trimmed}`);
      if (e164 && this.o.numbers) {
        const route = await this.o.numbers.route(e164);
        if (route && route.authId === account.authId && route.status === 'active' && (!owner.subAccount || route.subAccount === owner.subAccount)) {
          return { user: e164, shown: e164, endpoint: null, callerId: e164, subAccount: route.subAccount };
        }
      }
    }
    const user = uri ? uri.user : trimmed;
    if (user && (!uri || uri.host === owner.domain)) {
      const cred = await this.o.credentials.get(owner.domain, user);
      const endpoint = cred ? await this.o.directory.getEndpoint(account.authId, cred.endpointId) : null;
      if (endpoint && (!owner.subAccount || endpoint.subAccount === owner.subAccount)) {
        const callerId = this.o.numbers ? await this.o.numbers.callerIdOf(account.authId, endpoint.endpointId) : null;
        return { user: endpoint.username, shown: `sip:${endpoint.username}@${owner.domain}`, endpoint, callerId, subAccount: endpoint.subAccount };
      }
    }
    throw new CallRefusedError(400, 'invalid_from', '`from` is neither a number of this account nor one of its endpoints');
  }

  /** Where a `to` goes: an endpoint of the account (sip: URI or username) or a number. */
  private async planTo(owner: CallOwner, account: AccountRecord, to: string, from: PlacedFrom, req: Pick<PlaceCallRequest, 'sipHeaders' | 'callerName'>): Promise<LegPlan> {
    const text = to.trim();
    const headers: Array<[string, string]> = Object.entries(req.sipHeaders ?? {}).map(([k, v]) => [`X-PH-${k}`, v]);
    const base = { from: { user: from.user, domain: owner.domain, displayName: req.callerName ?? null }, endpoint: from.endpoint, callerId: from.callerId, headers };
    if (text.startsWith('sip:')) {
      const u = parseUri(text);
      if (!u || !u.user || u.host !== owner.domain) throw new CallRefusedError(400, 'invalid_to', `\`to\` ${text} is not an endpoint of this account (sip:<username>@${owner.domain})`);
      return { ...base, requestUri: `sip:${u.user}@${owner.domain}`, to: text };
    }
    const digits = text.replace(/[\s().-]/g, '');
    if (!/^\+?\d{3,15}$/.test(digits)) {
      // A bare username of the account.
      if (/^[A-Za-z0-9_.-]{1,64}$/.test(text)) return { ...base, requestUri: `sip:${text}@${owner.domain}`, to: `sip:${text}@${owner.domain}` };
      throw new CallRefusedError(400, 'invalid_to', `\`to\` ${text} is neither a number nor a sip: URI`);
    }
    const number = digits.startsWith('+') ? digits : `+${digits}`;
    return { ...base, requestUri: `sip:${number}@${owner.domain};user=phone`, to: number };
  }
}

/** Whom a call is placed from: a number of the account or one of its endpoints. */
type PlacedFrom = { user: string; shown: string; endpoint: EndpointRecord | null; callerId: string | null; subAccount?: string | null };

/** A refusal the proxy gave before sending the call on, as the API answers it. */
function refusalOf(status: number, warning: string | null): CallRefusedError | null {
  const text = warning ? (/"([^"]*)"/.exec(warning)?.[1] ?? warning) : '';
  if (status === 402) return new CallRefusedError(402, 'insufficient_balance', text || 'the balance does not cover this call');
  if (status === 403) return new CallRefusedError(403, 'forbidden', text || 'this call is not allowed');
  if (status === 503 && /limit/.test(text)) return new CallRefusedError(429, 'limit_reached', text, /cps/.test(text) ? 1 : 5);
  return null;
}

function recordingView(r: RecordingRecord, recorder: Recorder): RecordingView {
  return {
    recordingId: r.recordingId,
    callUuid: r.callUuid,
    duration: r.durationMs / 1000,
    format: r.format,
    url: recorder.urlOf(r.subAccount ?? r.authId, r.recordingId),
    addedOn: new Date(r.createdAt).toISOString(),
    source: r.source,
    fromNumber: r.from,
    toNumber: r.to,
  };
}

function visible(r: LiveCallRecord, owner: CallOwner): boolean {
  return !owner.subAccount || r.subAccount === owner.subAccount;
}

function viewOf(r: LiveCallRecord): CallView {
  return {
    callUuid: r.callUuid,
    requestUuid: r.requestUuid,
    direction: r.direction,
    from: r.from,
    to: r.to,
    callerName: r.callerName,
    status: r.status,
    sessionStart: new Date(r.sessionStart).toISOString(),
    answeredAt: r.answeredAt === null ? null : new Date(r.answeredAt).toISOString(),
    bLegUuid: r.bLegUuid,
  };
}
