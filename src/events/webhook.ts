/**
 * One delivery attempt of a callback (webhook), as docs/callbacks.md describes:
 * HTTPS only, a form-encoded request signed with the account's secret, 3 s for the
 * whole exchange, only 200 counts, no redirects followed, and no connection to an
 * address CALLBACK_ALLOWED_NETWORKS does not allow (checked on the address actually
 * connected to, so DNS rebinding cannot get round it). The caller (the outbox)
 * decides when to retry, with retry.ts; this module never retries and never throws
 * for what the network or the receiver does.
 */
import { request as httpsRequest } from 'node:https';
import { lookup as dnsLookup, type LookupAddress, type LookupOptions } from 'node:dns';
import { isIP, type LookupFunction } from 'node:net';
import { performance } from 'node:perf_hooks';
import type { CallbackNetworkGuard } from './network-guard.js';
import { signCallback } from './signature.js';

export const WEBHOOK_USER_AGENT = 'SipEdge-Webhook/1.0';
export const SIGNATURE_HEADER = 'x-sipedge-signature';
export const TIMESTAMP_HEADER = 'x-sipedge-timestamp';
/** The form parameter carrying the callback's id, the same on every attempt (spec Events, rule 5). */
export const CALLBACK_ID_PARAM = 'CallbackId';
/** The spec's delivery rule 2: the receiver answers within 3 seconds. */
export const DEFAULT_TIMEOUT_MS = 3_000;
/** Bytes of a response body read (and thrown away) before the connection is cut. */
export const MAX_RESPONSE_BYTES = 64 * 1024;

export interface CallbackRequest {
  /** The callback URL; must be https://. May carry `user:password@` (sent as Basic auth). */
  url: string;
  method: 'GET' | 'POST';
  /** The callback's parameters (Event, timestamp, auth_id, CallUUID, …). */
  params: Readonly<Record<string, string>>;
  /** The account's signing secret. Never logged, never part of an outcome. */
  secret: string;
  /** Sent as the `CallbackId` parameter; the caller keeps it the same across retries. */
  callbackId: string;
  /** Deadline of the whole attempt: DNS, connect, TLS, request and response. @default 3000 */
  timeoutMs?: number;
  /** Which addresses may be connected to (CALLBACK_ALLOWED_NETWORKS). */
  allowed: CallbackNetworkGuard;
  /**
   * Trust anchors replacing Node's for this attempt. Production leaves it unset and
   * trusts a private CA through NODE_EXTRA_CA_CERTS; tests set it.
   */
  ca?: string | Buffer | Array<string | Buffer>;
  /** Also send the signature under this header name (`x-webhook-signature`); the value is the same. */
  signatureHeader?: string;
}

/**
 * Why an attempt failed: `bad_url`, `not_https` and `address_refused` are decided
 * before any connection and no retry can cure them; the rest may pass next time.
 */
export type DeliveryError =
  | 'bad_url'
  | 'not_https'
  | 'address_refused'
  | 'dns'
  | 'connect'
  | 'tls'
  | 'timeout'
  | 'status'
  | 'network';

export interface DeliveryOutcome {
  /** True only for HTTP 200. */
  ok: boolean;
  /** The receiver's HTTP status, when it answered. */
  status?: number;
  error?: DeliveryError;
  /** One line for the log: an error code and Node's message; never the secret or the URL's path, query or credentials. */
  detail?: string;
  /** False when a retry cannot succeed (bad URL, not HTTPS, refused address): dead-letter at once. */
  retryable: boolean;
  /** Milliseconds the attempt took. */
  ms: number;
}

/** The error the guarded lookup fails with; carried to the request's `error` event. */
class AddressRefusedError extends Error {
  readonly code = 'ERR_CALLBACK_ADDRESS_REFUSED';
  constructor(address: string, reason: string) {
    super(`callback address ${address} refused (${reason}); CALLBACK_ALLOWED_NETWORKS does not list it`);
  }
}

