import {
  isGenValueChar,
  isHostChar,
  isTokenChar,
  parseDigits,
  quotedEnd,
  scanToken,
  skipWs,
  unquoteRange,
} from './grammar.js';
import type { ContactList, CSeq, DigestCredentials, NameAddr, SipMessage, Via } from './message.js';
import { parseUri } from './uri.js';

// RFC 3261 §7.3.3 compact forms, plus those registered later (IANA "Header
// Fields" registry): RFC 3841 (a, d, j), RFC 3892 (b), RFC 6665 (o, u),
// RFC 3515 (r), RFC 4028 (x), RFC 8224 (y), RFC 4474 (n).
const COMPACT: ReadonlyArray<[string, string]> = [
  ['a', 'accept-contact'],
  ['b', 'referred-by'],
  ['c', 'content-type'],
  ['d', 'request-disposition'],
  ['e', 'content-encoding'],
  ['f', 'from'],
  ['i', 'call-id'],
  ['j', 'reject-contact'],
  ['k', 'supported'],
  ['l', 'content-length'],
  ['m', 'contact'],
  ['n', 'identity-info'],
  ['o', 'event'],
  ['r', 'refer-to'],
  ['s', 'subject'],
  ['t', 'to'],
  ['u', 'allow-events'],
  ['v', 'via'],
  ['x', 'session-expires'],
  ['y', 'identity'],
];

// Wire spelling of well-known headers; also the display form used when serialising.
const DISPLAY_NAMES = [
  'Via', 'From', 'To', 'Call-ID', 'CSeq', 'Contact', 'Max-Forwards', 'Content-Length',
  'Content-Type', 'Content-Encoding', 'Expires', 'Min-Expires', 'Route', 'Record-Route',
  'Path', 'Supported', 'Require', 'Proxy-Require', 'Unsupported', 'Allow', 'Allow-Events',
  'Accept', 'Accept-Encoding', 'Accept-Language', 'Accept-Contact', 'Reject-Contact',
  'Request-Disposition', 'Authorization', 'Proxy-Authorization', 'WWW-Authenticate',
  'Proxy-Authenticate', 'Authentication-Info', 'User-Agent', 'Server', 'Date', 'Subject',
  'Event', 'Refer-To', 'Referred-By', 'Session-Expires', 'Min-SE', 'Identity', 'Identity-Info',
  'Retry-After', 'Warning', 'Timestamp', 'Organization', 'Priority', 'Reply-To', 'In-Reply-To',
  'Call-Info', 'Alert-Info', 'Error-Info', 'Content-Disposition', 'Content-Language',
  'MIME-Version', 'Service-Route', 'P-Asserted-Identity', 'P-Preferred-Identity',
  'Privacy', 'Reason', 'Security-Client', 'Security-Server', 'Security-Verify',
  'RAck', 'RSeq', 'Flow-Timer', 'Sip-ETag', 'Sip-If-Match', 'Subscription-State',
];

// Exact spellings → canonical (interned) lower-case name: the common case costs one Map hit.
const CANONICAL = new Map<string, string>();
const DISPLAY = new Map<string, string>();
for (const display of DISPLAY_NAMES) {
  const lower = display.toLowerCase();
  CANONICAL.set(display, lower);
  CANONICAL.set(lower, lower);
  CANONICAL.set(display.toUpperCase(), lower);
  DISPLAY.set(lower, display);
}
for (const [short, long] of COMPACT) {
  const canonical = CANONICAL.get(long) ?? long;
  CANONICAL.set(short, canonical);
  CANONICAL.set(short.toUpperCase(), canonical);
  CANONICAL.set(long, canonical);
}

/**
 * Canonical form of a header name: lower-case, compact forms expanded
 * (RFC 3261 §7.3.3: `v` → `via`, `m` → `contact`, …). Header names are
 * case-insensitive (§7.3.1).
 */
export function canonicalHeaderName(name: string): string {
  const hit = CANONICAL.get(name);
  if (hit !== undefined) return hit;
  const lower = name.toLowerCase();
  return CANONICAL.get(lower) ?? lower;
}

// The same spellings bucketed by (length, first char) and matched in place with
// startsWith: on the parser's hot path a known name is neither sliced nor hashed.
const MAX_KNOWN_LENGTH = 31;
const BUCKETS: Array<string[] | null> = new Array<string[] | null>((MAX_KNOWN_LENGTH + 1) * 128).fill(null);
for (const [spelling, canonical] of CANONICAL) {
  if (spelling.length > MAX_KNOWN_LENGTH) continue;
  const key = spelling.length * 128 + spelling.charCodeAt(0);
  const bucket = BUCKETS[key] ?? (BUCKETS[key] = []);
  bucket.push(spelling, canonical);
}

