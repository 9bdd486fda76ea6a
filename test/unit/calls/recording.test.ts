/**
 * Recordings from rtpengine's pcap files (src/calls/recording.ts): a pcap written here
 * with known G.711 samples, read back → the exact PCM, a lost packet filled with
 * silence, other streams and RFC 4733 events left out, and a WAV that says so.
 */
import { describe, expect, it } from 'vitest';
import { alawToLinear, decodeStream, parseRtp, readPcapUdp, toneWav, ulawToLinear, wavOf } from '../../../src/calls/recording.js';

/** One RTP packet: 12-byte header (+ CSRCs, + extension) and a payload. */
function rtp(o: { pt: number; seq: number; ts: number; ssrc?: number; payload: Buffer; csrc?: number; ext?: boolean; pad?: number }): Buffer {
  const cc = o.csrc ?? 0;
  const ext = o.ext ? Buffer.from([0xbe, 0xde, 0x00, 0x01, 1, 2, 3, 4]) : Buffer.alloc(0);
  const pad = o.pad ? Buffer.concat([Buffer.alloc(o.pad - 1), Buffer.from([o.pad])]) : Buffer.alloc(0);
  const h = Buffer.alloc(12 + cc * 4);
  h[0] = 0x80 | (o.ext ? 0x10 : 0) | (o.pad ? 0x20 : 0) | cc;
  h[1] = o.pt;
  h.writeUInt16BE(o.seq, 2);
  h.writeUInt32BE(o.ts >>> 0, 4);
  h.writeUInt32BE(o.ssrc ?? 0x1234, 8);
  for (let i = 0; i < cc; i++) h.writeUInt32BE(0xcafe0000 + i, 12 + i * 4);
  return Buffer.concat([h, ext, o.payload, pad]);
}

/** An IPv4/UDP datagram 127.0.0.1:srcPort → 127.0.0.1:dstPort. */
function ipv4Udp(srcPort: number, dstPort: number, payload: Buffer): Buffer {
  const udp = Buffer.alloc(8);
  udp.writeUInt16BE(srcPort, 0);
  udp.writeUInt16BE(dstPort, 2);
  udp.writeUInt16BE(8 + payload.length, 4);
  const ip = Buffer.alloc(20);
  ip[0] = 0x45;
  ip.writeUInt16BE(20 + 8 + payload.length, 2);
  ip[8] = 64;
  ip[9] = 17;
  Buffer.from([127, 0, 0, 1]).copy(ip, 12);
  Buffer.from([127, 0, 0, 1]).copy(ip, 16);
  return Buffer.concat([ip, udp, payload]);
}

/** A pcap file as rtpengine writes it (`--recording-format=raw`: link type 101, big-endian magic as it writes it on x86: d4c3b2a1 LE). */
function pcap(records: Array<{ timeMs: number; data: Buffer }>, opts: { linkType?: number; bigEndian?: boolean } = {}): Buffer {
  const le = !opts.bigEndian;
  const w32 = (b: Buffer, v: number, o: number): void => void (le ? b.writeUInt32LE(v, o) : b.writeUInt32BE(v, o));
  const g = Buffer.alloc(24);
  w32(g, 0xa1b2c3d4, 0);
  if (le) {
    g.writeUInt16LE(2, 4);
    g.writeUInt16LE(4, 6);
  } else {
    g.writeUInt16BE(2, 4);
    g.writeUInt16BE(4, 6);
  }
  w32(g, 65535, 16);
  w32(g, opts.linkType ?? 101, 20);
  const parts: Buffer[] = [g];
  for (const r of records) {
    const h = Buffer.alloc(16);
    w32(h, Math.floor(r.timeMs / 1000), 0);
    w32(h, Math.round((r.timeMs % 1000) * 1000), 4);
    w32(h, r.data.length, 8);
    w32(h, r.data.length, 12);
    parts.push(h, r.data);
  }
  return Buffer.concat(parts);
}

