/**
 * WhatsApp message templates at the provider (the WhatsApp Cloud API on the Graph API):
 * submit (`POST /{waba_id}/message_templates`), list with statuses
 * (`GET /{waba_id}/message_templates`) and delete by name
 * (`DELETE /{waba_id}/message_templates?name=`). The access token travels only in the
 * `Authorization: Bearer` header — never in a URL, a log line or an error message.
 */
import { CatalogError } from './catalog-error.js';

export interface WhatsAppAccess {
  wabaId: string;
  phoneNumberId: string;
  accessToken: string;
}

/** A template as the provider lists it. */
export interface ProviderTemplate {
  id: string;
  name: string;
  language: string;
  status: string;
  category: string;
  rejectedReason: string | null;
}

const MAX_PAGES = 20;

export class TemplateProvider {
  constructor(
    private readonly baseUrl: string,
    private readonly timeoutMs: number,
  ) {}

  #url(wabaId: string, query: Record<string, string> = {}): string {
    const u = new URL(`${this.baseUrl.replace(/\/+$/, '')}/${encodeURIComponent(wabaId)}/message_templates`);
    for (const [k, v] of Object.entries(query)) u.searchParams.set(k, v);
    return u.toString();
  }

  async #call(method: string, url: string, access: WhatsAppAccess, body?: unknown): Promise<Record<string, unknown>> {
    let res: Response;
    try {
      res = await fetch(url, {
        method,
        headers: {
          authorization: `Bearer ${access.accessToken}`,
          accept: 'application/json',
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body !== undefined ? JSON.stringify(body) : undefined,
        signal: AbortSignal.timeout(this.timeoutMs),
      });
    } catch (err) {
      const timedOut = err instanceof Error && (err.name === 'TimeoutError' || err.name === 'AbortError');
      throw new CatalogError('provider', timedOut ? 'The WhatsApp API did not answer in time.' : 'The WhatsApp API could not be reached.', 'provider_unavailable');
    }
    const text = await res.text();
    let parsed: unknown = null;
    try {
      parsed = text === '' ? {} : JSON.parse(text);
    } catch {
      parsed = null;
    }
    const obj = typeof parsed === 'object' && parsed !== null && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : null;
    if (!res.ok) {
      const e = obj && typeof obj.error === 'object' && obj.error !== null ? (obj.error as Record<string, unknown>) : {};
      const code = typeof e.code === 'number' || typeof e.code === 'string' ? e.code : undefined;
      // The provider's own words, bounded and with the token (should it ever be echoed) removed.
      const said = typeof e.message === 'string' ? e.message.split(access.accessToken).join('[redacted]').slice(0, 300) : `HTTP ${res.status}`;
      const status = res.status >= 400 && res.status < 500 ? res.status : 502;
      throw new CatalogError('provider', `The WhatsApp API refused the request: ${said}`, status < 500 ? 'provider_rejected' : 'provider_error', undefined, status, code);
    }
    if (obj === null) throw new CatalogError('provider', 'The WhatsApp API answered something other than a JSON object.', 'provider_error');
    return obj;
  }

  /** Submit a template; the provider's id and status (PENDING unless it says otherwise). */
  async submit(access: WhatsAppAccess, t: { name: string; language: string; category: string; components: unknown[] }): Promise<{ id: string | null; status: string; category: string | null }> {
    const r = await this.#call('POST', this.#url(access.wabaId), access, { name: t.name, language: t.language, category: t.category, components: t.components });
    return {
      id: typeof r.id === 'string' ? r.id : null,
      status: typeof r.status === 'string' ? r.status : 'PENDING',
      category: typeof r.category === 'string' ? r.category : null,
    };
  }

  /** Every template of the WhatsApp Business Account, following the `after` cursor. */
  async list(access: WhatsAppAccess): Promise<ProviderTemplate[]> {
    const out: ProviderTemplate[] = [];
    let after: string | null = null;
    for (let page = 0; page < MAX_PAGES; page++) {
      const q: Record<string, string> = { fields: 'id,name,language,status,category,rejected_reason', limit: '100' };
      if (after !== null) q.after = after;
      const r = await this.#call('GET', this.#url(access.wabaId, q), access);
      const data = Array.isArray(r.data) ? r.data : [];
      for (const d of data) {
        if (typeof d !== 'object' || d === null) continue;
        const o = d as Record<string, unknown>;
        if (typeof o.name !== 'string' || typeof o.language !== 'string') continue;
        out.push({
          id: typeof o.id === 'string' ? o.id : '',
          name: o.name,
          language: o.language,
          status: typeof o.status === 'string' ? o.status : 'UNKNOWN',
          category: typeof o.category === 'string' ? o.category : '',
          rejectedReason: typeof o.rejected_reason === 'string' && o.rejected_reason !== 'NONE' ? o.rejected_reason : null,
        });
      }
      const paging = typeof r.paging === 'object' && r.paging !== null ? (r.paging as Record<string, unknown>) : {};
      const cursors = typeof paging.cursors === 'object' && paging.cursors !== null ? (paging.cursors as Record<string, unknown>) : {};
      if (typeof paging.next !== 'string' || typeof cursors.after !== 'string' || data.length === 0) break;
      after = cursors.after;
    }
    return out;
  }

  /** Delete every language of a template by name; a template the provider does not know counts as deleted. */
  async delete(access: WhatsAppAccess, name: string): Promise<void> {
    try {
      await this.#call('DELETE', this.#url(access.wabaId, { name }), access);
    } catch (err) {
      if (err instanceof CatalogError && err.providerStatus === 404) return;
      throw err;
    }
  }
}
