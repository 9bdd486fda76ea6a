/**
 * One call the platform placed (docs/calls.md): its A leg, the B leg a Dial connects, its
 * media on rtpengine, and the voice application it runs once answered. It implements the
 * call port the XML runtime drives (voicexml/runner.ts): every verb ends up here as a SIP
 * or rtpengine action on this call.
 */
import { randomUUID } from 'node:crypto';
import type { Logger } from '../logger.js';
import { HANGUP_CAUSE_HEADER, type OriginatedCall } from '../routing/origin.js';
import type { CallStart } from '../store/calls/calls.js';
import type { AccountRecord, EndpointRecord, SubAccountRecord } from '../store/directory/directory.js';
import type { LiveCallRecord } from '../store/live-calls/live-calls.js';
import { CallMediaSession, type MediaParty } from './media.js';
import type { Recorder } from './recorder.js';
import { MAX_RECORDING_MS } from './recording.js';
import type { SipLeg, UserAgent } from './ua.js';
import type { SipRequest } from '../sip/message.js';

/** Where a leg goes: its Request-URI and To, and the identity it is placed with. */
export interface LegPlan {
  requestUri: string;
  /** The display number/user of `to` (CDR to_number). */
  to: string;
  from: { user: string; domain: string; displayName: string | null };
  endpoint: EndpointRecord | null;
  callerId: string | null;
  headers: Array<[string, string]>;
}

/** What a placed call needs from the service that runs it. */
export interface PlacedCallHost {
  ua: UserAgent;
  log: Logger;
  /** Register a leg's INVITE as originated by the platform (proxy's `originated` hook). */
  originate(callId: string, o: OriginatedCall): void;
  forgetOrigin(callId: string): void;
  /** The call's live record changed (store write). */
  changed(call: PlacedCall): void;
  /** The call ended (remove it from the live store; at most once). */
  ended(call: PlacedCall, cause: string): void;
}

export interface DialTarget {
  kind: 'number' | 'user';
  value: string;
  sendDigits?: string;
  sipHeaders?: string;
}

export type DialOutcome = { status: 'completed' | 'busy' | 'failed' | 'timeout' | 'no-answer' | 'canceled'; bLegUuid: string | null; durationS: number; hangupBy: 'caller' | 'callee' | null };

type PlayOutcome = 'done' | 'interrupted' | 'hangup';

/** How a recording ended: `stopped` by the API (DELETE …/Record/); `silence` is not detected (docs/calls.md "Recording"). */
export type RecordEnded = 'finish-key' | 'max-length' | 'hangup' | 'stopped';

export interface RecordOutcome {
  recordingId: string;
  url: string;
  durationMs: number;
  /** The finishOnKey digit that stopped it ('' otherwise). */
  digits: string;
  ended: RecordEnded;
}

export class PlacedCall {
  readonly callUuid: string;
  status: LiveCallRecord['status'] = 'queued';
  answeredAt: number | null = null;
  readonly sessionStart = Date.now();
  bLegUuid: string | null = null;
  /** Whom the A leg was placed from (a Dial without callerId places its B leg the same way). */
  placedFrom: { user: string; shown: string; endpoint: EndpointRecord | null; callerId: string | null } = { user: '', shown: '', endpoint: null, callerId: null };
  readonly media: CallMediaSession;
  private a: SipLeg | null = null;
  private b: SipLeg | null = null;
  private ended = false;
  private endCause = '';
  private resolveGone!: () => void;
  readonly gone: Promise<void> = new Promise((r) => (this.resolveGone = r));
  private readonly timers = new Set<NodeJS.Timeout>();
  /** The playback in progress (its end or interruption resolves it). */
  private playing: { resolve: (o: PlayOutcome) => void; timer: NodeJS.Timeout } | null = null;
  private digitWaiter: ((d: string) => void) | null = null;
  private readonly digitBuffer: string[] = [];
  /** Resolves when the A leg is admitted by the proxy (or refused: status ≥ 300). */
  private admission!: (r: { ok: true } | { ok: false; status: number; reason: string; warning: string | null }) => void;
  readonly admitted = new Promise<{ ok: true } | { ok: false; status: number; reason: string; warning: string | null }>((r) => (this.admission = r));
  private readonly answeredSignal: Promise<boolean>;
  private answeredResolve!: (ok: boolean) => void;

