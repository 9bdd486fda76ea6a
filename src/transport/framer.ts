/**
 * Cuts a TCP/TLS byte stream into SIP messages by Content-Length (RFC 3261 §18.3)
 * and recognises CRLF keep-alives (RFC 5626 §3.5.1). Pure: no sockets.
 */

const CR = 0x0d;
const LF = 0x0a;
const HEADER_END = Buffer.from('\r\n\r\n');

export type FrameEvent =
  | { type: 'message'; data: Buffer }
  /** A double-CRLF "ping"; the server answers with a single CRLF "pong". */
  | { type: 'ping' }
  /** The stream cannot be framed any more (too large, no Content-Length); close it. */
  | { type: 'error'; reason: string };

export interface FramerLimits {
  maxMessageSize: number;
}

export class StreamFramer {
  private buf: Buffer = Buffer.alloc(0);
  private failed = false;

  constructor(private readonly limits: FramerLimits) {}

  /** Feed bytes; returns every complete event they finish. */
  push(chunk: Buffer): FrameEvent[] {
    if (this.failed) return [];
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    const out: FrameEvent[] = [];
    for (;;) {
      // Keep-alives and stray line ends between messages (RFC 3261 §7.5 allows CRLFs before a start line).
      while (this.buf.length > 0 && (this.buf[0] === CR || this.buf[0] === LF)) {
        if (this.buf.length >= 4 && this.buf.subarray(0, 4).equals(HEADER_END)) {
          out.push({ type: 'ping' });
          this.buf = this.buf.subarray(4);
          continue;
        }
        if (this.buf.length < 4 && HEADER_END.subarray(0, this.buf.length).equals(this.buf)) return out; // a ping may be arriving
        this.buf = this.buf.subarray(1);
      }
      if (this.buf.length === 0) return out;

      const end = this.buf.indexOf(HEADER_END);
      if (end < 0) {
        if (this.buf.length > this.limits.maxMessageSize) return this.fail(out, 'header block exceeds the message size limit');
        return out;
      }
      const length = contentLength(this.buf, end);
      if (length === null) return this.fail(out, 'message without a valid Content-Length on a stream transport');
      const total = end + 4 + length;
      if (total > this.limits.maxMessageSize) return this.fail(out, 'message exceeds the message size limit');
      if (this.buf.length < total) return out;
      // Copy so the message does not pin a larger shared chunk.
      out.push({ type: 'message', data: Buffer.from(this.buf.subarray(0, total)) });
      this.buf = this.buf.subarray(total);
    }
  }

  /** Bytes held waiting for the rest of a message. */
  get pending(): number {
    return this.buf.length;
  }

  private fail(out: FrameEvent[], reason: string): FrameEvent[] {
    this.failed = true;
    this.buf = Buffer.alloc(0);
    out.push({ type: 'error', reason });
    return out;
  }
}

/**
 * Finds Content-Length (or its compact form `l`) in the header block [0, end).
 * Returns null when absent or malformed: on a stream it is mandatory (RFC 3261 §18.3).
 */
export function contentLength(buf: Buffer, end: number): number | null {
  let lineStart = buf.indexOf(LF) + 1; // skip the start line
  if (lineStart <= 0) return null;
  let found: number | null = null;
  while (lineStart > 0 && lineStart < end) {
    let lineEnd = buf.indexOf(LF, lineStart);
    if (lineEnd < 0 || lineEnd > end) lineEnd = end;
    const first = buf[lineStart] | 0x20;
    if (first === 0x63 /* c */ || first === 0x6c /* l */) {
      const colon = buf.indexOf(0x3a, lineStart);
      if (colon > 0 && colon < lineEnd) {
        const name = buf.toString('latin1', lineStart, colon).trim().toLowerCase();
        if (name === 'content-length' || name === 'l') {
          const value = buf.toString('latin1', colon + 1, lineEnd).trim();
          if (!/^\d{1,9}$/.test(value)) return null;
          found = Number(value);
        }
      }
    }
    lineStart = lineEnd + 1;
  }
  return found;
}
