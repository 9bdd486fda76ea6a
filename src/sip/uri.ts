import {
  isHeaderChar,
  isHostChar,
  isParamChar,
  isPasswordChar,
  isUserChar,
  parseDigits,
  percentDecode,
  percentEncode,
} from './grammar.js';
import type { SipUri } from './message.js';

function isSchemeChar(c: number, first: boolean): boolean {
  const l = c | 0x20;
  if (l >= 0x61 && l <= 0x7a) return true;
  if (first) return false;
  return (c >= 0x30 && c <= 0x39) || c === 0x2b || c === 0x2d || c === 0x2e;
}

// 'sip' / 'sips' in any case, without allocating; null for another scheme.
function sipScheme(text: string, colon: number): 'sip' | 'sips' | null {
  if (colon !== 3 && colon !== 4) return null;
  if ((text.charCodeAt(0) | 0x20) !== 0x73 || (text.charCodeAt(1) | 0x20) !== 0x69 || (text.charCodeAt(2) | 0x20) !== 0x70) return null;
  if (colon === 3) return 'sip';
  return (text.charCodeAt(3) | 0x20) === 0x73 ? 'sips' : null;
}

function isHexOrColon(c: number): boolean {
  const l = c | 0x20;
  return (c >= 0x30 && c <= 0x39) || (l >= 0x61 && l <= 0x66) || c === 0x3a || c === 0x2e;
}

// Characters that never appear raw in an absoluteURI (RFC 3261 §25.1 / RFC 2396 §2.4.3).
function isOpaqueChar(c: number): boolean {
  return c > 0x20 && c !== 0x7f && c !== 0x3c && c !== 0x3e && c !== 0x22;
}

function otherScheme(scheme: string, text: string, restStart: number): SipUri | null {
  const n = text.length;
  if (restStart >= n) return null;
  for (let i = restStart; i < n; i++) if (!isOpaqueChar(text.charCodeAt(i))) return null;
  return { scheme, user: null, password: null, host: '', port: null, params: new Map(), headers: null, raw: text };
}

/**
 * Parses a SIP or SIPS URI (RFC 3261 §19.1.1, grammar §25.1):
 * `sip:user:password@host:port;uri-parameters?headers`.
 *
 * @remarks
 * The user part ends at the first '@', so user-unreserved characters such as
 * ';' and '?' stay in it (RFC 4475 §3.1.1.9). User, password and parameter
 * names/values have %HH escapes resolved (§19.1.4 compares them unescaped);
 * parameter names and the host are lower-cased; `headers` is kept raw.
 * Another scheme (tel:, http:, urn: …) yields `{scheme, host: '', raw}` when
 * it is a syntactically plausible absoluteURI. Returns null when malformed.
 */
