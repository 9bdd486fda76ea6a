/**
 * RFC 3261 §25.1 character classes and the small scanners the header and URI
 * parsers share. Tables are built once at load and scanners walk char codes
 * with an index: no regex or closure is built per call.
 */

const TOKEN = 1;
const WORD = 2;
const UNRESERVED = 4;
const USER = 8;
const PASSWORD = 16;
const PARAM = 32;
const HNV = 64;
const HOST = 128;
const GEN_VALUE = 256;

const CLASS = new Uint16Array(128);

function mark(chars: string, flag: number): void {
  for (let i = 0; i < chars.length; i++) CLASS[chars.charCodeAt(i)] |= flag;
}

const ALPHANUM = 'abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
// token = 1*(alphanum / "-" / "." / "!" / "%" / "*" / "_" / "+" / "`" / "'" / "~")
mark(ALPHANUM + "-.!%*_+`'~", TOKEN);
// word adds ( ) < > : \ DQUOTE / [ ] ? { } (Call-ID, §25.1)
mark(ALPHANUM + "-.!%*_+`'~()<>:\\\"/[]?{}", WORD);
// unreserved = alphanum / mark; mark = - _ . ! ~ * ' ( )
mark(ALPHANUM + "-_.!~*'()", UNRESERVED | USER | PASSWORD | PARAM | HNV);
mark('&=+$,;?/%', USER); // user-unreserved + escaped
mark('&=+$,%', PASSWORD);
mark('[]/:&+$%', PARAM); // param-unreserved + escaped
mark('[]/?:+$%', HNV); // hnv-unreserved + escaped
// hostname chars; '_' is outside RFC 1034 but common in deployed SRV-style names
mark(ALPHANUM + '-._', HOST);
// gen-value = token / host / quoted-string: token plus ':' '[' ']' for IPv6 hosts
mark(ALPHANUM + "-.!%*_+`'~:[]", GEN_VALUE);

/** True when `c` is a token character (RFC 3261 §25.1). */
export function isTokenChar(c: number): boolean {
  return c < 128 && (CLASS[c] & TOKEN) !== 0;
}

/** True when `c` may appear in a Call-ID word (RFC 3261 §25.1). */
export function isWordChar(c: number): boolean {
  return c < 128 && (CLASS[c] & WORD) !== 0;
}

/** True when `c` is allowed in a SIP URI user part (unescaped or '%'). */
export function isUserChar(c: number): boolean {
  return c < 128 && (CLASS[c] & USER) !== 0;
}

/** True when `c` is allowed in a SIP URI password. */
export function isPasswordChar(c: number): boolean {
  return c < 128 && (CLASS[c] & PASSWORD) !== 0;
}

/** True when `c` is allowed in a URI parameter name or value. */
export function isParamChar(c: number): boolean {
  return c < 128 && (CLASS[c] & PARAM) !== 0;
}

/** True when `c` is allowed in a URI header name or value ('=' and '&' are separators). */
export function isHeaderChar(c: number): boolean {
  return c < 128 && ((CLASS[c] & HNV) !== 0 || c === 0x3d || c === 0x26);
}

/** True when `c` is allowed in a hostname or IPv4 address. */
export function isHostChar(c: number): boolean {
  return c < 128 && (CLASS[c] & HOST) !== 0;
}

/** True when `c` may appear in an unquoted generic-param value (token / host). */
export function isGenValueChar(c: number): boolean {
  return c < 128 && (CLASS[c] & GEN_VALUE) !== 0;
}

/** True when `c` is unreserved (never needs escaping). */
export function isUnreservedChar(c: number): boolean {
  return c < 128 && (CLASS[c] & UNRESERVED) !== 0;
}

/** Index of the first non-SP/HT character at or after `i`. */
export function skipWs(s: string, i: number): number {
  const n = s.length;
  while (i < n) {
    const c = s.charCodeAt(i);
    if (c !== 0x20 && c !== 0x09) break;
    i++;
  }
  return i;
}

/** Index just past the run of token characters starting at `i` (== i when none). */
export function scanToken(s: string, i: number): number {
  const n = s.length;
  while (i < n && isTokenChar(s.charCodeAt(i))) i++;
  return i;
}

/** True when the whole of `s` is a non-empty token. */
export function isToken(s: string): boolean {
  return s.length > 0 && scanToken(s, 0) === s.length;
}

