/**
 * The interpreter of application documents (docs/voicexml.md "Running"): fetch the
 * answer URL (then the fallback URL), run the verbs top to bottom against a call
 * port, follow Gather/Record/Dial actions and Redirects (each returned document
 * replaces the current one), and hang up at the end of the document. The semantics
 * are the vendor's (Plivo XML's): a Gather without input goes on with the next verb;
 * a verb whose audio cannot be had is skipped; an action or Redirect that fails ends
 * the call with a cause naming it. The call going away (BYE, API hangup) stops the
 * run at once: every wait on the port is raced against `port.gone`.
 *
 * The runner knows nothing of SIP or media: calls/ implements CallPort.
 */
import type { Logger } from '../logger.js';
import { parseAppDocument, type DialVerb, type GatherVerb, type ParseResult, type Prompt, type RecordVerb, type UrlTarget, type Verb } from './document.js';
import type { FetchResult } from './fetch.js';
import { origin } from './https-get.js';

/** What the runner asks of a call. calls/ implements it over SIP and rtpengine. */
export interface CallPort {
  readonly callUuid: string;
  answered(): boolean;
  /** Send 200 OK (A leg already answered for outbound calls: no-op). */
  answer(): Promise<void>;
  /** 183 with media (inbound). */
  preAnswer(): Promise<void>;
  /** Resolves when playback ends (loop 0 = until interrupted). */
  play(file: string, o: { loop: number }): Promise<'done' | 'interrupted' | 'hangup'>;
  stopMedia(): Promise<void>;
  sendDigits(digits: string): Promise<void>;
  /** Collect DTMF until numDigits / finishOnKey / timeouts; prompts may be playing meanwhile (first digit interrupts them). */
  collectDigits(o: { numDigits: number; finishOnKey: string; firstDigitTimeoutMs: number; digitTimeoutMs: number; onFirstDigit: () => void }): Promise<{
    digits: string;
    ended: 'complete' | 'finish-key' | 'timeout' | 'hangup';
  }>;
  record(o: { maxLengthMs: number; finishOnKey: string; silenceTimeoutMs: number; beep: boolean; format: 'wav' | 'mp3' }): Promise<{
    recordingId: string;
    url: string;
    durationMs: number;
    digits: string;
    ended: 'finish-key' | 'max-length' | 'silence' | 'hangup';
  } | null>;
  dial(o: {
    targets: Array<{ kind: 'number' | 'user'; value: string; sendDigits?: string; sipHeaders?: string }>;
    timeoutS: number;
    timeLimitS: number | null;
    callerId: string | null;
    callerName: string | null;
    dialMusic: string | null;
    hangupOnStar: boolean;
  }): Promise<{ status: 'completed' | 'busy' | 'failed' | 'timeout' | 'no-answer' | 'canceled'; bLegUuid: string | null; durationS: number; hangupBy: 'caller' | 'callee' | null }>;
  wait(ms: number, o: { silence: boolean }): Promise<'done' | 'hangup'>;
  hangup(reason: string): Promise<void>;
  /** Resolves when the call is gone (remote BYE, API hangup). */
  readonly gone: Promise<void>;
}

/**
 * The causes a run ends with (docs/voicexml.md "Hangup causes"). Causes naming a
 * detail are written `CAUSE: detail`, e.g. `XML_UNSUPPORTED_VERB: Conference`.
 */
export const HANGUP_CAUSES = {
  /** The last verb of the last document ran. */
  END_OF_XML: 'END_OF_XML',
  /** `<Hangup/>`. */
  NORMAL_CLEARING: 'NORMAL_CLEARING',
  /** `<Hangup reason="rejected"/>`. */
  CALL_REJECTED: 'CALL_REJECTED',
  /** `<Hangup reason="busy"/>`. */
  USER_BUSY: 'USER_BUSY',
  /** Neither the answer URL nor the fallback URL answered with a document. */
  ANSWER_URL_FAILED: 'ANSWER_URL_FAILED',
  /** An action (Gather, Record, Dial) or Redirect URL did not answer with a document. */
  ACTION_URL_FAILED: 'ACTION_URL_FAILED',
  /** A document did not parse or broke a rule: `XML_INVALID: <reason>`. */
  XML_INVALID: 'XML_INVALID',
  /** A verb sip-edge cannot run: `XML_UNSUPPORTED_VERB: <verb>`. */
  XML_UNSUPPORTED_VERB: 'XML_UNSUPPORTED_VERB',
  /** An attribute sip-edge cannot honour: `XML_UNSUPPORTED_ATTRIBUTE: <verb> <attribute>`. */
  XML_UNSUPPORTED_ATTRIBUTE: 'XML_UNSUPPORTED_ATTRIBUTE',
  /** More documents than `maxDocuments` in one call (a Redirect loop). */
  XML_DOCUMENT_LIMIT: 'XML_DOCUMENT_LIMIT',
  /** The call ended from outside (BYE, API hangup); the B2BUA's own cause is better. */
  CALL_GONE: 'CALL_GONE',
  /** The port failed in a way the runner did not expect. */
  PLATFORM_ERROR: 'PLATFORM_ERROR',
} as const;

