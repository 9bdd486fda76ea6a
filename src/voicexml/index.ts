/**
 * Application documents (VobizXML, docs/voicexml.md): read, fetched and run against
 * a call port. calls/ implements the port and starts a run when a call is answered.
 */
export {
  parseAppDocument,
  MAX_DOCUMENT_BYTES,
  type Verb,
  type Prompt,
  type UrlTarget,
  type ParseCause,
  type ParseResult,
  type SpeakVerb,
  type PlayVerb,
  type WaitVerb,
  type HangupVerb,
  type RedirectVerb,
  type PreAnswerVerb,
  type DtmfVerb,
  type GatherVerb,
  type RecordVerb,
  type DialVerb,
  type DialTarget,
} from './document.js';
export { fetchDocument, fetchWithFallback, DEFAULT_FETCH_TIMEOUT_MS, type FetchDocumentRequest, type FetchResult, type FallbackResult } from './fetch.js';
export { SpeechRenderer, TtsUnavailableError, wavDurationMs, toTelephoneRate, MAX_SPEAK_CHARS, type TtsEngine, type SpeechRendererOptions, type RenderedSpeech } from './tts.js';
export { AudioCache, sniffAudio, AUDIO_MAX_BYTES, AUDIO_TIMEOUT_MS, type AudioResult, type AudioCacheOptions } from './audio.js';
export {
  runApplication,
  HANGUP_CAUSES,
  type CallPort,
  type RunOptions,
  type RunResult,
  type DocumentFetcher,
  type SpeechRendererLike,
  type AudioCacheLike,
} from './runner.js';