describe('G.711 decoding', () => {
  it('μ-law: the G.711 table (0xff and 0x7f are the two zeros, 0x00/0x80 the extremes)', () => {
    expect(ulawToLinear(0xff)).toBe(0);
    expect(ulawToLinear(0x7f)).toBe(0);
    expect(ulawToLinear(0x00)).toBe(-32124);
    expect(ulawToLinear(0x80)).toBe(32124);
    expect(ulawToLinear(0xfe)).toBe(8);
    expect(ulawToLinear(0x7e)).toBe(-8);
    expect(ulawToLinear(0xf0)).toBe(120);
  });

  it('A-law: the G.711 table (0xd5/0x55 the smallest steps, 0xaa/0x2a the extremes)', () => {
    expect(alawToLinear(0xd5)).toBe(8);
    expect(alawToLinear(0x55)).toBe(-8);
    expect(alawToLinear(0xaa)).toBe(32256);
    expect(alawToLinear(0x2a)).toBe(-32256);
    expect(alawToLinear(0xc5)).toBe(264);
  });

  it('every code and its sign-flipped twin decode to opposite values', () => {
    for (let i = 0; i < 128; i++) {
      expect(ulawToLinear(i) + ulawToLinear(i | 0x80)).toBe(0);
      expect(alawToLinear(i) + alawToLinear(i | 0x80)).toBe(0);
    }
  });
});

describe('RTP header', () => {
  it('skips CSRCs, the header extension and padding', () => {
    const p = parseRtp(rtp({ pt: 8, seq: 7, ts: 1600, payload: Buffer.from([1, 2, 3]), csrc: 2, ext: true, pad: 4 }));
    expect(p).toMatchObject({ payloadType: 8, sequence: 7, timestamp: 1600, ssrc: 0x1234 });
    expect([...(p?.payload ?? [])]).toEqual([1, 2, 3]);
  });

  it('RTCP and non-RTP are not RTP', () => {
    const rtcp = Buffer.alloc(28);
    rtcp[0] = 0x80;
    rtcp[1] = 200;
    expect(parseRtp(rtcp)).toBeNull();
    expect(parseRtp(Buffer.from('hello world!'))).toBeNull();
  });
});

