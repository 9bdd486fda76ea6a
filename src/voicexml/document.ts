/**
 * An application document (docs/voicexml.md): the VobizXML an answer, action or
 * Redirect URL returns, read into typed verbs. The element and attribute names are
 * the vendor's (vobiz-ai Vobiz-Python-SDK `vobizxml/elements.py`, modelled on Plivo
 * XML), case-sensitive; the defaults are the vendor's. Bad input is never thrown:
 * `parseAppDocument` answers why, and the runner hangs the call up naming it.
 *
 * What is refused, and why: a DOCTYPE (no entity definitions, so no entity
 * expansion beyond the five XML ones), a document over 100 KB, verbs that need a
 * mixing media server (Conference, MultiPartyCall, Stream, AudioStream), messages
 * (Message, SMS), speech input, and any element the vendor does not define.
 */
import { XMLParser, XMLValidator } from 'fast-xml-parser';

/** A URL the platform fetches, with its method (the same shape as calls/control.ts `UrlTarget`). */
export interface UrlTarget {
  url: string;
  method: 'GET' | 'POST';
}

/** The largest document read: 100 KB. */
export const MAX_DOCUMENT_BYTES = 100 * 1024;

export interface SpeakVerb {
  verb: 'Speak';
  text: string;
  /** `WOMAN` (default) or `MAN`; any other name is spoken with the default voice. */
  voice: string;
  /** @default 'en-US' */
  language: string;
  /** Times to say it; 0 = until the call moves on. @default 1 */
  loop: number;
}
export interface PlayVerb {
  verb: 'Play';
  url: string;
  /** Times to play it; 0 = until the call moves on. @default 1 */
  loop: number;
}
export interface WaitVerb {
  verb: 'Wait';
  /** Seconds. @default 1 */
  length: number;
  /** End the wait early on silence (answering machines). @default false */
  silence: boolean;
  /** Wait for a voicemail beep. Parsed; refused when run (no tone detection). @default false */
  beep: boolean;
}
export interface HangupVerb {
  verb: 'Hangup';
  /** `rejected`, `busy`, or null (normal clearing). */
  reason: 'rejected' | 'busy' | null;
  /** Seconds after which the call is hung up while the document goes on; null = now. */
  schedule: number | null;
}
export interface RedirectVerb {
  verb: 'Redirect';
  target: UrlTarget;
}
export type Prompt = SpeakVerb | PlayVerb | WaitVerb;
export interface PreAnswerVerb {
  verb: 'PreAnswer';
  prompts: Prompt[];
}
export interface DtmfVerb {
  verb: 'DTMF';
  /** 0-9, *, #, A-D, and `w`/`W` (0.5 s / 1 s pauses). */
  digits: string;
  /** Send in the background and go on at once. @default true */
  async: boolean;
}
export interface GatherVerb {
  verb: 'Gather';
  /** Where the digits are sent; null = the digits are dropped and the document goes on. */
  action: UrlTarget | null;
  /** @default 32 (1-32) */
  numDigits: number;
  /** One key that ends input ('' = none). @default '#' */
  finishOnKey: string;
  /** Seconds to wait for the first digit once the prompts have finished. @default 15 */
  executionTimeout: number;
  /** Seconds to wait for each further digit; `auto` reads as 5. @default 5 */
  digitEndTimeout: number;
  /** Run the action's document (true) or only notify it and go on (false). @default true */
  redirect: boolean;
  prompts: Prompt[];
}
export interface RecordVerb {
  verb: 'Record';
  action: UrlTarget | null;
  /** Seconds. @default 60 */
  maxLength: number;
  /** Keys that end the recording. @default '1234567890*#' */
  finishOnKey: string;
  /** Seconds of silence that end the recording. @default 15 */
  timeout: number;
  /** @default true */
  playBeep: boolean;
  /** @default 'mp3' (the vendor's) */
  fileFormat: 'wav' | 'mp3';
  /** Record the whole call in the background. Parsed; refused when run (the call port has no background recording). @default false */
  recordSession: boolean;
  /** @default true */
  redirect: boolean;
  /** Notified (POST by default) when the recording is ready. */
  callbackUrl: UrlTarget | null;
}
export interface DialTarget {
  kind: 'number' | 'user';
  /** E.164 number (Number) or `sip:` URI (User). */
  value: string;
  sendDigits?: string;
  /** `Name=value,Name2=value2` (User only). */
  sipHeaders?: string;
}
export interface DialVerb {
  verb: 'Dial';
  action: UrlTarget | null;
  /** Seconds the callee may ring. @default 30 */
  timeout: number;
  /** Seconds the bridged call may last. @default 14400 */
  timeLimit: number;
  callerId: string | null;
  callerName: string | null;
  /** @default false */
  hangupOnStar: boolean;
  /** `real` (ringback) or a URL; null = ringback. */
  dialMusic: string | null;
  /** @default true */
  redirect: boolean;
  /** Parsed; refused when run (the call port has no callee confirmation). */
  confirmSound: string | null;
  confirmKey: string | null;
  /** 1-10. */
  targets: DialTarget[];
}
export type Verb = SpeakVerb | PlayVerb | WaitVerb | HangupVerb | RedirectVerb | PreAnswerVerb | DtmfVerb | GatherVerb | RecordVerb | DialVerb;