/** Fetches one document; calls/ binds the account's secret and the network guard to `fetchDocument`. */
export type DocumentFetcher = (target: UrlTarget, params: Record<string, string>) => Promise<FetchResult>;

export interface SpeechRendererLike {
  render(text: string, o: { voice: string; language: string }): Promise<{ path: string; durationMs: number }>;
}
export interface AudioCacheLike {
  get(url: string): Promise<{ path: string; durationMs: number | null } | { error: string }>;
}

export interface RunOptions {
  port: CallPort;
  first: UrlTarget;
  fallback: UrlTarget | null;
  /** CallUUID, From, To, Direction, CallStatus, …: sent with every request, read afresh each time. */
  baseParams: () => Record<string, string>;
  fetch: DocumentFetcher;
  speech: SpeechRendererLike;
  audio: AudioCacheLike;
  log: Logger;
  /** Documents one call may run (a guard against Redirect loops). @default 50 */
  maxDocuments?: number;
}

export interface RunResult {
  hangupCause: string;
  /** `xml`: the run hung the call up; `call`: the call went away by itself. */
  endedBy: 'xml' | 'call';
}

/** Ends the run: thrown from anywhere inside it, caught once at the top. */
class Stop {
  constructor(readonly cause: string, readonly gone = false) {}
}

const GONE = Symbol('gone');

/** A prompt ready to play: a file (with its length when known) or a pause. */
type ReadyPrompt = { file: string; loop: number; durationMs: number | null } | { pauseMs: number; silence: boolean };

class Run {
  private gone = false;
  private documents = 0;
  private scheduled: NodeJS.Timeout | null = null;
  private scheduledCause: string | null = null;
  private readonly goneP: Promise<typeof GONE>;
  private readonly port: CallPort;
  private readonly log: Logger;

  constructor(private readonly o: RunOptions) {
    this.port = o.port;
    this.log = o.log;
    this.goneP = o.port.gone.then(() => {
      this.gone = true;
      return GONE;
    });
  }

  async run(): Promise<RunResult> {
    try {
      let verbs = await this.firstDocument();
      for (;;) {
        const next = await this.runDocument(verbs);
        if (next === null) throw new Stop(HANGUP_CAUSES.END_OF_XML);
        verbs = next;
      }
    } catch (e) {
      if (this.scheduled) clearTimeout(this.scheduled);
      if (!(e instanceof Stop)) {
        this.log.error({ err: e, callUuid: this.port.callUuid }, 'voicexml: the call port failed; hanging up');
        if (!this.gone) await this.port.hangup(HANGUP_CAUSES.PLATFORM_ERROR).catch(() => undefined);
        return { hangupCause: HANGUP_CAUSES.PLATFORM_ERROR, endedBy: 'xml' };
      }
      if (e.gone || this.gone) {
        if (this.scheduledCause !== null) return { hangupCause: this.scheduledCause, endedBy: 'xml' };
        return { hangupCause: HANGUP_CAUSES.CALL_GONE, endedBy: 'call' };
      }
      this.log.info({ callUuid: this.port.callUuid, cause: e.cause }, 'voicexml: hanging up');
      await this.port.hangup(e.cause).catch((err: unknown) => this.log.warn({ err, callUuid: this.port.callUuid }, 'voicexml: hangup failed'));
      return { hangupCause: e.cause, endedBy: 'xml' };
    }
  }

  /** Waits for `p` unless the call goes first; then the run stops. */
  private async race<T>(p: Promise<T>): Promise<T> {
    // Promise.race subscribes to `p`: a failure after the call is gone is not an unhandled rejection.
    const r = await Promise.race([p, this.goneP]);
    if (r === GONE) throw new Stop(HANGUP_CAUSES.CALL_GONE, true);
    return r as T;
  }

