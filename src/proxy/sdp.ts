/**
 * The one thing the edge reads from SDP (RFC 4566): whether an offer asks for
 * video. The body itself is forwarded byte for byte.
 */

/**
 * True when an SDP body has an active video stream: an `m=video` line with a
 * non-zero port (RFC 3264 §5.1: port 0 rejects or disables a stream) whose
 * section is not `a=inactive`. Bodies of another type (or none) → false.
 */
export function offersVideo(contentType: string | undefined, body: Buffer): boolean {
  if (body.length === 0 || !contentType || !/^\s*application\/sdp\b/i.test(contentType)) return false;
  const text = body.toString('latin1');
  if (!/^m=video/im.test(text)) return false;
  let inVideo = false;
  let active = false;
  for (const raw of text.split('\n')) {
    const line = raw.trimEnd();
    if (line.startsWith('m=')) {
      if (inVideo && active) return true;
      const m = /^m=video\s+(\d+)/.exec(line);
      inVideo = m !== null;
      active = m !== null && Number(m[1]) !== 0;
    } else if (inVideo && line === 'a=inactive') {
      active = false;
    }
  }
  return inVideo && active;
}
