/**
 * Edits of a parsed message, as a proxy makes them before forwarding
 * (RFC 3261 §16.6: copy, then rewrite the Request-URI, Max-Forwards, Route,
 * Record-Route and Via). Pure: no I/O. Header names are canonical lower-case
 * (message.ts); serializeMessage() turns the result back into bytes.
 */
import { splitHeaderList } from './headers.js';
import type { RawHeader, SipMessage, SipRequest, SipResponse } from './message.js';

/** A copy whose header list can be edited without touching the original (the body is shared, read-only). */
export function cloneRequest(req: SipRequest): SipRequest {
  return { kind: 'request', method: req.method, uri: req.uri, headers: req.headers.map(copyHeader), body: req.body };
}

/** A copy of a response whose header list can be edited. */
export function cloneResponse(res: SipResponse): SipResponse {
  return { kind: 'response', status: res.status, reason: res.reason, headers: res.headers.map(copyHeader), body: res.body };
}

function copyHeader(h: RawHeader): RawHeader {
  return { name: h.name, value: h.value };
}

/** Removes every `name` header line; returns how many went. */
export function removeHeaders(msg: SipMessage, name: string): number {
  const before = msg.headers.length;
  msg.headers = msg.headers.filter((h) => h.name !== name);
  return before - msg.headers.length;
}

/** Removes the header lines for which `drop` is true. */
export function removeHeadersWhere(msg: SipMessage, name: string, drop: (value: string) => boolean): void {
  msg.headers = msg.headers.filter((h) => h.name !== name || !drop(h.value));
}

/**
 * Adds header lines above every other line of that name (or, when there is
 * none, after the Via lines): `values[0]` ends up topmost.
 */
export function prependHeaders(msg: SipMessage, name: string, values: readonly string[]): void {
  if (values.length === 0) return;
  const hs = msg.headers;
  let at = hs.findIndex((h) => h.name === name);
  if (at < 0) {
    at = 0;
    for (let i = 0; i < hs.length; i++) if (hs[i].name === 'via') at = i + 1;
  }
  hs.splice(at, 0, ...values.map((value) => ({ name, value })));
}

/** Sets the first `name` line to `value` (appends one when absent) and removes any other. */
export function setHeader(msg: SipMessage, name: string, value: string): void {
  const hs = msg.headers;
  const first = hs.findIndex((h) => h.name === name);
  if (first < 0) {
    hs.push({ name, value });
    return;
  }
  hs[first] = { name, value };
  msg.headers = hs.filter((h, i) => h.name !== name || i === first);
}

/**
 * Removes the first element of a list-valued header (Via, Route; RFC 3261
 * §7.3.1: `a, b` on one line ≡ two lines) and returns it, or undefined when
 * there is none. Other elements of the same line stay, in order.
 */
export function shiftListValue(msg: SipMessage, name: string): string | undefined {
  const hs = msg.headers;
  for (let i = 0; i < hs.length; i++) {
    if (hs[i].name !== name) continue;
    const items = splitHeaderList(hs[i].value);
    if (items.length === 0) {
      hs.splice(i, 1);
      i--;
      continue;
    }
    const first = items.shift() as string;
    if (items.length === 0) hs.splice(i, 1);
    else hs[i] = { name, value: items.join(', ') };
    return first;
  }
  return undefined;
}

/** Replaces the first element of a list-valued header (the top Via after received/rport are set). */
export function replaceFirstListValue(msg: SipMessage, name: string, value: string): void {
  const hs = msg.headers;
  for (let i = 0; i < hs.length; i++) {
    if (hs[i].name !== name) continue;
    const items = splitHeaderList(hs[i].value);
    if (items.length <= 1) hs[i] = { name, value };
    else hs[i] = { name, value: [value, ...items.slice(1)].join(', ') };
    return;
  }
}
