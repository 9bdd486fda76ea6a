/**
 * The Calls API (docs/api.md "Calls"): place calls, list and read live and queued
 * calls, hang up, transfer, and act on a running call (play, speak, DTMF, record),
 * plus the recordings. Paths, parameters and answers follow the vendor's SDK
 * (`calls`, `live_calls`, `play_audio`, `speak_text`, `dtmf`, `record_calls`,
 * `recordings`); the SDK's response models forbid unknown fields, so answers carry
 * exactly their fields. The interface spec's Call resource ({api_id, request_uuid,
 * message}) is the place-call answer.
 *
 * These routes stand on {@link CallControl} only (src/calls/control.ts): the B2BUA
 * behind it places and runs the calls; without one (`ctx.callControl` null) every
 * route answers 503 `calls_unavailable`. A {@link CallRefusedError} is answered with
 * its status and `{api_id, error, message}` (429 with Retry-After).
 *
 * Who: an account on its own path; a sub-account with its own credentials on its
 * own `/Account/<sub_auth_id>/` path, seeing and acting on its own calls and
 * recordings only. A parent's credentials on a sub-account's path → 404 (the path
 * names another account), as on every other Account route.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import {
  CallRefusedError,
  type CallControl,
  type CallOwner,
  type CallView,
  type HttpMethod,
  type LegChoice,
  type PlaceCallRequest,
  type RecordingView,
  type UrlTarget,
} from '../calls/control.js';
import { ApiError, badRequest, describedPattern, notFound, type Details } from './errors.js';
import { bodyObject, customerOf, queryObject, validationDetails, type ApiContext } from './context.js';

/** Most destinations in one `to` (the vendor's limit). */
export const MAX_DESTINATIONS = 1000;
/** Longest `caller_name`. */
export const MAX_CALLER_NAME = 50;
/** `ring_timeout` when not given, seconds, and its bound (the SDK states neither; docs/api.md "Calls"). */
export const DEFAULT_RING_TIMEOUT = 60;
export const MAX_RING_TIMEOUT = 300;
/** `time_limit` when not given, seconds (4 h), and its bound (24 h). */
export const DEFAULT_TIME_LIMIT = 14_400;
export const MAX_TIME_LIMIT = 86_400;
/** Bound of `hangup_on_ring`, seconds. */
export const MAX_HANGUP_ON_RING = 300;
/** Most `sip_headers` pairs. */
export const MAX_SIP_HEADERS = 24;
/** Most queued calls a queued list answers (the vendor's "max 20"). */
export const MAX_QUEUED_LISTED = 20;
/** `time_limit` of a recording when not given, seconds, and its bound (8 h). */
export const DEFAULT_RECORD_TIME_LIMIT = 60;
export const MAX_RECORD_TIME_LIMIT = 28_800;
/** Most audio URLs of one Play. */
export const MAX_PLAY_URLS = 20;

// Spec "Events", delivery rule 1: callback URLs must be HTTPS. Every URL the platform
// fetches for a call (XML, audio) or notifies is held to the same rule.
const HTTPS = describedPattern('^https://[^\\s]+$', 'must be an https:// URL (callbacks are delivered over HTTPS only)');

/** A destination or source number: digits of an E.164 number, a leading `+` allowed. */
const NUMBER_RE = /^\+?\d{2,15}$/;
/** A SIP URI without display name or angle brackets: `sip:[user@]host[:port][;params]`. */
const SIP_URI_RE =
  /^sips?:(?:[A-Za-z0-9\-_.!~*'()&=+$,;?/%]{1,128}@)?(?:[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*|\[[0-9A-Fa-f:.]{2,45}\])(?::\d{1,5})?(?:;[A-Za-z0-9\-_.!~*'()&=+$%:]{1,64})*$/i;
