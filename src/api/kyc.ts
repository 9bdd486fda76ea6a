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
import { KycError, SessionError, sessionView, type KycResult, type VerifyInput } from '../kyc/index.js';
import type { PageState } from '../kyc/sessions.js';
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

// --- partner KYC sessions and the hosted page -------------------------------------------

const HTTP_URL = describedPattern('^https?://[^\\s]+$', 'must be an http(s):// URL');

const sessionBody = {
  type: 'object',
  additionalProperties: false,
  required: ['account_auth_id'],
  properties: {
    account_auth_id: { type: 'string', minLength: 1, maxLength: 64 },
    flow_type: { type: 'string', enum: ['email', 'redirect'] },
    customer_email: { type: ['string', 'null'], maxLength: 254, pattern: describedPattern('^[^\\s@]+@[^\\s@]+$', 'must be an email address') },
    redirect_url: { type: ['string', 'null'], maxLength: 2048, pattern: HTTP_URL },
    webhook_url: { type: ['string', 'null'], maxLength: 2048, pattern: describedPattern('^https://[^\\s]+$', 'must be an https:// URL (callbacks are delivered over HTTPS only)') },
    expires_in_days: { type: 'integer', minimum: 1, maximum: 90 },
    reminder_schedule: { type: 'array', maxItems: 10 },
    metadata: { type: ['object', 'null'] },
  },
} as const;

const sessionParams = { type: 'object', properties: { session_id: { type: 'string' } } } as const;
const sessionList = {
  type: 'object',
  additionalProperties: true,
  properties: {
    status: { type: 'string', maxLength: 32 },
    account_auth_id: { type: 'string', maxLength: 64 },
    page: { type: 'integer', minimum: 1, maximum: 1_000_000, default: 1 },
    size: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
  },
} as const;
const revokeBody = { type: ['object', 'null'], additionalProperties: false, properties: { reason: { type: ['string', 'null'], maxLength: 512 } } } as const;
const pageParams = { type: 'object', properties: { token: { type: 'string', maxLength: 128 } } } as const;
const submitBody = {
  type: 'object',
  additionalProperties: false,
  required: ['business_type', 'pan'],
  properties: { business_type: { type: 'string', maxLength: 64 }, pan: { type: 'string', maxLength: 64 }, gstin: { type: 'string', maxLength: 64 }, access_request_id: { type: 'string', maxLength: 128 } },
} as const;

/** A SessionError as the API's refusal. */
export function sessionApiError(e: unknown): unknown {
  if (!(e instanceof SessionError)) return e;
  switch (e.kind) {
    case 'invalid':
      return badRequest({ [e.field ?? 'body']: e.message });
    case 'not_found':
      return notFound(e.message);
    case 'conflict':
      return conflict('kyc_session_active', e.message);
    case 'gone':
      return new ApiError(409, 'kyc_session_closed', e.message);
    case 'cooldown':
      return new ApiError(429, 'resend_cooldown', e.message, { retry_after: e.retryAfterS }, false, { 'retry-after': String(e.retryAfterS) });
    case 'unavailable':
      return new ApiError(503, 'kyc_provider_not_configured', e.message);
    case 'provider_error':
      return new ApiError(502, 'kyc_provider_error', e.message);
  }
}

const sessionRun = async <T>(f: () => Promise<T>): Promise<T> => {
  try {
    return await f();
  } catch (e) {
    throw sessionApiError(e);
  }
};

