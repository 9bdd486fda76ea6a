/**
 * Who is calling (spec "Authentication"): X-Auth-ID + X-Auth-Token name an
 * account, a sub-account or a partner; a partner may instead present the Bearer
 * token of its interactive login. Tokens are compared as SHA-256 digests in
 * constant time; an unknown Auth ID costs the same work as a known one.
 */
import { createHash, createHmac, randomBytes, randomUUID, timingSafeEqual } from 'node:crypto';
import { jwtVerify, SignJWT, type JWTPayload } from 'jose';
import type { FastifyRequest } from 'fastify';
import type { PartnerConfig } from '../config.js';
import { hashToken, tokenMatches, type AccountRecord, type Directory, type SubAccountRecord } from '../store/directory/directory.js';
import { forbidden, notFound, unauthorized } from './errors.js';

/** The authenticated caller of a request. */
export type Principal =
  | { kind: 'account'; authId: string; account: AccountRecord }
  | { kind: 'subaccount'; authId: string; account: AccountRecord; subAccount: SubAccountRecord }
  | { kind: 'partner'; authId: string; partner: PartnerConfig };

/**
 * Who may call a route:
 * - `probe`: anyone; no content negotiation, no rate limit (health checks);
 * - `public`: anyone (partner login);
 * - `customer`: an account or sub-account, on its own `/Account/<auth_id>/` path;
 * - `account`: an account (not a sub-account) on its own path;
 * - `parent`: an account (not a sub-account) naming one of its sub-accounts in the path
 *   (`/api/v1/sub-accounts/{sub_auth_id}/kyc/…`); whose sub-account it is, the route checks (404);
 * - `partner`: a partner;
 * - `admin`: the operator, by `X-Admin-Token: <ADMIN_AUTH_TOKEN>` (404 while that is unset).
 */
export type Access = 'probe' | 'public' | 'customer' | 'account' | 'parent' | 'partner' | 'admin';

declare module 'fastify' {
  interface FastifyRequest {
    /** Set by the auth hook on every route whose access is not probe/public. */
    principal: Principal | null;
  }
  interface FastifyContextConfig {
    access?: Access;
    /**
     * The route's own 404 body (spec "Errors"), also used when the path names
     * another account, so that answer cannot be told from "no such resource":
     * `empty` (endpoint update/delete) or `endpoint` ({error, endpoint_id}).
     */
    notFound?: 'empty' | 'endpoint';
    /** The route also answers `Accept: text/event-stream` (docs/events.md). */
    eventStream?: boolean;
    /** The route answers an HTML page whatever the Accept header (the hosted KYC page). */
    html?: boolean;
    /** The route answers `text/csv` (a CSV export): `Accept: text/csv` is allowed too. */
    csv?: boolean;
    /** The route answers audio (a recording's file) whatever the Accept header. */
    audio?: boolean;
    /** A provider calls the route (Meta's WhatsApp webhook): any Accept header is taken. */
    anyAccept?: boolean;
  }
}

/** Lifetime of a partner login token, seconds. */
export const PARTNER_TOKEN_TTL_S = 3600;
/** Clock skew between nodes a partner login token's exp/iat may have, seconds. */
export const PARTNER_TOKEN_CLOCK_TOLERANCE_S = 5;
const PARTNER_TOKEN_ISSUER = 'sip-edge';
const PARTNER_TOKEN_AUDIENCE = 'partner';

const AUTH_ID_RE = /^[A-Za-z0-9][A-Za-z0-9_.@-]{0,127}$/;
const MAX_TOKEN_LENGTH = 512;

/** A single header value, or null when absent or repeated. */
export function headerValue(req: FastifyRequest, name: string): string | null {
  const v = req.headers[name];
  return typeof v === 'string' ? v : null;
}

function sha256(s: string): Buffer {
  return createHash('sha256').update(s, 'utf8').digest();
}

/** The principal resolver and partner-token issuer of one server. */
export class Authenticator {
  readonly #directory: Directory;
  readonly #partners: ReadonlyMap<string, { partner: PartnerConfig; tokenHash: string }>;
  readonly #jwtKey: Buffer;
  /** A hash no token matches, compared against when the Auth ID is unknown. */
  readonly #dummyHash = hashToken(randomUUID());

  /**
   * @param jwtSecret keys the partner login tokens; pass config.nonceSecret so all
   *   nodes accept each other's tokens (random per process when null).
   */
  constructor(directory: Directory, partners: readonly PartnerConfig[], jwtSecret: string | null) {
    this.#directory = directory;
    this.#partners = new Map(partners.map((p) => [p.authId, { partner: p, tokenHash: hashToken(p.authToken) }]));
    this.#jwtKey = jwtSecret
      ? createHmac('sha256', jwtSecret).update('sip-edge partner login token').digest()
      : randomBytes(32);
  }

