/**
 * Sub-account KYC (docs/kyc.md; the vendor SDK's `sub_account_kyc` and
 * `sub_account_kyc_test_mode`): the status, the verifications and, under
 * `/api/v1/sub-accounts/test/`, their test mode (magic inputs, `mock: true`).
 *
 * Every route authenticates as the PARENT account (access `parent`): a sub-account's
 * own credentials are 403, a sub-account of another account is 404. The numbers
 * checked (PAN, GSTIN, CIN, Aadhaar access ids) never reach a log or an error body.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { KycError, type KycResult, type VerifyInput } from '../kyc/index.js';
import type { VerificationType } from '../store/kyc/kyc.js';
import { ApiError, badRequest, conflict, describedPattern, notFound } from './errors.js';
import { bodyObject, customerOf, validationDetails, type ApiContext } from './context.js';

const REDIRECT_PATTERN = describedPattern('^https?://[^\\s]+$', 'must be an http(s):// URL');

const params = { type: 'object', properties: { sub_auth_id: { type: 'string' } } } as const;
const str = (max: number) => ({ type: 'string', minLength: 1, maxLength: max }) as const;
const obj = (required: string[], properties: Record<string, unknown>) => ({ type: 'object', additionalProperties: false, required, properties }) as const;

const BODIES = {
  pan: obj(['pan'], { pan: str(64) }),
  gst: obj(['gstin'], { gstin: str(64) }),
  cinSearch: obj(['company_name'], { company_name: str(256) }),
  cinConfirm: obj(['company_name', 'selected_cin'], { company_name: str(256), selected_cin: str(64) }),
  dlInitiate: obj(['redirect_url'], { redirect_url: { type: 'string', maxLength: 2048, pattern: REDIRECT_PATTERN }, oauth_state: { type: 'string', maxLength: 256 } }),
  dlVerify: obj(['access_request_id'], { access_request_id: str(128), linked_number: { type: 'string', maxLength: 32 } }),
  finalize: obj(['verification_type', 'outcome'], {
    verification_type: { type: 'string', enum: ['pan', 'aadhaar', 'gst', 'cin'] },
    outcome: { type: 'string', enum: ['verified', 'failed'] },
  }),
};

/**
 * KycVerificationResult exactly (spec; the SDK's model refuses other fields): no
 * api_id, no overall_status (GET …/kyc/status has it).
 */
export function resultView(r: KycResult): Record<string, unknown> {
  return { verification_type: r.verification_type, status: r.status, kyc_calls_blocked: r.kyc_calls_blocked, ...(r.mock ? { mock: true } : {}) };
}

/** A KycError as the API's refusal. */
export function kycApiError(e: unknown): unknown {
  if (!(e instanceof KycError)) return e;
  switch (e.kind) {
    case 'invalid':
      return badRequest({ [e.field ?? 'body']: e.message });
    case 'not_found':
      return notFound(e.message);
    case 'conflict':
      return conflict('no_pending_verification', e.message);
    case 'unavailable':
      return new ApiError(503, 'kyc_provider_not_configured', e.message);
    case 'provider_error':
      return new ApiError(502, 'kyc_provider_error', e.message);
  }
}

/** Register the KYC routes, real and test mode. */
export function registerKycRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const config = { access: 'parent' as const };

  for (const test of [false, true]) {
    const base = test ? '/api/v1/sub-accounts/test/:sub_auth_id/kyc' : '/api/v1/sub-accounts/:sub_auth_id/kyc';

    /** Parent, sub-account and a validated body; a KycError becomes its status (500 for the mock provider error). */
    const run = async <T>(req: FastifyRequest, f: (parent: string, sub: string, body: Record<string, unknown>) => Promise<T>): Promise<T> => {
      const c = customerOf(req);
      const { sub_auth_id: sub } = req.params as { sub_auth_id: string };
      // 404 before 400: another account's sub-account says nothing more.
      if (!(await ctx.directory.getSubAccount(c.account.authId, sub))) throw notFound('No sub-account with this Auth ID on this account.');
      const details = validationDetails(req);
      if (Object.keys(details).length > 0) throw badRequest(details);
      try {
        return await f(c.account.authId, sub, bodyObject(req));
      } catch (e) {
        if (test && e instanceof KycError && e.kind === 'provider_error') {
          throw new ApiError(500, 'kyc_provider_error', e.message, { mock: true });
        }
        throw kycApiError(e);
      }
    };
    const mock = test ? { mock: true as const } : {};
    const verification = (route: string, body: object, input: (b: Record<string, unknown>) => VerifyInput): void => {
      app.post(`${base}/${route}`, { schema: { params, body }, attachValidation: true, config }, async (req) =>
        run(req, async (parent, sub, b) => resultView(await ctx.kyc.verify(parent, sub, input(b), test))),
      );
    };

    // Status has no test-mode twin (as the SDK): test rows count in the one status.
    if (!test) app.get(`${base}/status`, { schema: { params }, config }, async (req) => run(req, (parent, sub) => ctx.kyc.status(parent, sub)));
    verification('verify-pan', BODIES.pan, (b) => ({ type: 'pan', pan: String(b.pan) }));
    verification('verify-gst', BODIES.gst, (b) => ({ type: 'gst', gstin: String(b.gstin) }));
    verification('cin/confirm', BODIES.cinConfirm, (b) => ({ type: 'cin', companyName: String(b.company_name), cin: String(b.selected_cin) }));
    verification('digilocker/verify', BODIES.dlVerify, (b) => ({ type: 'aadhaar', accessRequestId: String(b.access_request_id) }));

    app.post(`${base}/cin/search`, { schema: { params, body: BODIES.cinSearch }, attachValidation: true, config }, async (req) =>
      run(req, async (parent, sub, b) => {
        const matches = await ctx.kyc.cinSearch(parent, sub, String(b.company_name), test);
        return { api_id: req.id, matches, ...mock };
      }),
    );
    app.post(`${base}/digilocker/initiate`, { schema: { params, body: BODIES.dlInitiate }, attachValidation: true, config }, async (req) =>
      run(req, async (parent, sub, b) => ({ api_id: req.id, ...(await ctx.kyc.digilockerInitiate(parent, sub, String(b.redirect_url), test)), ...mock })),
    );
    if (test) {
      app.post(`${base}/finalize-pending`, { schema: { params, body: BODIES.finalize }, attachValidation: true, config }, async (req) =>
        run(req, async (parent, sub, b) => resultView(await ctx.kyc.finalizePending(parent, sub, b.verification_type as VerificationType, b.outcome as 'verified' | 'failed'))),
      );
    }
  }
}
