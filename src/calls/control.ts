/**
 * What the Calls API asks of the B2BUA (docs/calls.md): place a call, see and end
 * live and queued calls, transfer them to new XML, and act on them while they run
 * (play, speak, DTMF, record). The API routes (api/calls.ts) stand on this
 * interface only; calls/ implements it. Every method is answered by any node of a
 * fleet: the call's state is in the store, and a command for a call another
 * process runs is handed to that process.
 */

/** Who places or acts on a call: the account (or sub-account) behind the API credentials. */
export interface CallOwner {
  /** The auth_id on the path: the account's, or the sub-account's own. */
  authId: string;
  /** The account's SIP domain (the store's partition). */
  domain: string;
  /** The sub-account, when a sub-account's credentials are used (its calls only). */
  subAccount: string | null;
}

export type HttpMethod = 'GET' | 'POST';

/** A URL the platform fetches or notifies, with its method. */
export interface UrlTarget {
  url: string;
  method: HttpMethod;
}

/** `POST /Call/` (the vendor's `calls.make_call`), validated by the route. */
export interface PlaceCallRequest {
  /** A number the account owns (E.164) or one of its endpoints (`sip:` URI or username). */
  from: string;
  /** One or more destinations (the API's `to` split on `<`): E.164 numbers or `sip:` URIs of endpoints. At most 1000. */
  to: string[];
  answer: UrlTarget;
  ring?: UrlTarget | null;
  hangup?: UrlTarget | null;
  fallback?: UrlTarget | null;
  callerName?: string | null;
  /** Seconds the call may last once answered. */
  timeLimit?: number | null;
  /** Seconds the A leg may ring before it counts as no-answer. */
  ringTimeout?: number | null;
  /** Seconds after ringing starts at which the call is hung up (0/null: off). */
  hangupOnRing?: number | null;
  /** Headers added to the A leg's INVITE (`X-PH-` prefixed by the platform). */
  sipHeaders?: Record<string, string> | null;
}

/** The answer to a placed call (the spec's Call resource, the vendor's MakeCallResponse). */
export interface PlacedCall {
  requestUuid: string;
  /** One call per destination; each has its own `call_uuid` once it leaves the queue. */
  callUuids: string[];
}

export type LiveCallStatus = 'queued' | 'ringing' | 'in-progress';
export type FinalCallStatus = 'completed' | 'busy' | 'no-answer' | 'failed' | 'canceled';

/** A call as the live/queued APIs show it (the vendor's GetLiveCallResponse / GetQueuedCallResponse fields). */
export interface CallView {
  callUuid: string;
  requestUuid: string;
  direction: 'inbound' | 'outbound';
  from: string;
  to: string;
  callerName: string;
  status: LiveCallStatus;
  /** ISO 8601 time the call started (was placed). */
  sessionStart: string;
  /** ISO 8601 time the A leg answered; null before. */
  answeredAt: string | null;
  /** The B leg bridged to it, when a Dial connected one. */
  bLegUuid: string | null;
  /** STIR/SHAKEN attestation of an inbound call (A, B, C); absent: answered `""`. */
  stirAttestation?: string;
  /** STIR/SHAKEN verification result; absent: answered `Not Applicable`. */
  stirVerification?: string;
}

export type LegChoice = 'aleg' | 'bleg' | 'both';

export interface TransferRequest {
  legs: LegChoice;
  aleg?: UrlTarget | null;
  bleg?: UrlTarget | null;
}

export interface PlayRequest {
  urls: string[];
  legs: LegChoice;
  /** Seconds to play at most. */
  length?: number | null;
  loop?: boolean;
  mix?: boolean;
}

export interface SpeakRequest {
  text: string;
  voice?: string;
  language?: string;
  legs: LegChoice;
  loop?: boolean;
  mix?: boolean;
}

export interface DtmfRequest {
  digits: string;
  leg: 'aleg' | 'bleg';
}

export interface RecordRequest {
  /** Seconds; the recording stops by itself after this. */
  timeLimit?: number | null;
  fileFormat?: 'wav' | 'mp3';
  callback?: UrlTarget | null;
  /** The vendor's `record_channel_type`: both legs mixed (`mono`) or one per channel (`stereo`). */
  recordChannelType?: 'mono' | 'stereo';
  /** The vendor's `transcription_type` (`auto`); absent: no transcription. */
  transcriptionType?: 'auto';
}

export interface StartedRecording {
  recordingId: string;
  /** Where the finished recording is served (`GET …/Recording/{id}/`). */
  url: string;
}

/** A finished recording (the vendor's GetRecordingResponse fields). */
export interface RecordingView {
  recordingId: string;
  callUuid: string;
  /** Seconds. */
  duration: number;
  format: 'wav' | 'mp3';
  url: string;
  addedOn: string;
  /** `call` (the Record API) or `xml` (a Record verb). */
  source: 'call' | 'xml';
  /** The call's from and to (the vendor's `from_number`, `to_number`); absent: answered `""`. */
  fromNumber?: string;
  toNumber?: string;
}

/**
 * Why a call was refused before anything was sent. The route answers `status`
 * with `{api_id, error, message}`; `retryAfter` (seconds) sets Retry-After on a 429.
 */
export class CallRefusedError extends Error {
  constructor(
    readonly status: 400 | 402 | 403 | 404 | 429 | 503,
    readonly error: string,
    message: string,
    readonly retryAfter?: number,
  ) {
    super(message);
    this.name = 'CallRefusedError';
  }
}

/** What the Calls API routes call. Unknown or ended calls: `null`/`false` (the route answers 404). */
export interface CallControl {
  place(owner: CallOwner, req: PlaceCallRequest): Promise<PlacedCall>;
  /** Live (`ringing`, `in-progress`) or queued calls of the owner, newest first. */
  list(owner: CallOwner, which: 'live' | 'queued'): Promise<CallView[]>;
  get(owner: CallOwner, callUuid: string, which: 'live' | 'queued'): Promise<CallView | null>;
  /** Hang up a live call or drop a queued one (request_uuid accepted too). */
  hangup(owner: CallOwner, callUuid: string): Promise<boolean>;
  transfer(owner: CallOwner, callUuid: string, req: TransferRequest): Promise<boolean>;
  play(owner: CallOwner, callUuid: string, req: PlayRequest): Promise<boolean>;
  stopPlay(owner: CallOwner, callUuid: string): Promise<boolean>;
  speak(owner: CallOwner, callUuid: string, req: SpeakRequest): Promise<boolean>;
  stopSpeak(owner: CallOwner, callUuid: string): Promise<boolean>;
  dtmf(owner: CallOwner, callUuid: string, req: DtmfRequest): Promise<boolean>;
  record(owner: CallOwner, callUuid: string, req: RecordRequest): Promise<StartedRecording | null>;
  stopRecord(owner: CallOwner, callUuid: string): Promise<boolean>;
  recordings(owner: CallOwner, filter: { callUuid?: string; limit: number; offset: number }): Promise<{ total: number; items: RecordingView[] }>;
  recording(owner: CallOwner, recordingId: string): Promise<RecordingView | null>;
  /** The audio of a finished recording (served by `GET …/Recording/{id}.wav`). */
  recordingAudio(owner: CallOwner, recordingId: string): Promise<{ contentType: string; data: Buffer } | null>;
  deleteRecording(owner: CallOwner, recordingId: string): Promise<boolean>;
}