/**
 * Given `s[i] === '"'`, the index just past the closing quote, or -1 when the
 * quoted-string is unterminated (RFC 3261 §25.1: quoted-pair = "\" any char
 * except CR and LF).
 */
export function quotedEnd(s: string, i: number): number {
  const n = s.length;
  for (let j = i + 1; j < n; j++) {
    const c = s.charCodeAt(j);
    if (c === 0x5c) {
      j++;
      if (j >= n) return -1;
      const e = s.charCodeAt(j);
      if (e === 0x0d || e === 0x0a) return -1;
    } else if (c === 0x22) {
      return j + 1;
    } else if (c === 0x0d || c === 0x0a) {
      return -1;
    }
  }
  return -1;
}

/** Content of the quoted-string `s[start, end)` (quotes included) with escapes resolved. */
export function unquoteRange(s: string, start: number, end: number): string {
  const inner = s.slice(start + 1, end - 1);
  if (inner.indexOf('\\') < 0) return inner;
  let out = '';
  for (let j = 0; j < inner.length; j++) {
    let c = inner.charCodeAt(j);
    if (c === 0x5c && j + 1 < inner.length) c = inner.charCodeAt(++j);
    out += String.fromCharCode(c);
  }
  return out;
}

function hexValue(c: number): number {
  if (c >= 0x30 && c <= 0x39) return c - 0x30;
  const l = c | 0x20;
  if (l >= 0x61 && l <= 0x66) return l - 0x61 + 10;
  return -1;
}

/**
 * Resolves %HH escapes (RFC 3261 §19.1.2 escaped) and decodes the octets as
 * UTF-8; null when an escape is malformed. Returns `s` itself when it has none.
 */
export function percentDecode(s: string): string | null {
  let p = s.indexOf('%');
  if (p < 0) return s;
  const bytes = Buffer.allocUnsafe(Buffer.byteLength(s, 'utf8'));
  let n = bytes.write(s.slice(0, p), 0, 'utf8');
  const len = s.length;
  while (p < len) {
    const c = s.charCodeAt(p);
    if (c === 0x25) {
      if (p + 2 >= len) return null;
      const hi = hexValue(s.charCodeAt(p + 1));
      const lo = hexValue(s.charCodeAt(p + 2));
      if (hi < 0 || lo < 0) return null;
      bytes[n++] = (hi << 4) | lo;
      p += 3;
    } else {
      const next = s.indexOf('%', p);
      const end = next < 0 ? len : next;
      n += bytes.write(s.slice(p, end), n, 'utf8');
      p = end;
    }
  }
  return bytes.toString('utf8', 0, n);
}

const HEX = '0123456789ABCDEF';

/**
 * Escapes every character of `s` for which `allowed` is false as %HH over its
 * UTF-8 octets (RFC 3261 §19.1.2). Returns `s` itself when nothing needs it.
 */
export function percentEncode(s: string, allowed: (c: number) => boolean): string {
  let i = 0;
  const n = s.length;
  // '%' is in the allowed sets only as the escape introducer: a literal one is re-escaped.
  while (i < n) {
    const c = s.charCodeAt(i);
    if (c === 0x25 || !allowed(c)) break;
    i++;
  }
  if (i === n) return s;
  let out = s.slice(0, i);
  for (; i < n; i++) {
    const c = s.charCodeAt(i);
    if (c !== 0x25 && allowed(c)) {
      out += s[i];
      continue;
    }
    // code points above U+007F become their UTF-8 octets
    const cp = s.codePointAt(i) ?? c;
    if (cp > 0xffff) i++;
    const bytes = Buffer.from(String.fromCodePoint(cp), 'utf8');
    for (let b = 0; b < bytes.length; b++) {
      const v = bytes[b];
      out += '%' + HEX[v >> 4] + HEX[v & 15];
    }
  }
  return out;
}

/** Parses 1*DIGIT exactly (no sign, no spaces); null when not digits or above `max`. */
export function parseDigits(s: string, max: number): number | null {
  const n = s.length;
  if (n === 0) return null;
  let v = 0;
  for (let i = 0; i < n; i++) {
    const c = s.charCodeAt(i) - 0x30;
    if (c < 0 || c > 9) return null;
    v = v * 10 + c;
    if (v > max) return null;
  }
  return v;
}
