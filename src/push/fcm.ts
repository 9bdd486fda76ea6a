/**
 * FCM HTTP v1 (docs/push.md "FCM"): an OAuth2 access token from the service account's
 * token URI (the JWT bearer grant of RFC 7523, signed RS256), then
 * POST <FCM_URL>/v1/projects/<project>/messages:send with a high-priority data message.
 */
import { importPKCS8, SignJWT, type CryptoKey, type KeyObject } from 'jose';
import type { PushAttempt, PushRequest } from './types.js';

/** The fields of a Google service account file the edge uses. */
export interface ServiceAccount {
  client_email: string;
  private_key: string;
  token_uri: string;
  project_id?: string;
}

export const FCM_SCOPE = 'https://www.googleapis.com/auth/firebase.messaging';

/** Reads a service account JSON; throws an Error naming what is missing. */
export function parseServiceAccount(text: string): ServiceAccount {
  const o = JSON.parse(text) as Record<string, unknown>;
  for (const k of ['client_email', 'private_key', 'token_uri'] as const) {
    if (typeof o[k] !== 'string' || o[k] === '') throw new Error(`no ${k}`);
  }
  return o as unknown as ServiceAccount;
}

export interface FcmOptions {
  url: string;
  account: ServiceAccount;
  timeoutMs?: number;
  now?: () => number;
}

export class FcmClient {
  #key: Promise<CryptoKey | KeyObject>;
  #token: { value: string; until: number } | null = null;
  readonly #now: () => number;

  constructor(private readonly opts: FcmOptions) {
    this.#now = opts.now ?? Date.now;
    this.#key = importPKCS8(opts.account.private_key, 'RS256');
    this.#key.catch(() => undefined);
  }

  /** The signed assertion of the JWT bearer grant (RFC 7523 §2.1). */
  async assertion(): Promise<string> {
    const iat = Math.floor(this.#now() / 1000);
    return new SignJWT({ scope: FCM_SCOPE })
      .setProtectedHeader({ alg: 'RS256', typ: 'JWT' })
      .setIssuer(this.opts.account.client_email)
      .setAudience(this.opts.account.token_uri)
      .setIssuedAt(iat)
      .setExpirationTime(iat + 3600)
      .sign(await this.#key);
  }

  /** An access token, kept until a minute before it expires. */
  async accessToken(): Promise<string> {
    const now = this.#now();
    if (this.#token && now < this.#token.until) return this.#token.value;
    const res = await fetch(this.opts.account.token_uri, {
      method: 'POST',
      headers: { 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer', assertion: await this.assertion() }).toString(),
      signal: AbortSignal.timeout(this.opts.timeoutMs ?? 5000),
    });
    if (!res.ok) throw new Error(`token endpoint answered ${res.status}`);
    const j = (await res.json()) as { access_token?: unknown; expires_in?: unknown };
    if (typeof j.access_token !== 'string') throw new Error('token endpoint gave no access_token');
    const ttl = typeof j.expires_in === 'number' ? j.expires_in : 3600;
    this.#token = { value: j.access_token, until: now + Math.max(0, ttl - 60) * 1000 };
    return j.access_token;
  }

  async send(req: PushRequest): Promise<PushAttempt> {
    const project = req.push.param ?? this.opts.account.project_id;
    if (!project) return { outcome: 'failed', status: 0, reason: 'no project (pn-param)' };
    const token = await this.accessToken();
    const res = await fetch(`${this.opts.url.replace(/\/$/, '')}/v1/projects/${encodeURIComponent(project)}/messages:send`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        message: {
          token: req.push.prid,
          data: { 'call-id': req.callId, method: req.method },
          android: { priority: 'high', ttl: '0s' },
        },
      }),
      signal: AbortSignal.timeout(this.opts.timeoutMs ?? 5000),
    });
    if (res.ok) return { outcome: 'sent', status: res.status };
    const text = await res.text();
    if (res.status === 401) this.#token = null;
    if (/UNREGISTERED/.test(text)) return { outcome: 'gone', status: res.status, reason: 'UNREGISTERED' };
    return { outcome: res.status >= 500 ? 'retry' : 'failed', status: res.status };
  }

  close(): void {}
}
