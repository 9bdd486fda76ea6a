/**
 * The partner API (spec "Partner operations"): how customer accounts come to
 * exist (docs/design.md). Partners are configured by the operator (config.partners).
 *
 * - `POST /api/v1/partner/login` exchanges a partner's email and password for a
 *   Bearer token (HS256 JWT, valid one hour); it is the one
 *   partner operation without X-Auth headers, since it is how an interactive
 *   session obtains credentials. The token is accepted on the other partner
 *   operations in place of X-Auth-ID/X-Auth-Token.
 * - `GET /api/v1/partner/me`: the PartnerProfile.
 * - `POST /api/v1/partner/accounts`: a customer account; its auth_id and
 *   auth_token are returned once. Optional `cps_limit` and
 *   `concurrent_calls_limit` (1..100000) set its limits; absent, the defaults.
 */
import { randomBytes, scrypt as scryptCb } from 'node:crypto';
import { promisify } from 'node:util';
import { newSigningSecret } from './cdrs.js';
import type { FastifyInstance } from 'fastify';
import { accountSipDomain, hashToken, newAuthId, newAuthToken, type AccountRecord } from '../store/directory/directory.js';
import { accountView } from './account.js';
import { amountNumber } from '../billing/amount.js';
import { ApiError, badRequest, describedPattern, forbidden } from './errors.js';
import { bodyObject, isoNow, optString, validationDetails, type ApiContext } from './context.js';

const scrypt = promisify(scryptCb) as (password: string, salt: Buffer, keylen: number) => Promise<Buffer>;

/** Calls per second a new customer account may place. @default 10 */
export const DEFAULT_CPS_LIMIT = 10;
/** Concurrent calls a new customer account may hold. @default 100 */
export const DEFAULT_CONCURRENT_CALLS_LIMIT = 100;
/** Bounds of `cps_limit` and `concurrent_calls_limit` a partner may give its customer. */
export const ACCOUNT_LIMIT_MIN = 1;
export const ACCOUNT_LIMIT_MAX = 100_000;

const EMAIL_PATTERN = describedPattern('^[^\\s@]+@[^\\s@]+\\.[^\\s@]+$', 'must be an email address');
const COUNTRY_PATTERN = describedPattern('^[A-Za-z]{2}$', 'must be a two-letter ISO 3166-1 country code');

const loginBody = {
  type: 'object',
  additionalProperties: false,
  required: ['email', 'password'],
  properties: {
    email: { type: 'string', minLength: 1, maxLength: 254 },
    password: { type: 'string', minLength: 1, maxLength: 256 },
  },
} as const;

const accountBody = {
  type: 'object',
  additionalProperties: false,
  required: ['name', 'email', 'password', 'country'],
  properties: {
    name: { type: 'string', minLength: 1, maxLength: 128 },
    email: { type: 'string', maxLength: 254, pattern: EMAIL_PATTERN },
    password: { type: 'string', minLength: 8, maxLength: 128 },
    country: { type: 'string', pattern: COUNTRY_PATTERN },
    // A reseller sets its customer's limits; absent: the defaults above.
    cps_limit: { type: 'integer', minimum: ACCOUNT_LIMIT_MIN, maximum: ACCOUNT_LIMIT_MAX },
    concurrent_calls_limit: { type: 'integer', minimum: ACCOUNT_LIMIT_MIN, maximum: ACCOUNT_LIMIT_MAX },
  },
} as const;

/** An integer field of the validated body, or `fallback` when absent. */
const optInt = (o: Record<string, unknown>, k: string, fallback: number): number => (Number.isInteger(o[k]) ? (o[k] as number) : fallback);

/** scrypt of a console password: `scrypt$<salt b64>$<key b64>` (N=16384, r=8, p=1). */
async function hashPassword(password: string): Promise<string> {
  const salt = randomBytes(16);
  const key = await scrypt(password, salt, 32);
  return `scrypt$${salt.toString('base64')}$${key.toString('base64')}`;
}

