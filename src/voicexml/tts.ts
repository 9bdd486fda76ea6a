/**
 * `<Speak>`: text to a WAV file the call port plays. Debian's `flite` by default
 * (voices `slt` for WOMAN, `kal` for MAN; written as 8 kHz mono 16-bit, the
 * telephone rate, `slt`'s 16 kHz halved here), or `espeak-ng` (22.05 kHz, which
 * rtpengine resamples). The engine is spawned with an argument vector, never a
 * shell, and reads the text from a file, so no text can become an option or a
 * command. Renders are cached under sha256(engine, voice, language, text); renders of
 * the same text at the same time share one run.
 */
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { mkdir, open, readFile, rename, rm, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/** Characters of text spoken at most; the rest is cut (a prompt, not an audiobook). */
export const MAX_SPEAK_CHARS = 4000;
/** A render taking longer is killed. */
export const RENDER_TIMEOUT_MS = 30_000;

export type TtsEngine = 'flite' | 'espeak-ng';

/** The engine's program is not installed (or cannot run). */
export class TtsUnavailableError extends Error {
  readonly code = 'ERR_TTS_UNAVAILABLE';
  constructor(engine: string, detail: string) {
    super(`text-to-speech engine ${engine} cannot run (${detail}); install it (Debian: apt-get install ${engine}) or configure another`);
    this.name = 'TtsUnavailableError';
  }
}

export interface SpeechRendererOptions {
  /** @default 'flite' */
  engine?: TtsEngine;
  /** The program to run. @default the engine's name, found on PATH */
  binary?: string;
  /** @default `<os.tmpdir()>/sip-edge-tts` */
  dir?: string;
}

export interface RenderedSpeech {
  path: string;
  durationMs: number;
}

export class SpeechRenderer {
  readonly engine: TtsEngine;
  private readonly binary: string;
  private readonly dir: string;
  private readonly pending = new Map<string, Promise<RenderedSpeech>>();

  constructor(o: SpeechRendererOptions = {}) {
    this.engine = o.engine ?? 'flite';
    this.binary = o.binary ?? this.engine;
    this.dir = o.dir ?? join(tmpdir(), 'sip-edge-tts');
  }

  /** The WAV of a text, rendered on first use. Rejects with TtsUnavailableError when the engine is missing. */
  render(text: string, o: { voice: string; language: string }): Promise<RenderedSpeech> {
    const spoken = text.slice(0, MAX_SPEAK_CHARS);
    const key = createHash('sha256').update(JSON.stringify([this.engine, o.voice, o.language, spoken])).digest('hex');
    let p = this.pending.get(key);
    if (p === undefined) {
      p = this.load(spoken, o, key).finally(() => this.pending.delete(key));
      this.pending.set(key, p);
    }
    return p;
  }

  private async load(text: string, o: { voice: string; language: string }, key: string): Promise<RenderedSpeech> {
    const path = join(this.dir, `${key}.wav`);
    try {
      if ((await stat(path)).size > 44) return { path, durationMs: await wavDurationMs(path) };
    } catch {
      // not cached yet
    }
    await mkdir(this.dir, { recursive: true });
    const stem = join(this.dir, `${key}.${process.pid}.${Date.now()}`);
    const textFile = `${stem}.txt`;
    const raw = `${stem}.raw.wav`;
    try {
      await writeFile(textFile, text);
      await this.run(this.argv(o, textFile, raw));
      const wav = await readFile(raw);
      await writeFile(`${stem}.wav`, this.engine === 'flite' ? toTelephoneRate(wav) : wav);
      await rename(`${stem}.wav`, path);
    } finally {
      await rm(textFile, { force: true });
      await rm(raw, { force: true });
    }
    return { path, durationMs: await wavDurationMs(path) };
  }

  private argv(o: { voice: string; language: string }, textFile: string, out: string): string[] {
    const man = o.voice.toUpperCase() === 'MAN';
    if (this.engine === 'flite') return ['-voice', man ? 'kal' : 'slt', '-f', textFile, '-o', out];
    // espeak-ng: the language as its voice (en-US → en-us), +f3 for a woman's variant.
    const lang = /^[A-Za-z]{2,3}(-[A-Za-z0-9]{2,8})?$/.test(o.language) ? o.language.toLowerCase() : 'en-us';
    return ['-v', man ? lang : `${lang}+f3`, '-f', textFile, '-w', out];
  }

  private run(args: string[]): Promise<void> {
    return new Promise((resolve, reject) => {
      const child = spawn(this.binary, args, { stdio: ['ignore', 'ignore', 'pipe'], shell: false });
      let stderr = '';
      child.stderr.on('data', (c: Buffer) => (stderr = (stderr + c.toString()).slice(-500)));
      const timer = setTimeout(() => child.kill('SIGKILL'), RENDER_TIMEOUT_MS);
      child.on('error', (e: NodeJS.ErrnoException) => {
        clearTimeout(timer);
        reject(e.code === 'ENOENT' || e.code === 'EACCES' ? new TtsUnavailableError(this.engine, `${this.binary}: ${e.code}`) : e);
      });
      child.on('close', (code, signal) => {
        clearTimeout(timer);
        if (code === 0) resolve();
        else reject(new Error(`${this.engine} failed (${signal ?? `exit ${code}`}): ${stderr.trim().slice(0, 200)}`));
      });
    });
  }
}

interface WavInfo {
  sampleRate: number;
  channels: number;
  bitsPerSample: number;
  byteRate: number;
  dataOffset: number;
  dataBytes: number;
}

/** The fmt and data chunks of a RIFF/WAVE header. */
function wavInfo(b: Buffer, fileBytes: number): WavInfo {
  if (b.length < 12 || b.toString('latin1', 0, 4) !== 'RIFF' || b.toString('latin1', 8, 12) !== 'WAVE') throw new Error('not a RIFF/WAVE file');
  let off = 12;
  let fmt: Omit<WavInfo, 'dataOffset' | 'dataBytes'> | null = null;
  while (off + 8 <= b.length) {
    const id = b.toString('latin1', off, off + 4);
    const size = b.readUInt32LE(off + 4);
    if (id === 'fmt ' && off + 24 <= b.length) {
      fmt = { channels: b.readUInt16LE(off + 10), sampleRate: b.readUInt32LE(off + 12), byteRate: b.readUInt32LE(off + 16), bitsPerSample: b.readUInt16LE(off + 22) };
    } else if (id === 'data') {
      if (fmt === null || fmt.byteRate === 0) throw new Error('WAVE data before a valid fmt chunk');
      // A streamed WAV may carry 0 or 0xFFFFFFFF: the file's end is the data's end.
      const dataBytes = size === 0 || off + 8 + size > fileBytes ? fileBytes - off - 8 : size;
      return { ...fmt, dataOffset: off + 8, dataBytes };
    }
    off += 8 + size + (size % 2);
  }
  throw new Error('no data chunk in the first 64 KB of the WAVE file');
}

/** How long a WAV file plays, from its RIFF header (fmt byte rate, data size). */
export async function wavDurationMs(path: string): Promise<number> {
  const f = await open(path, 'r');
  try {
    const { size } = await f.stat();
    const buf = Buffer.alloc(Math.min(size, 64 * 1024));
    await f.read(buf, 0, buf.length, 0);
    const info = wavInfo(buf, size);
    return Math.round((info.dataBytes / info.byteRate) * 1000);
  } finally {
    await f.close();
  }
}

/** A 16-bit mono WAV as 8 kHz: 16 kHz is low-passed ([1 2 1]/4) and halved; 8 kHz is kept. */
export function toTelephoneRate(wav: Buffer): Buffer {
  const info = wavInfo(wav, wav.length);
  if (info.sampleRate === 8000 || info.sampleRate !== 16000 || info.channels !== 1 || info.bitsPerSample !== 16) return wav;
  const n = Math.floor(info.dataBytes / 2);
  const s = (i: number): number => wav.readInt16LE(info.dataOffset + 2 * Math.min(Math.max(i, 0), n - 1));
  const outSamples = Math.floor(n / 2);
  const out = Buffer.alloc(44 + outSamples * 2);
  for (let j = 0; j < outSamples; j++) {
    const i = 2 * j;
    out.writeInt16LE(Math.round((s(i - 1) + 2 * s(i) + s(i + 1)) / 4), 44 + 2 * j);
  }
  out.write('RIFF', 0, 'latin1');
  out.writeUInt32LE(36 + outSamples * 2, 4);
  out.write('WAVEfmt ', 8, 'latin1');
  out.writeUInt32LE(16, 16);
  out.writeUInt16LE(1, 20); // PCM
  out.writeUInt16LE(1, 22); // mono
  out.writeUInt32LE(8000, 24);
  out.writeUInt32LE(16000, 28); // byte rate
  out.writeUInt16LE(2, 32); // block align
  out.writeUInt16LE(16, 34);
  out.write('data', 36, 'latin1');
  out.writeUInt32LE(outSamples * 2, 40);
  return out;
}
