/**
 * Recording a placed call's A leg (docs/calls.md "Recording"). rtpengine runs with
 * `--recording-method=pcap --recording-dir=<CALLS_RECORDING_DIR> --recording-format=raw`:
 * NG `start recording` opens `<dir>/pcaps/<call-id>-<hex>.pcap` (one new file per start),
 * `stop recording` (or `delete`) closes it and moves its metadata file to
 * `<dir>/metadata/rtpengine-meta-<call-id>-<hex>.txt`: the pcap is complete from then on.
 * The edge reads that pcap (calls/recording.ts), keeps what rtpengine received on the A
 * leg's port, makes a WAV, stores it (store/recordings/) and removes rtpengine's files.
 */
import { randomUUID } from 'node:crypto';
import { mkdir, readdir, readFile, rm, stat, writeFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { Logger } from '../logger.js';
import type { OutboxItem } from '../store/calls/calls.js';
import type { RecordingRecord, RecordingStore } from '../store/recordings/recordings.js';
import type { CallMediaSession } from './media.js';
import { decodeStream, durationMsOf, MAX_RECORDING_SAMPLES, readPcapUdp, toneWav, wavOf } from './recording.js';

export interface RecorderOptions {
  /** rtpengine's `--recording-dir` as this machine sees it. */
  dir: string;
  store: RecordingStore;
  /** Where the beep file is written (CALLS_MEDIA_DIR: rtpengine plays from there). */
  mediaDir: string;
  /** The signed callbacks' outbox (a Record API `callback_url`). */
  outbox: { enqueue(item: OutboxItem): Promise<void> } | null;
  log: Logger;
  /** How long to wait for rtpengine to close a recording's file, ms. @default 3000 */
  closeWaitMs?: number;
}

/** A recording in progress: which files were there before it, and when it started. */
export interface RecordingTake {
  before: Set<string>;
  startedAt: number;
}

/** What a finished recording is about. */
export interface RecordingSubject {
  recordingId: string;
  domain: string;
  authId: string;
  subAccount: string | null;
  callUuid: string;
  source: 'call' | 'xml';
  from: string;
  to: string;
  /** The recording's length limit (maxLength, time_limit), ms. */
  maxMs: number;
}

export class Recorder {
  private beep: Promise<string> | null = null;

  constructor(private readonly o: RecorderOptions) {}

  /** The API route that serves a recording's audio (api/calls.ts). */
  urlOf(authId: string, recordingId: string): string {
    return `/api/v1/Account/${authId}/Recording/${recordingId}.wav`;
  }

  newId(): string {
    return randomUUID();
  }

  /** A 0.3 s 1 kHz tone (the Record verb's `playBeep`), written once. */
  beepFile(): Promise<string> {
    this.beep ??= (async () => {
      const dir = join(this.o.mediaDir, 'tones');
      await mkdir(dir, { recursive: true });
      const file = join(dir, 'beep-1000hz-300ms.wav');
      await writeFile(file, toneWav(300, 1000));
      return file;
    })();
    // A failed write is tried again by the next Record.
    this.beep.catch(() => (this.beep = null));
    return this.beep;
  }

  /** Starts rtpengine's recording of the call. */
  async begin(media: CallMediaSession): Promise<RecordingTake> {
    const before = new Set(await this.pcapsOf(media.ngCallId));
    const startedAt = Date.now();
    await media.startRecording();
    return { before, startedAt };
  }

  /**
   * Stops the recording (or finds it closed by the call's end), makes its WAV, stores it
   * and removes rtpengine's files. Null when no file came (rtpengine does not write into
   * this directory) or it could not be read.
   */
  async finish(take: RecordingTake, media: CallMediaSession, s: RecordingSubject): Promise<RecordingRecord | null> {
    const stoppedAt = Date.now();
    await media.stopRecording();
    const wait = this.o.closeWaitMs ?? 3000;
    const deadline = Date.now() + wait;
    let files: string[] = [];
    for (;;) {
      files = (await this.pcapsOf(media.ngCallId)).filter((f) => !take.before.has(f));
      const closed = await Promise.all(files.map((f) => this.closed(f)));
      if (files.length > 0 && closed.every(Boolean)) break;
      if (Date.now() > deadline) break;
      await new Promise((r) => setTimeout(r, 50));
    }
    if (files.length === 0) {
      this.o.log.warn({ call: s.callUuid, dir: this.o.dir }, 'recording: rtpengine wrote no pcap file here (is its --recording-dir CALLS_RECORDING_DIR, --recording-method=pcap?)');
      return null;
    }
    try {
      const datagrams = [];
      for (const f of files) datagrams.push(...readPcapUdp(await readFile(join(this.o.dir, 'pcaps', f))));
      datagrams.sort((a, b) => a.timeMs - b.timeMs);
      const maxSamples = Math.min(MAX_RECORDING_SAMPLES, Math.round(s.maxMs * 8));
      const port = media.aLegPort;
      const audio = decodeStream(datagrams, { ...(port !== null ? { dstPort: port } : {}), startMs: take.startedAt, endMs: stoppedAt, maxSamples });
      const wav = wavOf(audio.samples);
      const r: RecordingRecord = {
        recordingId: s.recordingId,
        domain: s.domain,
        authId: s.authId,
        subAccount: s.subAccount,
        callUuid: s.callUuid,
        source: s.source,
        durationMs: durationMsOf(audio.samples.length),
        format: 'wav',
        size: wav.length,
        from: s.from,
        to: s.to,
        createdAt: Date.now(),
      };
      await this.o.store.put(r, wav);
      this.o.log.info({ call: s.callUuid, recording: s.recordingId, durationMs: r.durationMs, packets: audio.packets, gapMs: durationMsOf(audio.gapSamples) }, 'recording stored');
      return r;
    } catch (err) {
      this.o.log.warn({ call: s.callUuid, recording: s.recordingId, err: err instanceof Error ? err.message : String(err) }, 'recording not stored');
      return null;
    } finally {
      for (const f of files) {
        await rm(join(this.o.dir, 'pcaps', f), { force: true }).catch(() => undefined);
        await rm(join(this.o.dir, 'metadata', metadataOf(f)), { force: true }).catch(() => undefined);
      }
    }
  }

  /** A Record API `callback_url`: told when the recording is stored (signed outbox, docs/callbacks.md). */
  async notify(target: { url: string; method: 'GET' | 'POST' }, r: RecordingRecord, url: string): Promise<void> {
    if (!this.o.outbox) return;
    await this.o.outbox.enqueue({
      id: randomUUID(),
      domain: r.domain,
      authId: r.authId,
      event: 'RecordStop',
      url: target.url,
      method: target.method,
      params: {
        Event: 'RecordStop',
        timestamp: new Date().toISOString(),
        auth_id: r.subAccount ?? r.authId,
        CallUUID: r.callUuid,
        From: r.from,
        To: r.to,
        RecordingID: r.recordingId,
        RecordUrl: url,
        RecordingDuration: String(Math.round(r.durationMs / 1000)),
        RecordingDurationMs: String(r.durationMs),
        RecordingFormat: r.format,
        RecordingStartMs: String(r.createdAt - r.durationMs),
        RecordingEndMs: String(r.createdAt),
        ...(r.subAccount ? { SubAccount: r.subAccount } : {}),
      },
      attempts: 0,
      fallback: null,
      createdAt: Date.now(),
    });
  }

  private async pcapsOf(ngCallId: string): Promise<string[]> {
    try {
      return (await readdir(join(this.o.dir, 'pcaps'))).filter((f) => f.startsWith(`${ngCallId}-`) && f.endsWith('.pcap'));
    } catch {
      return [];
    }
  }

  /** rtpengine moved the recording's metadata out of tmp/: the file is closed. */
  private async closed(pcap: string): Promise<boolean> {
    try {
      await stat(join(this.o.dir, 'metadata', metadataOf(pcap)));
      return true;
    } catch {
      return false;
    }
  }
}

function metadataOf(pcap: string): string {
  return `rtpengine-meta-${pcap.replace(/\.pcap$/, '')}.txt`;
}
