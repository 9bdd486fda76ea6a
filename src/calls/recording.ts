/**
 * Call recordings from rtpengine's pcap files (docs/calls.md "Recording"). rtpengine
 * (`--recording-method=pcap --recording-format=raw`) writes every packet it RECEIVES on a
 * call to `<recording dir>/pcaps/<call-id>-<hex>.pcap` (link type 101: raw IPv4, no
 * Ethernet header). This module reads such a file, keeps the RTP of one stream (the
 * packets that arrived on one rtpengine port: the recorded party's), decodes G.711
 * (μ-law, A-law) to 16-bit PCM, fills the gaps by RTP timestamp with silence and writes
 * an 8 kHz mono WAV. Everything here is pure (no I/O): calls/recorder.ts does the files.
 */

/** One UDP datagram of a pcap file. */
export interface PcapUdp {
  /** Capture time, ms since the epoch (fractional). */
  timeMs: number;
  src: string;
  srcPort: number;
  dst: string;
  dstPort: number;
  payload: Buffer;
}

export interface RtpPacket {
  payloadType: number;
  marker: boolean;
  sequence: number;
  timestamp: number;
  ssrc: number;
  payload: Buffer;
}

const LINKTYPE_ETHERNET = 1;
const LINKTYPE_RAW = 101;
const LINKTYPE_IPV4 = 228;
const LINKTYPE_LINUX_SLL = 113;

/**
 * The UDP datagrams (IPv4) of a classic pcap file, in file order. Accepts either byte
 * order and micro/nanosecond timestamps; link types raw IP (101, 228), Ethernet (1) and
 * Linux cooked (113). Fragments, non-UDP and truncated records are skipped; a file cut
 * short ends the list (rtpengine may still be writing the last record).
 */
export function readPcapUdp(file: Buffer): PcapUdp[] {
  if (file.length < 24) throw new Error('not a pcap file: shorter than its global header');
  const magicLe = file.readUInt32LE(0);
  let le: boolean;
  let nano: boolean;
  if (magicLe === 0xa1b2c3d4) [le, nano] = [true, false];
  else if (magicLe === 0xa1b23c4d) [le, nano] = [true, true];
  else if (magicLe === 0xd4c3b2a1) [le, nano] = [false, false];
  else if (magicLe === 0x4d3cb2a1) [le, nano] = [false, true];
  else throw new Error(`not a pcap file (magic 0x${magicLe.toString(16)})`);
  const u32 = (o: number): number => (le ? file.readUInt32LE(o) : file.readUInt32BE(o));
  const linkType = u32(20) & 0x0fffffff;
  const out: PcapUdp[] = [];
  let o = 24;
  while (o + 16 <= file.length) {
    const sec = u32(o);
    const frac = u32(o + 4);
    const incl = u32(o + 8);
    const start = o + 16;
    o = start + incl;
    if (o > file.length) break;
    const frame = file.subarray(start, start + incl);
    let ip: Buffer | null;
    switch (linkType) {
      case LINKTYPE_RAW:
      case LINKTYPE_IPV4:
        ip = frame;
        break;
      case LINKTYPE_ETHERNET:
        ip = frame.length >= 14 && frame.readUInt16BE(12) === 0x0800 ? frame.subarray(14) : null;
        break;
      case LINKTYPE_LINUX_SLL:
        ip = frame.length >= 16 && frame.readUInt16BE(14) === 0x0800 ? frame.subarray(16) : null;
        break;
      default:
        throw new Error(`pcap link type ${linkType} is not read`);
    }
    if (!ip) continue;
    const udp = udpOfIpv4(ip);
    if (!udp) continue;
    out.push({ timeMs: sec * 1000 + (nano ? frac / 1e6 : frac / 1e3), ...udp });
  }
  return out;
}

function udpOfIpv4(ip: Buffer): Omit<PcapUdp, 'timeMs'> | null {
  if (ip.length < 20 || ip[0]! >> 4 !== 4) return null;
  const ihl = (ip[0]! & 0x0f) * 4;
  if (ihl < 20 || ip.length < ihl + 8) return null;
  if (ip[9] !== 17) return null;
  // A fragment (more fragments, or an offset) is not a whole datagram.
  const frag = ip.readUInt16BE(6);
  if ((frag & 0x2000) !== 0 || (frag & 0x1fff) !== 0) return null;
  const total = Math.min(ip.readUInt16BE(2) || ip.length, ip.length);
  const u = ip.subarray(ihl, total);
  if (u.length < 8) return null;
  const udpLen = Math.min(u.readUInt16BE(4) || u.length, u.length);
  return {
    src: `${ip[12]}.${ip[13]}.${ip[14]}.${ip[15]}`,
    dst: `${ip[16]}.${ip[17]}.${ip[18]}.${ip[19]}`,
    srcPort: u.readUInt16BE(0),
    dstPort: u.readUInt16BE(2),
    payload: u.subarray(8, udpLen),
  };
}