  constructor(
    private readonly host: PlacedCallHost,
    readonly owner: { account: AccountRecord; sub: SubAccountRecord | null; domain: string },
    readonly requestUuid: string,
    readonly view: { from: string; to: string; callerName: string; direction: 'outbound' | 'inbound' },
    readonly callbacks: { ring: CallStart['callbacks']['ring']; hangup: CallStart['callbacks']['hangup'] },
    media: { client: ConstructorParameters<typeof CallMediaSession>[0] },
    callUuid?: string,
  ) {
    this.callUuid = callUuid ?? randomUUID();
    this.media = new CallMediaSession(media.client, this.callUuid, host.log);
    this.answeredSignal = new Promise((r) => (this.answeredResolve = r));
  }

  get isGone(): boolean {
    return this.ended;
  }

  get cause(): string {
    return this.endCause;
  }

  /** The recording in progress (one at a time); `stop` ends it (the API's DELETE …/Record/). */
  private recordingNow: { recordingId: string; stop: () => void } | null = null;

  /** The A leg's answer (true) or failure (false). */
  answeredOrFailed(): Promise<boolean> {
    return this.answeredSignal;
  }

  record(owner: string): LiveCallRecord {
    return {
      callUuid: this.callUuid,
      requestUuid: this.requestUuid,
      domain: this.owner.domain,
      authId: this.owner.sub?.authId ?? this.owner.account.authId,
      subAccount: this.owner.sub?.authId ?? null,
      owner,
      status: this.status,
      direction: this.view.direction,
      from: this.view.from,
      to: this.view.to,
      callerName: this.view.callerName,
      sessionStart: this.sessionStart,
      answeredAt: this.answeredAt,
      bLegUuid: this.bLegUuid,
      dialogs: [this.a, this.b].filter((l): l is SipLeg => l !== null && l.state === 'confirmed').map((l) => l.snapshot()),
      media: this.media.engineId ? { ngCallId: this.media.ngCallId, engine: this.media.engineId } : null,
    };
  }

  // --- the A leg --------------------------------------------------------------------

  /** Offers media and sends the A leg's INVITE. */
  async start(plan: LegPlan, o: { ringTimeoutS: number; hangupOnRingS: number | null; timeLimitS: number | null }): Promise<void> {
    const sdp = await this.media.offerA();
    const leg = this.host.ua.leg({
      onProvisional: () => {
        if (this.status !== 'queued') return;
        this.status = 'ringing';
        this.host.changed(this);
        if (o.hangupOnRingS !== null && o.hangupOnRingS >= 0) this.after(o.hangupOnRingS * 1000, () => void this.hangup('HANGUP_ON_RING'));
      },
      onAnswered: (answer) => void this.onAnswered(answer, o.timeLimitS),
      onFailed: (status, reason, warning) => {
        this.admission({ ok: false, status, reason, warning });
        this.answeredResolve(false);
        this.finish(status === 487 ? 'ORIGINATOR_CANCEL' : `SIP_${status}`);
      },
      onBye: () => this.finish('NORMAL_CLEARING'),
      onInfoDigit: (d) => this.digit(d),
    });
    this.a = leg;
    this.host.originate(leg.callId, this.origin(plan, this.callUuid, this.callbacks, () => this.admission({ ok: true })));
    this.after(o.ringTimeoutS * 1000, () => {
      if (this.answeredAt === null) leg.cancel();
    });
    leg.invite({ requestUri: plan.requestUri, from: fromHeader(plan), to: `<${plan.requestUri}>`, sdp, headers: plan.headers });
  }

  private origin(plan: LegPlan, callUuid: string, callbacks: PlacedCall['callbacks'], admitted: () => void): OriginatedCall {
    return {
      account: this.owner.account,
      sub: this.owner.sub,
      endpoint: plan.endpoint,
      user: plan.from.user,
      callerId: plan.callerId,
      record: { callUuid, callbacks: { answer: null, hangup: callbacks.hangup ?? null, ring: callbacks.ring ?? null }, bridgeUuid: this.callUuid },
      admitted,
    };
  }

  /**
   * A call to an application (docs/calls.md "Inbound"): the caller's INVITE, taken by `leg`,
   * rings; the application's verbs answer it (200) or pre-answer it (183) with rtpengine's SDP.
   */
  async startInbound(legId: string, invite: SipRequest): Promise<void> {
    const leg = this.host.ua.leg(
      {
        onFailed: () => {
          this.answeredResolve(false);
          this.finish('ORIGINATOR_CANCEL');
        },
        onBye: () => this.finish('NORMAL_CLEARING'),
        onInfoDigit: (d) => this.digit(d),
      },
      legId,
    );
    leg.accept(invite);
    this.a = leg;
    const offer = leg.remoteSdp;
    if (!offer) {
      leg.respond(488, 'Not Acceptable Here', null);
      this.finish('INCOMPATIBLE_DESTINATION');
      return;
    }
    try {
      this.inboundSdp = await this.media.answerOffer(offer);
    } catch (err) {
      this.host.log.warn({ call: this.callUuid, err: err instanceof Error ? err.message : String(err) }, 'application call: media not set up');
      leg.respond(503, 'Service Unavailable', null);
      this.finish('MEDIA_FAILED');
      return;
    }
    leg.respond(180, 'Ringing', null);
    this.status = 'ringing';
    this.host.changed(this);
  }