/** An endpoint username (alphanumeric, spec "Endpoint"). */
const USERNAME_RE = /^[A-Za-z0-9]{1,64}$/;
/** A `sip_headers` name (the platform prefixes `X-PH-`). */
const HEADER_NAME_RE = /^[A-Za-z0-9-]{1,64}$/;
/** A `sip_headers` value: visible ASCII and spaces, no `,` (the pair separator). */
const HEADER_VALUE_RE = /^[\x20-\x2b\x2d-\x7e]{1,256}$/;
const DIGITS_RE = /^[0-9*#A-Da-dwW]{1,64}$/;

const nullable = (t: string | readonly string[]) => [...(Array.isArray(t) ? t : [t]), 'null'];
const url = { type: nullable('string'), maxLength: 2048, pattern: HTTPS } as const;
const method = { type: nullable('string'), enum: ['GET', 'POST', null] } as const;
const legs = { type: nullable('string'), enum: ['aleg', 'bleg', 'both', null] } as const;
const seconds = (min: number, max: number) => ({ type: nullable('integer'), minimum: min, maximum: max }) as const;
const bool = { type: nullable('boolean') } as const;
const text = (max: number) => ({ type: nullable('string'), maxLength: max }) as const;

const id = { type: 'string', minLength: 1, maxLength: 128 } as const;
const params = { type: 'object', properties: { auth_id: { type: 'string', maxLength: 128 }, call_uuid: id, recording_id: id } } as const;

const placeBody = {
  type: 'object',
  additionalProperties: false,
  required: ['from', 'to', 'answer_url'],
  properties: {
    from: { type: 'string', minLength: 1, maxLength: 256 },
    to: { type: 'string', minLength: 1, maxLength: 65_536 },
    answer_url: { type: 'string', minLength: 1, maxLength: 2048, pattern: HTTPS },
    answer_method: method,
    ring_url: url,
    ring_method: method,
    hangup_url: url,
    hangup_method: method,
    fallback_url: url,
    fallback_method: method,
    caller_name: text(MAX_CALLER_NAME),
    time_limit: seconds(1, MAX_TIME_LIMIT),
    ring_timeout: seconds(1, MAX_RING_TIMEOUT),
    hangup_on_ring: seconds(0, MAX_HANGUP_ON_RING),
    sip_headers: text(4096),
  },
} as const;

const transferBody = {
  type: 'object',
  additionalProperties: false,
  properties: { legs, aleg_url: url, aleg_method: method, bleg_url: url, bleg_method: method },
} as const;

const playBody = {
  type: 'object',
  additionalProperties: false,
  required: ['urls'],
  properties: { urls: { type: 'string', minLength: 1, maxLength: 65_536 }, legs, length: seconds(1, MAX_TIME_LIMIT), loop: bool, mix: bool },
} as const;

const speakBody = {
  type: 'object',
  additionalProperties: false,
  required: ['text'],
  properties: { text: { type: 'string', minLength: 1, maxLength: 3000 }, voice: text(64), language: text(16), legs, loop: bool, mix: bool },
} as const;

const dtmfBody = {
  type: 'object',
  additionalProperties: false,
  required: ['digits'],
  properties: { digits: { type: 'string', minLength: 1, maxLength: 64 }, leg: legs },
} as const;

const recordBody = {
  type: 'object',
  additionalProperties: false,
  properties: {
    time_limit: seconds(1, MAX_RECORD_TIME_LIMIT),
    file_format: { type: nullable('string'), enum: ['mp3', 'wav', null] },
    transcription_type: { type: nullable('string'), enum: ['auto', null] },
    callback_url: url,
    callback_method: method,
    record_channel_type: { type: nullable('string'), enum: ['mono', 'stereo', null] },
  },
} as const;

const statusQuery = {
  type: 'object',
  additionalProperties: false,
  required: ['status'],
  properties: { status: { type: 'string', enum: ['live', 'queued'] } },
} as const;

const recordingQuery = {
  type: 'object',
  additionalProperties: false,
  properties: {
    limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
    offset: { type: 'integer', minimum: 0, maximum: 1_000_000_000, default: 0 },
    call_uuid: { type: 'string', minLength: 1, maxLength: 128 },
  },
} as const;

/** The answer when no B2BUA is configured. */
function unavailable(): ApiError {
  return new ApiError(503, 'calls_unavailable', 'Calls are not available on this server.');
}

/** A {@link CallRefusedError} as the API answers it; anything else unchanged. */
export function callApiError(err: unknown): unknown {
  if (!(err instanceof CallRefusedError)) return err;
  const headers: Record<string, string> = {};
  if (err.retryAfter !== undefined || err.status === 429) {
    headers['retry-after'] = String(Math.max(1, Math.ceil(err.retryAfter ?? 1)));
  }
  return new ApiError(err.status, err.error, err.message, {}, false, headers);
}

async function refused<T>(f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (err) {
    throw callApiError(err);
  }
}

/** Whether `s` is a number or a SIP URI (a `to` destination). */
export function isDestination(s: string): boolean {
  return NUMBER_RE.test(s) || (s.length <= 256 && SIP_URI_RE.test(s));
}

/**
 * `to` split on `<` into destinations; the problem for `details.to` when it is malformed
 * (an empty part, a part neither a number nor a SIP URI, more than {@link MAX_DESTINATIONS}).
 */
export function parseDestinations(to: string): { to: string[] } | { problem: string } {
  const parts = to.split('<').map((p) => p.trim());
  if (parts.length > MAX_DESTINATIONS) return { problem: `must name at most ${MAX_DESTINATIONS} destinations (separated by <); got ${parts.length}` };
  const bad = parts.findIndex((p) => !isDestination(p));
  if (bad >= 0) {
    return {
      problem:
        parts[bad] === ''
          ? `destination ${bad + 1} is empty (destinations are separated by <)`
          : `destination ${bad + 1} must be a phone number (digits, a leading + allowed) or a sip: URI`,
    };
  }
  return { to: parts };
}

/** The vendor's `sip_headers` (`name=value,name2=value2`) as an object; the problem when malformed. */
export function parseSipHeaders(s: string): { headers: Record<string, string> } | { problem: string } {
  const headers: Record<string, string> = {};
  const seen = new Set<string>();
  const pairs = s.split(',');
  if (pairs.length > MAX_SIP_HEADERS) return { problem: `must hold at most ${MAX_SIP_HEADERS} name=value pairs` };
  for (const pair of pairs) {
    const eq = pair.indexOf('=');
    const name = eq < 0 ? pair : pair.slice(0, eq);
    const value = eq < 0 ? '' : pair.slice(eq + 1);
    if (eq < 0 || !HEADER_NAME_RE.test(name)) return { problem: 'must be name=value pairs separated by commas; names are letters, digits and -' };
    if (!HEADER_VALUE_RE.test(value)) return { problem: `the value of ${name} must be 1-256 visible ASCII characters or spaces (no commas)` };
    if (seen.has(name.toLowerCase())) return { problem: `names ${name} twice` };
    seen.add(name.toLowerCase());
    headers[name] = value;
  }
  return { headers };
}

const str = (o: Record<string, unknown>, k: string): string | undefined => (typeof o[k] === 'string' ? (o[k] as string) : undefined);
const int = (o: Record<string, unknown>, k: string): number | undefined => (typeof o[k] === 'number' ? (o[k] as number) : undefined);
const flag = (o: Record<string, unknown>, k: string): boolean | undefined => (typeof o[k] === 'boolean' ? (o[k] as boolean) : undefined);
const methodOf = (o: Record<string, unknown>, k: string): HttpMethod => (o[k] === 'GET' ? 'GET' : 'POST');
const legsOf = (o: Record<string, unknown>, k: string): LegChoice => (o[k] === 'bleg' || o[k] === 'both' ? (o[k] as LegChoice) : 'aleg');

/** `<prefix>_url` and `<prefix>_method` as a target, or null when the URL is absent or empty. */
function target(body: Record<string, unknown>, prefix: string, urlKey = `${prefix}_url`): UrlTarget | null {
  const u = str(body, urlKey);
  return u ? { url: u, method: methodOf(body, `${prefix}_method`) } : null;
}

/** A method given without its URL: named in details (it would be ignored silently). */
function orphanMethods(body: Record<string, unknown>, details: Details, prefixes: readonly string[]): void {
  for (const p of prefixes) {
    if (typeof body[`${p}_method`] === 'string' && !str(body, `${p}_url`) && !(`${p}_method` in details)) {
      details[`${p}_method`] = `is given without ${p}_url`;
    }
  }
}

/** The GetLiveCallResponse of the vendor's SDK: exactly its fields. */
export function liveCallBody(apiId: string, v: CallView): Record<string, unknown> {
  return {
    api_id: apiId,
    call_status: v.status,
    call_uuid: v.callUuid,
    caller_name: v.callerName,
    direction: v.direction,
    from: v.from,
    request_uuid: v.requestUuid,
    session_start: v.sessionStart,
    stir_attestation: v.stirAttestation ?? '',
    stir_verification: v.stirVerification ?? 'Not Applicable',
    to: v.to,
  };
}

/** The GetQueuedCallResponse of the vendor's SDK: exactly its fields. */
export function queuedCallBody(apiId: string, v: CallView): Record<string, unknown> {
  return {
    api_id: apiId,
    call_status: v.status,
    call_uuid: v.callUuid,
    request_uuid: v.requestUuid,
    caller_name: v.callerName,
    direction: v.direction,
    from: v.from,
    to: v.to,
  };
}

const DAY_MS = 24 * 60 * 60 * 1000;

/** A recording as the vendor's ListRecordingsResponseObjectsItem (GetRecordingResponse adds `api_id`). */
export function recordingBody(r: RecordingView, pathAuthId: string, nowMs: number = Date.now()): Record<string, unknown> {
  const added = Date.parse(r.addedOn);
  return {
    add_time: r.addedOn,
    call_uuid: r.callUuid,
    conference_name: null,
    from_number: r.fromNumber ?? '',
    // The edge does not bill storage: amounts and rates are 0.
    monthly_recording_storage_amount: 0,
    recording_duration_ms: String(Math.round(r.duration * 1000)),
    recording_end_ms: null,
    recording_format: r.format,
    recording_id: r.recordingId,
    recording_start_ms: null,
    recording_storage_duration: Number.isNaN(added) ? 0 : Math.max(0, Math.floor((nowMs - added) / DAY_MS)),
    recording_storage_rate: 0,
    recording_type: r.source,
    recording_url: r.url,
    resource_uri: `/v1/Account/${pathAuthId}/Recording/${r.recordingId}/`,
    rounded_recording_duration: Math.ceil(r.duration / 60) * 60,
    to_number: r.toNumber ?? '',
  };
}

/** Content types a `.wav` / `.mp3` audio path serves. */
const AUDIO_TYPES: Record<'wav' | 'mp3', RegExp> = { wav: /wav/i, mp3: /mpeg|mp3/i };

/** Register the Calls API routes. */
export function registerCallRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const acct = '/api/v1/Account/:auth_id';
  const call = `${acct}/Call/:call_uuid/`;
  const config = { access: 'customer' as const };

  const control = (): CallControl => {
    const cc = ctx.callControl;
    if (!cc) throw unavailable();
    return cc;
  };
  const ownerOf = (req: FastifyRequest): CallOwner => {
    const c = customerOf(req);
    return { authId: c.subAccount?.authId ?? c.account.authId, domain: c.account.sipDomain, subAccount: c.subAccount?.authId ?? null };
  };
  const callUuidOf = (req: FastifyRequest): string => (req.params as { call_uuid: string }).call_uuid;
  const recordingIdOf = (req: FastifyRequest): string => (req.params as { recording_id: string }).recording_id;
  const noCall = (): ApiError => notFound('No such live or queued call on this account.');
  const noRecording = (): ApiError => notFound('No such recording on this account.');
  const failIf = (details: Details): void => {
    if (Object.keys(details).length > 0) throw badRequest(details);
  };
  /** Run a call action answering true/false: 404 when false. */
  const acted = async (f: () => Promise<boolean>): Promise<void> => {
    if (!(await refused(f))) throw noCall();
  };

  // ---- place a call ----
  app.post(`${acct}/Call/`, { schema: { params, body: placeBody }, attachValidation: true, config }, async (req, reply) => {
    const cc = control();
    const owner = ownerOf(req);
    const c = customerOf(req);
    await ctx.idempotency.run(req, reply, { scope: c.account.authId, caller: owner.authId, operation: 'call.place' }, async () => {
      const details = validationDetails(req);
      const body = bodyObject(req);
      const from = str(body, 'from');
      if (from !== undefined && !('from' in details) && !(NUMBER_RE.test(from) || SIP_URI_RE.test(from) || USERNAME_RE.test(from))) {
        details.from = 'must be a phone number of the account (digits, a leading + allowed), a sip: URI or an endpoint username';
      }
      let to: string[] = [];
      const rawTo = str(body, 'to');
      if (rawTo !== undefined && !('to' in details)) {
        const parsed = parseDestinations(rawTo);
        if ('problem' in parsed) details.to = parsed.problem;
        else to = parsed.to;
      }
      let sipHeaders: Record<string, string> | null = null;
      const rawHeaders = str(body, 'sip_headers');
      if (rawHeaders && !('sip_headers' in details)) {
        const parsed = parseSipHeaders(rawHeaders);
        if ('problem' in parsed) details.sip_headers = parsed.problem;
        else sipHeaders = parsed.headers;
      }
      orphanMethods(body, details, ['ring', 'hangup', 'fallback']);
      failIf(details);
      const placeReq: PlaceCallRequest = {
        from: from ?? '',
        to,
        answer: { url: str(body, 'answer_url') ?? '', method: methodOf(body, 'answer_method') },
        ring: target(body, 'ring'),
        hangup: target(body, 'hangup'),
        fallback: target(body, 'fallback'),
        callerName: str(body, 'caller_name') ?? null,
        timeLimit: int(body, 'time_limit') ?? DEFAULT_TIME_LIMIT,
        ringTimeout: int(body, 'ring_timeout') ?? DEFAULT_RING_TIMEOUT,
        hangupOnRing: int(body, 'hangup_on_ring') || null,
        sipHeaders,
      };
      const placed = await refused(() => cc.place(owner, placeReq));
      // No numbers or URLs in the log (URLs may carry the customer's own tokens).
      req.log.info({ request_uuid: placed.requestUuid, destinations: to.length }, 'call placed');
      return { status: 201, body: { api_id: req.id, message: 'call fired', request_uuid: placed.requestUuid } };
    });
  });

  // ---- live and queued calls ----
  app.get(`${acct}/Call/`, { schema: { params, querystring: statusQuery }, attachValidation: true, config }, async (req) => {
    const cc = control();
    failIf(validationDetails(req));
    const which = queryObject(req).status as 'live' | 'queued';
    const views = await refused(() => cc.list(ownerOf(req), which));
    const uuids = views.map((v) => v.callUuid);
    return { api_id: req.id, calls: which === 'queued' ? uuids.slice(0, MAX_QUEUED_LISTED) : uuids };
  });

  app.get(call, { schema: { params, querystring: statusQuery }, attachValidation: true, config }, async (req) => {
    const cc = control();
    failIf(validationDetails(req));
    const which = queryObject(req).status as 'live' | 'queued';
    const v = await refused(() => cc.get(ownerOf(req), callUuidOf(req), which));
    if (!v) throw noCall();
    return which === 'live' ? liveCallBody(req.id, v) : queuedCallBody(req.id, v);
  });

  app.delete(call, { schema: { params }, config }, async (req, reply) => {
    const cc = control();
    await acted(() => cc.hangup(ownerOf(req), callUuidOf(req)));
    req.log.info({ call_uuid: callUuidOf(req) }, 'call hung up by the API');
    return reply.code(204).send();
  });

  // ---- transfer ----
  app.post(call, { schema: { params, body: transferBody }, attachValidation: true, config }, async (req, reply) => {
    const cc = control();
    const details = validationDetails(req);
    const body = bodyObject(req);
    const which = legsOf(body, 'legs');
    if (!('legs' in details)) {
      if ((which === 'aleg' || which === 'both') && !str(body, 'aleg_url') && !('aleg_url' in details)) details.aleg_url = `is required when legs is ${which}`;
      if ((which === 'bleg' || which === 'both') && !str(body, 'bleg_url') && !('bleg_url' in details)) details.bleg_url = `is required when legs is ${which}`;
    }
    orphanMethods(body, details, ['aleg', 'bleg']);
    failIf(details);
    await acted(() =>
      cc.transfer(ownerOf(req), callUuidOf(req), {
        legs: which,
        aleg: which === 'bleg' ? null : target(body, 'aleg'),
        bleg: which === 'aleg' ? null : target(body, 'bleg'),
      }),
    );
    return reply.code(202).send({ api_id: req.id, message: 'call transferred' });
  });

  // ---- play ----
  app.post(`${call}Play/`, { schema: { params, body: playBody }, attachValidation: true, config }, async (req, reply) => {
    const cc = control();
    const details = validationDetails(req);
    const body = bodyObject(req);
    const urls = (str(body, 'urls') ?? '').split(',').map((u) => u.trim());
    if (!('urls' in details)) {
      if (urls.length > MAX_PLAY_URLS) details.urls = `must hold at most ${MAX_PLAY_URLS} URLs`;
      else if (urls.some((u) => !/^https:\/\/\S+$/.test(u) || u.length > 2048)) details.urls = 'must be https:// URLs separated by commas';
    }
    failIf(details);
    await acted(() =>
      cc.play(ownerOf(req), callUuidOf(req), {
        urls,
        legs: legsOf(body, 'legs'),
        length: int(body, 'length') ?? null,
        loop: flag(body, 'loop') ?? false,
        mix: flag(body, 'mix') ?? true,
      }),
    );
    return reply.code(202).send({ api_id: req.id, message: 'play started' });
  });

  app.delete(`${call}Play/`, { schema: { params }, config }, async (req, reply) => {
    const cc = control();
    await acted(() => cc.stopPlay(ownerOf(req), callUuidOf(req)));
    return reply.code(204).send();
  });

  // ---- speak ----
  app.post(`${call}Speak/`, { schema: { params, body: speakBody }, attachValidation: true, config }, async (req, reply) => {
    const cc = control();
    const details = validationDetails(req);
    const body = bodyObject(req);
    const text = str(body, 'text') ?? '';
    if (!('text' in details) && text.trim() === '') details.text = 'must not be blank';
    failIf(details);
    const voice = str(body, 'voice');
    const language = str(body, 'language');
    await acted(() =>
      cc.speak(ownerOf(req), callUuidOf(req), {
        text,
        ...(voice ? { voice } : {}),
        ...(language ? { language } : {}),
        legs: legsOf(body, 'legs'),
        loop: flag(body, 'loop') ?? false,
        mix: flag(body, 'mix') ?? true,
      }),
    );
    return reply.code(202).send({ api_id: req.id, message: 'speak started' });
  });

  app.delete(`${call}Speak/`, { schema: { params }, config }, async (req, reply) => {
    const cc = control();
    await acted(() => cc.stopSpeak(ownerOf(req), callUuidOf(req)));
    return reply.code(204).send();
  });

  // ---- DTMF ----
  app.post(`${call}DTMF/`, { schema: { params, body: dtmfBody }, attachValidation: true, config }, async (req, reply) => {
    const cc = control();
    const details = validationDetails(req);
    const body = bodyObject(req);
    const digits = str(body, 'digits') ?? '';
    if (!('digits' in details) && !DIGITS_RE.test(digits)) details.digits = 'must be 1-64 of 0-9 * # A-D, w (0.5 s pause) and W (1 s pause)';
    // The SDK's type admits `both`; tones go to one leg.
    if (body.leg === 'both' && !('leg' in details)) details.leg = 'must be aleg or bleg';
    failIf(details);
    await acted(() => cc.dtmf(ownerOf(req), callUuidOf(req), { digits, leg: body.leg === 'bleg' ? 'bleg' : 'aleg' }));
    return reply.code(202).send({ api_id: req.id, message: 'digits sent' });
  });

  // ---- record ----
  app.post(`${call}Record/`, { schema: { params, body: recordBody }, attachValidation: true, config }, async (req, reply) => {
    const cc = control();
    const details = validationDetails(req);
    const body = bodyObject(req);
    orphanMethods(body, details, ['callback']);
    failIf(details);
    const channels = str(body, 'record_channel_type');
    const started = await refused(() =>
      cc.record(ownerOf(req), callUuidOf(req), {
        timeLimit: int(body, 'time_limit') ?? DEFAULT_RECORD_TIME_LIMIT,
        fileFormat: body.file_format === 'wav' ? 'wav' : 'mp3',
        callback: target(body, 'callback'),
        ...(channels === 'mono' || channels === 'stereo' ? { recordChannelType: channels } : {}),
        ...(body.transcription_type === 'auto' ? { transcriptionType: 'auto' as const } : {}),
      }),
    );
    if (!started) throw noCall();
    req.log.info({ call_uuid: callUuidOf(req), recording_id: started.recordingId }, 'call recording started');
    return reply.code(202).send({ api_id: req.id, message: 'call recording started', recording_id: started.recordingId, url: started.url });
  });

  app.delete(`${call}Record/`, { schema: { params }, config }, async (req, reply) => {
    const cc = control();
    await acted(() => cc.stopRecord(ownerOf(req), callUuidOf(req)));
    return reply.code(204).send();
  });

  // ---- recordings ----
  const recordings = `${acct}/Recording/`;
  app.get(recordings, { schema: { params, querystring: recordingQuery }, attachValidation: true, config }, async (req) => {
    const cc = control();
    failIf(validationDetails(req));
    const q = queryObject(req);
    const limit = typeof q.limit === 'number' ? q.limit : 20;
    const offset = typeof q.offset === 'number' ? q.offset : 0;
    const callUuid = typeof q.call_uuid === 'string' ? q.call_uuid : undefined;
    const owner = ownerOf(req);
    const r = await refused(() => cc.recordings(owner, { ...(callUuid !== undefined ? { callUuid } : {}), limit, offset }));
    const pageUri = (o: number): string => {
      const u = new URLSearchParams({ limit: String(limit), offset: String(o) });
      if (callUuid !== undefined) u.set('call_uuid', callUuid);
      return `/api/v1/Account/${owner.authId}/Recording/?${u.toString()}`;
    };
    return {
      api_id: req.id,
      meta: {
        limit,
        // The SDK's model types `next` as a string (not Optional): "" on the last page.
        next: offset + limit < r.total ? pageUri(offset + limit) : '',
        offset,
        previous: offset > 0 ? pageUri(Math.max(0, offset - limit)) : null,
        total_count: r.total,
      },
      objects: r.items.map((x) => recordingBody(x, owner.authId)),
    };
  });

  const recording = `${recordings}:recording_id/`;
  app.get(recording, { schema: { params }, config }, async (req) => {
    const cc = control();
    const owner = ownerOf(req);
    const r = await refused(() => cc.recording(owner, recordingIdOf(req)));
    if (!r) throw noRecording();
    return { api_id: req.id, ...recordingBody(r, owner.authId) };
  });

  app.delete(recording, { schema: { params }, config }, async (req, reply) => {
    const cc = control();
    const gone = await refused(() => cc.deleteRecording(ownerOf(req), recordingIdOf(req)));
    if (!gone) throw noRecording();
    req.log.info({ recording_id: recordingIdOf(req) }, 'recording deleted');
    return reply.code(204).send();
  });

  // The audio (StartedRecording.url, RecordingView.url point here): any Accept header.
  const audio = (ext: 'wav' | 'mp3') => async (req: FastifyRequest, reply: FastifyReply) => {
    const cc = control();
    const a = await refused(() => cc.recordingAudio(ownerOf(req), recordingIdOf(req)));
    if (!a || !AUDIO_TYPES[ext].test(a.contentType)) throw noRecording();
    return reply
      .code(200)
      .header('content-type', a.contentType)
      .header('content-length', String(a.data.length))
      .header('cache-control', 'private, no-store')
      .header('content-disposition', `inline; filename="${recordingIdOf(req).replace(/[^A-Za-z0-9._-]/g, '_')}.${ext}"`)
      .send(a.data);
  };
  const audioConfig = { ...config, audio: true };
  app.get(`${recordings}:recording_id.wav`, { schema: { params }, config: audioConfig }, audio('wav'));
  app.get(`${recordings}:recording_id.mp3`, { schema: { params }, config: audioConfig }, audio('mp3'));
}