/**
 * Canonical name when `text[start, end)` is spelled exactly as a well-known
 * header (`Via`, `via`, `VIA`, `v`, `Call-ID` …), else undefined. Lets the
 * parser skip validating and lower-casing names it already knows.
 */
export function knownHeaderAt(text: string, start: number, end: number): string | undefined {
  const len = end - start;
  if (len <= 0 || len > MAX_KNOWN_LENGTH) return undefined;
  const bucket = BUCKETS[len * 128 + (text.charCodeAt(start) & 127)];
  if (bucket === null) return undefined;
  for (let i = 0; i < bucket.length; i += 2) if (text.startsWith(bucket[i], start)) return bucket[i + 1];
  return undefined;
}

/** Conventional wire spelling of a canonical header name (`call-id` → `Call-ID`). */
export function displayHeaderName(canonical: string): string {
  const hit = DISPLAY.get(canonical);
  if (hit !== undefined) return hit;
  let out = '';
  let up = true;
  for (let i = 0; i < canonical.length; i++) {
    const ch = canonical[i];
    out += up ? ch.toUpperCase() : ch;
    up = ch === '-';
  }
  return out;
}

/** Value of the first header line called `name` (canonical lower-case), or undefined. */
export function getHeader(msg: SipMessage, name: string): string | undefined {
  const hs = msg.headers;
  for (let i = 0; i < hs.length; i++) if (hs[i].name === name) return hs[i].value;
  return undefined;
}

/** Values of every header line called `name` (canonical lower-case), in wire order. */
export function getHeaders(msg: SipMessage, name: string): string[] {
  const out: string[] = [];
  const hs = msg.headers;
  for (let i = 0; i < hs.length; i++) if (hs[i].name === name) out.push(hs[i].value);
  return out;
}

function pushTrimmed(out: string[], s: string, start: number, end: number): void {
  while (start < end && (s.charCodeAt(start) === 0x20 || s.charCodeAt(start) === 0x09)) start++;
  while (end > start && (s.charCodeAt(end - 1) === 0x20 || s.charCodeAt(end - 1) === 0x09)) end--;
  if (end > start) out.push(s.slice(start, end));
}

/**
 * Splits a list-valued header (RFC 3261 §7.3.1: `a, b` ≡ two header lines) on
 * commas outside quoted-strings and `<…>`; trims each element and drops empty
 * ones. Not for auth headers, whose commas separate parameters.
 */
export function splitHeaderList(value: string): string[] {
  const out: string[] = [];
  const n = value.length;
  if (value.indexOf(',') < 0) {
    pushTrimmed(out, value, 0, n);
    return out;
  }
  let start = 0;
  let inQuote = false;
  let inAngle = false;
  for (let i = 0; i < n; i++) {
    const c = value.charCodeAt(i);
    if (inQuote) {
      if (c === 0x5c) i++;
      else if (c === 0x22) inQuote = false;
    } else if (c === 0x22) {
      inQuote = true;
    } else if (c === 0x3c) {
      inAngle = true;
    } else if (c === 0x3e) {
      inAngle = false;
    } else if (c === 0x2c && !inAngle) {
      pushTrimmed(out, value, start, i);
      start = i + 1;
    }
  }
  pushTrimmed(out, value, start, n);
  return out;
}

/** Every element of every `name` header line, comma-split (Via, Contact, Route, Path, Supported, Allow …). */
export function getListValues(msg: SipMessage, name: string): string[] {
  const hs = msg.headers;
  let out: string[] | null = null;
  for (let i = 0; i < hs.length; i++) {
    if (hs[i].name !== name) continue;
    const items = splitHeaderList(hs[i].value);
    if (out === null) out = items;
    else for (const item of items) out.push(item);
  }
  return out ?? [];
}