  private inboundSdp: string | null = null;
  private preAnswered = false;

  /** The 200 to the caller of a call to an application (no-op for a call the platform placed). */
  private answerInbound(): void {
    const leg = this.a;
    if (!leg || !this.inboundSdp || this.answeredAt !== null || this.ended) return;
    leg.respond(200, 'OK', this.inboundSdp);
    this.status = 'in-progress';
    this.answeredAt = Date.now();
    this.host.changed(this);
    this.answeredResolve(true);
  }

  private async onAnswered(sdp: string | null, timeLimitS: number | null): Promise<void> {
    if (this.ended) return;
    try {
      if (!sdp) throw new Error('the answer has no SDP');
      await this.media.answerA(sdp);
    } catch (err) {
      this.host.log.warn({ call: this.callUuid, err: err instanceof Error ? err.message : String(err) }, 'A leg media not set up');
      this.answeredResolve(false);
      await this.hangup('MEDIA_FAILED');
      return;
    }
    this.status = 'in-progress';
    this.answeredAt = Date.now();
    this.host.changed(this);
    if (timeLimitS !== null && timeLimitS > 0) this.after(timeLimitS * 1000, () => void this.hangup('TIME_LIMIT_REACHED'));
    this.answeredResolve(true);
  }

  /** Hangs the call up (both legs) with a cause the CDR keeps. */
  async hangup(cause: string): Promise<void> {
    if (this.ended) return;
    const legs = [this.a, this.b].filter((l): l is SipLeg => l !== null);
    this.finish(cause);
    await Promise.all(legs.map((l) => l.hangup(undefined, [[HANGUP_CAUSE_HEADER, cause]])));
  }

  private finish(cause: string): void {
    if (this.ended) return;
    this.ended = true;
    this.endCause = cause;
    for (const t of this.timers) clearTimeout(t);
    this.timers.clear();
    this.playing?.resolve('hangup');
    this.digitWaiter?.('');
    const b = this.b;
    if (b && b.state !== 'terminated') void b.hangup(undefined, [[HANGUP_CAUSE_HEADER, cause]]);
    for (const l of [this.a, this.b]) if (l) this.host.forgetOrigin(l.callId);
    void this.media.delete();
    this.resolveGone();
    this.host.ended(this, cause);
    // Leg objects stay a moment for the BYE's answer, then go.
    const t = setTimeout(() => {
      for (const l of [this.a, this.b]) if (l) this.host.ua.forget(l);
    }, 5000);
    t.unref();
  }

  private after(ms: number, f: () => void): void {
    const t = setTimeout(() => {
      this.timers.delete(t);
      f();
    }, ms);
    t.unref();
    this.timers.add(t);
  }

  // --- the call port (voicexml/runner.ts) --------------------------------------------

  answered(): boolean {
    return this.answeredAt !== null && !this.ended;
  }

  async answer(): Promise<void> {
    this.answerInbound();
  }

  async preAnswer(): Promise<void> {
    const leg = this.a;
    if (!leg || !this.inboundSdp || this.preAnswered || this.answeredAt !== null || this.ended) return;
    this.preAnswered = true;
    leg.respond(183, 'Session Progress', this.inboundSdp);
  }

  /** Plays a file to the A leg `loop` times (0: until interrupted); resolves how it ended. */
  async play(file: string, o: { loop: number }, to: MediaParty = 'a'): Promise<PlayOutcome> {
    const times = o.loop <= 0 ? 1000 : o.loop;
    for (let i = 0; i < times; i++) {
      if (this.ended) return 'hangup';
      const ms = await this.media.play(to, file);
      const r = await new Promise<PlayOutcome>((resolve) => {
        const timer = setTimeout(() => resolve('done'), Math.max(ms, 20) + 60);
        this.playing = { resolve, timer };
      });
      if (this.playing) clearTimeout(this.playing.timer);
      this.playing = null;
      if (r !== 'done') return r;
    }
    return 'done';
  }

  async stopMedia(): Promise<void> {
    const p = this.playing;
    this.playing = null;
    if (p) {
      clearTimeout(p.timer);
      p.resolve('interrupted');
    }
    if (!this.ended) await this.media.stop('a');
  }