describe('pcap → PCM → WAV', () => {
  const A_PORT = 30000;
  const t0 = 1_700_000_000_000;
  /** 4 PCMA packets of 160 samples, each its own byte; the third lost. */
  const codes = [0xd5, 0xc5, 0xaa, 0x2a];
  const file = pcap([
    ...codes
      .map((c, i) => ({ i, c }))
      .filter(({ i }) => i !== 2)
      .map(({ i, c }) => ({ timeMs: t0 + 20 * i, data: ipv4Udp(40000, A_PORT, rtp({ pt: 8, seq: i, ts: 8000 + 160 * i, payload: Buffer.alloc(160, c) })) })),
    // The other party's stream (another rtpengine port): not this recording.
    { timeMs: t0 + 5, data: ipv4Udp(40002, A_PORT + 2, rtp({ pt: 8, seq: 0, ts: 0, ssrc: 99, payload: Buffer.alloc(160, 0xaa) })) },
    // An RFC 4733 event on the recorded stream: not audio.
    { timeMs: t0 + 30, data: ipv4Udp(40000, A_PORT, rtp({ pt: 101, seq: 100, ts: 8160, payload: Buffer.from([2, 0x0a, 0, 160]) })) },
    // RTCP on the recorded port.
    { timeMs: t0 + 40, data: ipv4Udp(40000, A_PORT, Buffer.from([0x80, 200, 0, 6, 0, 0, 0x12, 0x34, ...Buffer.alloc(20)])) },
  ]);

  it('reads every UDP datagram of a raw-IP pcap with its time and ports', () => {
    const d = readPcapUdp(file);
    expect(d).toHaveLength(6);
    expect(d[0]).toMatchObject({ src: '127.0.0.1', srcPort: 40000, dst: '127.0.0.1', dstPort: A_PORT });
    expect(d[0]?.timeMs).toBeCloseTo(t0, 3);
    expect(d[1]?.timeMs).toBeCloseTo(t0 + 20, 3);
  });

  it('big-endian files and Ethernet framing read the same', () => {
    const be = readPcapUdp(pcap([{ timeMs: t0, data: ipv4Udp(1, 2, Buffer.from([9])) }], { bigEndian: true }));
    expect(be).toMatchObject([{ srcPort: 1, dstPort: 2 }]);
    const eth = Buffer.concat([Buffer.alloc(12), Buffer.from([0x08, 0x00]), ipv4Udp(3, 4, Buffer.from([9]))]);
    expect(readPcapUdp(pcap([{ timeMs: t0, data: eth }], { linkType: 1 }))).toMatchObject([{ srcPort: 3, dstPort: 4 }]);
    expect(() => readPcapUdp(Buffer.alloc(24))).toThrow(/not a pcap/);
  });

  it('the recorded port only, G.711 decoded exactly, the lost packet as 160 samples of silence', () => {
    const a = decodeStream(readPcapUdp(file), { dstPort: A_PORT });
    expect(a.packets).toBe(3);
    expect(a.samples).toHaveLength(640);
    expect(a.gapSamples).toBe(160);
    expect([...a.samples.subarray(0, 160)]).toEqual(Array(160).fill(8));
    expect([...a.samples.subarray(160, 320)]).toEqual(Array(160).fill(264));
    expect([...a.samples.subarray(320, 480)]).toEqual(Array(160).fill(0));
    expect([...a.samples.subarray(480, 640)]).toEqual(Array(160).fill(-32256));
  });

  it('μ-law packets decode with the μ-law table', () => {
    const f = pcap([{ timeMs: t0, data: ipv4Udp(1, A_PORT, rtp({ pt: 0, seq: 1, ts: 0, payload: Buffer.from([0xff, 0x80, 0x00, 0xfe]) })) }]);
    expect([...decodeStream(readPcapUdp(f), { dstPort: A_PORT }).samples]).toEqual([0, 32124, -32124, 8]);
  });

  it('silence before the first packet and after the last, up to when the recording ran; capped', () => {
    const a = decodeStream(readPcapUdp(file), { dstPort: A_PORT, startMs: t0 - 100, endMs: t0 + 400 });
    // 100 ms lead (800 samples), 4 packets, to 500 ms in all.
    expect(a.samples).toHaveLength(4000);
    expect([...a.samples.subarray(0, 800)].every((s) => s === 0)).toBe(true);
    expect(a.samples[800]).toBe(8);
    expect(a.samples[800 + 480]).toBe(-32256);
    expect(decodeStream(readPcapUdp(file), { dstPort: A_PORT, maxSamples: 200 }).samples).toHaveLength(200);
  });

  it('a new SSRC starts where its first packet arrived; timestamps wrap', () => {
    const f = pcap([
      { timeMs: t0, data: ipv4Udp(1, A_PORT, rtp({ pt: 8, seq: 1, ts: 0xffffff60, payload: Buffer.alloc(160, 0xd5) })) },
      { timeMs: t0 + 20, data: ipv4Udp(1, A_PORT, rtp({ pt: 8, seq: 2, ts: 0, payload: Buffer.alloc(160, 0xc5) })) },
      { timeMs: t0 + 100, data: ipv4Udp(1, A_PORT, rtp({ pt: 8, seq: 9, ts: 5, ssrc: 7, payload: Buffer.alloc(160, 0xaa) })) },
    ]);
    const a = decodeStream(readPcapUdp(f), { dstPort: A_PORT });
    expect(a.samples).toHaveLength(960);
    expect(a.samples[159]).toBe(8);
    expect(a.samples[160]).toBe(264);
    expect(a.samples[400]).toBe(0);
    expect(a.samples[800]).toBe(32256);
  });

  it('the WAV: RIFF/WAVE, PCM 16-bit mono 8 kHz, the samples little-endian', () => {
    const s = new Int16Array([0, 1, -1, 32767, -32768]);
    const w = wavOf(s);
    expect(w.toString('ascii', 0, 4)).toBe('RIFF');
    expect(w.readUInt32LE(4)).toBe(36 + 10);
    expect(w.toString('ascii', 8, 16)).toBe('WAVEfmt ');
    expect(w.readUInt16LE(20)).toBe(1);
    expect(w.readUInt16LE(22)).toBe(1);
    expect(w.readUInt32LE(24)).toBe(8000);
    expect(w.readUInt32LE(28)).toBe(16000);
    expect(w.readUInt16LE(34)).toBe(16);
    expect(w.toString('ascii', 36, 40)).toBe('data');
    expect(w.readUInt32LE(40)).toBe(10);
    expect([0, 1, 2, 3, 4].map((i) => w.readInt16LE(44 + 2 * i))).toEqual([0, 1, -1, 32767, -32768]);
  });

  it('the beep: 0.3 s of 1 kHz', () => {
    const w = toneWav(300, 1000);
    expect(w.readUInt32LE(40)).toBe(2400 * 2);
    // 1 kHz at 8 kHz: period 8 samples.
    expect(w.readInt16LE(44 + 2 * 2)).toBe(10000);
    expect(w.readInt16LE(44 + 2 * 10)).toBe(10000);
  });
});