/**
 * A `lookup` for https.request that resolves as usual and keeps only the addresses
 * the guard allows, so the socket can only ever connect to a checked address.
 * Node calls it with `all: true` when it races IPv4 and IPv6 (autoSelectFamily).
 */
export function guardedLookup(guard: CallbackNetworkGuard): LookupFunction {
  return (hostname: string, options: LookupOptions, callback: (err: NodeJS.ErrnoException | null, address: string | LookupAddress[], family?: number) => void) => {
    dnsLookup(hostname, { ...options, all: true }, (err, addresses) => {
      if (err) return callback(err, '', 0);
      const usable = addresses.filter((a) => guard.check(a.address).allowed);
      if (usable.length === 0) {
        const first = addresses[0];
        const verdict = first ? guard.check(first.address) : null;
        const reason = verdict && !verdict.allowed ? verdict.reason : 'no address';
        return callback(new AddressRefusedError(first?.address ?? hostname, reason), '', 0);
      }
      if (options.all) return callback(null, usable);
      const a = usable[0] as LookupAddress;
      callback(null, a.address, a.family);
    });
  };
}

const DNS_CODES = new Set(['ENOTFOUND', 'EAI_AGAIN', 'EAI_FAIL', 'ENODATA', 'ESERVFAIL', 'EAI_NONAME']);
const CONNECT_CODES = new Set(['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ETIMEDOUT', 'EADDRNOTAVAIL', 'ENETDOWN', 'EHOSTDOWN']);

function errorCode(e: unknown): string {
  const err = e as { code?: unknown; errors?: unknown[] };
  if (typeof err?.code === 'string') return err.code;
  // Node's address racing (autoSelectFamily) reports an AggregateError of the attempts.
  if (Array.isArray(err?.errors) && err.errors.length > 0) return errorCode(err.errors[0]);
  return 'UNKNOWN';
}

function classify(e: unknown): DeliveryError {
  const code = errorCode(e);
  if (code === 'ERR_CALLBACK_ADDRESS_REFUSED') return 'address_refused';
  if (DNS_CODES.has(code)) return 'dns';
  if (CONNECT_CODES.has(code)) return 'connect';
  if (/CERT|SSL|TLS|UNABLE_TO_|SIGNATURE|HOSTNAME|ALTNAME/.test(code)) return 'tls';
  return 'network';
}

/**
 * Makes one attempt at delivering a callback and reports how it went. Resolves,
 * never rejects, for anything the network, DNS or the receiver does; throws only
 * for a method other than GET/POST (a caller's bug).
 *
 * POST: the parameters and `CallbackId` form-encoded in the body, which is what is
 * signed. GET: the same encoding appended to the URL's query string; the whole
 * query string as sent (without `?`) is what is signed.
 */