  private params(extra: Record<string, string> = {}): Record<string, string> {
    return { ...this.o.baseParams(), ...extra };
  }

  private static xmlCause(p: Extract<ParseResult, { ok: false }>): string {
    if (p.cause === 'unsupported-verb') return `${HANGUP_CAUSES.XML_UNSUPPORTED_VERB}: ${p.verb ?? p.reason}`;
    return `${HANGUP_CAUSES.XML_INVALID}: ${p.reason}`;
  }

  /** The answer URL's document, or the fallback URL's when the first fails to fetch or to parse. */
  private async firstDocument(): Promise<Verb[]> {
    let cause: string = HANGUP_CAUSES.ANSWER_URL_FAILED;
    for (const [which, target] of [['answer', this.o.first], ['fallback', this.o.fallback]] as const) {
      if (target === null) continue;
      this.documents++;
      const got = await this.race(this.o.fetch(target, this.params()));
      if (!got.ok) {
        this.log.warn({ callUuid: this.port.callUuid, url: origin(target.url), reason: got.reason }, `voicexml: the ${which} URL failed`);
        continue;
      }
      const doc = parseAppDocument(got.xml);
      if (doc.ok) return doc.verbs;
      cause = Run.xmlCause(doc);
      this.log.warn({ callUuid: this.port.callUuid, url: origin(target.url), reason: doc.reason }, `voicexml: the ${which} URL's document is refused`);
    }
    throw new Stop(cause);
  }

  /** An action's or Redirect's document, which replaces the current one. */
  private async nextDocument(target: UrlTarget, extra: Record<string, string>): Promise<Verb[]> {
    if (++this.documents > (this.o.maxDocuments ?? 50)) throw new Stop(HANGUP_CAUSES.XML_DOCUMENT_LIMIT);
    const got = await this.race(this.o.fetch(target, this.params(extra)));
    if (!got.ok) {
      this.log.warn({ callUuid: this.port.callUuid, url: origin(target.url), reason: got.reason }, 'voicexml: an action URL failed');
      throw new Stop(HANGUP_CAUSES.ACTION_URL_FAILED);
    }
    const doc = parseAppDocument(got.xml);
    if (!doc.ok) throw new Stop(Run.xmlCause(doc));
    return doc.verbs;
  }

  /** An action with `redirect="false"` (or after the call is gone): told, its answer not run. */
  private async notify(target: UrlTarget, extra: Record<string, string>): Promise<void> {
    const got = await this.o.fetch(target, this.params(extra));
    if (!got.ok) this.log.warn({ callUuid: this.port.callUuid, url: origin(target.url), reason: got.reason }, 'voicexml: an action URL failed (notify only)');
  }

  private async ensureAnswered(): Promise<void> {
    if (!this.port.answered()) await this.race(this.port.answer());
  }

  /** Runs one document; answers the document replacing it, or null at its end. */
  private async runDocument(verbs: Verb[]): Promise<Verb[] | null> {
    for (const v of verbs) {
      if (this.gone) throw new Stop(HANGUP_CAUSES.CALL_GONE, true);
      if (v.verb !== 'PreAnswer' && v.verb !== 'Hangup' && v.verb !== 'Redirect') await this.ensureAnswered();
      const next = await this.verb(v);
      if (next !== null) return next;
    }
    return null;
  }

  private async verb(v: Verb): Promise<Verb[] | null> {
    switch (v.verb) {
      case 'Speak':
      case 'Play':
      case 'Wait':
        await this.prompts([v]);
        return null;
      case 'PreAnswer':
        if (this.port.answered()) {
          this.log.debug({ callUuid: this.port.callUuid }, 'voicexml: PreAnswer skipped, the call is answered');
          return null;
        }
        await this.race(this.port.preAnswer());
        await this.prompts(v.prompts);
        return null;
      case 'Hangup': {
        const cause = v.reason === 'rejected' ? HANGUP_CAUSES.CALL_REJECTED : v.reason === 'busy' ? HANGUP_CAUSES.USER_BUSY : HANGUP_CAUSES.NORMAL_CLEARING;
        if (v.schedule === null) throw new Stop(cause);
        if (this.scheduled) clearTimeout(this.scheduled);
        this.scheduled = setTimeout(() => {
          this.scheduledCause = cause;
          void this.port.hangup(cause).catch(() => undefined);
        }, v.schedule * 1000);
        return null;
      }
      case 'Redirect':
        return this.nextDocument(v.target, {});
      case 'DTMF':
        if (v.async) void this.port.sendDigits(v.digits).catch((err: unknown) => this.log.warn({ err, callUuid: this.port.callUuid }, 'voicexml: DTMF failed'));
        else await this.race(this.port.sendDigits(v.digits));
        return null;
      case 'Gather':
        return this.gather(v);
      case 'Record':
        return this.record(v);
      case 'Dial':
        return this.dial(v);
    }
  }

