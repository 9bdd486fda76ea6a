/**
 * SIP message model (RFC 3261 §7). Pure data; parser.ts builds it from bytes,
 * response.ts and serializer functions turn it back into bytes.
 *
 * Header names are stored in their canonical lower-case long form ('v' → 'via',
 * 'm' → 'contact', …). Values are unfolded (RFC 3261 §7.3.1: LWS folding becomes
 * one space) and trimmed, otherwise exactly as on the wire.
 */

export interface RawHeader {
  /** canonical lower-case long name, e.g. 'via', 'call-id', 'www-authenticate' */
  name: string;
  /** unfolded, trimmed value of this header line (may hold a comma-separated list) */
  value: string;
}

interface SipMessageBase {
  /** Every header line in wire order. */
  headers: RawHeader[];
  /** Message body (exactly Content-Length bytes; empty Buffer when none). */
  body: Buffer;
}

export interface SipRequest extends SipMessageBase {
  kind: 'request';
  /** Method token, case-sensitive as sent (RFC 3261 §7.1). */
  method: string;
  /** Request-URI text as sent. */
  uri: string;
}

export interface SipResponse extends SipMessageBase {
  kind: 'response';
  status: number;
  reason: string;
}

export type SipMessage = SipRequest | SipResponse;

/** A SIP or SIPS URI (RFC 3261 §19.1). Other schemes (tel:, http:) keep only scheme + raw. */
export interface SipUri {
  /** lower-case scheme: 'sip', 'sips', or another (then host is '' and raw holds the rest) */
  scheme: string;
  /** user part, percent-escapes decoded; null when absent */
  user: string | null;
  password: string | null;
  /** host, lower-cased; IPv6 references keep their brackets: '[2001:db8::1]' */
  host: string;
  port: number | null;
  /** uri-parameters, names lower-cased; a parameter without value maps to null */
  params: Map<string, string | null>;
  /** the `?headers` part, raw, or null */
  headers: string | null;
  /** the URI exactly as it appeared */
  raw: string;
}

/** name-addr or addr-spec with header parameters (From, To, Contact, Route, Path …). */
export interface NameAddr {
  /** display name with quotes removed and escapes resolved, or null */
  displayName: string | null;
  uri: SipUri;
  /** header parameters (after the URI, or after '>'), names lower-cased */
  params: Map<string, string | null>;
  /** this one value exactly as it appeared (for echoing a Contact back) */
  raw: string;
}

/** One Via value (RFC 3261 §20.42). */
export interface Via {
  /** upper-case transport token: 'UDP', 'TCP', 'TLS', 'WS', 'WSS', 'SCTP' … */
  transport: string;
  /** sent-by host as written (lower-cased; IPv6 with brackets) */
  host: string;
  port: number | null;
  /** via-params in order, names lower-cased; 'rport' with no value maps to null */
  params: Map<string, string | null>;
  branch: string | null;
  raw: string;
}

export interface CSeq {
  seq: number;
  method: string;
}

/** Digest credentials from Authorization / Proxy-Authorization (RFC 7616 §3.4). */
export interface DigestCredentials {
  /** auth scheme, as sent ('Digest') */
  scheme: string;
  /** auth-params, names lower-cased, values unquoted with escapes resolved */
  params: Map<string, string>;
}

/** A Contact header value list: either '*' or name-addrs. */
export type ContactList = { star: true } | { star: false; contacts: NameAddr[] };
