import { isTokenChar, isWordChar, parseDigits } from './grammar.js';
import { canonicalHeaderName, knownHeaderAt, parseCSeq, parseNameAddr, parseVia, splitHeaderList } from './headers.js';
import type { RawHeader, SipMessage, SipRequest, SipResponse } from './message.js';
import { parseUri } from './uri.js';

/** Bounds applied to every message before and while it is parsed. */
export interface ParseLimits {
  /** Largest whole message, bytes. @default 65535 */
  maxMessageSize: number;
  /** Most header fields (continuation lines not counted). @default 128 */
  maxHeaders: number;
  /** Longest single line (start line or physical header line), characters. @default 8192 */
  maxLineLength: number;
}

/** The limits used when none are passed. */
export const DEFAULT_LIMITS: ParseLimits = Object.freeze({
  maxMessageSize: 65535,
  maxHeaders: 128,
  maxLineLength: 8192,
});

/** Outcome of {@link parseMessage}; bad wire input is a value, never an exception. */
export type ParseResult =
  | { ok: true; msg: SipMessage }
  | {
      ok: false;
      /** Short machine-readable prefix ('version:', 'size:', 'header:', …) then detail. */
      reason: string;
      /**
       * Set when the request line, the header block and at least one Via were
       * read, so a 400 (or, for reason 'version…', a 505) can be formed from it.
       * Its headers are as received; From/To/Call-ID/CSeq may be missing or bad.
       */
      request?: SipRequest;
    };

const CRLFCRLF = Buffer.from('\r\n\r\n', 'latin1');
const LFLF = Buffer.from('\n\n', 'latin1');
// Shared, zero-length: cannot be written through.
const EMPTY_BODY = Buffer.alloc(0);
const MAX_UINT32 = 0xffffffff;

function fail(reason: string, request?: SipRequest): ParseResult {
  return request === undefined ? { ok: false, reason } : { ok: false, reason, request };
}

// SIP-Version = "SIP" "/" 1*DIGIT "." 1*DIGIT, case-insensitive (RFC 3261 §7.1).
// Returns 1 for SIP/2.0, 0 for another well-formed version, -1 when malformed.
function sipVersion(s: string): number {
  const n = s.length;
  if (n < 7) return -1;
  if ((s.charCodeAt(0) | 0x20) !== 0x73 || (s.charCodeAt(1) | 0x20) !== 0x69 || (s.charCodeAt(2) | 0x20) !== 0x70) return -1;
  if (s.charCodeAt(3) !== 0x2f) return -1;
  let dot = -1;
  for (let i = 4; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x2e && dot < 0) dot = i;
    else if (c < 0x30 || c > 0x39) return -1;
  }
  if (dot <= 4 || dot === n - 1) return -1;
  return n === 7 && s.charCodeAt(4) === 0x32 && s.charCodeAt(6) === 0x30 ? 1 : 0;
}

function isWs(c: number): boolean {
  return c === 0x20 || c === 0x09;
}

// callid = word [ "@" word ] (RFC 3261 §25.1)
function isCallId(s: string): boolean {
  const n = s.length;
  if (n === 0) return false;
  let at = -1;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c === 0x40 && at < 0) at = i;
    else if (!isWordChar(c)) return false;
  }
  return at !== 0 && at !== n - 1;
}

function isStatusLine(buf: Buffer, at: number): boolean {
  return (
    buf.length >= at + 4 &&
    (buf[at] | 0x20) === 0x73 &&
    (buf[at + 1] | 0x20) === 0x69 &&
    (buf[at + 2] | 0x20) === 0x70 &&
    buf[at + 3] === 0x2f
  );
}

/**
 * Parses one whole SIP message (RFC 3261 §7): a UDP datagram, a WebSocket
 * frame, or a stream frame cut by Content-Length. Never throws.
 *
 * @remarks
 * Only the start line is parsed and the header block split into unfolded
 * lines eagerly; the mandatory headers (Via, From, To, Call-ID, CSeq — §8.1.1,
 * for requests and responses alike) are then validated, because nothing can
 * be done with a message lacking them. Everything else is left raw for the
 * lazy helpers in headers.ts. `body` is a view into `buf`, not a copy.
 */