export type ParseCause = 'invalid-xml' | 'too-large' | 'unknown-verb' | 'unsupported-verb' | 'bad-attribute';
export type ParseResult = { ok: true; verbs: Verb[] } | { ok: false; reason: string; cause: ParseCause; verb?: string };

/** Verbs the vendor defines that sip-edge cannot run, and why. */
const UNSUPPORTED: Readonly<Record<string, string>> = {
  Conference: 'needs a mixing media server, which sip-edge does not have',
  MultiPartyCall: 'needs a mixing media server, which sip-edge does not have',
  Stream: 'needs a mixing media server (audio forked to a WebSocket), which sip-edge does not have',
  AudioStream: 'needs a mixing media server (audio forked to a WebSocket), which sip-edge does not have',
  Message: 'sends a message, which is not available in calls',
  SMS: 'sends a message, which is not available in calls',
};

/** Thrown inside the parser only; parseAppDocument turns it into an answer. */
class Refusal extends Error {
  constructor(readonly why: ParseCause, message: string, readonly verb?: string) {
    super(message);
  }
}

/** A node of fast-xml-parser's `preserveOrder` output: `{ Name: children, ':@': attributes }` or `{ '#text': t }`. */
type XNode = Record<string, unknown>;

function nameOf(n: XNode): string {
  return Object.keys(n).find((k) => k !== ':@') ?? '';
}
function childrenOf(n: XNode): XNode[] {
  const c = n[nameOf(n)];
  return Array.isArray(c) ? (c as XNode[]) : [];
}
/** The text of a node, nested markup (SSML in Speak) dropped, words joined by single spaces. */
function textOf(n: XNode): string {
  const parts: string[] = [];
  const walk = (x: XNode): void => {
    for (const c of childrenOf(x)) {
      if (nameOf(c) === '#text') parts.push(String(c['#text']));
      else walk(c);
    }
  };
  walk(n);
  return parts.join(' ').replace(/\s+/g, ' ').trim();
}

