import type { CredentialStore, EndpointCredential } from '../store/credentials/credentials.js';
import type { SipRequest, DigestCredentials, SipUri } from '../sip/message.js';
import { parseUri } from '../sip/uri.js';
import { getHeader, getHeaders, parseDigestCredentials } from '../sip/headers.js';
import { buildChallenge, credentialAlgorithm, dummyHa1, verifyDigest, type DigestAlgorithm } from './digest.js';
import type { NonceManager } from './nonce.js';

export type AuthOutcome =
  | { ok: true; user: string; credential: EndpointCredential }
  /** Answer 401/407 with these challenge headers. `reason` is for logs and metrics only. */
  | { ok: false; kind: 'challenge'; headers: Array<[string, string]>; reason: AuthFailure }
  /**
   * Credentials for another user than the request claims (RFC 3261 §22.1 / kamailio auth_check flag 1),
   * or an attempt refused unchecked during a password-guessing cooling-off (`cooling-off`).
   */
  | { ok: false; kind: 'forbidden'; reason: 'user-mismatch' | 'cooling-off' }
  /**
   * The credentials' `uri` names another resource than the request (RFC 7616 §3.4.6: the
   * server checks it and answers 400 when it does not match; see {@link DigestAuthenticator}).
   */
  | { ok: false; kind: 'bad-request'; reason: 'uri-mismatch' };

export type AuthFailure = 'no-credentials' | 'bad-nonce' | 'stale-nonce' | 'replay' | 'bad-credentials' | 'unsupported';

export interface AuthenticatorOptions {
  credentials: CredentialStore;
  nonces: NonceManager;
  /** Offered in this order, one WWW-Authenticate header each (RFC 8760 §2.4). */
  algorithms: readonly DigestAlgorithm[];
  /**
   * User-Agent substrings (lower-case) of clients known to answer only the first
   * challenge even when it names an algorithm they lack (SIPp 3.6, some desk
   * phones): they are challenged with MD5 alone.
   */
  md5OnlyUserAgents?: readonly string[];
  /** Password-guessing defence around the password check; absent = none. */
  guard?: AuthAttemptGuard;
  /**
   * Whether a URI names this node (one of its addresses and listening ports): such a digest
   * `uri` is accepted, since SIPp and many phones hash `sip:<server ip>:<port>`.
   */
  isOwnUri?: (u: SipUri) => boolean;
  /** The platform's SIP domain (`SIP_DOMAIN`): a digest `uri` naming it is accepted too. */
  sipDomain?: string;
}

/**
 * Counts failed digest responses and refuses attempts during a cooling-off
 * (src/security/auth-guard.ts). `source` is the request's source address.
 */
export interface AuthAttemptGuard {
  /** Before the password is checked: `ok`, or the counter that refuses it. */
  check(source: string | undefined, realm: string, user: string): Promise<'ok' | 'source' | 'endpoint'>;
  failed(source: string | undefined, realm: string, user: string): Promise<void>;
  succeeded(source: string | undefined, realm: string, user: string): Promise<void>;
}

/**
 * Digest authentication of a request against the endpoint credentials
 * (kamailio auth/ + auth_db: challenge, then auth_check).
 *
 * Unknown users and wrong passwords take the same path — a credential lookup and
 * one hash over a dummy HA1 — and get the same fresh challenge, so neither the
 * answer nor its timing tells whether a username exists.
 */
/**
 * What the registrar and the proxy need of authentication: check a request's
 * credentials for `user` in `realm` (WWW-Authenticate / 401 for REGISTER,
 * Proxy-Authenticate / 407 when `proxy`). {@link DigestAuthenticator} is the
 * implementation; tests and other schemes can stand in for it.
 */
export interface RequestAuthenticator {
  authenticate(req: SipRequest, realm: string, user: string, proxy?: boolean, source?: string): Promise<AuthOutcome>;
}

export class DigestAuthenticator implements RequestAuthenticator {
  private readonly md5Only: readonly DigestAlgorithm[];
  /** Requests refused because the digest `uri` named another resource (`sip_auth_uri_mismatch_total`). */
  uriMismatches = 0;

  constructor(private readonly opts: AuthenticatorOptions) {
    this.md5Only = opts.algorithms.includes('MD5') ? ['MD5'] : opts.algorithms;
  }