  /** Speak/Play/Wait made ready: speech rendered, audio fetched; failures skipped with a warning. */
  private async ready(prompts: Prompt[]): Promise<ReadyPrompt[]> {
    const out: ReadyPrompt[] = [];
    for (const p of prompts) {
      if (p.verb === 'Wait') {
        if (p.beep) throw new Stop(`${HANGUP_CAUSES.XML_UNSUPPORTED_ATTRIBUTE}: Wait beep`);
        out.push({ pauseMs: p.length * 1000, silence: p.silence });
      } else if (p.verb === 'Speak') {
        try {
          const r = await this.race(this.o.speech.render(p.text, { voice: p.voice, language: p.language }));
          out.push({ file: r.path, loop: p.loop, durationMs: r.durationMs });
        } catch (e) {
          if (e instanceof Stop) throw e;
          this.log.warn({ callUuid: this.port.callUuid, err: (e as Error).message }, 'voicexml: Speak skipped, the text could not be rendered');
        }
      } else {
        const r = await this.race(this.o.audio.get(p.url));
        if ('error' in r) this.log.warn({ callUuid: this.port.callUuid, url: origin(p.url), reason: r.error }, 'voicexml: Play skipped, the audio could not be fetched');
        else out.push({ file: r.path, loop: p.loop, durationMs: r.durationMs });
      }
    }
    return out;
  }

  /** Plays prompts in turn (Speak, Play, Wait, PreAnswer). */
  private async prompts(prompts: Prompt[]): Promise<void> {
    for (const r of await this.ready(prompts)) {
      const result = await this.race('pauseMs' in r ? this.port.wait(r.pauseMs, { silence: r.silence }) : this.port.play(r.file, { loop: r.loop }));
      if (result === 'hangup') throw new Stop(HANGUP_CAUSES.CALL_GONE, true);
    }
  }

  /**
   * `<Gather>`: the prompts play while digits are collected; the first digit stops
   * them. The first-digit timer covers the prompts' length plus executionTimeout, so
   * the caller has executionTimeout once the prompts end (a prompt of unknown length,
   * or looping forever, counts 0 and is cut when the timer ends).
   */
  private async gather(v: GatherVerb): Promise<Verb[] | null> {
    const ready = await this.ready(v.prompts);
    const promptMs = ready.reduce((sum, r) => sum + ('pauseMs' in r ? r.pauseMs : r.loop > 0 && r.durationMs !== null ? r.durationMs * r.loop : 0), 0);
    let digitSeen = false;
    let onDigit: () => void = () => undefined;
    const firstDigit = new Promise<void>((resolve) => (onDigit = resolve));
    let collected = false;
    const collect = this.port
      .collectDigits({
        numDigits: v.numDigits,
        finishOnKey: v.finishOnKey,
        firstDigitTimeoutMs: promptMs + v.executionTimeout * 1000,
        digitTimeoutMs: v.digitEndTimeout * 1000,
        onFirstDigit: () => {
          digitSeen = true;
          onDigit();
          void this.port.stopMedia().catch(() => undefined);
        },
      })
      .finally(() => {
        collected = true;
        onDigit();
      });
    // The prompts, as ready: played from `ready` without rendering again.
    const playing = this.playReady(ready, () => digitSeen || collected, firstDigit).then(
      () => null,
      (e: unknown) => e,
    );
    const got = await this.race(collect);
    const failed = await this.race(playing);
    if (failed !== null) throw failed;
    if (got.ended === 'hangup') throw new Stop(HANGUP_CAUSES.CALL_GONE, true);
    if (got.digits === '') return null; // no input: on with the next verb
    if (v.action === null) return null;
    const extra = { Digits: got.digits, InputType: 'dtmf' };
    if (v.redirect) return this.nextDocument(v.action, extra);
    await this.notify(v.action, extra);
    return null;
  }