  async sendDigits(digits: string): Promise<void> {
    if (!this.ended) await this.media.digits('a', digits);
  }

  /** A digit from the A leg (rtpengine's DTMF log or SIP INFO). */
  digit(d: string): void {
    if (this.ended) return;
    const w = this.digitWaiter;
    if (w) w(d);
    else if (this.digitBuffer.length < 64) this.digitBuffer.push(d);
  }

  async collectDigits(o: { numDigits: number; finishOnKey: string; firstDigitTimeoutMs: number; digitTimeoutMs: number; onFirstDigit: () => void }): Promise<{ digits: string; ended: 'complete' | 'finish-key' | 'timeout' | 'hangup' }> {
    let digits = '';
    const next = (ms: number): Promise<string | null> =>
      new Promise((resolve) => {
        const buffered = this.digitBuffer.shift();
        if (buffered !== undefined) return resolve(buffered);
        if (this.ended) return resolve('');
        const t = setTimeout(() => {
          this.digitWaiter = null;
          resolve(null);
        }, ms);
        this.digitWaiter = (d) => {
          clearTimeout(t);
          this.digitWaiter = null;
          resolve(d);
        };
      });
    for (;;) {
      const d = await next(digits === '' ? o.firstDigitTimeoutMs : o.digitTimeoutMs);
      if (d === '' || this.ended) return { digits, ended: 'hangup' };
      if (d === null) return { digits, ended: 'timeout' };
      if (digits === '') o.onFirstDigit();
      if (o.finishOnKey && o.finishOnKey.includes(d)) return { digits, ended: 'finish-key' };
      digits += d;
      if (digits.length >= o.numDigits) return { digits, ended: 'complete' };
    }
  }

  async wait(ms: number): Promise<'done' | 'hangup'> {
    if (this.ended) return 'hangup';
    return Promise.race([new Promise<'done'>((r) => setTimeout(() => r('done'), ms).unref()), this.gone.then(() => 'hangup' as const)]);
  }

  /** A Dial: a B leg to the first target that answers, bridged to A until one side ends. */
  async dial(o: { targets: DialTarget[]; timeoutS: number; timeLimitS: number | null; plan: (t: DialTarget) => Promise<LegPlan> }): Promise<DialOutcome> {
    const aSdp = this.a?.remoteSdp;
    if (this.ended || !aSdp) return { status: 'failed', bLegUuid: null, durationS: 0, hangupBy: null };
    let last: DialOutcome = { status: 'failed', bLegUuid: null, durationS: 0, hangupBy: null };
    for (const target of o.targets) {
      if (this.ended) return { ...last, status: 'canceled' };
      let plan: LegPlan;
      try {
        plan = await o.plan(target);
      } catch (err) {
        this.host.log.info({ call: this.callUuid, target: target.value, err: err instanceof Error ? err.message : String(err) }, 'dial target refused');
        continue;
      }
      last = await this.dialOne(plan, aSdp, o.timeoutS, o.timeLimitS);
      if (last.status === 'completed' || this.ended) return last;
    }
    return last;
  }

  private async dialOne(plan: LegPlan, aSdp: string, timeoutS: number, timeLimitS: number | null): Promise<DialOutcome> {
    const bUuid = randomUUID();
    const sdp = await this.media.offerB(aSdp);
    let answeredAt = 0;
    return new Promise<DialOutcome>((resolve) => {
      let settled = false;
      const done = (r: DialOutcome): void => {
        if (settled) return;
        settled = true;
        clearTimeout(ring);
        if (limit) clearTimeout(limit);
        this.b = null;
        if (this.bLegUuid === bUuid) {
          this.bLegUuid = null;
          if (!this.ended) this.host.changed(this);
        }
        resolve(r);
      };
      let limit: NodeJS.Timeout | null = null;
      const leg = this.host.ua.leg({
        onAnswered: (bSdp) => {
          void (async () => {
            try {
              if (!bSdp) throw new Error('the answer has no SDP');
              await this.media.answerB(bSdp);
            } catch (err) {
              this.host.log.warn({ call: this.callUuid, err: err instanceof Error ? err.message : String(err) }, 'B leg media not set up');
              await leg.hangup(undefined, [[HANGUP_CAUSE_HEADER, 'MEDIA_FAILED']]);
              done({ status: 'failed', bLegUuid: bUuid, durationS: 0, hangupBy: null });
              return;
            }
            answeredAt = Date.now();
            clearTimeout(ring);
            this.bLegUuid = bUuid;
            this.host.changed(this);
            if (timeLimitS !== null && timeLimitS > 0) limit = setTimeout(() => void leg.hangup(undefined, [[HANGUP_CAUSE_HEADER, 'TIME_LIMIT_REACHED']]).then(() => done(result('caller'))), timeLimitS * 1000);
          })();
        },
        onFailed: (status) => {
          this.host.forgetOrigin(leg.callId);
          done({ status: status === 486 || status === 600 ? 'busy' : status === 487 ? (this.ended ? 'canceled' : 'no-answer') : status === 408 || status === 480 ? 'no-answer' : 'failed', bLegUuid: bUuid, durationS: 0, hangupBy: null });
        },
        onBye: () => done(result('callee')),
      });
      const result = (by: 'caller' | 'callee'): DialOutcome => ({ status: 'completed', bLegUuid: bUuid, durationS: answeredAt ? Math.round((Date.now() - answeredAt) / 1000) : 0, hangupBy: by });
      this.b = leg;
      const ring = setTimeout(() => leg.cancel(), timeoutS * 1000);
      void this.gone.then(() => {
        if (answeredAt) done(result('caller'));
      });
      this.host.originate(leg.callId, this.origin(plan, bUuid, { ring: null, hangup: null }, () => undefined));
      leg.invite({ requestUri: plan.requestUri, from: fromHeader(plan), to: `<${plan.requestUri}>`, sdp, headers: plan.headers });
    });
  }