/** Reads one element's attributes with the vendor's defaults; every bad value names verb and attribute. */
class Attrs {
  private readonly a: Record<string, string>;
  constructor(private readonly verb: string, node: XNode) {
    this.a = (node[':@'] as Record<string, string> | undefined) ?? {};
  }
  private bad(name: string, want: string): never {
    throw new Refusal('bad-attribute', `${this.verb} ${name}="${String(this.a[name]).slice(0, 40)}": ${want}`, this.verb);
  }
  str(name: string): string | null {
    const v = this.a[name];
    return v === undefined || v.trim() === '' ? null : v.trim();
  }
  int(name: string, dflt: number, min: number, max: number): number {
    const v = this.str(name);
    if (v === null) return dflt;
    if (!/^\d+$/.test(v) || Number(v) < min || Number(v) > max) this.bad(name, `must be a whole number from ${min} to ${max}`);
    return Number(v);
  }
  bool(name: string, dflt: boolean): boolean {
    const v = this.str(name)?.toLowerCase() ?? null;
    if (v === null) return dflt;
    if (v !== 'true' && v !== 'false') this.bad(name, 'must be true or false');
    return v === 'true';
  }
  oneOf<T extends string>(name: string, values: readonly T[], dflt: T): T {
    const v = this.str(name);
    if (v === null) return dflt;
    if (!(values as readonly string[]).includes(v)) this.bad(name, `must be one of ${values.join(', ')}`);
    return v as T;
  }
  keys(name: string, dflt: string, pattern: RegExp): string {
    const v = this.a[name];
    if (v === undefined) return dflt;
    const t = v.trim();
    if (t === '' || t.toLowerCase() === 'none') return '';
    if (!pattern.test(t)) this.bad(name, 'must be DTMF keys (0-9, * and #)');
    return t;
  }
  url(name: string): string | null {
    const v = this.str(name);
    if (v === null) return null;
    if (!isHttpsUrl(v)) this.bad(name, 'must be an absolute https:// URL');
    return v;
  }
  /** `name` (a URL) with its method attribute (`methodName`, POST by default). */
  target(name: string, methodName: string): UrlTarget | null {
    const url = this.url(name);
    const method = this.oneOf(methodName, ['GET', 'POST'] as const, 'POST');
    return url === null ? null : { url, method };
  }
}

function isHttpsUrl(s: string): boolean {
  try {
    return new URL(s).protocol === 'https:';
  } catch {
    return false;
  }
}

/** Text content that must be an https URL (Play, Redirect). */
function urlText(verb: string, n: XNode): string {
  const t = textOf(n);
  if (!isHttpsUrl(t)) throw new Refusal('bad-attribute', `${verb} URL "${t.slice(0, 60)}": must be an absolute https:// URL`, verb);
  return t;
}

function speak(n: XNode): SpeakVerb {
  const a = new Attrs('Speak', n);
  const text = textOf(n);
  if (text === '') throw new Refusal('bad-attribute', 'Speak text: must not be empty', 'Speak');
  return { verb: 'Speak', text, voice: a.str('voice') ?? 'WOMAN', language: a.str('language') ?? 'en-US', loop: a.int('loop', 1, 0, 1000) };
}
function play(n: XNode): PlayVerb {
  return { verb: 'Play', url: urlText('Play', n), loop: new Attrs('Play', n).int('loop', 1, 0, 1000) };
}
function wait(n: XNode): WaitVerb {
  const a = new Attrs('Wait', n);
  return { verb: 'Wait', length: a.int('length', 1, 1, 3600), silence: a.bool('silence', false), beep: a.bool('beep', false) };
}

/** Speak, Play and Wait nested in Gather or PreAnswer. */
function prompts(parent: string, n: XNode): Prompt[] {
  return elements(parent, n).map((c) => {
    const name = nameOf(c);
    if (name === 'Speak') return speak(c);
    if (name === 'Play') return play(c);
    if (name === 'Wait') return wait(c);
    throw new Refusal('unknown-verb', `${parent} may hold only Speak, Play and Wait, not ${name}`, name);
  });
}

/** The element children of a node; non-blank text between elements is refused. */
function elements(parent: string, n: XNode): XNode[] {
  const out: XNode[] = [];
  for (const c of childrenOf(n)) {
    const name = nameOf(c);
    if (name === '#text') {
      if (String(c['#text']).trim() !== '') throw new Refusal('invalid-xml', `text directly inside ${parent}`);
    } else out.push(c);
  }
  return out;
}

