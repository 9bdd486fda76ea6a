/**
 * HTTP Digest authentication for SIP: challenges and response verification.
 *
 * RFC 3261 §22.4 (Digest in SIP), RFC 7616 (HTTP Digest, SHA-256), RFC 8760 (SHA-256
 * in SIP). Only the `auth` quality of protection and the non-`-sess` algorithms are
 * supported; the RFC 2069 form without qop is accepted because many desk phones
 * still send it. Pure functions; no I/O, no state except a per-process secret for
 * {@link dummyHa1}.
 */
import { createHash, createHmac, hash, randomBytes, timingSafeEqual } from 'node:crypto';
import type { DigestCredentials } from '../sip/message.js';

/** Digest algorithms this server verifies (RFC 8760: SHA-256 and MD5 for SIP). */
export type DigestAlgorithm = 'MD5' | 'SHA-256';

/** Result of {@link verifyDigest}; only `'ok'` authenticates. */
export type VerifyOutcome = 'ok' | 'bad-response' | 'malformed' | 'unsupported-algorithm' | 'unsupported-qop';

/** Node hash name and hex digest length per algorithm, built once. */
const HASH = {
  MD5: { node: 'md5', hexLen: 32 },
  'SHA-256': { node: 'sha256', hexLen: 64 },
} as const satisfies Record<DigestAlgorithm, { node: string; hexLen: number }>;

/** RFC 7616 §3.4: `nc-value = 8LHEX`; upper-case hex is tolerated. */
const NC_VALUE = /^[0-9a-fA-F]{8}$/;
const HEX = /^[0-9a-fA-F]+$/;
const LOWER_HEX = /^[0-9a-f]+$/;
/** Control characters (and DEL) cannot appear in a quoted-string (RFC 3261 §25.1 qdtext). */
const CTL = /[\u0000-\u001f\u007f]/;

/** Random per process: dummy HA1 values are unguessable and change at every restart. */
const DUMMY_SECRET = randomBytes(32);

/** One-shot `crypto.hash` (Node ≥ 20.12) is half the cost of createHash per call; the hot path makes two per registration. */
const oneShot = typeof hash === 'function';

function h(algorithm: DigestAlgorithm, data: string): string {
  const node = HASH[algorithm].node;
  return oneShot ? hash(node, data, 'hex') : createHash(node).update(data, 'utf8').digest('hex');
}

/**
 * HA1 = H(username ":" realm ":" password), lower-case hex (RFC 7616 §3.4.2, non-`-sess`).
 * The value the credential store keeps instead of the password.
 */
export function computeHa1(algorithm: DigestAlgorithm, username: string, realm: string, password: string): string {
  return h(algorithm, `${username}:${realm}:${password}`);
}

/**
 * An HA1-shaped value for a user that does not exist, derived from a per-process
 * secret (HMAC-SHA256 over algorithm, realm and username).
 *
 * @remarks
 * Verify an unknown user's credentials against this value exactly as for a known
 * user, so that the work done, the timing and the answer (a new challenge) are the
 * same and usernames cannot be enumerated (design rule: unknown users get
 * the same challenge as known ones). The secret is unknown to clients, so a match is
 * a 2^-128 event; the caller must still treat the outcome as a failure whatever
 * {@link verifyDigest} returns.
 */
export function dummyHa1(algorithm: DigestAlgorithm, username: string, realm: string): string {
  const mac = createHmac('sha256', DUMMY_SECRET).update(`${algorithm}\u0000${realm}\u0000${username}`, 'utf8').digest('hex');
  return mac.slice(0, HASH[algorithm].hexLen);
}

/** Options of {@link buildChallenge}. */
export interface ChallengeOptions {
  /** Protection space; for sip-edge the account's SIP domain. */
  realm: string;
  /** From `NonceManager.issue` (`./nonce.js`). */
  nonce: string;
  algorithm: DigestAlgorithm;
  /** Set when the client's nonce was well signed but stale (RFC 7616 §3.3 `stale`). */
  stale?: boolean;
  /** Echoed by the client unchanged (RFC 7616 §3.3 `opaque`). */
  opaque?: string;
}