  /**
   * Resolve the caller of a request, or throw 401. Does not check what the
   * caller may do (see {@link authorize}).
   */
  async authenticate(req: FastifyRequest): Promise<Principal> {
    const id = headerValue(req, 'x-auth-id');
    const token = headerValue(req, 'x-auth-token');
    if (id === null && token === null) {
      const bearer = /^Bearer\s+(\S+)\s*$/i.exec(headerValue(req, 'authorization') ?? '');
      if (bearer?.[1]) {
        const partner = await this.verifyPartnerToken(bearer[1]);
        if (partner) return { kind: 'partner', authId: partner.authId, partner };
        throw unauthorized('The Bearer token is invalid or has expired.');
      }
      throw unauthorized('X-Auth-ID and X-Auth-Token headers are required.');
    }
    if (id === null || token === null) throw unauthorized('Both X-Auth-ID and X-Auth-Token headers are required.');
    if (!AUTH_ID_RE.test(id) || token.length === 0 || token.length > MAX_TOKEN_LENGTH) {
      throw unauthorized('X-Auth-ID or X-Auth-Token is malformed.');
    }

    const p = this.#partners.get(id);
    if (p) {
      if (tokenMatches(token, p.tokenHash)) return { kind: 'partner', authId: id, partner: p.partner };
      throw unauthorized();
    }
    const rec = await this.#directory.findPrincipal(id);
    if (rec === null) {
      tokenMatches(token, this.#dummyHash);
      throw unauthorized();
    }
    if (rec.kind === 'account') {
      if (!tokenMatches(token, rec.account.tokenHash)) throw unauthorized();
      return { kind: 'account', authId: id, account: rec.account };
    }
    if (!tokenMatches(token, rec.subAccount.tokenHash)) throw unauthorized();
    return { kind: 'subaccount', authId: id, account: rec.account, subAccount: rec.subAccount };
  }

  /**
   * What the caller may reach (spec "Authentication failures"): customer
   * credentials on partner paths and partner credentials on Account paths are
   * 403; another account's Auth ID in the path is 404, so nothing tells whether
   * it exists.
   */
  authorize(principal: Principal, access: Access, pathAuthId: string | undefined): void {
    if (access === 'partner') {
      if (principal.kind !== 'partner') throw forbidden('Customer credentials cannot call partner operations.');
      return;
    }
    if (access === 'parent') {
      if (principal.kind === 'partner') throw forbidden("A partner token cannot drive a customer's resources; use the customer's own credentials.");
      if (principal.kind === 'subaccount') throw forbidden("Sub-account credentials cannot call this operation (KYC, messaging); use the parent account's.");
      if (!principal.account.enabled) throw forbidden('The account is disabled.');
      return;
    }
    if (access !== 'customer' && access !== 'account') return;
    if (principal.kind === 'partner') {
      throw forbidden("A partner token cannot drive a customer's resources; use the customer's own credentials.");
    }
    if (pathAuthId !== principal.authId) throw notFound();
    if (!principal.account.enabled) throw forbidden('The account is disabled.');
    if (principal.kind === 'subaccount') {
      if (!principal.subAccount.enabled) throw forbidden('The sub-account is disabled.');
      if (access === 'account') throw forbidden('Sub-account credentials cannot call this operation.');
    }
  }

  /** The partner whose login email and password these are, or null. */
  checkPartnerLogin(email: string, password: string): PartnerConfig | null {
    const given = sha256(password);
    let found: PartnerConfig | null = null;
    for (const { partner } of this.#partners.values()) {
      // Compare against every configured password so the time taken does not
      // reveal whether the email exists.
      const expected = sha256(partner.password ?? randomUUID());
      const ok = timingSafeEqual(given, expected);
      if (ok && partner.password !== null && partner.email !== '' && partner.email.toLowerCase() === email.toLowerCase()) {
        found = partner;
      }
    }
    return found;
  }

  /** A signed HS256 JWT for a partner (jose), valid {@link PARTNER_TOKEN_TTL_S} seconds. */
  async issuePartnerToken(partner: PartnerConfig, nowMs: number = Date.now()): Promise<{ token: string; expiresIn: number }> {
    const iat = Math.floor(nowMs / 1000);
    const token = await new SignJWT({ aid: partner.authId })
      .setProtectedHeader({ alg: 'HS256', typ: 'JWT' })
      .setIssuer(PARTNER_TOKEN_ISSUER)
      .setAudience(PARTNER_TOKEN_AUDIENCE)
      .setSubject(partner.id)
      .setIssuedAt(iat)
      .setExpirationTime(iat + PARTNER_TOKEN_TTL_S)
      .setJti(randomUUID())
      .sign(this.#jwtKey);
    return { token, expiresIn: PARTNER_TOKEN_TTL_S };
  }

  /**
   * The partner a login token names, when it is an HS256 JWT (no other `alg` is
   * accepted) signed with this server's key, of our issuer and audience, unexpired
   * ({@link PARTNER_TOKEN_CLOCK_TOLERANCE_S} of clock skew allowed between nodes), and
   * its partner still configured.
   */
  async verifyPartnerToken(token: string, nowMs: number = Date.now()): Promise<PartnerConfig | null> {
    if (token.length > 2048) return null;
    let claims: JWTPayload;
    try {
      ({ payload: claims } = await jwtVerify(token, this.#jwtKey, {
        algorithms: ['HS256'],
        typ: 'JWT',
        issuer: PARTNER_TOKEN_ISSUER,
        audience: PARTNER_TOKEN_AUDIENCE,
        requiredClaims: ['exp', 'iat', 'sub'],
        maxTokenAge: PARTNER_TOKEN_TTL_S,
        clockTolerance: PARTNER_TOKEN_CLOCK_TOLERANCE_S,
        currentDate: new Date(nowMs),
      }));
    } catch {
      return null;
    }
    if (typeof claims.aid !== 'string') return null;
    const entry = this.#partners.get(claims.aid);
    return entry && entry.partner.id === claims.sub ? entry.partner : null;
  }
}

/**
 * The operator check of `admin` routes: 404 (as for a route that does not exist)
 * when no ADMIN_AUTH_TOKEN is configured, 401 when the header is missing or wrong.
 * Compared as SHA-256 digests in constant time; the token is never echoed.
 */
export function checkAdminToken(req: FastifyRequest, configured: string | null): void {
  if (configured === null) throw notFound(`No route ${req.method} ${req.url.split('?')[0] ?? ''}.`);
  const given = headerValue(req, 'x-admin-token');
  const ok = timingSafeEqual(sha256(given ?? ''), sha256(configured));
  if (given === null || !ok) throw unauthorized('Missing or wrong X-Admin-Token.');
}
