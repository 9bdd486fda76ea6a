/**
 * Calls the platform places (docs/calls.md): the Calls API's B2BUA. `createCalls` builds
 * the service, its user agent (into the proxy over internal flows), the live-call store,
 * the DTMF log listener and the voice application runtime (voicexml/).
 */
import { join } from 'node:path';
import { tmpdir } from 'node:os';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { RtpengineClient } from '../media/rtpengine.js';
import type { NumberLookup } from '../numbers/lookup.js';
import type { CallStore } from '../store/calls/calls.js';
import type { CredentialStore } from '../store/credentials/credentials.js';
import type { Directory } from '../store/directory/directory.js';
import type { RedisClient } from '../store/redis/client.js';
import { MemoryLiveCallStore } from '../store/live-calls/memory.js';
import { RedisLiveCallStore } from '../store/live-calls/redis.js';
import type { CallbackNetworkGuard } from '../events/network-guard.js';
import { AudioCache, fetchDocument, runApplication, SpeechRenderer, type CallPort } from '../voicexml/index.js';
import { DtmfListener } from './media.js';
import { Recorder } from './recorder.js';
import { MemoryRecordingStore } from '../store/recordings/memory.js';
import { RedisRecordingStore } from '../store/recordings/redis.js';
import type { RecordingStore } from '../store/recordings/recordings.js';
import type { PlacedCall } from './placed-call.js';
import { CallService, type CallNotices } from './service.js';
import type { UaHost } from './ua.js';

export { CallService } from './service.js';
export type { CallControl } from './control.js';

export interface CallsDeps {
  config: Readonly<Config>;
  redis: RedisClient | null;
  ua: UaHost;
  processId: string;
  directory: Directory;
  credentials: CredentialStore;
  numbers: NumberLookup | null;
  /** Signing secrets of answer_url requests (the callbacks' secret of the account). */
  callStore: CallStore;
  rtpengine: RtpengineClient | null;
  notices: CallNotices | null;
  alive: (() => Promise<Set<string>>) | null;
  guard: CallbackNetworkGuard;
  log: Logger;
}

export interface Calls {
  service: CallService;
  start(): Promise<void>;
  stop(): Promise<void>;
}

export function createCalls(d: CallsDeps): Calls {
  const dir = d.config.callsMediaDir ?? join(tmpdir(), 'sip-edge-media');
  const speech = new SpeechRenderer({ engine: d.config.ttsEngine, dir: join(dir, 'tts') });
  const audio = new AudioCache({ guard: d.guard, dir: join(dir, 'audio') });
  const recording = recordingOf(d, dir);
  const service: CallService = new CallService({
    ua: d.ua,
    processId: d.processId,
    sipDomain: d.config.sipDomain,
    directory: d.directory,
    credentials: d.credentials,
    numbers: d.numbers,
    live: d.redis ? new RedisLiveCallStore(d.redis) : new MemoryLiveCallStore(),
    rtpengine: d.rtpengine,
    notices: d.notices,
    alive: d.alive,
    ringTimeoutS: d.config.callsRingTimeout,
    recording,
    prompts: {
      audio: (url) => audio.get(url),
      speech: async (text, voice, language) => (await speech.render(text, { voice, language })).path,
    },
    log: d.log,
    run: async (call, app) => {
      const secret = await d.callStore.signingSecret(call.owner.domain);
      // A transfer (POST …/Call/{uuid}/) replaces the running document: each run gets its own
      // port, and a replaced run's port acts as if the call had gone.
      let first = app.answer;
      let fallback = app.fallback;
      for (let generation = 0; generation < 20; generation++) {
        const transferred = new Promise<'transfer'>((resolve) => service.onTransfer(call.callUuid, () => resolve('transfer')));
        const port = portOf(call, service, () => service.generation(call.callUuid) === generation, recording?.recorder ?? null);
        const run = runApplication({
          port,
          first,
          fallback,
          baseParams: app.params,
          fetch: (target, params) => fetchDocument({ target, params, secret, guard: d.guard }),
          speech,
          audio,
          log: d.log,
        });
        const r = await Promise.race([run, transferred]);
        if (r !== 'transfer') return r.hangupCause;
        const next = service.takeTransfer(call.callUuid);
        if (!next || call.isGone) return 'NORMAL_CLEARING';
        first = next;
        fallback = null;
      }
      return 'TRANSFER_LIMIT';
    },
  });
  const dtmf = d.config.callsDtmfListen ? new DtmfListener(d.config.callsDtmfListen, (e) => service.dtmfEvent(e), d.log) : null;
  return {
    service,
    async start() {
      await dtmf?.start();
    },
    async stop() {
      dtmf?.stop();
      await service.stop();
    },
  };
}

/**
 * The call port of one run of the application (voicexml/runner.ts). While `current()` is
 * false (a transfer replaced the run) it behaves as a call that went away.
 */
function portOf(call: PlacedCall, service: CallService, current: () => boolean, recorder: Recorder | null): CallPort {
  const stale = (): boolean => !current() || call.isGone;
  return {
    callUuid: call.callUuid,
    gone: call.gone,
    answered: () => call.answered(),
    answer: () => call.answer(),
    preAnswer: () => call.preAnswer(),
    play: async (file, o) => (stale() ? 'hangup' : call.play(file, o)),
    stopMedia: () => call.stopMedia(),
    sendDigits: async (digits) => {
      if (!stale()) await call.sendDigits(digits);
    },
    collectDigits: async (o) => (stale() ? { digits: '', ended: 'hangup' } : call.collectDigits(o)),
    // docs/calls.md "Recording": the A leg into a WAV (never mp3); null when recording is off.
    record: async (o) => {
      if (stale() || !recorder) return null;
      const r = await call.recordLeg(o, recorder, { source: 'xml' });
      return r && { ...r, ended: r.ended === 'stopped' ? 'max-length' : r.ended };
    },
    dial: async (o) => {
      if (stale()) return { status: 'canceled', bLegUuid: null, durationS: 0, hangupBy: null };
      return call.dial({ targets: o.targets, timeoutS: o.timeoutS, timeLimitS: o.timeLimitS, plan: service.dialPlan(call, o.callerId) });
    },
    wait: async (ms) => (stale() ? 'hangup' : call.wait(ms)),
    hangup: async (reason) => {
      if (!stale()) await call.hangup(reason);
    },
  };
}

/** Call recording when CALLS_RECORDING_DIR is set (rtpengine's --recording-dir); null: off. */
function recordingOf(d: CallsDeps, mediaDir: string): { recorder: Recorder; store: RecordingStore } | null {
  if (!d.config.callsRecordingDir) return null;
  const store: RecordingStore = d.redis ? new RedisRecordingStore(d.redis) : new MemoryRecordingStore();
  const recorder = new Recorder({ dir: d.config.callsRecordingDir, store, mediaDir, outbox: d.callStore, log: d.log });
  return { recorder, store };
}
