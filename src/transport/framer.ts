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
  /**
   * Bytes waiting to be framed are `store[start, end)`. While nothing waits, the
   * incoming chunk itself is the store (no copy); a partial message moves into a
   * buffer of our own that grows by doubling, so a message trickling in byte by
   * byte costs linear, not quadratic, time (slow senders must not amplify CPU).
   */
  private store: Buffer = Buffer.alloc(0);
  private owned = false;
  private start = 0;
  private end = 0;
  /** Bytes from `start` already searched for the end of the header block. */
  private scanned = 0;
  /** Total length of the message at `start` once its header block was read; -1 until then. */
  private total = -1;
  private failed = false;

  constructor(private readonly limits: FramerLimits) {}

  /** Feed bytes; returns every complete event they finish. */
  push(chunk: Buffer): FrameEvent[] {
    if (this.failed) return [];
    this.append(chunk);
    const out: FrameEvent[] = [];
    const store = this.store;
    for (;;) {
      // Keep-alives and stray line ends between messages (RFC 3261 §7.5 allows CRLFs before a start line).
      while (this.end > this.start && (store[this.start] === CR || store[this.start] === LF)) {
        const n = this.end - this.start;
        if (n >= 4 && store[this.start] === CR && store[this.start + 1] === LF && store[this.start + 2] === CR && store[this.start + 3] === LF) {
          out.push({ type: 'ping' });
          this.consume(4);
          continue;
        }
        if (n < 4 && HEADER_END.subarray(0, n).equals(store.subarray(this.start, this.end))) return out; // a ping may be arriving
        this.consume(1);
      }
      const available = this.end - this.start;
      if (available === 0) return out;

      if (this.total < 0) {
        const view = store.subarray(this.start, this.end);
        const end = view.indexOf(HEADER_END, Math.max(0, this.scanned - 3));
        if (end < 0) {
          this.scanned = available;
          if (available > this.limits.maxMessageSize) return this.fail(out, 'header block exceeds the message size limit');
          return out;
        }
        const length = contentLength(view, end);
        if (length === null) return this.fail(out, 'message without a valid Content-Length on a stream transport');
        this.total = end + 4 + length;
        if (this.total > this.limits.maxMessageSize) return this.fail(out, 'message exceeds the message size limit');
      }
      if (available < this.total) return out;
      // Copy so the message owns its bytes (the store is reused, or is a larger shared chunk).
      out.push({ type: 'message', data: Buffer.from(store.subarray(this.start, this.start + this.total)) });
      this.consume(this.total);
    }
  }

  /** Bytes held waiting for the rest of a message. */
  get pending(): number {
    return this.end - this.start;
  }

  private append(chunk: Buffer): void {
    const live = this.end - this.start;
    if (live === 0) {
      this.store = chunk;
      this.owned = false;
      this.start = 0;
      this.end = chunk.length;
      return;
    }
    const need = live + chunk.length;
    if (!this.owned || need > this.store.length) {
      const grown = Buffer.allocUnsafe(Math.max(need, this.owned ? this.store.length * 2 : 0, 4096));
      this.store.copy(grown, 0, this.start, this.end);
      this.store = grown;
      this.owned = true;
      this.start = 0;
      this.end = live;
    } else if (this.end + chunk.length > this.store.length) {
      this.store.copy(this.store, 0, this.start, this.end);
      this.start = 0;
      this.end = live;
    }
    chunk.copy(this.store, this.end);
    this.end += chunk.length;
  }

  private consume(n: number): void {
    this.start += n;
    this.scanned = 0;
    this.total = -1;
    if (this.start >= this.end) {
      // Nothing waits: drop the store (an owned one may be large; a chunk must not be pinned).
      this.store = Buffer.alloc(0);
      this.owned = false;
      this.start = 0;
      this.end = 0;
    }
  }

  private fail(out: FrameEvent[], reason: string): FrameEvent[] {
    this.failed = true;
    this.store = Buffer.alloc(0);
    this.owned = false;
    this.start = 0;
    this.end = 0;
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
