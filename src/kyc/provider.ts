/**
 * The verification provider (docs/kyc.md "Providers"): real-mode checks go to one
 * provider behind {@link KycProvider}. The project ships the HTTP adapter
 * ({@link httpKycProvider}, `KYC_PROVIDER_URL` + `KYC_PROVIDER_SECRET`); test mode never
 * calls a provider.
 *
 * The HTTP protocol: `POST <KYC_PROVIDER_URL>/<operation>` with
 * `Authorization: Bearer <secret>` and a JSON body `{sub_account_id, …fields}`;
 * operations `verify-pan {pan}`, `verify-gst {gstin}`, `cin/search {company_name}`,
 * `cin/confirm {company_name, cin}`, `digilocker/initiate {redirect_url}`,
 * `digilocker/verify {access_request_id}`. Verifications answer
 * `{status: verified|failed|pending, reference?}`, the search `{matches: [{cin, company_name}]}`,
 * the DigiLocker start `{authorization_url, access_request_id}`.
 */
import type { RowStatus } from '../store/kyc/kyc.js';

export interface ProviderVerdict {
  status: RowStatus;
  reference: string | null;
}

export interface CinMatch {
  cin: string;
  company_name: string;
}

export interface KycProvider {
  verify(op: 'verify-pan' | 'verify-gst' | 'cin/confirm' | 'digilocker/verify', subAuthId: string, fields: Record<string, string>): Promise<ProviderVerdict>;
  cinSearch(subAuthId: string, companyName: string): Promise<CinMatch[]>;
  digilockerInitiate(subAuthId: string, redirectUrl: string): Promise<{ authorization_url: string; access_request_id: string }>;
}

/** The provider did not answer in time: the verification stays pending. */
export class ProviderTimeoutError extends Error {
  constructor() {
    super('the KYC provider did not answer in time');
    this.name = 'ProviderTimeoutError';
  }
}

/** The provider answered with an error or nonsense (its body is not repeated: it may echo the input). */
export class ProviderFailedError extends Error {
  constructor(readonly status: number) {
    super(`the KYC provider answered ${status}`);
    this.name = 'ProviderFailedError';
  }
}

export interface HttpProviderOptions {
  url: string;
  secret: string;
  /** ms @default 5000 */
  timeoutMs?: number;
}

/** The HTTP adapter of {@link KycProvider}. */
export function httpKycProvider(o: HttpProviderOptions): KycProvider {
  const base = o.url.replace(/\/+$/, '');
  const timeoutMs = o.timeoutMs ?? 5000;
  const call = async (op: string, body: Record<string, string>): Promise<Record<string, unknown>> => {
    let res: Response;
    try {
      res = await fetch(`${base}/${op}`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${o.secret}`, accept: 'application/json' },
        body: JSON.stringify(body),
        signal: AbortSignal.timeout(timeoutMs),
      });
    } catch (err) {
      if (err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError')) throw new ProviderTimeoutError();
      throw new ProviderFailedError(0);
    }
    if (!res.ok) {
      await res.body?.cancel();
      throw new ProviderFailedError(res.status);
    }
    const v: unknown = await res.json().catch(() => null);
    if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new ProviderFailedError(res.status);
    return v as Record<string, unknown>;
  };
  return {
    async verify(op, subAuthId, fields) {
      const r = await call(op, { sub_account_id: subAuthId, ...fields });
      const s = r.status;
      if (s !== 'verified' && s !== 'failed' && s !== 'pending') throw new ProviderFailedError(200);
      return { status: s, reference: typeof r.reference === 'string' ? r.reference : null };
    },
    async cinSearch(subAuthId, companyName) {
      const r = await call('cin/search', { sub_account_id: subAuthId, company_name: companyName });
      const m = Array.isArray(r.matches) ? r.matches : [];
      return m
        .filter((x): x is Record<string, unknown> => typeof x === 'object' && x !== null)
        .map((x) => ({ cin: String(x.cin ?? ''), company_name: String(x.company_name ?? '') }));
    },
    async digilockerInitiate(subAuthId, redirectUrl) {
      const r = await call('digilocker/initiate', { sub_account_id: subAuthId, redirect_url: redirectUrl });
      if (typeof r.authorization_url !== 'string' || typeof r.access_request_id !== 'string') throw new ProviderFailedError(200);
      return { authorization_url: r.authorization_url, access_request_id: r.access_request_id };
    },
  };
}