  // --- recording (docs/calls.md "Recording") ----------------------------------------

  get isRecording(): boolean {
    return this.recordingNow !== null;
  }

  /**
   * Records what the A leg says until `maxLengthMs`, a `finishOnKey` digit, `stopRecording()`
   * or the call's end; then stores the WAV. Null when nothing could be recorded (the call
   * is gone or not answered, another recording runs, rtpengine wrote no file).
   * `silenceTimeoutMs` is not applied.
   */
  async recordLeg(
    o: { maxLengthMs: number; finishOnKey: string; silenceTimeoutMs: number; beep: boolean },
    rec: Recorder,
    meta: { recordingId?: string; source: 'xml' | 'call' },
  ): Promise<RecordOutcome | null> {
    if (this.ended || this.answeredAt === null || this.recordingNow || this.media.aLegPort === null) return null;
    const recordingId = meta.recordingId ?? rec.newId();
    let stop!: (e: RecordEnded) => void;
    const stopped = new Promise<RecordEnded>((r) => (stop = r));
    this.recordingNow = { recordingId, stop: () => stop('stopped') };
    let waiter: ((d: string) => void) | null = null;
    try {
      if (o.beep) await this.play(await rec.beepFile(), { loop: 1 });
      if (this.ended) return null;
      const take = await rec.begin(this.media);
      const maxMs = Math.min(Math.max(o.maxLengthMs, 1000), MAX_RECORDING_MS);
      const timer = setTimeout(() => stop('max-length'), maxMs);
      timer.unref();
      void this.gone.then(() => stop('hangup'));
      let digits = '';
      if (o.finishOnKey) {
        // Digits pressed before the recording began are not for it.
        this.digitBuffer.length = 0;
        const w = (d: string): void => {
          if (d !== '' && o.finishOnKey.includes(d)) {
            digits = d;
            stop('finish-key');
          }
        };
        waiter = w;
        this.digitWaiter = w;
      }
      const ended = await stopped;
      clearTimeout(timer);
      if (waiter && this.digitWaiter === waiter) this.digitWaiter = null;
      const owner = { domain: this.owner.domain, authId: this.owner.account.authId, subAccount: this.owner.sub?.authId ?? null };
      const r = await rec.finish(take, this.media, { recordingId, ...owner, callUuid: this.callUuid, source: meta.source, from: this.view.from, to: this.view.to, maxMs });
      if (!r) return null;
      return { recordingId, url: rec.urlOf(this.owner.sub?.authId ?? this.owner.account.authId, recordingId), durationMs: r.durationMs, digits, ended };
    } catch (err) {
      this.host.log.warn({ call: this.callUuid, err: err instanceof Error ? err.message : String(err) }, 'recording failed');
      return null;
    } finally {
      if (waiter && this.digitWaiter === waiter) this.digitWaiter = null;
      this.recordingNow = null;
    }
  }

  /** Ends the recording in progress (the API's DELETE …/Record/); false when none runs. */
  stopRecording(): boolean {
    const r = this.recordingNow;
    if (!r) return false;
    r.stop();
    return true;
  }
}

function fromHeader(plan: LegPlan): string {
  const name = plan.from.displayName ? `"${plan.from.displayName.replace(/["\\\r\n]/g, '')}" ` : '';
  return `${name}<sip:${plan.from.user}@${plan.from.domain}>`;
}
