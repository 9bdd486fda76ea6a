/**
 * Fetching an application document (docs/voicexml.md "Requests"): the answer URL,
 * a Gather/Record/Dial action, a Redirect. The request is a callback in all but
 * name: form-encoded parameters (GET: the query string; POST: the body), signed
 * with the account's secret exactly as callbacks are (events/signature.ts, the same
 * headers and user agent), https:// only, no redirects, the SSRF guard. Only a 2xx
 * answer whose body looks like XML counts.
 */
import type { CallbackNetworkGuard } from '../events/network-guard.js';
import { signCallback } from '../events/signature.js';
import { SIGNATURE_HEADER, TIMESTAMP_HEADER, WEBHOOK_USER_AGENT } from '../events/webhook.js';
import { MAX_DOCUMENT_BYTES, type UrlTarget } from './document.js';
import { httpsExchange, origin } from './https-get.js';

/** How long an application has to answer: 5 s for DNS, connect, TLS, request and answer. */
export const DEFAULT_FETCH_TIMEOUT_MS = 5_000;

export interface FetchDocumentRequest {
  target: UrlTarget;
  params: Readonly<Record<string, string>>;
  /** The account's signing secret; null = sent unsigned. Never logged. */
  secret: string | null;
  guard: CallbackNetworkGuard;
  /** @default 5000 */
  timeoutMs?: number;
  /** @default 102400 */
  maxBytes?: number;
  /** Trust anchors replacing Node's (tests). */
  ca?: string | Buffer | Array<string | Buffer>;
}

export type FetchResult = { ok: true; xml: string; status: number } | { ok: false; reason: string };

/** A body is XML-ish when, past a BOM and white space, it starts with `<`. */
function looksLikeXml(body: string): boolean {
  return /^\uFEFF?\s*</.test(body);
}

/** Fetches one document. Resolves for every outcome; throws only for a method other than GET/POST. */
export async function fetchDocument(req: FetchDocumentRequest): Promise<FetchResult> {
  const { url, method } = req.target;
  if (method !== 'GET' && method !== 'POST') throw new TypeError(`document method must be GET or POST, got ${String(method)}`);
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    return { ok: false, reason: 'the URL does not parse' };
  }
  const encoded = new URLSearchParams(req.params).toString();
  let target = url;
  let body: string | undefined;
  let signed: string;
  if (method === 'GET') {
    const query = parsed.search.length > 1 ? `${parsed.search.slice(1)}&${encoded}` : encoded;
    parsed.search = '';
    parsed.hash = '';
    target = `${parsed.toString()}?${query}`;
    signed = query;
  } else {
    body = encoded;
    signed = body;
  }
  const headers: Record<string, string> = { 'user-agent': WEBHOOK_USER_AGENT, accept: 'application/xml, text/xml' };
  if (req.secret !== null) {
    const timestamp = String(Math.floor(Date.now() / 1000));
    headers[TIMESTAMP_HEADER] = timestamp;
    headers[SIGNATURE_HEADER] = signCallback(req.secret, timestamp, signed);
  }
  if (method === 'POST') headers['content-type'] = 'application/x-www-form-urlencoded';
  const a = await httpsExchange({
    url: target,
    method,
    headers,
    body,
    guard: req.guard,
    timeoutMs: req.timeoutMs ?? DEFAULT_FETCH_TIMEOUT_MS,
    maxBytes: req.maxBytes ?? MAX_DOCUMENT_BYTES,
    ca: req.ca,
  });
  if (!a.ok) return a;
  if (a.status < 200 || a.status > 299) return { ok: false, reason: `HTTP ${a.status} from ${origin(url)}` };
  const xml = a.body.toString('utf8');
  if (!looksLikeXml(xml)) return { ok: false, reason: `the answer from ${origin(url)} is not XML` };
  return { ok: true, xml: xml.replace(/^\uFEFF/, ''), status: a.status };
}

export type FallbackResult =
  | { ok: true; xml: string; status: number; answeredBy: 'primary' | 'fallback'; target: UrlTarget }
  | { ok: false; reason: string };

/**
 * The answer URL, then the fallback URL when the first fails (the vendor's
 * `fallback_url`). Says which one answered.
 */
export async function fetchWithFallback(
  primary: UrlTarget,
  fallback: UrlTarget | null,
  req: Omit<FetchDocumentRequest, 'target'>,
  fetch: (r: FetchDocumentRequest) => Promise<FetchResult> = fetchDocument,
): Promise<FallbackResult> {
  const first = await fetch({ ...req, target: primary });
  if (first.ok) return { ...first, answeredBy: 'primary', target: primary };
  if (fallback === null) return first;
  const second = await fetch({ ...req, target: fallback });
  if (second.ok) return { ...second, answeredBy: 'fallback', target: fallback };
  return { ok: false, reason: `${first.reason}; fallback: ${second.reason}` };
}
