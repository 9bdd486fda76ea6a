/**
 * The WhatsApp Cloud API client (docs/messaging.md "Providers"): one request per send,
 * `POST {WHATSAPP_API_BASE_URL}/{phone_number_id}/messages` with the channel's access
 * token as a Bearer token, answered `{messages:[{id:"wamid…"}]}`.
 *
 * The Cloud API has no idempotency key, so what a failed attempt means decides whether
 * it may be made again (send.ts acts on it):
 * - `retry`: nothing can have been sent — the connection never opened, or the API
 *   answered an error without a message id (HTTP 429 or 5xx);
 * - `rejected`: HTTP 4xx, the provider's error code kept (`131047`, `100` …);
 * - `unknown`: the request was on the wire and no answer came in time (or the
 *   connection broke mid-answer): the message may have gone out. Never retried.
 *
 * The token is sent in the Authorization header only: never in a URL, a log line or
 * an outcome.
 */
import { request as httpRequest, Agent as HttpAgent, type IncomingMessage } from 'node:http';
import { request as httpsRequest, Agent as HttpsAgent } from 'node:https';

/** The Cloud API's request body (messaging_product, to, type and the type's object). */
export type CloudPayload = Record<string, unknown>;

export type SendOutcome =
  | { kind: 'ok'; providerMessageId: string }
  | { kind: 'rejected'; status: number; code: string; title: string }
  | { kind: 'retry'; detail: string }
  | { kind: 'unknown'; detail: string };

/** Sends one message through the Cloud API. */
export interface WhatsAppClient {
  send(phoneNumberId: string, accessToken: string, payload: CloudPayload): Promise<SendOutcome>;
  close(): void;
}

/** Bytes of a provider answer read at most. */
const MAX_ANSWER = 256 * 1024;

/** The provider's error (`{error:{code, message, error_data:{details}}}`), as code and title. */
export function providerError(body: unknown, status: number): { code: string; title: string } {
  const e = (body as { error?: { code?: unknown; message?: unknown; title?: unknown; error_subcode?: unknown } } | null)?.error;
  const code = typeof e?.code === 'number' || typeof e?.code === 'string' ? String(e.code) : `http_${status}`;
  const title = typeof e?.title === 'string' ? e.title : typeof e?.message === 'string' ? e.message : `HTTP ${status}`;
  return { code, title: title.slice(0, 300) };
}

/**
 * @param baseUrl WHATSAPP_API_BASE_URL (`https://graph.facebook.com/v21.0`; tests: a local stub).
 * @param timeoutMs the whole exchange, connect to the last byte of the answer.
 */
export function createWhatsAppClient(baseUrl: string, timeoutMs = 10_000): WhatsAppClient {
  const base = new URL(baseUrl.endsWith('/') ? baseUrl : `${baseUrl}/`);
  const https = base.protocol === 'https:';
  const agent = https ? new HttpsAgent({ keepAlive: true, maxSockets: 64 }) : new HttpAgent({ keepAlive: true, maxSockets: 64 });
  return {
    close: () => agent.destroy(),
    send(phoneNumberId, accessToken, payload) {
      const url = new URL(`${encodeURIComponent(phoneNumberId)}/messages`, base);
      const body = JSON.stringify(payload);
      return new Promise<SendOutcome>((resolve) => {
        let settled = false;
        // Whether the request may have reached the provider: once a socket is connected
        // (or a kept-alive one reused) and bytes were written, a failure is `unknown`.
        let onWire = false;
        const finish = (o: SendOutcome): void => {
          if (settled) return;
          settled = true;
          clearTimeout(timer);
          resolve(o);
        };
        const timer = setTimeout(() => {
          finish(onWire ? { kind: 'unknown', detail: `no answer within ${timeoutMs} ms` } : { kind: 'retry', detail: `no connection within ${timeoutMs} ms` });
          req.destroy();
        }, timeoutMs);
        const req = (https ? httpsRequest : httpRequest)(url, {
          method: 'POST',
          agent,
          headers: {
            authorization: `Bearer ${accessToken}`,
            'content-type': 'application/json',
            'content-length': String(Buffer.byteLength(body)),
            accept: 'application/json',
          },
        });
        req.on('socket', (s) => {
          if (req.reusedSocket) onWire = true;
          else s.once(https ? 'secureConnect' : 'connect', () => (onWire = true));
        });
        req.on('error', (e: NodeJS.ErrnoException) => {
          const code = e.code ?? 'ERROR';
          finish(onWire ? { kind: 'unknown', detail: `${code} after the request was sent` } : { kind: 'retry', detail: `${code} before the request was sent` });
        });
        req.on('response', (res: IncomingMessage) => {
          const status = res.statusCode ?? 0;
          const chunks: Buffer[] = [];
          let size = 0;
          res.on('data', (c: Buffer) => {
            size += c.length;
            if (size <= MAX_ANSWER) chunks.push(c);
          });
          res.on('error', () => finish({ kind: 'unknown', detail: 'the answer broke off' }));
          res.on('end', () => {
            let parsed: unknown = null;
            try {
              parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
            } catch {
              parsed = null;
            }
            if (status >= 200 && status < 300) {
              const id = (parsed as { messages?: Array<{ id?: unknown }> } | null)?.messages?.[0]?.id;
              if (typeof id === 'string' && id !== '') finish({ kind: 'ok', providerMessageId: id });
              // Accepted without an id: it may have gone out; never sent again.
              else finish({ kind: 'unknown', detail: `HTTP ${status} without a message id` });
            } else if (status === 429 || status >= 500) {
              finish({ kind: 'retry', detail: `HTTP ${status}` });
            } else {
              finish({ kind: 'rejected', status, ...providerError(parsed, status) });
            }
          });
        });
        req.end(body);
      });
    },
  };
}