export function parseUri(text: string): SipUri | null {
  const n = text.length;
  const colon = text.indexOf(':');
  if (colon <= 0) return null;
  for (let i = 0; i < colon; i++) if (!isSchemeChar(text.charCodeAt(i), i === 0)) return null;
  const scheme = sipScheme(text, colon);
  if (scheme === null) return otherScheme(text.slice(0, colon).toLowerCase(), text, colon + 1);

  let i = colon + 1;
  let user: string | null = null;
  let password: string | null = null;
  const at = text.indexOf('@', i);
  if (at >= 0) {
    let pw = -1;
    for (let j = i; j < at; j++) {
      const c = text.charCodeAt(j);
      if (c === 0x3a && pw < 0) {
        pw = j;
        continue;
      }
      if (pw < 0 ? !isUserChar(c) : !isPasswordChar(c)) return null;
    }
    const userEnd = pw < 0 ? at : pw;
    if (userEnd === i) return null;
    user = percentDecode(text.slice(i, userEnd));
    if (user === null) return null;
    if (pw >= 0) {
      password = percentDecode(text.slice(pw + 1, at));
      if (password === null) return null;
    }
    i = at + 1;
  }

  let host: string;
  if (i < n && text.charCodeAt(i) === 0x5b) {
    // IPv6reference = "[" IPv6address "]" (RFC 3261 §25.1)
    const close = text.indexOf(']', i);
    if (close < 0 || close === i + 1) return null;
    for (let j = i + 1; j < close; j++) if (!isHexOrColon(text.charCodeAt(j))) return null;
    const firstColon = text.indexOf(':', i);
    if (firstColon < 0 || firstColon > close) return null;
    host = text.slice(i, close + 1).toLowerCase();
    i = close + 1;
  } else {
    const hs = i;
    let upper = false;
    for (; i < n; i++) {
      const c = text.charCodeAt(i);
      if (!isHostChar(c)) break;
      if (c >= 0x41 && c <= 0x5a) upper = true;
    }
    if (i === hs) return null;
    host = upper ? text.slice(hs, i).toLowerCase() : text.slice(hs, i);
  }

  let port: number | null = null;
  if (i < n && text.charCodeAt(i) === 0x3a) {
    const ps = i + 1;
    i = ps;
    while (i < n && text.charCodeAt(i) >= 0x30 && text.charCodeAt(i) <= 0x39) i++;
    port = parseDigits(text.slice(ps, i), 65535);
    if (port === null) return null;
  }

  const params = new Map<string, string | null>();
  while (i < n && text.charCodeAt(i) === 0x3b) {
    const ps = i + 1;
    let eq = -1;
    i = ps;
    while (i < n) {
      const c = text.charCodeAt(i);
      if (c === 0x3d && eq < 0) eq = i;
      else if (!isParamChar(c)) break;
      i++;
    }
    const nameEnd = eq < 0 ? i : eq;
    if (nameEnd === ps || (eq >= 0 && eq + 1 === i)) return null;
    const name = percentDecode(text.slice(ps, nameEnd));
    if (name === null) return null;
    let value: string | null = null;
    if (eq >= 0) {
      value = percentDecode(text.slice(eq + 1, i));
      if (value === null) return null;
    }
    const key = name.toLowerCase();
    if (!params.has(key)) params.set(key, value);
  }

  let headers: string | null = null;
  if (i < n && text.charCodeAt(i) === 0x3f) {
    const hs = i + 1;
    i = hs;
    while (i < n && isHeaderChar(text.charCodeAt(i))) i++;
    if (i === hs) return null;
    headers = text.slice(hs, i);
  }
  if (i !== n) return null;

  return { scheme, user, password, host, port, params, headers, raw: text };
}

function userSafe(c: number): boolean {
  return isUserChar(c);
}

function passwordSafe(c: number): boolean {
  return isPasswordChar(c);
}

function paramSafe(c: number): boolean {
  return isParamChar(c);
}

/**
 * Serialises a URI. SIP/SIPS URIs are rebuilt from their fields (escaping
 * what RFC 3261 §25.1 does not allow raw), so edits to `params` show; other
 * schemes return `raw`.
 */
export function formatUri(u: SipUri): string {
  if (u.scheme !== 'sip' && u.scheme !== 'sips') return u.raw;
  let s = u.scheme + ':';
  if (u.user !== null) {
    s += percentEncode(u.user, userSafe);
    if (u.password !== null) s += ':' + percentEncode(u.password, passwordSafe);
    s += '@';
  }
  s += u.host;
  if (u.port !== null) s += ':' + u.port;
  for (const [name, value] of u.params) {
    s += ';' + percentEncode(name, paramSafe);
    if (value !== null) s += '=' + percentEncode(value, paramSafe);
  }
  if (u.headers !== null) s += '?' + u.headers;
  return s;
}

/**
 * The address-of-record form of a URI: RFC 3261 §10.3 step 5 — every URI
 * parameter removed, escapes resolved (`scheme:user@host[:port]`, host
 * lower-cased). Other schemes keep their raw text with the scheme lower-cased.
 */
export function aorOf(u: SipUri): string {
  if (u.scheme !== 'sip' && u.scheme !== 'sips') return u.scheme + u.raw.slice(u.raw.indexOf(':'));
  let s = u.scheme + ':';
  if (u.user !== null) s += u.user + '@';
  s += u.host;
  if (u.port !== null) s += ':' + u.port;
  return s;
}