  /** Plays ready prompts until `stop()`; when the collection ends first, the media still playing is stopped. */
  private async playReady(ready: ReadyPrompt[], stop: () => boolean, firstDigit: Promise<void>): Promise<void> {
    for (const r of ready) {
      if (stop()) return;
      const step = 'pauseMs' in r ? this.port.wait(r.pauseMs, { silence: false }) : this.port.play(r.file, { loop: r.loop });
      const result = await this.race(Promise.race([step, firstDigit.then(() => 'interrupted' as const)]));
      if (result === 'hangup') throw new Stop(HANGUP_CAUSES.CALL_GONE, true);
      if (result === 'interrupted' && stop() && !('pauseMs' in r)) await this.race(this.port.stopMedia());
    }
  }

  /** `<Record>`: the action gets RecordUrl, RecordingDuration(Ms), RecordingID and Digits. */
  private async record(v: RecordVerb): Promise<Verb[] | null> {
    if (v.recordSession) throw new Stop(`${HANGUP_CAUSES.XML_UNSUPPORTED_ATTRIBUTE}: Record recordSession`);
    const recording = this.port.record({ maxLengthMs: v.maxLength * 1000, finishOnKey: v.finishOnKey, silenceTimeoutMs: v.timeout * 1000, beep: v.playBeep, format: v.fileFormat });
    // The caller hanging up ends the recording too; what was recorded still goes to the action (the port needs a moment to store it).
    const r = await Promise.race([recording, this.goneP.then(() => Promise.race([recording, delay(5000).then(() => null)]))]);
    if (r === null && this.gone) throw new Stop(HANGUP_CAUSES.CALL_GONE, true);
    if (r === null) {
      this.log.warn({ callUuid: this.port.callUuid }, 'voicexml: Record produced no recording');
      return null;
    }
    const extra = {
      RecordUrl: r.url,
      RecordingID: r.recordingId,
      RecordingDuration: String(Math.round(r.durationMs / 1000)),
      RecordingDurationMs: String(r.durationMs),
      Digits: r.digits,
    };
    if (v.callbackUrl !== null) void this.notify(v.callbackUrl, extra).catch(() => undefined);
    if (r.ended === 'hangup' || this.gone) {
      if (v.action !== null) await this.notify(v.action, extra);
      throw new Stop(HANGUP_CAUSES.CALL_GONE, true);
    }
    if (v.action === null) return null;
    if (v.redirect) return this.nextDocument(v.action, extra);
    await this.notify(v.action, extra);
    return null;
  }

  /** `<Dial>`: the action gets DialStatus, DialALegUUID, DialBLegUUID and DialDuration; without one the document goes on. */
  private async dial(v: DialVerb): Promise<Verb[] | null> {
    if (v.confirmSound !== null) throw new Stop(`${HANGUP_CAUSES.XML_UNSUPPORTED_ATTRIBUTE}: Dial confirmSound`);
    if (v.confirmKey !== null) throw new Stop(`${HANGUP_CAUSES.XML_UNSUPPORTED_ATTRIBUTE}: Dial confirmKey`);
    const dialing = this.port.dial({
      targets: v.targets,
      timeoutS: v.timeout,
      timeLimitS: v.timeLimit,
      callerId: v.callerId,
      callerName: v.callerName,
      dialMusic: v.dialMusic,
      hangupOnStar: v.hangupOnStar,
    });
    // The caller hanging up ends the dial too; its outcome still goes to the action.
    const r = await Promise.race([dialing, this.goneP.then(() => Promise.race([dialing, delay(2000).then(() => null)]))]);
    const extra = {
      DialStatus: r?.status ?? 'canceled',
      DialALegUUID: this.port.callUuid,
      DialBLegUUID: r?.bLegUuid ?? '',
      DialDuration: String(r?.durationS ?? 0),
    };
    if (this.gone) {
      if (v.action !== null) await this.notify(v.action, extra);
      throw new Stop(HANGUP_CAUSES.CALL_GONE, true);
    }
    if (v.action === null) return null;
    if (v.redirect) return this.nextDocument(v.action, extra);
    await this.notify(v.action, extra);
    return null;
  }
}

function delay(ms: number): Promise<void> {
  return new Promise((resolve) => setTimeout(resolve, ms).unref());
}

/**
 * Runs an application on an answered (or, inbound, ringing) call until the call
 * ends. Never rejects: whatever happens ends in a hangup cause.
 */
export function runApplication(o: RunOptions): Promise<RunResult> {
  return new Run(o).run();
}