export function parseMessage(buf: Buffer, limits: ParseLimits = DEFAULT_LIMITS): ParseResult {
  // Typed as Buffer, but checked as unknown: JS callers and tests may pass anything.
  const input: unknown = buf;
  if (!(input instanceof Uint8Array)) return fail('input: not a Buffer');
  try {
    const b = Buffer.isBuffer(input) ? input : Buffer.from(input.buffer, input.byteOffset, input.byteLength);
    return parse(b, limits);
  } catch (err) {
    // Defensive: the code paths above are total; this keeps the contract if one is not.
    return fail(`internal: ${err instanceof Error ? err.message : 'parser error'}`);
  }
}

function parse(buf: Buffer, limits: ParseLimits): ParseResult {
  const total = buf.length;
  if (total > limits.maxMessageSize) {
    return fail(`size: message of ${total} bytes exceeds maxMessageSize ${limits.maxMessageSize}`);
  }
  // RFC 3261 §7.5: CRLFs before the start-line are ignored (stream keep-alives).
  let start = 0;
  while (start < total && (buf[start] === 0x0d || buf[start] === 0x0a)) start++;
  if (start === total) return fail('empty: no start line');

  let headEnd = buf.indexOf(CRLFCRLF, start);
  let bodyStart: number;
  if (headEnd >= 0) {
    bodyStart = headEnd + 4;
  } else {
    // Tolerate bare-LF line ends (never sent by a conformant peer, seen in hand-made tests).
    headEnd = buf.indexOf(LFLF, start);
    if (headEnd >= 0) {
      bodyStart = headEnd + 2;
    } else if (buf[total - 1] === 0x0a) {
      // A datagram whose last header line is complete but lacks the empty line
      // (§7 requires it): read it as headers without a body rather than drop it
      // unanswered (RFC 4475 §3.1.2.15's message is sent this way).
      headEnd = total > start + 1 && buf[total - 2] === 0x0d ? total - 2 : total - 1;
      bodyStart = total;
    } else {
      return fail('framing: no empty line ends the header block');
    }
  }

  const text = buf.toString('utf8', start, headEnd);
  const n = text.length;
  const maxLine = limits.maxLineLength;

  // ---- start line
  let nl = text.indexOf('\n');
  let lineEnd = nl < 0 ? n : nl;
  let pos = nl < 0 ? n : nl + 1;
  if (lineEnd > 0 && text.charCodeAt(lineEnd - 1) === 0x0d) lineEnd--;
  if (lineEnd > maxLine) return fail(`line: start line of ${lineEnd} characters exceeds maxLineLength ${maxLine}`);
  const startLine = text.slice(0, lineEnd);
  if (startLine.indexOf('\r') >= 0) return fail('start-line: bare CR');

  let isRequest: boolean;
  let method = '';
  let uri = '';
  let version = 1;
  let status = 0;
  let reason = '';
  if (isStatusLine(buf, start)) {
    // Status-Line = SIP-Version SP Status-Code SP Reason-Phrase (§7.2)
    isRequest = false;
    const sp = startLine.indexOf(' ');
    if (sp < 0) return fail('status-line: malformed');
    if (sipVersion(startLine.slice(0, sp)) !== 1) return fail(`version: ${startLine.slice(0, sp)} not supported`);
    const code = parseDigits(startLine.slice(sp + 1, sp + 4), 999);
    if (code === null || code < 100 || code > 699) return fail('status-line: status code is not 3 digits in 100-699');
    if (startLine.length > sp + 4 && startLine.charCodeAt(sp + 4) !== 0x20) {
      return fail('status-line: status code is not 3 digits in 100-699');
    }
    status = code;
    reason = startLine.length > sp + 5 ? startLine.slice(sp + 5) : '';
  } else {
    // Request-Line = Method SP Request-URI SP SIP-Version (§7.1): exactly two single SPs.
    isRequest = true;
    const sp1 = startLine.indexOf(' ');
    const sp2 = startLine.lastIndexOf(' ');
    if (sp1 <= 0 || sp2 <= sp1) return fail('request-line: malformed');
    for (let i = 0; i < sp1; i++) {
      if (!isTokenChar(startLine.charCodeAt(i))) return fail('request-line: method is not a token');
    }
    method = startLine.slice(0, sp1);
    uri = startLine.slice(sp1 + 1, sp2);
    version = sipVersion(startLine.slice(sp2 + 1));
  }

  // ---- header lines (§7.3): unfold, canonicalise names, keep values raw
  const headers: RawHeader[] = [];
  const maxHeaders = limits.maxHeaders;
  let last: RawHeader | null = null;
  let cr = -1; // next '\r' at or after pos, cached so bare-LF input stays linear
  while (pos < n) {
    nl = text.indexOf('\n', pos);
    let end = nl < 0 ? n : nl;
    const next = nl < 0 ? n : nl + 1;
    if (end > pos && text.charCodeAt(end - 1) === 0x0d) end--;
    if (end - pos > maxLine) return fail(`line: header line of ${end - pos} characters exceeds maxLineLength ${maxLine}`);
    if (cr < pos) {
      cr = text.indexOf('\r', pos);
      if (cr < 0) cr = n;
    }
    if (cr < end) return fail('header: bare CR inside a header line');

    const c = text.charCodeAt(pos);
    if (isWs(c)) {
      // RFC 3261 §7.3.1: a line starting with whitespace continues the previous
      // header; the fold (LWS) is replaced by a single SP.
      if (last === null) return fail('header: continuation line before the first header');
      let a = pos;
      let b = end;
      while (a < b && isWs(text.charCodeAt(a))) a++;
      while (b > a && isWs(text.charCodeAt(b - 1))) b--;
      if (b > a) last.value = last.value.length === 0 ? text.slice(a, b) : last.value + ' ' + text.slice(a, b);
    } else {
      if (end === pos) return fail('header: empty line inside the header block');
      if (headers.length >= maxHeaders) return fail(`headers: more than maxHeaders ${maxHeaders} header fields`);
      const colon = text.indexOf(':', pos);
      if (colon < 0 || colon >= end) return fail('header: line without a colon');
      let ne = colon;
      while (ne > pos && isWs(text.charCodeAt(ne - 1))) ne--;
      if (ne === pos) return fail('header: empty name');
      let name = knownHeaderAt(text, pos, ne);
      if (name === undefined) {
        for (let i = pos; i < ne; i++) {
          if (!isTokenChar(text.charCodeAt(i))) return fail('header: name is not a token');
        }
        name = canonicalHeaderName(text.slice(pos, ne));
      }
      let vs = colon + 1;
      while (vs < end && isWs(text.charCodeAt(vs))) vs++;
      let ve = end;
      while (ve > vs && isWs(text.charCodeAt(ve - 1))) ve--;
      last = { name, value: text.slice(vs, ve) };
      headers.push(last);
    }
    pos = next;
  }

  // ---- mandatory headers (§8.1.1; §20 table), found in one pass
  let vias = 0;
  let froms = 0;
  let tos = 0;
  let callIds = 0;
  let cseqs = 0;
  let from = '';
  let to = '';
  let callId = '';
  let cseqValue = '';
  let contentLength = -1;
  let lengthError: string | null = null;
  for (let h = 0; h < headers.length; h++) {
    const hdr = headers[h];
    switch (hdr.name) {
      case 'via':
        vias++;
        break;
      case 'from':
        if (froms++ === 0) from = hdr.value;
        break;
      case 'to':
        if (tos++ === 0) to = hdr.value;
        break;
      case 'call-id':
        if (callIds++ === 0) callId = hdr.value;
        break;
      case 'cseq':
        if (cseqs++ === 0) cseqValue = hdr.value;
        break;
      case 'content-length': {
        // RFC 4475 §3.1.2.3 (negative), §3.3.9 (several differing values): 400.
        const v = parseDigits(hdr.value, MAX_UINT32);
        if (v === null) lengthError = 'header: malformed Content-Length';
        else if (contentLength >= 0 && v !== contentLength) lengthError = 'header: conflicting Content-Length values';
        else contentLength = v;
        break;
      }
      default:
        break;
    }
  }

  // What a 400/505 can be built from: the request line and headers as received.
  const partial: SipRequest | undefined =
    isRequest && vias > 0 ? { kind: 'request', method, uri, headers, body: EMPTY_BODY } : undefined;

  if (isRequest) {
    // RFC 3261 §21.5.6: a version the server cannot handle is answered 505.
    if (version === 0) return fail(`version: ${startLine.slice(startLine.lastIndexOf(' ') + 1)} not supported`, partial);
    if (version < 0) return fail('request-line: malformed SIP-Version', partial);
    const ruri = parseUri(uri);
    if (ruri === null) return fail('request-line: malformed Request-URI', partial);
    // §19.1.1 table: headers are not allowed in a Request-URI (RFC 4475 §3.1.2.11).
    if (ruri.headers !== null) return fail('request-line: Request-URI carries headers', partial);
  }

  if (lengthError !== null) return fail(lengthError, partial);
  if (vias === 0) return fail('header: missing Via', partial);
  if (froms !== 1) return fail(froms === 0 ? 'header: missing From' : 'header: more than one From', partial);
  if (tos !== 1) return fail(tos === 0 ? 'header: missing To' : 'header: more than one To', partial);
  if (callIds !== 1) return fail(callIds === 0 ? 'header: missing Call-ID' : 'header: more than one Call-ID', partial);
  if (cseqs !== 1) return fail(cseqs === 0 ? 'header: missing CSeq' : 'header: more than one CSeq', partial);

  for (let h = 0; h < headers.length; h++) {
    if (headers[h].name !== 'via') continue;
    const items = splitHeaderList(headers[h].value);
    if (items.length === 0) return fail('header: empty Via', partial);
    for (let k = 0; k < items.length; k++) {
      if (parseVia(items[k]) === null) return fail('header: malformed Via', partial);
    }
  }
  if (parseNameAddr(from) === null) return fail('header: malformed From', partial);
  if (parseNameAddr(to) === null) return fail('header: malformed To', partial);
  if (!isCallId(callId)) return fail('header: malformed Call-ID', partial);
  const cseq = parseCSeq(cseqValue);
  if (cseq === null) return fail('header: malformed CSeq', partial);
  // §8.1.1.5 / §20.16: the CSeq method matches the request method (RFC 4475 §3.1.2.17-18).
  if (isRequest && cseq.method !== method) return fail('header: CSeq method does not match the request method', partial);

  // ---- body (§18.3, §20.14)
  const available = total - bodyStart;
  let body: Buffer;
  if (contentLength < 0) {
    body = available > 0 ? buf.subarray(bodyStart) : EMPTY_BODY;
  } else if (contentLength > available) {
    // §18.3: a truncated datagram; a request SHOULD get a 400, a response is discarded.
    return fail(`body: Content-Length ${contentLength} exceeds the ${available} bytes available`, partial);
  } else {
    // Extra octets after the body are discarded (RFC 4475 §3.1.1.8).
    body = contentLength === 0 ? EMPTY_BODY : buf.subarray(bodyStart, bodyStart + contentLength);
  }

  if (isRequest) {
    if (partial === undefined) return fail('header: missing Via');
    // Every check passed: the partial request is the whole request.
    partial.body = body;
    return { ok: true, msg: partial };
  }
  const res: SipResponse = { kind: 'response', status, reason, headers, body };
  return { ok: true, msg: res };
}
