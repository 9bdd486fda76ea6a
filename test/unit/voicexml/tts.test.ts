/**
 * SpeechRenderer with the real flite (Debian's package): an 8 kHz mono 16-bit WAV
 * of the text, the cache, one render for concurrent requests, a missing engine
 * named, text that looks like an option spoken as text; wavDurationMs from the header.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { SpeechRenderer, TtsUnavailableError, toTelephoneRate, wavDurationMs } from '../../../src/voicexml/tts.js';

let dir: string;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'sip-edge-tts-test-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** fmt fields of a canonical 44-byte-header WAV. */
function fmt(path: string): { riff: string; wave: string; format: number; channels: number; rate: number; bits: number } {
  const b = readFileSync(path);
  return { riff: b.toString('latin1', 0, 4), wave: b.toString('latin1', 8, 12), format: b.readUInt16LE(20), channels: b.readUInt16LE(22), rate: b.readUInt32LE(24), bits: b.readUInt16LE(34) };
}

describe('SpeechRenderer (flite)', () => {
  it('renders WOMAN (slt, 16 kHz halved) as an 8 kHz mono 16-bit WAV with a duration', async () => {
    const tts = new SpeechRenderer({ dir });
    const r = await tts.render('Press one for sales, two for support.', { voice: 'WOMAN', language: 'en-US' });
    expect(fmt(r.path)).toEqual({ riff: 'RIFF', wave: 'WAVE', format: 1, channels: 1, rate: 8000, bits: 16 });
    expect(r.durationMs).toBeGreaterThan(1000);
    expect(r.durationMs).toBeLessThan(10_000);
    expect(await wavDurationMs(r.path)).toBe(r.durationMs);
    // Not silence: some sample is loud.
    const pcm = readFileSync(r.path).subarray(44);
    let peak = 0;
    for (let i = 0; i + 1 < pcm.length; i += 2) peak = Math.max(peak, Math.abs(pcm.readInt16LE(i)));
    expect(peak).toBeGreaterThan(1000);
  });

  it('renders MAN with kal, another file', async () => {
    const tts = new SpeechRenderer({ dir });
    const man = await tts.render('Hello', { voice: 'MAN', language: 'en-US' });
    const woman = await tts.render('Hello', { voice: 'WOMAN', language: 'en-US' });
    expect(man.path).not.toBe(woman.path);
    expect(fmt(man.path).rate).toBe(8000);
  });

  it('serves a second render from the cache, and shares one render between concurrent requests', async () => {
    const tts = new SpeechRenderer({ dir });
    const o = { voice: 'WOMAN', language: 'en-US' };
    const p1 = tts.render('Cached words', o);
    const p2 = tts.render('Cached words', o);
    expect(p2).toBe(p1);
    const first = await p1;
    const mtime = statSync(first.path).mtimeMs;
    const again = await new SpeechRenderer({ dir }).render('Cached words', o);
    expect(again).toEqual(first);
    expect(statSync(first.path).mtimeMs).toBe(mtime);
    // Only finished files stay in the directory: no text or raw files left behind.
    expect(readdirSync(dir).filter((f) => !/^[0-9a-f]{64}\.wav$/.test(f))).toEqual([]);
  });

  it('speaks text that looks like an option or a shell command as text', async () => {
    const tts = new SpeechRenderer({ dir });
    const marker = join(dir, 'pwned');
    const r = await tts.render(`-o /dev/null; touch ${marker} $(touch ${marker})`, { voice: 'WOMAN', language: 'en-US' });
    expect(r.durationMs).toBeGreaterThan(500);
    expect(() => statSync(marker)).toThrow();
  });

  it('fails with TtsUnavailableError naming the engine when it is not installed', async () => {
    const tts = new SpeechRenderer({ dir, binary: '/nonexistent/flite' });
    const err = await tts.render('x', { voice: 'WOMAN', language: 'en-US' }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(TtsUnavailableError);
    expect((err as Error).message).toContain('flite');
    expect((err as TtsUnavailableError).code).toBe('ERR_TTS_UNAVAILABLE');
  });
});

describe('wavDurationMs and toTelephoneRate', () => {
  function pcmWav(rate: number, samples: number): Buffer {
    const b = Buffer.alloc(44 + samples * 2);
    b.write('RIFF', 0, 'latin1');
    b.writeUInt32LE(36 + samples * 2, 4);
    b.write('WAVEfmt ', 8, 'latin1');
    b.writeUInt32LE(16, 16);
    b.writeUInt16LE(1, 20);
    b.writeUInt16LE(1, 22);
    b.writeUInt32LE(rate, 24);
    b.writeUInt32LE(rate * 2, 28);
    b.writeUInt16LE(2, 32);
    b.writeUInt16LE(16, 34);
    b.write('data', 36, 'latin1');
    b.writeUInt32LE(samples * 2, 40);
    for (let i = 0; i < samples; i++) b.writeInt16LE(1000, 44 + 2 * i);
    return b;
  }

  it('reads the duration from the fmt byte rate and the data size', async () => {
    const p = join(dir, 'two-seconds.wav');
    writeFileSync(p, pcmWav(16000, 32000));
    expect(await wavDurationMs(p)).toBe(2000);
    writeFileSync(p, Buffer.from('not a wav file at all........................'));
    await expect(wavDurationMs(p)).rejects.toThrow('RIFF');
  });

  it('halves 16 kHz to 8 kHz, keeping the signal', () => {
    const out = toTelephoneRate(pcmWav(16000, 1600));
    expect(out.readUInt32LE(24)).toBe(8000);
    expect(out.readUInt32LE(40)).toBe(1600);
    expect(out.readInt16LE(44 + 400)).toBe(1000);
    const eight = pcmWav(8000, 10);
    expect(toTelephoneRate(eight)).toBe(eight);
  });
});