/** An RTP packet (RFC 3550: CSRCs, header extension and padding removed), or null for anything else (RTCP, STUN, junk). */
export function parseRtp(b: Buffer): RtpPacket | null {
  if (b.length < 12 || b[0]! >> 6 !== 2) return null;
  const pt = b[1]! & 0x7f;
  // RTCP (200-204 with the marker bit read as part of the type) shares rtcp-mux ports.
  if (b[1]! >= 200 && b[1]! <= 204) return null;
  const cc = b[0]! & 0x0f;
  let o = 12 + cc * 4;
  if (b.length < o) return null;
  if (b[0]! & 0x10) {
    if (b.length < o + 4) return null;
    o += 4 + b.readUInt16BE(o + 2) * 4;
    if (b.length < o) return null;
  }
  let end = b.length;
  if (b[0]! & 0x20) {
    const pad = b[b.length - 1]!;
    if (pad === 0 || o + pad > end) return null;
    end -= pad;
  }
  return { payloadType: pt, marker: (b[1]! & 0x80) !== 0, sequence: b.readUInt16BE(2), timestamp: b.readUInt32BE(4), ssrc: b.readUInt32BE(8), payload: b.subarray(o, end) };
}

/** G.711 μ-law byte → 16-bit linear PCM (ITU-T G.711; the classic formula). */
export function ulawToLinear(u: number): number {
  const x = ~u & 0xff;
  const exponent = (x >> 4) & 0x07;
  const mantissa = x & 0x0f;
  const magnitude = (((mantissa << 3) + 0x84) << exponent) - 0x84;
  return (x & 0x80 ? -magnitude : magnitude) | 0;
}

/** G.711 A-law byte → 16-bit linear PCM. */
export function alawToLinear(a: number): number {
  const x = (a ^ 0x55) & 0xff;
  const exponent = (x >> 4) & 0x07;
  const mantissa = x & 0x0f;
  const magnitude = exponent === 0 ? (mantissa << 4) + 8 : ((mantissa << 4) + 0x108) << (exponent - 1);
  return x & 0x80 ? magnitude : -magnitude;
}

const ULAW = Int16Array.from({ length: 256 }, (_, i) => ulawToLinear(i));
const ALAW = Int16Array.from({ length: 256 }, (_, i) => alawToLinear(i));

/** The RTP payload types decoded to audio (static G.711); everything else (RFC 4733 events, comfort noise) is skipped. */
export const PT_PCMU = 0;
export const PT_PCMA = 8;
const SAMPLE_RATE = 8000;

export interface DecodeOptions {
  /** Keep only the datagrams sent to this port (the recorded party's rtpengine port). */
  dstPort?: number;
  /** When the recording started / stopped (ms since the epoch): silence before the first packet / after the last. */
  startMs?: number;
  endMs?: number;
  /** At most this many samples (the cap of a recording). */
  maxSamples?: number;
}

export interface DecodedAudio {
  samples: Int16Array;
  /** Audio packets used. */
  packets: number;
  /** Samples of silence put in for missing packets (not counting lead/tail padding). */
  gapSamples: number;
}

/**
 * One stream's audio: G.711 packets placed on the timeline by RTP timestamp (a new SSRC
 * restarts at its capture time), holes left as silence, duplicates overwrite.
 */
