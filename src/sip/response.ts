import { displayHeaderName, parseNameAddr } from './headers.js';
import type { SipMessage, SipRequest } from './message.js';

/** Extras for {@link buildResponse}. */
export interface ResponseOptions {
  /** To-tag to add when the request's To has none and the status is above 100 (RFC 3261 §8.2.6.2). */
  toTag?: string;
  /** Further header lines, written in order after CSeq, names as given. */
  headers?: Array<[string, string]>;
  /** Message body; Content-Length is computed from its byte length. */
  body?: Buffer | string;
  /** Replaces the request's Via values, one line each (e.g. the top Via with received/rport set). */
  vias?: string[];
}

const CRLF = '\r\n';
const EMPTY = Buffer.alloc(0);
const TAG_TEXT = /tag/i;

function hasTag(to: string): boolean {
  // Fast path: without the letters "tag" anywhere there can be no tag parameter.
  if (!TAG_TEXT.test(to)) return false;
  const na = parseNameAddr(to);
  // A malformed To is echoed untouched rather than grown a tag.
  return na === null || na.params.has('tag');
}

function assemble(head: string, body: Buffer | string | undefined): Buffer {
  const b = body === undefined ? EMPTY : typeof body === 'string' ? Buffer.from(body, 'utf8') : body;
  head += 'Content-Length: ' + b.length + CRLF + CRLF;
  if (b.length === 0) return Buffer.from(head, 'utf8');
  const headLen = Buffer.byteLength(head, 'utf8');
  const out = Buffer.allocUnsafe(headLen + b.length);
  out.write(head, 0, 'utf8');
  b.copy(out, headLen);
  return out;
}

/**
 * Builds a response to `req` (RFC 3261 §8.2.6): copies every Via (in order,
 * one line per request Via line, or `opts.vias`), From, To (with `;tag=`
 * appended when it has none, `status > 100` and `opts.toTag` is given),
 * Call-ID and CSeq; then `opts.headers` in order; then Content-Length, always.
 * Headers missing from a partially parsed request are skipped. CRLF line ends.
 */
export function buildResponse(req: SipRequest, status: number, reason: string, opts?: ResponseOptions): Buffer {
  let head = 'SIP/2.0 ' + status + ' ' + reason + CRLF;
  const vias = opts?.vias;
  let from: string | undefined;
  let to: string | undefined;
  let callId: string | undefined;
  let cseq: string | undefined;
  const hs = req.headers;
  for (let i = 0; i < hs.length; i++) {
    const h = hs[i];
    switch (h.name) {
      case 'via':
        if (vias === undefined) head += 'Via: ' + h.value + CRLF;
        break;
      case 'from':
        from ??= h.value;
        break;
      case 'to':
        to ??= h.value;
        break;
      case 'call-id':
        callId ??= h.value;
        break;
      case 'cseq':
        cseq ??= h.value;
        break;
      default:
        break;
    }
  }
  if (vias !== undefined) for (let i = 0; i < vias.length; i++) head += 'Via: ' + vias[i] + CRLF;
  if (from !== undefined) head += 'From: ' + from + CRLF;
  if (to !== undefined) {
    const tag = opts?.toTag;
    head += tag !== undefined && status > 100 && !hasTag(to) ? 'To: ' + to + ';tag=' + tag + CRLF : 'To: ' + to + CRLF;
  }
  if (callId !== undefined) head += 'Call-ID: ' + callId + CRLF;
  if (cseq !== undefined) head += 'CSeq: ' + cseq + CRLF;
  const extra = opts?.headers;
  if (extra !== undefined) for (let i = 0; i < extra.length; i++) head += extra[i][0] + ': ' + extra[i][1] + CRLF;
  return assemble(head, opts?.body);
}

/**
 * Serialises a message to wire bytes: start line, every header line in order
 * under its conventional spelling (`call-id` → `Call-ID`), then a
 * Content-Length computed from `body` (any Content-Length header in `headers`
 * is replaced, so the framing is always right), then the body.
 */
export function serializeMessage(msg: SipMessage): Buffer {
  let head = msg.kind === 'request' ? msg.method + ' ' + msg.uri + ' SIP/2.0' + CRLF : 'SIP/2.0 ' + msg.status + ' ' + msg.reason + CRLF;
  const hs = msg.headers;
  for (let i = 0; i < hs.length; i++) {
    const h = hs[i];
    if (h.name === 'content-length') continue;
    head += displayHeaderName(h.name) + ': ' + h.value + CRLF;
  }
  return assemble(head, msg.body);
}