// Parses `*( SEMI generic-param )` from `s[i…]` into `out` (names lower-cased,
// quoted values kept with their quotes; the first of duplicate names wins).
// SEMI and EQUAL allow whitespace around them (§25.1). False when malformed.
function parseGenericParams(s: string, i: number, out: Map<string, string | null>): boolean {
  const n = s.length;
  for (;;) {
    i = skipWs(s, i);
    if (i >= n) return true;
    if (s.charCodeAt(i) !== 0x3b) return false;
    i = skipWs(s, i + 1);
    const ne = scanToken(s, i);
    if (ne === i) return false;
    const name = s.slice(i, ne).toLowerCase();
    i = skipWs(s, ne);
    let value: string | null = null;
    if (i < n && s.charCodeAt(i) === 0x3d) {
      i = skipWs(s, i + 1);
      let e: number;
      if (i < n && s.charCodeAt(i) === 0x22) {
        e = quotedEnd(s, i);
        if (e < 0) return false;
      } else {
        e = i;
        while (e < n && isGenValueChar(s.charCodeAt(e))) e++;
        if (e === i) return false;
      }
      value = s.slice(i, e);
      i = e;
    }
    if (!out.has(name)) out.set(name, value);
  }
}

/** Parameter lookup by case-insensitive name; null for a valueless parameter, undefined when absent. */
export function getParam(params: ReadonlyMap<string, string | null>, name: string): string | null | undefined {
  return params.get(name.toLowerCase());
}

/** A parameter value with surrounding quotes removed and `\x` escapes resolved (RFC 3261 §25.1 quoted-string). */
export function unquote(value: string): string {
  const n = value.length;
  if (n >= 2 && value.charCodeAt(0) === 0x22 && value.charCodeAt(n - 1) === 0x22) return unquoteRange(value, 0, n);
  return value;
}

function isIpv6Char(c: number): boolean {
  const l = c | 0x20;
  return (c >= 0x30 && c <= 0x39) || (l >= 0x61 && l <= 0x66) || c === 0x3a || c === 0x2e;
}

// Matches "SIP" / "2.0" case-insensitively without allocating.
function isSipName(s: string, a: number, b: number): boolean {
  return b - a === 3 && (s.charCodeAt(a) | 0x20) === 0x73 && (s.charCodeAt(a + 1) | 0x20) === 0x69 && (s.charCodeAt(a + 2) | 0x20) === 0x70;
}

function isVersion20(s: string, a: number, b: number): boolean {
  return b - a === 3 && s.charCodeAt(a) === 0x32 && s.charCodeAt(a + 1) === 0x2e && s.charCodeAt(a + 2) === 0x30;
}

/**
 * Parses one Via value (RFC 3261 §20.42):
 * `SIP / 2.0 / transport host[:port] *(; via-param)`, whitespace allowed
 * around '/', ':', ';' and '=' (§25.1 SLASH, COLON, SEMI, EQUAL). Returns
 * null when malformed, e.g. an empty parameter as in RFC 4475 §3.1.2.1.
 */
export function parseVia(value: string): Via | null {
  const s = value;
  const n = s.length;
  let i = skipWs(s, 0);
  let e = scanToken(s, i);
  if (!isSipName(s, i, e)) return null;
  i = skipWs(s, e);
  if (s.charCodeAt(i) !== 0x2f) return null;
  i = skipWs(s, i + 1);
  e = scanToken(s, i);
  if (!isVersion20(s, i, e)) return null;
  i = skipWs(s, e);
  if (s.charCodeAt(i) !== 0x2f) return null;
  i = skipWs(s, i + 1);
  e = scanToken(s, i);
  if (e === i) return null;
  const transport = s.slice(i, e).toUpperCase();
  i = skipWs(s, e);
  if (i === e) return null; // sent-protocol LWS sent-by

  let host: string;
  if (s.charCodeAt(i) === 0x5b) {
    const close = s.indexOf(']', i);
    if (close < 0 || close === i + 1) return null;
    for (let j = i + 1; j < close; j++) if (!isIpv6Char(s.charCodeAt(j))) return null;
    host = s.slice(i, close + 1).toLowerCase();
    i = close + 1;
  } else {
    const hs = i;
    while (i < n && isHostChar(s.charCodeAt(i))) i++;
    if (i === hs) return null;
    host = s.slice(hs, i).toLowerCase();
  }

  let port: number | null = null;
  let k = skipWs(s, i);
  if (k < n && s.charCodeAt(k) === 0x3a) {
    k = skipWs(s, k + 1);
    const ps = k;
    while (k < n && s.charCodeAt(k) >= 0x30 && s.charCodeAt(k) <= 0x39) k++;
    port = parseDigits(s.slice(ps, k), 65535);
    if (port === null) return null;
    i = k;
  }

  const params = new Map<string, string | null>();
  if (!parseGenericParams(s, i, params)) return null;
  const branch = params.get('branch');
  if (branch === null) return null; // via-branch = "branch" EQUAL token
  return { transport, host, port, params, branch: branch ?? null, raw: value.trim() };
}