/**
 * The value of one WWW-Authenticate or Proxy-Authenticate header (RFC 3261 §22.4,
 * RFC 7616 §3.3), e.g. `Digest realm="a.sip.localhost", nonce="…", algorithm=SHA-256, qop="auth"`.
 *
 * @remarks
 * RFC 8760: a server offering several algorithms sends one header per
 * algorithm, most preferred (SHA-256) first; call this once per algorithm.
 * `algorithm` and `stale` are tokens and go unquoted; `qop` is quoted (RFC 7616 §3.3).
 *
 * @throws RangeError when a value holds a control character (header injection).
 */
export function buildChallenge(o: ChallengeOptions): string {
  let out = `Digest realm=${quote(o.realm)}, nonce=${quote(o.nonce)}, algorithm=${o.algorithm}, qop="auth"`;
  if (o.stale === true) out += ', stale=true';
  if (o.opaque !== undefined) out += `, opaque=${quote(o.opaque)}`;
  return out;
}

function quote(value: string): string {
  if (CTL.test(value)) throw new RangeError('digest challenge value contains a control character');
  // RFC 3261 §25.1: quoted-pair escapes '"' and '\' inside a quoted-string.
  return `"${value.replace(/["\\]/g, '\\$&')}"`;
}

/**
 * The algorithm named by the credentials, or null when it is one this server does
 * not verify.
 *
 * @remarks
 * RFC 7616 §3.3: "If this is not present, it is assumed to be 'MD5'." Tokens compare
 * case-insensitively. `MD5-sess`, `SHA-256-sess`, `SHA-512-256` and anything else → null.
 */
export function credentialAlgorithm(creds: DigestCredentials): DigestAlgorithm | null {
  const alg = creds.params.get('algorithm');
  if (alg === undefined) return 'MD5';
  switch (alg.toUpperCase()) {
    case 'MD5':
      return 'MD5';
    case 'SHA-256':
      return 'SHA-256';
    default:
      return null;
  }
}

/**
 * The nonce-count of credentials sent with `qop=auth`, as a number for
 * `NonceManager.acceptCount` (`./nonce.js`); null when absent or not 8 hex digits.
 */
export function nonceCount(creds: DigestCredentials): number | null {
  const nc = creds.params.get('nc');
  if (nc === undefined || !NC_VALUE.test(nc)) return null;
  return Number.parseInt(nc, 16);
}

/** Options of {@link verifyDigest}. */
export interface VerifyOptions {
  /** Method of the request carrying the credentials (RFC 7616 §3.4.3 A2). */
  method: string;
  /** Stored HA1 for this user and realm (or {@link dummyHa1}), lower-case hex of `algorithm`. */
  ha1: string;
  /** The algorithm `ha1` was computed with; must be the one the credentials name. */
  algorithm: DigestAlgorithm;
}

/**
 * Checks the `response` of Digest credentials against a stored HA1.
 *
 * @remarks
 * RFC 7616 §3.4.1: with `qop=auth`,
 * `response = H(HA1 ":" nonce ":" nc ":" cnonce ":" qop ":" H(method ":" uri))`;
 * without qop (RFC 3261 §22.4 requires servers to stay backwards compatible
 * with RFC 2069), `response = H(HA1 ":" nonce ":" H(method ":" uri))`.
 *
 * `uri` is the credentials' own `uri` parameter, not the Request-URI: clients
 * disagree on what they put there (SIPp hashes `sip:<server ip>:<port>`), and
 * Kamailio's auth module verifies over the Authorization uri the same way.
 *
 * This function does not check the realm, the nonce's validity or its nonce-count;
 * see `NonceManager` for those. The comparison is constant-time.
 *
 * @returns `'malformed'` when a required parameter is missing or ill-formed,
 * `'unsupported-algorithm'` when the credentials name an algorithm other than
 * `o.algorithm` (or an unsupported one), `'unsupported-qop'` for `auth-int` or any
 * qop other than `auth`, `'bad-response'` when the response does not match.
 * @throws RangeError when `o.ha1` is not lower-case hex of the algorithm's length (a caller bug).
 */
