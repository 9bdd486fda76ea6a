/**
 * One HTTPS exchange with a URL an application chose (documents, Play audio), under
 * the callbacks' rules (docs/callbacks.md): https:// only, no redirects followed, a
 * deadline for the whole exchange, a cap on the body, and no connection to an
 * address the CallbackNetworkGuard refuses (checked on the address connected to,
 * through events/webhook.ts `guardedLookup`). Never throws for what the network does;
 * a failure's reason names no path, query or credentials of the URL.
 */
import { request as httpsRequest } from 'node:https';
import type { IncomingHttpHeaders } from 'node:http';
import { isIP } from 'node:net';
import type { CallbackNetworkGuard } from '../events/network-guard.js';
import { guardedLookup } from '../events/webhook.js';

export interface HttpsExchange {
  url: string;
  method: 'GET' | 'POST';
  headers: Record<string, string>;
  body?: string;
  guard: CallbackNetworkGuard;
  timeoutMs: number;
  maxBytes: number;
  /** Trust anchors replacing Node's (tests); production trusts NODE_EXTRA_CA_CERTS. */
  ca?: string | Buffer | Array<string | Buffer>;
}

export type HttpsAnswer = { ok: true; status: number; headers: IncomingHttpHeaders; body: Buffer } | { ok: false; reason: string };

/** `scheme://host:port` of a URL: what a log line or a reason may show of it. */
export function origin(url: string): string {
  try {
    return new URL(url).origin;
  } catch {
    return '(unparsable URL)';
  }
}

export function httpsExchange(x: HttpsExchange): Promise<HttpsAnswer> {
  let url: URL;
  try {
    url = new URL(x.url);
  } catch {
    return Promise.resolve({ ok: false, reason: 'the URL does not parse' });
  }
  if (url.protocol !== 'https:') return Promise.resolve({ ok: false, reason: `only https:// URLs are fetched (got ${url.protocol}//)` });
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (isIP(host) !== 0) {
    const verdict = x.guard.check(host);
    if (!verdict.allowed) return Promise.resolve({ ok: false, reason: `address ${host} refused (${verdict.reason})` });
  }
  const path = `${url.pathname}${url.search}`;
  return new Promise((resolve) => {
    let settled = false;
    let req: ReturnType<typeof httpsRequest> | undefined;
    const finish = (a: HttpsAnswer): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      req?.destroy();
      resolve(a);
    };
    const timer = setTimeout(() => finish({ ok: false, reason: `no complete answer from ${origin(x.url)} within ${x.timeoutMs} ms` }), x.timeoutMs);
    const headers: Record<string, string> = { ...x.headers, connection: 'close' };
    if (x.body !== undefined) headers['content-length'] = String(Buffer.byteLength(x.body));
    try {
      req = httpsRequest({
        protocol: 'https:',
        host,
        port: url.port === '' ? 443 : Number(url.port),
        path,
        method: x.method,
        headers,
        agent: false,
        lookup: guardedLookup(x.guard),
        auth: url.username !== '' ? `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` : undefined,
        ca: x.ca,
      });
    } catch (e) {
      finish({ ok: false, reason: `the request could not be built (${(e as { code?: string }).code ?? 'error'})` });
      return;
    }
    req.on('error', (e: NodeJS.ErrnoException) => {
      // The message of a refused address names the address, never the URL.
      const code = e.code ?? (e as { errors?: NodeJS.ErrnoException[] }).errors?.[0]?.code ?? 'error';
      finish({ ok: false, reason: code === 'ERR_CALLBACK_ADDRESS_REFUSED' ? e.message : `${code} reaching ${origin(x.url)}` });
    });
    req.on('response', (res) => {
      const status = res.statusCode ?? 0;
      const chunks: Buffer[] = [];
      let bytes = 0;
      res.on('data', (c: Buffer) => {
        bytes += c.length;
        if (bytes > x.maxBytes) finish({ ok: false, reason: `the answer from ${origin(x.url)} is over ${x.maxBytes} bytes` });
        else chunks.push(c);
      });
      res.on('end', () => finish({ ok: true, status, headers: res.headers, body: Buffer.concat(chunks) }));
      res.on('error', () => finish({ ok: false, reason: `the answer from ${origin(x.url)} was cut` }));
      res.on('aborted', () => finish({ ok: false, reason: `the answer from ${origin(x.url)} was cut` }));
    });
    req.end(x.body);
  });
}
