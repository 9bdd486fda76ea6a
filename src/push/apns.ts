/**
 * APNs provider API (docs/push.md "APNs"): HTTP/2 to APNS_URL with token-based provider
 * authentication — an ES256 JWT (`kid` = APNS_KEY_ID, `iss` = APNS_TEAM_ID, `iat`) signed
 * with the `.p8` key, made again before Apple's hour is up — POST /3/device/<token>.
 */
import { connect, type ClientHttp2Session } from 'node:http2';
import { importPKCS8, SignJWT, type CryptoKey, type KeyObject } from 'jose';
import { apnsPushType, topicOf } from './params.js';
import type { PushAttempt, PushRequest } from './types.js';

export interface ApnsOptions {
  url: string;
  /** The `.p8` key (PEM, PKCS #8). */
  keyPem: string;
  keyId: string;
  teamId: string;
  /** Give up on one attempt after this long, ms. @default 5000 */
  timeoutMs?: number;
  now?: () => number;
}

/** A provider token is made again after this long (Apple: at most once per 20 min, valid for an hour). */
export const APNS_TOKEN_TTL_MS = 50 * 60_000;

export class ApnsClient {
  #session: ClientHttp2Session | null = null;
  #key: Promise<CryptoKey | KeyObject>;
  #token: { jwt: string; at: number } | null = null;
  readonly #now: () => number;

  constructor(private readonly opts: ApnsOptions) {
    this.#now = opts.now ?? Date.now;
    this.#key = importPKCS8(opts.keyPem, 'ES256');
    // A bad key surfaces at the first push as a failure, never as an unhandled rejection.
    this.#key.catch(() => undefined);
  }

  /** The provider token (RFC 7519 JWT, ES256), kept until {@link APNS_TOKEN_TTL_MS} old. */
  async token(): Promise<string> {
    const now = this.#now();
    if (this.#token && now - this.#token.at < APNS_TOKEN_TTL_MS) return this.#token.jwt;
    const jwt = await new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: this.opts.keyId })
      .setIssuer(this.opts.teamId)
      .setIssuedAt(Math.floor(now / 1000))
      .sign(await this.#key);
    this.#token = { jwt, at: now };
    return jwt;
  }

  async send(req: PushRequest): Promise<PushAttempt> {
    const topic = req.push.param ? topicOf(req.push.param) : null;
    if (!topic) return { outcome: 'failed', status: 0, reason: 'no topic (pn-param)' };
    const jwt = await this.token();
    const body = JSON.stringify({
      aps: apnsPushType(topic) === 'voip' ? {} : { 'content-available': 1 },
      'call-id': req.callId,
      method: req.method,
    });
    const { status, text } = await this.post(
      {
        ':method': 'POST',
        ':path': `/3/device/${encodeURIComponent(req.push.prid)}`,
        authorization: `bearer ${jwt}`,
        'apns-topic': topic,
        'apns-push-type': apnsPushType(topic),
        'apns-priority': '10',
        'apns-expiration': '0',
        'content-type': 'application/json',
      },
      body,
    );
    if (status === 200) return { outcome: 'sent', status };
    let reason = '';
    try {
      reason = String((JSON.parse(text) as { reason?: unknown }).reason ?? '');
    } catch {
      // not JSON: the status says it
    }
    if (status === 410 || reason === 'BadDeviceToken' || reason === 'Unregistered') return { outcome: 'gone', status, reason };
    if (status === 403 && reason === 'ExpiredProviderToken') this.#token = null;
    return { outcome: status >= 500 ? 'retry' : 'failed', status, reason };
  }

  private session(): ClientHttp2Session {
    const s = this.#session;
    if (s && !s.closed && !s.destroyed) return s;
    const fresh = connect(this.opts.url);
    fresh.on('error', () => undefined);
    fresh.on('close', () => {
      if (this.#session === fresh) this.#session = null;
    });
    fresh.unref();
    this.#session = fresh;
    return fresh;
  }

  private post(headers: Record<string, string>, body: string): Promise<{ status: number; text: string }> {
    return new Promise((resolve, reject) => {
      let session: ClientHttp2Session;
      try {
        session = this.session();
      } catch (err) {
        reject(err instanceof Error ? err : new Error(String(err)));
        return;
      }
      const stream = session.request(headers);
      const timer = setTimeout(() => stream.close(), this.opts.timeoutMs ?? 5000);
      timer.unref();
      let status = 0;
      const chunks: Buffer[] = [];
      stream.on('response', (h) => {
        status = Number(h[':status']);
      });
      stream.on('data', (c: Buffer) => chunks.push(c));
      stream.on('end', () => {
        clearTimeout(timer);
        if (status === 0) reject(new Error('no response'));
        else resolve({ status, text: Buffer.concat(chunks).toString('utf8') });
      });
      stream.on('error', (err) => {
        clearTimeout(timer);
        this.#session?.destroy();
        reject(err);
      });
      stream.end(body);
    });
  }

  close(): void {
    this.#session?.close();
    this.#session = null;
  }
}