/**
 * Serialises a Via value. `params` is authoritative (the `branch` field is a
 * read-only convenience) and keeps its insertion order, so a parsed Via with
 * `received`/`rport` set comes back with every other parameter as it was.
 */
export function formatVia(via: Via): string {
  let s = 'SIP/2.0/' + via.transport + ' ' + via.host;
  if (via.port !== null) s += ':' + via.port;
  for (const [name, value] of via.params) s += value === null ? ';' + name : ';' + name + '=' + value;
  return s;
}

function isAngleAddrSafe(c: number): boolean {
  return c !== 0x3b && c !== 0x2c && c !== 0x3f && c !== 0x20 && c !== 0x09;
}

/**
 * Parses a name-addr (`"Display" <uri>;params`, `Token Display <uri>`) or an
 * addr-spec (`uri;params`) as used by From, To, Contact, Route, Path
 * (RFC 3261 §20.10, §25.1).
 *
 * @remarks
 * In the addr-spec form every ';param' after the URI is a header parameter,
 * not a URI parameter (§20), and a URI holding ',', '?' or ';' must be in
 * angle brackets (§20.10; RFC 4475 §3.1.2.13). Header parameter values keep
 * any quotes (see {@link unquote}). Returns null when malformed.
 */
export function parseNameAddr(value: string): NameAddr | null {
  const raw = value.trim();
  const s = raw;
  const n = s.length;
  if (n === 0) return null;
  let i = 0;
  let displayName: string | null = null;
  let angle = false;

  if (s.charCodeAt(0) === 0x22) {
    const e = quotedEnd(s, 0);
    if (e < 0) return null;
    displayName = unquoteRange(s, 0, e);
    i = skipWs(s, e);
    if (s.charCodeAt(i) !== 0x3c) return null;
    angle = true;
  } else {
    // display-name = *(token LWS): scan tokens and blanks; a '<' after them means name-addr
    let j = 0;
    let c = s.charCodeAt(0);
    while (j < n && (isTokenChar(c) || c === 0x20 || c === 0x09)) c = s.charCodeAt(++j);
    if (j < n && c === 0x3c) {
      let de = j;
      while (de > 0 && (s.charCodeAt(de - 1) === 0x20 || s.charCodeAt(de - 1) === 0x09)) de--;
      displayName = de > 0 ? s.slice(0, de) : null;
      i = j;
      angle = true;
    }
  }

  let uriText: string;
  if (angle) {
    const close = s.indexOf('>', i + 1);
    if (close < 0) return null;
    uriText = s.slice(i + 1, close);
    i = close + 1;
  } else {
    let e = 0;
    while (e < n && isAngleAddrSafe(s.charCodeAt(e))) e++;
    if (e < n) {
      const c = s.charCodeAt(e);
      if (c === 0x2c || c === 0x3f) return null;
    }
    uriText = s.slice(0, e);
    i = e;
  }

  const uri = parseUri(uriText);
  if (uri === null) return null;
  const params = new Map<string, string | null>();
  if (!parseGenericParams(s, i, params)) return null;
  return { displayName, uri, params, raw };
}

/**
 * The Contact list of a message (RFC 3261 §20.10, §10.3 step 6): `{star:true}`
 * for a lone `*`, else every contact of every Contact line. No Contact header
 * gives an empty list; null when any value is malformed, a line is empty, or
 * `*` appears with anything else.
 */
export function parseContacts(msg: SipMessage): ContactList | null {
  const contacts: NameAddr[] = [];
  let stars = 0;
  const hs = msg.headers;
  for (let h = 0; h < hs.length; h++) {
    if (hs[h].name !== 'contact') continue;
    const items = splitHeaderList(hs[h].value);
    if (items.length === 0) return null;
    for (const item of items) {
      if (item === '*') {
        stars++;
        continue;
      }
      const c = parseNameAddr(item);
      if (c === null) return null;
      contacts.push(c);
    }
  }
  if (stars > 0) return stars === 1 && contacts.length === 0 ? { star: true } : null;
  return { star: false, contacts };
}

/**
 * Parses `CSeq: 1*DIGIT LWS Method` (RFC 3261 §20.16). The number must fit in
 * 32 bits unsigned (§8.1.1.5; RFC 4475 §3.1.2.4); null otherwise.
 */