export function verifyDigest(creds: DigestCredentials, o: VerifyOptions): VerifyOutcome {
  const { hexLen } = HASH[o.algorithm];
  if (o.ha1.length !== hexLen || !LOWER_HEX.test(o.ha1)) {
    throw new RangeError(`ha1 must be ${hexLen} lower-case hex digits for ${o.algorithm}`);
  }
  if (creds.scheme.toLowerCase() !== 'digest') return 'malformed';

  const p = creds.params;
  const username = p.get('username');
  const realm = p.get('realm');
  const nonce = p.get('nonce');
  const uri = p.get('uri');
  const response = p.get('response');
  if (username === undefined || realm === undefined || nonce === undefined || uri === undefined || response === undefined) {
    return 'malformed';
  }

  const alg = credentialAlgorithm(creds);
  if (alg === null || alg !== o.algorithm) return 'unsupported-algorithm';

  const qop = p.get('qop');
  const ha2 = h(o.algorithm, `${o.method}:${uri}`);
  let expected: string;
  if (qop === undefined) {
    expected = h(o.algorithm, `${o.ha1}:${nonce}:${ha2}`);
  } else if (qop.toLowerCase() === 'auth') {
    const nc = p.get('nc');
    const cnonce = p.get('cnonce');
    if (nc === undefined || !NC_VALUE.test(nc) || cnonce === undefined || cnonce === '') return 'malformed';
    // nc, cnonce and qop enter the hash exactly as the client sent them.
    expected = h(o.algorithm, `${o.ha1}:${nonce}:${nc}:${cnonce}:${qop}:${ha2}`);
  } else {
    return 'unsupported-qop';
  }

  if (response.length !== hexLen || !HEX.test(response)) return 'malformed';
  // Both sides are ASCII hex of equal length, as timingSafeEqual requires.
  const ok = timingSafeEqual(Buffer.from(expected, 'latin1'), Buffer.from(response.toLowerCase(), 'latin1'));
  return ok ? 'ok' : 'bad-response';
}

/** What a client needs to answer a Digest challenge (the edge answering a carrier's 401/407). */
export interface DigestAnswerOptions {
  /** The challenge's parameters (`realm`, `nonce`, `qop`, `algorithm`, `opaque`). */
  challenge: ReadonlyMap<string, string>;
  method: string;
  uri: string;
  username: string;
  password: string;
  /** The client nonce (random when absent; fixed in tests). */
  cnonce?: string;
}

/**
 * The credentials value (`Digest username=…, response=…`) answering a challenge as a
 * client (RFC 7616 §3.4, RFC 3261 §22.4): MD5 or SHA-256, `qop=auth` when offered, else
 * the RFC 2069 form. Null for a challenge this code cannot answer (another algorithm,
 * `-sess`, `auth-int` only, no nonce or realm).
 */
export function answerChallenge(o: DigestAnswerOptions): string | null {
  const c = o.challenge;
  const realm = c.get('realm');
  const nonce = c.get('nonce');
  if (realm === undefined || nonce === undefined) return null;
  const algName = (c.get('algorithm') ?? 'MD5').toUpperCase();
  const algorithm: DigestAlgorithm | null = algName === 'MD5' ? 'MD5' : algName === 'SHA-256' ? 'SHA-256' : null;
  if (!algorithm) return null;
  const qops = c.get('qop')?.split(',').map((q) => q.trim().toLowerCase());
  if (qops && !qops.includes('auth')) return null;
  const ha1 = computeHa1(algorithm, o.username, realm, o.password);
  const ha2 = h(algorithm, `${o.method}:${o.uri}`);
  const q = (s: string): string => `"${s.replace(/["\\]/g, '\\$&')}"`;
  const parts = [`username=${q(o.username)}`, `realm=${q(realm)}`, `nonce=${q(nonce)}`, `uri=${q(o.uri)}`];
  let response: string;
  if (qops) {
    const cnonce = o.cnonce ?? randomBytes(8).toString('hex');
    const nc = '00000001';
    response = h(algorithm, `${ha1}:${nonce}:${nc}:${cnonce}:auth:${ha2}`);
    parts.push(`response=${q(response)}`, 'qop=auth', `nc=${nc}`, `cnonce=${q(cnonce)}`);
  } else {
    response = h(algorithm, `${ha1}:${nonce}:${ha2}`);
    parts.push(`response=${q(response)}`);
  }
  parts.push(`algorithm=${algorithm}`);
  const opaque = c.get('opaque');
  if (opaque !== undefined) parts.push(`opaque=${q(opaque)}`);
  return `Digest ${parts.join(', ')}`;
}
