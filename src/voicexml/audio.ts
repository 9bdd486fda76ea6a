/**
 * The audio of `<Play>` URLs: downloaded once (https:// only, the SSRF guard, 10 s,
 * 20 MB), checked to be audio, kept in a cache directory under sha256(url), and
 * handed to the call port as a file. Concurrent plays of one URL share a download.
 * Failures are answers (`{ error }`), never exceptions: the runner skips the verb.
 */
import { createHash } from 'node:crypto';
import { mkdir, rename, stat, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { CallbackNetworkGuard } from '../events/network-guard.js';
import { WEBHOOK_USER_AGENT } from '../events/webhook.js';
import { httpsExchange, origin } from './https-get.js';
import { wavDurationMs } from './tts.js';

export const AUDIO_TIMEOUT_MS = 10_000;
export const AUDIO_MAX_BYTES = 20 * 1024 * 1024;

export type AudioResult = { path: string; durationMs: number | null } | { error: string };

export interface AudioCacheOptions {
  guard: CallbackNetworkGuard;
  /** @default `<os.tmpdir()>/sip-edge-audio` */
  dir?: string;
  timeoutMs?: number;
  maxBytes?: number;
  ca?: string | Buffer | Array<string | Buffer>;
}

/** The file type of audio bytes by their magic, or null when they are not audio we know. */
export function sniffAudio(b: Buffer): 'wav' | 'mp3' | null {
  if (b.length >= 12 && b.toString('latin1', 0, 4) === 'RIFF' && b.toString('latin1', 8, 12) === 'WAVE') return 'wav';
  if (b.length >= 3 && b.toString('latin1', 0, 3) === 'ID3') return 'mp3';
  // An MPEG audio frame starts with 11 set bits (0xFFE…).
  if (b.length >= 2 && b[0] === 0xff && ((b[1] as number) & 0xe0) === 0xe0) return 'mp3';
  return null;
}

export class AudioCache {
  private readonly dir: string;
  private readonly pending = new Map<string, Promise<AudioResult>>();

  constructor(private readonly o: AudioCacheOptions) {
    this.dir = o.dir ?? join(tmpdir(), 'sip-edge-audio');
  }

  /** The file of a Play URL, downloaded on first use. */
  get(url: string): Promise<AudioResult> {
    const key = createHash('sha256').update(url).digest('hex');
    let p = this.pending.get(key);
    if (p === undefined) {
      p = this.load(url, key).finally(() => this.pending.delete(key));
      this.pending.set(key, p);
    }
    return p;
  }

  private async load(url: string, key: string): Promise<AudioResult> {
    for (const ext of ['wav', 'mp3']) {
      const path = join(this.dir, `${key}.${ext}`);
      if (await exists(path)) return { path, durationMs: ext === 'wav' ? await wavDurationMs(path).catch(() => null) : null };
    }
    const a = await httpsExchange({
      url,
      method: 'GET',
      headers: { 'user-agent': WEBHOOK_USER_AGENT, accept: 'audio/*' },
      guard: this.o.guard,
      timeoutMs: this.o.timeoutMs ?? AUDIO_TIMEOUT_MS,
      maxBytes: this.o.maxBytes ?? AUDIO_MAX_BYTES,
      ca: this.o.ca,
    });
    if (!a.ok) return { error: a.reason };
    if (a.status < 200 || a.status > 299) return { error: `HTTP ${a.status} from ${origin(url)}` };
    const type = String(a.headers['content-type'] ?? '').toLowerCase();
    const kind = sniffAudio(a.body) ?? (type.startsWith('audio/') ? (/mpeg|mp3/.test(type) ? 'mp3' : 'wav') : null);
    if (kind === null || a.body.length === 0) return { error: `the answer from ${origin(url)} is not audio (${type || 'no Content-Type'})` };
    try {
      await mkdir(this.dir, { recursive: true });
      const path = join(this.dir, `${key}.${kind}`);
      // Written aside and renamed: a reader never sees half a file.
      const part = `${path}.${process.pid}.part`;
      await writeFile(part, a.body);
      await rename(part, path);
      return { path, durationMs: kind === 'wav' ? await wavDurationMs(path).catch(() => null) : null };
    } catch (e) {
      return { error: `the audio could not be stored (${(e as NodeJS.ErrnoException).code ?? 'error'})` };
    }
  }
}

async function exists(path: string): Promise<boolean> {
  try {
    return (await stat(path)).size > 0;
  } catch {
    return false;
  }
}