export function decodeStream(datagrams: readonly PcapUdp[], o: DecodeOptions = {}): DecodedAudio {
  const max = o.maxSamples ?? Number.MAX_SAFE_INTEGER;
  type Piece = { at: number; pcm: Int16Array };
  const pieces: Piece[] = [];
  let origin: number | null = null;
  let stream: { ssrc: number; ts0: number; base: number } | null = null;
  let packets = 0;
  for (const d of datagrams) {
    if (o.dstPort !== undefined && d.dstPort !== o.dstPort) continue;
    const rtp = parseRtp(d.payload);
    if (!rtp || (rtp.payloadType !== PT_PCMU && rtp.payloadType !== PT_PCMA)) continue;
    // Sample 0 is when the recording started (or the first packet, if that was earlier by clock skew).
    if (origin === null) origin = o.startMs !== undefined ? Math.min(o.startMs, d.timeMs) : d.timeMs;
    if (!stream || stream.ssrc !== rtp.ssrc) stream = { ssrc: rtp.ssrc, ts0: rtp.timestamp, base: Math.max(0, Math.round(((d.timeMs - origin) * SAMPLE_RATE) / 1000)) };
    // Signed 32-bit distance from the stream's first timestamp (wraps, late packets).
    const delta = (rtp.timestamp - stream.ts0) | 0;
    const at = stream.base + delta;
    if (at < 0 || at >= max) continue;
    const table = rtp.payloadType === PT_PCMU ? ULAW : ALAW;
    const pcm = new Int16Array(rtp.payload.length);
    for (let i = 0; i < pcm.length; i++) pcm[i] = table[rtp.payload[i]!]!;
    pieces.push({ at, pcm });
    packets++;
  }
  let length = 0;
  for (const p of pieces) length = Math.max(length, p.at + p.pcm.length);
  // Silence up to when the recording stopped (the party said nothing at the end).
  if (o.endMs !== undefined) {
    const from = origin ?? o.startMs;
    if (from !== undefined) length = Math.max(length, Math.round(((o.endMs - from) * SAMPLE_RATE) / 1000));
  }
  length = Math.min(length, max);
  const samples = new Int16Array(length);
  const filled = new Uint8Array(length);
  for (const p of pieces) {
    const n = Math.min(p.pcm.length, length - p.at);
    if (n <= 0) continue;
    samples.set(p.pcm.subarray(0, n), p.at);
    filled.fill(1, p.at, p.at + n);
  }
  // Holes between the first and the last audio packet are the gaps.
  let gapSamples = 0;
  if (pieces.length > 0) {
    const first = Math.min(...pieces.map((p) => p.at));
    const last = Math.min(length, Math.max(...pieces.map((p) => p.at + p.pcm.length)));
    for (let i = first; i < last; i++) if (!filled[i]) gapSamples++;
  }
  return { samples, packets, gapSamples };
}

/** A 16-bit mono PCM WAV (RIFF/WAVE, one `fmt ` and one `data` chunk). */
export function wavOf(samples: Int16Array, sampleRate = SAMPLE_RATE): Buffer {
  const data = samples.length * 2;
  const b = Buffer.alloc(44 + data);
  b.write('RIFF', 0, 'ascii');
  b.writeUInt32LE(36 + data, 4);
  b.write('WAVE', 8, 'ascii');
  b.write('fmt ', 12, 'ascii');
  b.writeUInt32LE(16, 16);
  b.writeUInt16LE(1, 20); // PCM
  b.writeUInt16LE(1, 22); // mono
  b.writeUInt32LE(sampleRate, 24);
  b.writeUInt32LE(sampleRate * 2, 28);
  b.writeUInt16LE(2, 32);
  b.writeUInt16LE(16, 34);
  b.write('data', 36, 'ascii');
  b.writeUInt32LE(data, 40);
  for (let i = 0; i < samples.length; i++) b.writeInt16LE(samples[i]!, 44 + i * 2);
  return b;
}

/** The recording length in ms of `samples` at 8 kHz. */
export function durationMsOf(samples: number, sampleRate = SAMPLE_RATE): number {
  return Math.round((samples * 1000) / sampleRate);
}

/** A tone as a WAV (the Record verb's beep): `ms` of `hz` at 8 kHz, amplitude ~-10 dBFS. */
export function toneWav(ms: number, hz: number, sampleRate = SAMPLE_RATE): Buffer {
  const n = Math.round((ms * sampleRate) / 1000);
  const s = new Int16Array(n);
  for (let i = 0; i < n; i++) s[i] = Math.round(10000 * Math.sin((2 * Math.PI * hz * i) / sampleRate));
  return wavOf(s, sampleRate);
}

/** The largest WAV a recording may make (10 MiB): 655 s of 8 kHz 16-bit mono. */
export const MAX_RECORDING_BYTES = 10 * 1024 * 1024;
export const MAX_RECORDING_SAMPLES = Math.floor((MAX_RECORDING_BYTES - 44) / 2);
export const MAX_RECORDING_MS = Math.floor((MAX_RECORDING_SAMPLES * 1000) / SAMPLE_RATE);