  /**
   * @param realm the account SIP domain the request claims (To host for REGISTER)
   * @param user the username the request claims (To user for REGISTER)
   * @param proxy true for Proxy-Authorization / 407 (RFC 3261 §22.3)
   * @param source the request's source address (password-guessing counters)
   */
  async authenticate(req: SipRequest, realm: string, user: string, proxy = false, source?: string): Promise<AuthOutcome> {
    const creds = this.pickCredentials(req, realm, proxy);
    if (!creds) return this.challenge(req, realm, false, 'no-credentials', proxy);
    const algorithm = credentialAlgorithm(creds);
    if (!algorithm || !this.opts.algorithms.includes(algorithm)) return this.challenge(req, realm, false, 'unsupported', proxy);

    const username = creds.params.get('username') ?? '';
    const nonce = creds.params.get('nonce') ?? '';
    const nonceState = this.opts.nonces.check(nonce, realm);
    if (nonceState === 'invalid') return this.challenge(req, realm, false, 'bad-nonce', proxy);
    if (username !== user) return { ok: false, kind: 'forbidden', reason: 'user-mismatch' };
    // RFC 7616 §3.4.6: a response computed for another resource is not proof for this one
    // (it could be a replayed answer to a challenge of another request). Checked before the
    // password: a mismatch is not a wrong password and does not count towards a cooling-off.
    if (!this.uriMatches(creds.params.get('uri'), req.uri, realm)) {
      this.uriMismatches++;
      return { ok: false, kind: 'bad-request', reason: 'uri-mismatch' };
    }

    const guard = this.opts.guard;
    const [allowed, credential] = await Promise.all([
      guard ? guard.check(source, realm, username) : 'ok',
      this.opts.credentials.get(realm, username),
    ]);
    // A cooling-off: refused without checking the password, the same way for every username.
    if (allowed !== 'ok') return { ok: false, kind: 'forbidden', reason: 'cooling-off' };
    const ha1 = credential
      ? algorithm === 'SHA-256'
        ? credential.ha1Sha256
        : credential.ha1Md5
      : dummyHa1(algorithm, username, realm);
    const verdict = verifyDigest(creds, { method: req.method, ha1, algorithm });
    if (verdict !== 'ok' || !credential) {
      const reason = verdict === 'unsupported-qop' ? 'unsupported' : 'bad-credentials';
      if (reason === 'bad-credentials') await guard?.failed(source, realm, username);
      return this.challenge(req, realm, false, reason, proxy);
    }
    // RFC 7616 §3.3 stale: the password was right, only the nonce is old, so the
    // client may retry with a fresh nonce without asking its user.
    if (nonceState === 'stale') return this.challenge(req, realm, true, 'stale-nonce', proxy);
    if (creds.params.has('qop')) {
      const nc = parseInt(creds.params.get('nc') ?? '', 16);
      if (!Number.isFinite(nc) || nc <= 0 || !this.opts.nonces.acceptCount(nonce, nc)) {
        return this.challenge(req, realm, true, 'replay', proxy);
      }
    }
    if (guard) void guard.succeeded(source, realm, username);
    return { ok: true, user: username, credential };
  }

  /**
   * Whether the credentials' `uri` names the resource of the request: the Request-URI itself
   * (as sent, or the same user, host and port), the account's domain (`realm`), the platform's
   * SIP domain, or one of this node's addresses. README "Digest uri check".
   */
  private uriMatches(digestUri: string | undefined, requestUri: string, realm: string): boolean {
    if (digestUri === undefined) return true; // a missing uri fails verifyDigest as malformed
    if (digestUri === requestUri) return true;
    const u = parseUri(digestUri);
    if (!u || (u.scheme !== 'sip' && u.scheme !== 'sips') || u.host === '') return false;
    if (u.host === realm || (this.opts.sipDomain !== undefined && u.host === this.opts.sipDomain)) return true;
    const r = parseUri(requestUri);
    if (r && r.host === u.host && (r.port ?? null) === (u.port ?? null) && (u.user === null || u.user === r.user)) return true;
    return this.opts.isOwnUri?.(u) ?? false;
  }

  private pickCredentials(req: SipRequest, realm: string, proxy: boolean): DigestCredentials | null {
    let fallback: DigestCredentials | null = null;
    for (const value of getHeaders(req, proxy ? 'proxy-authorization' : 'authorization')) {
      const c = parseDigestCredentials(value);
      if (!c || c.scheme.toLowerCase() !== 'digest') continue;
      if ((c.params.get('realm') ?? '').toLowerCase() !== realm) continue;
      const alg = credentialAlgorithm(c);
      if (alg && this.opts.algorithms.includes(alg)) return c;
      fallback ??= c;
    }
    return fallback;
  }

  private challenge(req: SipRequest, realm: string, stale: boolean, reason: AuthFailure, proxy: boolean): AuthOutcome {
    const name = proxy ? 'Proxy-Authenticate' : 'WWW-Authenticate';
    const nonce = this.opts.nonces.issue(realm);
    const headers: Array<[string, string]> = this.algorithmsFor(req).map((algorithm) => [
      name,
      buildChallenge({ realm, nonce, algorithm, stale }),
    ]);
    return { ok: false, kind: 'challenge', headers, reason };
  }

  /** RFC 8760 §2.4 order (strongest first), except for clients on the MD5-only list. */
  private algorithmsFor(req: SipRequest): readonly DigestAlgorithm[] {
    const quirks = this.opts.md5OnlyUserAgents;
    if (!quirks || quirks.length === 0 || this.opts.algorithms.length < 2) return this.opts.algorithms;
    const ua = getHeader(req, 'user-agent');
    if (!ua) return this.opts.algorithms;
    const lower = ua.toLowerCase();
    return quirks.some((q) => lower.includes(q)) ? this.md5Only : this.opts.algorithms;
  }
}
