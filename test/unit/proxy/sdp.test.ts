import { describe, expect, it } from 'vitest';
import { offersVideo } from '../../../src/proxy/sdp.js';

describe('offersVideo (RFC 4566, RFC 3264 §5.1)', () => {
  const body = (s: string): Buffer => Buffer.from(s.replace(/\n/g, '\r\n'));
  const base = 'v=0\no=- 1 1 IN IP4 192.0.2.1\ns=-\nc=IN IP4 192.0.2.1\nt=0 0\nm=audio 4000 RTP/AVP 0\n';
  it('is true for an m=video line with a non-zero port', () => {
    expect(offersVideo('application/sdp', body(base + 'm=video 4002 RTP/AVP 96\na=rtpmap:96 VP8/90000\n'))).toBe(true);
  });
  it('is false for port 0, a=inactive, audio only, or another content type', () => {
    expect(offersVideo('application/sdp', body(base + 'm=video 0 RTP/AVP 96\n'))).toBe(false);
    expect(offersVideo('application/sdp', body(base + 'm=video 4002 RTP/AVP 96\na=inactive\nm=audio 4004 RTP/AVP 0\n'))).toBe(false);
    expect(offersVideo('application/sdp', body(base))).toBe(false);
    expect(offersVideo('text/plain', body(base + 'm=video 4002 RTP/AVP 96\n'))).toBe(false);
    expect(offersVideo(undefined, Buffer.alloc(0))).toBe(false);
  });
});