const esc = (v: string): string => v.replace(/[&<>"']/g, (c) => `&#${c.charCodeAt(0)};`);

/** The hosted page: one small form over the session's verification calls. */
function pageHtml(token: string, st: PageState): string {
  const s = st.session;
  const done = s.status === 'kyc_completed';
  const closed = s.status === 'revoked' || s.status === 'expired';
  const redirect = s.redirectUrl ? `${s.redirectUrl}${s.redirectUrl.includes('?') ? '&' : '?'}session_id=${encodeURIComponent(s.id)}&status=${s.status}&auth_id=${encodeURIComponent(s.accountAuthId)}` : '';
  const rows = (Object.entries(st.verifications) as Array<[string, string]>).map(([t, v]) => `<tr><td>${t.toUpperCase()}</td><td class="${v}">${v.replace('_', ' ')}</td></tr>`).join('');
  return `<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="viewport" content="width=device-width, initial-scale=1">
<title>Verify your business</title>
<style>
body{font-family:system-ui,sans-serif;background:#f4f6f8;margin:0;padding:32px;color:#1d2733}
main{max-width:480px;margin:auto;background:#fff;border-radius:10px;padding:28px;box-shadow:0 2px 10px #0002}
h1{font-size:22px;margin:0 0 4px} p.sub{color:#5a6878;margin:0 0 18px}
label{display:block;margin:12px 0 4px;font-weight:600;font-size:14px}
input,select{width:100%;box-sizing:border-box;padding:9px;border:1px solid #c4ccd6;border-radius:6px;font-size:15px}
button{margin-top:18px;width:100%;padding:11px;border:0;border-radius:6px;background:#1f6feb;color:#fff;font-size:16px;cursor:pointer}
table{width:100%;margin-top:16px;border-collapse:collapse} td{padding:4px 0;border-bottom:1px solid #eef1f4}
.verified{color:#1a7f37;font-weight:600}.failed{color:#cf222e;font-weight:600}.pending{color:#9a6700}
#result{margin-top:16px;font-weight:600} .mock{background:#fff8c5;padding:6px 10px;border-radius:6px;font-size:13px}
</style></head><body><main>
<h1>Verify your business</h1>
<p class="sub">KYC for account <b>${esc(s.accountAuthId)}</b> · session ${esc(s.id)}</p>
${st.mock ? '<p class="mock">Test mode: use TESTSUCCESS0001 (verified), TESTFAIL0001 (failed); Aadhaar: MOCK_AR_SUCCESS.</p>' : ''}
<div id="status" data-status="${s.status}">Status: <b>${s.status.replace('_', ' ')}</b></div>
<table>${rows}</table>
${
  done
    ? `<p id="result" class="verified">KYC completed. Thank you.</p>${redirect ? `<p><a id="continue" href="${esc(redirect)}">Continue</a></p>` : ''}`
    : closed
      ? `<p id="result" class="failed">This KYC link is ${s.status}.</p>`
      : `<form id="kyc">
<label for="business_type">Business type</label>
<select id="business_type" name="business_type">
<option value="individual">Individual</option><option value="proprietorship">Proprietorship</option><option value="huf">HUF</option>
<option value="private_limited">Private limited company</option><option value="public_limited">Public limited company</option><option value="llp">LLP</option><option value="partnership">Partnership</option>
</select>
<label for="pan">PAN</label><input id="pan" name="pan" autocomplete="off" maxlength="20" required>
<div id="company"><label for="gstin">GSTIN</label><input id="gstin" name="gstin" autocomplete="off" maxlength="20"></div>
<div id="person"><label for="access_request_id">Aadhaar (DigiLocker access id)</label><input id="access_request_id" name="access_request_id" autocomplete="off" maxlength="64"></div>
<button id="submit" type="submit">Verify</button>
<p id="result"></p>
</form>`
}
</main>
<script>
const f = document.getElementById('kyc');
if (f) {
  const bt = document.getElementById('business_type');
  const sync = () => { const c = !['individual','proprietorship','huf'].includes(bt.value); document.getElementById('company').hidden = !c; document.getElementById('person').hidden = c; };
  bt.addEventListener('change', sync); sync();
  f.addEventListener('submit', async (ev) => {
    ev.preventDefault();
    const out = document.getElementById('result');
    out.textContent = 'Verifying…';
    const body = { business_type: bt.value, pan: f.pan.value.trim().toUpperCase(), gstin: f.gstin.value.trim().toUpperCase(), access_request_id: f.access_request_id.value.trim() };
    const r = await fetch(${JSON.stringify(`/kyc/s/${token}/submit`)}, { method: 'POST', headers: { 'content-type': 'application/json', accept: 'application/json' }, body: JSON.stringify(body) });
    const j = await r.json();
    if (!r.ok) { out.className = 'failed'; out.textContent = j.details ? Object.entries(j.details).map(([k, v]) => k + ' ' + v).join('; ') : j.message; return; }
    location.reload();
  });
}
</script>
</body></html>`;
}

/** Register the partner KYC session routes and the hosted page. */
export function registerKycSessionRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const partner = { access: 'partner' as const };
  const partnerOf = (req: FastifyRequest): string => {
    const p = req.principal;
    if (p?.kind !== 'partner') throw new ApiError(403, 'forbidden', 'Partner credentials only.');
    return p.partner.id;
  };
  const widgetUrl = (req: FastifyRequest, token: string): string => `${req.protocol}://${req.headers.host ?? '127.0.0.1'}/kyc/s/${token}`;

  app.post('/api/v1/partner/kyc-sessions', { schema: { body: sessionBody }, attachValidation: true, config: partner }, async (req, reply) => {
    const pid = partnerOf(req);
    const details = validationDetails(req);
    if (Object.keys(details).length > 0) throw badRequest(details);
    const b = bodyObject(req);
    const str = (k: string): string | null => (typeof b[k] === 'string' && b[k] !== '' ? (b[k] as string) : null);
    const s = await sessionRun(() =>
      ctx.kyc.sessions.create(pid, {
        accountAuthId: String(b.account_auth_id),
        flowType: b.flow_type === 'redirect' ? 'redirect' : 'email',
        customerEmail: str('customer_email'),
        redirectUrl: str('redirect_url'),
        webhookUrl: str('webhook_url'),
        expiresInDays: typeof b.expires_in_days === 'number' ? b.expires_in_days : 7,
        metadata: typeof b.metadata === 'object' && b.metadata !== null ? (b.metadata as Record<string, unknown>) : {},
      }),
    );
    await reply.code(201).send({ message: 'KYC session created', session_id: s.id, ...sessionView(s), widget_url: widgetUrl(req, s.token) });
  });

  // The sub-account-scoped twin (the SDK's sub_account_kyc.create_subaccount_kyc_session): the parent account's credentials.
  const subSessionBody = { ...sessionBody, required: [] } as const;
  app.post('/api/v1/sub-accounts/:sub_auth_id/kyc-sessions', { schema: { params, body: subSessionBody }, attachValidation: true, config: { access: 'parent' as const } }, async (req, reply) => {
    const c = customerOf(req);
    const { sub_auth_id: sub } = req.params as { sub_auth_id: string };
    if (!(await ctx.directory.getSubAccount(c.account.authId, sub))) throw notFound('No sub-account with this Auth ID on this account.');
    const details = validationDetails(req);
    const b = bodyObject(req);
    if (typeof b.account_auth_id === 'string' && b.account_auth_id !== sub) details.account_auth_id = 'must be the sub-account of the path';
    if (Object.keys(details).length > 0) throw badRequest(details);
    const str = (k: string): string | null => (typeof b[k] === 'string' && b[k] !== '' ? (b[k] as string) : null);
    const s = await sessionRun(() =>
      ctx.kyc.sessions.createForSubAccount(c.account.authId, {
        accountAuthId: sub,
        flowType: b.flow_type === 'redirect' ? 'redirect' : 'email',
        customerEmail: str('customer_email'),
        redirectUrl: str('redirect_url'),
        webhookUrl: str('webhook_url'),
        expiresInDays: typeof b.expires_in_days === 'number' ? b.expires_in_days : 7,
        metadata: typeof b.metadata === 'object' && b.metadata !== null ? (b.metadata as Record<string, unknown>) : {},
      }),
    );
    await reply.code(201).send({ message: 'KYC session created', session_id: s.id, ...sessionView(s), widget_url: widgetUrl(req, s.token) });
  });

  app.get('/api/v1/partner/kyc-sessions', { schema: { querystring: sessionList }, config: partner }, async (req) => {
    const pid = partnerOf(req);
    const q = req.query as { status?: string; account_auth_id?: string; page: number; size: number };
    const all = await sessionRun(() => ctx.kyc.sessions.list(pid, { status: q.status, accountAuthId: q.account_auth_id }));
    return { sessions: all.slice((q.page - 1) * q.size, q.page * q.size).map(sessionView), total: all.length, page: q.page, size: q.size };
  });

  app.get('/api/v1/partner/kyc-sessions/:session_id', { schema: { params: sessionParams }, config: partner }, async (req) => {
    const pid = partnerOf(req);
    const s = await sessionRun(() => ctx.kyc.sessions.get(pid, (req.params as { session_id: string }).session_id));
    return { ...sessionView(s), ...(s.flowType === 'redirect' && s.status !== 'revoked' && s.status !== 'expired' ? { widget_url: widgetUrl(req, s.token) } : {}) };
  });

  app.delete('/api/v1/partner/kyc-sessions/:session_id', { schema: { params: sessionParams, body: revokeBody }, attachValidation: true, config: partner }, async (req) => {
    const pid = partnerOf(req);
    const details = validationDetails(req);
    if (Object.keys(details).length > 0) throw badRequest(details);
    const b = bodyObject(req);
    const s = await sessionRun(() => ctx.kyc.sessions.revoke(pid, (req.params as { session_id: string }).session_id, typeof b.reason === 'string' ? b.reason : null));
    return { message: 'KYC session revoked', ...sessionView(s) };
  });

  app.post('/api/v1/partner/kyc-sessions/:session_id/resend', { schema: { params: sessionParams }, config: partner }, async (req) => {
    const pid = partnerOf(req);
    const s = await sessionRun(() => ctx.kyc.sessions.resend(pid, (req.params as { session_id: string }).session_id));
    return { message: 'KYC link re-sent', ...sessionView(s) };
  });

  // The hosted page (public: the token in the URL is the credential).
  app.get('/kyc/s/:token', { schema: { params: pageParams }, config: { access: 'public' as const, html: true } }, async (req, reply) => {
    const { token } = req.params as { token: string };
    const st = await sessionRun(() => ctx.kyc.sessions.open(token));
    await reply.type('text/html; charset=utf-8').header('cache-control', 'no-store').header('referrer-policy', 'no-referrer').send(pageHtml(token, st));
  });

  app.post('/kyc/s/:token/submit', { schema: { params: pageParams, body: submitBody }, attachValidation: true, config: { access: 'public' as const } }, async (req) => {
    const details = validationDetails(req);
    if (Object.keys(details).length > 0) throw badRequest(details);
    const { token } = req.params as { token: string };
    const b = bodyObject(req);
    const st = await sessionRun(() =>
      ctx.kyc.sessions.submit(token, { businessType: String(b.business_type), pan: String(b.pan), gstin: String(b.gstin ?? ''), accessRequestId: String(b.access_request_id ?? '') }),
    );
    return { status: st.session.status, overall_status: st.overall, verifications: st.verifications, ...(st.mock ? { mock: true } : {}) };
  });
}