/** Register the partner routes. */
export function registerPartnerRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.post(
    '/api/v1/partner/login',
    {
      schema: { body: loginBody },
      config: {
        access: 'public',
        // Password guessing: a tight limit per client address, on top of nothing else.
        rateLimit: { max: 10, timeWindow: '1 minute', keyGenerator: (req) => `login:${req.ip}` },
      },
    },
    async (req) => {
      const body = bodyObject(req);
      const partner = ctx.auth.checkPartnerLogin(optString(body, 'email') ?? '', optString(body, 'password') ?? '');
      if (!partner) throw new ApiError(401, 'invalid_credentials', 'The email or password is wrong.');
      const { token, expiresIn } = await ctx.auth.issuePartnerToken(partner);
      req.log.info({ partner: partner.id }, 'partner login');
      return { api_id: req.id, tokens: { access_token: token, token_type: 'Bearer', expires_in: expiresIn } };
    },
  );

  app.get('/api/v1/partner/me', { config: { access: 'partner' } }, async (req) => {
    const p = req.principal;
    if (p?.kind !== 'partner') throw forbidden('Customer credentials cannot call partner operations.');
    const { partner } = p;
    // The balance is the partner's ledger account (docs/billing.md); a number, as the spec types it.
    const own = await ctx.billing.ledger.partnerAccount(partner);
    // Profile fields the configuration does not carry get neutral values.
    return {
      api_id: req.id,
      id: partner.id,
      name: partner.name,
      email: partner.email,
      phone: '',
      company: partner.company,
      balance: amountNumber(own.balance),
      currency: own.currency,
      gstin: '',
      gst_status: 'not_registered',
      tds_applicable: false,
      tds_percentage: 0,
      account_type: 'partner',
      status: 'active',
      can_create_accounts: partner.canCreateAccounts,
      can_transfer_balance: partner.canTransferBalance,
      created_at: ctx.startedAt,
      updated_at: ctx.startedAt,
    };
  });

  app.post(
    '/api/v1/partner/accounts',
    { schema: { body: accountBody }, attachValidation: true, config: { access: 'partner' } },
    async (req, reply) => {
      const p = req.principal;
      if (p?.kind !== 'partner') throw forbidden('Customer credentials cannot call partner operations.');
      if (!p.partner.canCreateAccounts) throw forbidden('This partner may not create accounts (can_create_accounts is false).');
      await ctx.idempotency.run(req, reply, { scope: p.authId, caller: p.authId, operation: 'partner.account.create' }, async () => {
        const details = validationDetails(req);
        if (Object.keys(details).length > 0) throw badRequest(details);
        const body = bodyObject(req);
        const passwordHash = await hashPassword(optString(body, 'password') ?? '');
        const now = isoNow();
        for (let attempt = 0; attempt < 5; attempt++) {
          const token = newAuthToken();
          const authId = newAuthId('MA');
          if (ctx.config.partners.some((x) => x.authId === authId)) continue;
          const rec: AccountRecord = {
            authId,
            tokenHash: hashToken(token),
            passwordHash,
            name: optString(body, 'name') ?? '',
            email: optString(body, 'email') ?? '',
            country: (optString(body, 'country') ?? '').toUpperCase(),
            accountType: 'PREPAID',
            enabled: true,
            cpsLimit: optInt(body, 'cps_limit', DEFAULT_CPS_LIMIT),
            concurrentCallsLimit: optInt(body, 'concurrent_calls_limit', DEFAULT_CONCURRENT_CALLS_LIMIT),
            sipDomain: accountSipDomain(authId, ctx.config.sipDomain),
            partnerId: p.partner.id,
            createdAt: now,
            updatedAt: now,
          };
          // The callback signing secret (docs/callbacks.md) is stored before the account exists,
          // so that no callback of the account is ever made without one.
          const signingSecret = newSigningSecret();
          await ctx.calls.setSigningSecret(rec.sipDomain, signingSecret);
          // Its ledger account, in the partner's currency (an unused one is harmless if the Auth ID is taken).
          await ctx.billing.ledger.customerAccount(rec);
          if (await ctx.directory.createAccount(rec)) {
            req.log.info({ account: authId, partner: p.partner.id }, 'customer account created');
            // The token and the signing secret are shown this once.
            return { status: 201, body: { api_id: req.id, message: 'created', ...accountView(rec), auth_token: token, callback_signing_secret: signingSecret } };
          }
        }
        throw new ApiError(503, 'service_unavailable', 'Could not allocate an Auth ID; retry.');
      });
    },
  );
}