export function deliverCallback(req: CallbackRequest): Promise<DeliveryOutcome> {
  const started = performance.now();
  const outcome = (o: Omit<DeliveryOutcome, 'ms'>): DeliveryOutcome => ({ ...o, ms: Math.round(performance.now() - started) });
  const refuse = (error: DeliveryError, detail: string): Promise<DeliveryOutcome> => Promise.resolve(outcome({ ok: false, error, detail, retryable: false }));

  if (req.method !== 'GET' && req.method !== 'POST') throw new TypeError(`callback method must be GET or POST, got ${String(req.method)}`);
  let url: URL;
  try {
    url = new URL(req.url);
  } catch {
    return refuse('bad_url', 'the callback URL does not parse');
  }
  if (url.protocol !== 'https:') return refuse('not_https', `callback URLs must be https:// (got ${url.protocol}//); nothing was sent`);
  // An IP-literal host is never looked up, so it is checked here (WHATWG URL has
  // already turned 0x7f.1 and 2130706433 into 127.0.0.1).
  const host = url.hostname.replace(/^\[(.*)\]$/, '$1');
  if (host === '') return refuse('bad_url', 'the callback URL has no host');
  if (isIP(host) !== 0) {
    const verdict = req.allowed.check(host);
    if (!verdict.allowed) return refuse('address_refused', new AddressRefusedError(host, verdict.reason).message);
  }

  const form = new URLSearchParams(req.params);
  form.set(CALLBACK_ID_PARAM, req.callbackId);
  const encoded = form.toString();
  let path: string;
  let body: string;
  let signed: string;
  if (req.method === 'GET') {
    const query = url.search.length > 1 ? `${url.search.slice(1)}&${encoded}` : encoded;
    path = `${url.pathname}?${query}`;
    body = '';
    signed = query;
  } else {
    path = `${url.pathname}${url.search}`;
    body = encoded;
    signed = body;
  }
  // Signed afresh on every attempt, so a late retry is not near the receiver's 5-minute window.
  const timestamp = String(Math.floor(Date.now() / 1000));
  const headers: Record<string, string> = {
    'user-agent': WEBHOOK_USER_AGENT,
    [TIMESTAMP_HEADER]: timestamp,
    [SIGNATURE_HEADER]: signCallback(req.secret, timestamp, signed),
    connection: 'close',
  };
  const extra = req.signatureHeader?.toLowerCase();
  if (extra !== undefined && /^x-[a-z0-9-]{1,60}$/.test(extra)) headers[extra] = headers[SIGNATURE_HEADER] as string;
  if (req.method === 'POST') {
    headers['content-type'] = 'application/x-www-form-urlencoded';
    headers['content-length'] = String(Buffer.byteLength(body));
  }
  const scrub = (text: string): string => {
    let t = text.replace(/\s+/g, ' ').slice(0, 300);
    if (req.secret !== '') t = t.split(req.secret).join('[secret]');
    return t;
  };

  return new Promise<DeliveryOutcome>((resolve) => {
    let settled = false;
    let status: number | undefined;
    let request: ReturnType<typeof httpsRequest> | undefined;
    const byStatus = (): Omit<DeliveryOutcome, 'ms'> =>
      status === 200
        ? { ok: true, status, retryable: false }
        : { ok: false, status, error: 'status', detail: `HTTP ${status}`, retryable: true };
    const finish = (o: Omit<DeliveryOutcome, 'ms'>): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      request?.destroy();
      resolve(outcome(o));
    };
    const timeoutMs = req.timeoutMs ?? DEFAULT_TIMEOUT_MS;
    const timer = setTimeout(() => {
      // Headers already in: the receiver answered in time, the rest of the body does not matter.
      if (status !== undefined) finish(byStatus());
      else finish({ ok: false, error: 'timeout', detail: `no answer within ${timeoutMs} ms`, retryable: true });
    }, timeoutMs);

    try {
      request = httpsRequest({
        protocol: 'https:',
        host,
        port: url.port === '' ? 443 : Number(url.port),
        path,
        method: req.method,
        headers,
        // A fresh agent: no pooled socket that was checked for another host, no proxy.
        agent: false,
        lookup: guardedLookup(req.allowed),
        auth: url.username !== '' ? `${decodeURIComponent(url.username)}:${decodeURIComponent(url.password)}` : undefined,
        ca: req.ca,
      });
    } catch (e) {
      finish({ ok: false, error: 'bad_url', detail: scrub(`${errorCode(e)}: the request could not be built`), retryable: false });
      return;
    }
    request.on('error', (e) => {
      const error = classify(e);
      finish({ ok: false, error, detail: scrub(`${errorCode(e)}: ${(e as Error).message}`), retryable: error !== 'address_refused' });
    });
    request.on('response', (res) => {
      status = res.statusCode ?? 0;
      let bytes = 0;
      res.on('data', (chunk: Buffer) => {
        bytes += chunk.length;
        if (bytes > MAX_RESPONSE_BYTES) finish(byStatus());
      });
      res.on('end', () => finish(byStatus()));
      res.on('error', () => finish(byStatus()));
      res.on('aborted', () => finish(byStatus()));
    });
    request.end(body === '' ? undefined : body);
  });
}