function gather(n: XNode): GatherVerb {
  const a = new Attrs('Gather', n);
  const inputType = a.str('inputType') ?? 'dtmf';
  if (inputType !== 'dtmf') {
    if (/^(speech|dtmf speech|speech dtmf)$/.test(inputType)) {
      throw new Refusal('unsupported-verb', `Gather inputType="${inputType}": speech recognition is not available; use inputType="dtmf"`, 'Gather');
    }
    a.oneOf('inputType', ['dtmf', 'speech', 'dtmf speech'] as const, 'dtmf');
  }
  const det = a.str('digitEndTimeout');
  return {
    verb: 'Gather',
    action: a.target('action', 'method'),
    numDigits: a.int('numDigits', 32, 1, 32),
    finishOnKey: a.keys('finishOnKey', '#', /^[0-9*#]$/),
    executionTimeout: a.int('executionTimeout', 15, 1, 300),
    digitEndTimeout: det === 'auto' ? 5 : a.int('digitEndTimeout', 5, 1, 60),
    redirect: a.bool('redirect', true),
    prompts: prompts('Gather', n),
  };
}

function record(n: XNode): RecordVerb {
  const a = new Attrs('Record', n);
  if (elements('Record', n).length > 0) throw new Refusal('unknown-verb', 'Record holds no elements', 'Record');
  return {
    verb: 'Record',
    action: a.target('action', 'method'),
    maxLength: a.int('maxLength', 60, 1, 14400),
    finishOnKey: a.keys('finishOnKey', '1234567890*#', /^[0-9*#]+$/),
    timeout: a.int('timeout', 15, 1, 3600),
    playBeep: a.bool('playBeep', true),
    fileFormat: a.oneOf('fileFormat', ['wav', 'mp3'] as const, 'mp3'),
    recordSession: a.bool('recordSession', false),
    redirect: a.bool('redirect', true),
    callbackUrl: a.target('callbackUrl', 'callbackMethod'),
  };
}

const SEND_DIGITS = /^[0-9*#A-DwW]+$/;

function dial(n: XNode): DialVerb {
  const a = new Attrs('Dial', n);
  const targets: DialTarget[] = [];
  for (const c of childrenOf(n)) {
    const name = nameOf(c);
    if (name === '#text') {
      // The vendor's shorthand: `<Dial>+14155550100</Dial>` is one Number.
      const t = String(c['#text']).trim();
      if (t !== '') targets.push({ kind: 'number', value: t });
      continue;
    }
    if (name !== 'Number' && name !== 'User') {
      throw new Refusal(name === 'Record' ? 'unsupported-verb' : 'unknown-verb', `Dial may hold only Number and User, not ${name}`, name);
    }
    const ca = new Attrs(name, c);
    const value = textOf(c);
    if (name === 'Number' && !/^\+?[0-9*#]{1,32}$/.test(value)) throw new Refusal('bad-attribute', `Number "${value.slice(0, 40)}": must be a phone number`, 'Number');
    if (name === 'User' && !/^sips?:[^\s<>"]+$/.test(value)) throw new Refusal('bad-attribute', `User "${value.slice(0, 60)}": must be a sip: URI`, 'User');
    const t: DialTarget = { kind: name === 'Number' ? 'number' : 'user', value };
    const sd = ca.str('sendDigits');
    if (sd !== null) {
      if (!SEND_DIGITS.test(sd)) throw new Refusal('bad-attribute', `${name} sendDigits="${sd.slice(0, 40)}": must be DTMF digits and w/W pauses`, name);
      t.sendDigits = sd;
    }
    const sh = name === 'User' ? ca.str('sipHeaders') : null;
    if (sh !== null) t.sipHeaders = sh;
    targets.push(t);
  }
  if (targets.length === 0) throw new Refusal('bad-attribute', 'Dial: needs at least one Number or User', 'Dial');
  if (targets.length > 10) throw new Refusal('bad-attribute', `Dial: at most 10 Number/User, got ${targets.length}`, 'Dial');
  const music = a.str('dialMusic');
  if (music !== null && music !== 'real' && !isHttpsUrl(music)) a.url('dialMusic');
  const confirmSound = a.url('confirmSound');
  return {
    verb: 'Dial',
    action: a.target('action', 'method'),
    timeout: a.int('timeout', 30, 1, 600),
    timeLimit: a.int('timeLimit', 14400, 1, 86400),
    callerId: a.str('callerId'),
    callerName: a.str('callerName'),
    hangupOnStar: a.bool('hangupOnStar', false),
    dialMusic: music,
    redirect: a.bool('redirect', true),
    confirmSound,
    confirmKey: a.keys('confirmKey', '', /^[0-9*#]$/) || null,
    targets,
  };
}

function verb(n: XNode): Verb {
  const name = nameOf(n);
  const a = new Attrs(name, n);
  switch (name) {
    case 'Speak':
      return speak(n);
    case 'Play':
      return play(n);
    case 'Wait':
      return wait(n);
    case 'Hangup': {
      const reason = a.str('reason') === null ? null : a.oneOf('reason', ['rejected', 'busy'] as const, 'rejected');
      return { verb: 'Hangup', reason, schedule: a.str('schedule') === null ? null : a.int('schedule', 0, 1, 86400) };
    }
    case 'Redirect':
      return { verb: 'Redirect', target: { url: urlText('Redirect', n), method: a.oneOf('method', ['GET', 'POST'] as const, 'POST') } };
    case 'PreAnswer':
      return { verb: 'PreAnswer', prompts: prompts('PreAnswer', n) };
    case 'DTMF': {
      const digits = textOf(n);
      if (!SEND_DIGITS.test(digits)) throw new Refusal('bad-attribute', `DTMF "${digits.slice(0, 40)}": must be DTMF digits and w/W pauses`, 'DTMF');
      return { verb: 'DTMF', digits, async: a.bool('async', true) };
    }
    case 'Gather':
      return gather(n);
    case 'Record':
      return record(n);
    case 'Dial':
      return dial(n);
    default: {
      const why = UNSUPPORTED[name];
      if (why !== undefined) throw new Refusal('unsupported-verb', `${name} ${why}`, name);
      throw new Refusal('unknown-verb', `${name} is not a VobizXML verb`, name);
    }
  }
}

const parser = new XMLParser({
  preserveOrder: true,
  ignoreAttributes: false,
  attributeNamePrefix: '',
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  // The five XML entities and character references only; DOCTYPEs are refused before parsing.
  processEntities: true,
  htmlEntities: false,
});

/** Reads a VobizXML document. Never throws. */
export function parseAppDocument(xml: string): ParseResult {
  if (Buffer.byteLength(xml, 'utf8') > MAX_DOCUMENT_BYTES) {
    return { ok: false, cause: 'too-large', reason: `the document is over ${MAX_DOCUMENT_BYTES / 1024} KB` };
  }
  if (/<!DOCTYPE/i.test(xml)) return { ok: false, cause: 'invalid-xml', reason: 'a DOCTYPE is not allowed' };
  const valid = XMLValidator.validate(xml);
  if (valid !== true) return { ok: false, cause: 'invalid-xml', reason: `line ${valid.err.line}: ${valid.err.msg}` };
  try {
    const top = (parser.parse(xml) as XNode[]).filter((n) => !nameOf(n).startsWith('?'));
    const root = top.find((n) => nameOf(n) !== '#text');
    if (top.length !== 1 || root === undefined || nameOf(root) !== 'Response') {
      return { ok: false, cause: 'invalid-xml', reason: 'the root element must be <Response>' };
    }
    return { ok: true, verbs: elements('Response', root).map(verb) };
  } catch (e) {
    if (e instanceof Refusal) return { ok: false, cause: e.why, reason: e.message, ...(e.verb ? { verb: e.verb } : {}) };
    return { ok: false, cause: 'invalid-xml', reason: (e as Error).message.slice(0, 200) };
  }
}