export function parseCSeq(value: string): CSeq | null {
  const s = value;
  const n = s.length;
  const ds = skipWs(s, 0);
  let i = ds;
  while (i < n && s.charCodeAt(i) >= 0x30 && s.charCodeAt(i) <= 0x39) i++;
  const seq = parseDigits(s.slice(ds, i), 0xffffffff);
  if (seq === null) return null;
  const ms = skipWs(s, i);
  if (ms === i) return null;
  const me = scanToken(s, ms);
  if (me === ms || skipWs(s, me) !== n) return null;
  return { seq, method: s.slice(ms, me) };
}

const MAX_DELTA_SECONDS = 0xffffffff;

/**
 * Parses delta-seconds (Expires header, `expires` parameter; RFC 3261 §20.19).
 * Values beyond 2**32-1, the field's range, are clamped to it; anything that
 * is not 1*DIGIT gives null.
 */
export function parseExpires(value: string): number | null {
  const s = value;
  let a = 0;
  let b = s.length;
  while (a < b && (s.charCodeAt(a) === 0x20 || s.charCodeAt(a) === 0x09)) a++;
  while (b > a && (s.charCodeAt(b - 1) === 0x20 || s.charCodeAt(b - 1) === 0x09)) b--;
  if (a === b) return null;
  let v = 0;
  for (let i = a; i < b; i++) {
    const d = s.charCodeAt(i) - 0x30;
    if (d < 0 || d > 9) return null;
    if (v <= MAX_DELTA_SECONDS) v = v * 10 + d;
  }
  return v > MAX_DELTA_SECONDS ? MAX_DELTA_SECONDS : v;
}

/**
 * Parses Authorization / Proxy-Authorization digest credentials
 * (RFC 3261 §20.7, RFC 7616 §3.4): `Digest name=value, name="quoted", …`.
 *
 * @remarks
 * Whitespace around '=' and ',' is tolerated, as are empty list elements.
 * Names are lower-cased; quoted values are unquoted with `\x` escapes resolved.
 * Returns null for another scheme (RFC 4475 §3.3.7: the caller challenges),
 * no parameters, a repeated parameter (ambiguous input to a security check),
 * or malformed syntax.
 */
export function parseDigestCredentials(value: string): DigestCredentials | null {
  const s = value;
  const n = s.length;
  let i = skipWs(s, 0);
  const se = scanToken(s, i);
  if (se - i !== 6 || s.slice(i, se).toLowerCase() !== 'digest') return null;
  const scheme = s.slice(i, se);
  i = skipWs(s, se);
  if (i === se) return null;
  const params = new Map<string, string>();
  for (;;) {
    while (i < n) {
      const c = s.charCodeAt(i);
      if (c !== 0x20 && c !== 0x09 && c !== 0x2c) break;
      i++;
    }
    if (i >= n) break;
    const ne = scanToken(s, i);
    if (ne === i) return null;
    const name = s.slice(i, ne).toLowerCase();
    i = skipWs(s, ne);
    if (s.charCodeAt(i) !== 0x3d) return null;
    i = skipWs(s, i + 1);
    let v: string;
    if (s.charCodeAt(i) === 0x22) {
      const e = quotedEnd(s, i);
      if (e < 0) return null;
      v = unquoteRange(s, i, e);
      i = e;
    } else {
      // token; lenient: unquoted URIs and the like run to ',' or whitespace
      const vs = i;
      while (i < n) {
        const c = s.charCodeAt(i);
        if (c === 0x2c || c === 0x20 || c === 0x09 || c === 0x22) break;
        i++;
      }
      if (i === vs) return null;
      v = s.slice(vs, i);
    }
    if (params.has(name)) return null;
    params.set(name, v);
    i = skipWs(s, i);
    if (i < n && s.charCodeAt(i) !== 0x2c) return null;
  }
  if (params.size === 0) return null;
  return { scheme, params };
}

const TAG_TEXT = /tag/i;
const TAG_PARAM = /;\s*tag\s*=\s*([^;\s]+)/i;

/**
 * The `tag` parameter of a From or To header value (RFC 3261 §19.3), or null.
 * Looks only after the URI's closing `>` (a `tag` inside the URI is a URI
 * parameter); cheap on the hot path, where most values have no "tag" at all.
 */
export function tagOf(value: string | undefined): string | null {
  if (value === undefined || !TAG_TEXT.test(value)) return null;
  const gt = value.lastIndexOf('>');
  const m = TAG_PARAM.exec(gt >= 0 ? value.slice(gt + 1) : value);
  return m ? (m[1] as string) : null;
}
