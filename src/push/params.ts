/**
 * RFC 8599 push parameters of a Contact URI (`pn-provider`, `pn-prid`, `pn-param`):
 * parsing and checking at REGISTER, reading back from a stored binding, and the
 * shortened form that is all logs and the API ever show of a device token.
 */
import { SipError } from '../errors.js';
import type { Binding } from '../store/location/location.js';

/** The push services this edge can send through. */
export const PUSH_PROVIDERS = ['apns', 'fcm'] as const;
export type PushProvider = (typeof PUSH_PROVIDERS)[number];

/** The push parameters of one binding. */
export interface PushParams {
  provider: PushProvider;
  /** The device token (APNs) or registration token (FCM): a secret of the device, never logged whole. */
  prid: string;
  /** APNs: `<team id>.<topic>`; FCM: the project id. Null when absent. */
  param: string | null;
}

/** Longest values accepted (an APNs token is 64 hex digits, an FCM token about 160 characters). */
export const PN_PROVIDER_MAX = 32;
export const PN_PRID_MAX = 1024;
export const PN_PARAM_MAX = 256;

const PROVIDER_RE = /^[a-z0-9][a-z0-9.-]*$/i;
// RFC 8599 §9: pn-prid and pn-param are `paramchar`s of RFC 3261 (unreserved, escaped, param-unreserved).
const VALUE_RE = /^(?:[A-Za-z0-9\-_.!~*'()[\]/:&+$]|%[0-9A-Fa-f]{2})+$/;

/** 555 Push Notification Service Not Supported (RFC 8599 §4.1.1): the Feature-Caps of what is. */
export function unsupportedProvider(): SipError {
  return new SipError(555, 'Push Notification Service Not Supported', 'REG_PUSH_PROVIDER', [['Feature-Caps', featureCaps(PUSH_PROVIDERS)]]);
}

/** `Feature-Caps: *;+sip.pns="apns,fcm"` (RFC 8599 §12.1). */
export function featureCaps(providers: readonly string[]): string {
  return `*;+sip.pns="${providers.join(',')}"`;
}

/**
 * The push parameters of a Contact URI's parameters, checked: null when it has none;
 * a 400 naming the bad parameter(s) when malformed or oversized; 555 for a provider
 * this edge does not send through.
 */
export function parsePushParams(params: ReadonlyMap<string, string | null>): PushParams | null {
  const provider = params.get('pn-provider');
  const prid = params.get('pn-prid');
  const param = params.get('pn-param');
  if (provider === undefined && prid === undefined && param === undefined) return null;
  const bad: string[] = [];
  if (provider === undefined || provider === null || provider.length > PN_PROVIDER_MAX || !PROVIDER_RE.test(provider)) bad.push('pn-provider');
  // RFC 8599 §5.1: pn-provider alone asks whether the service is supported (the 200 says so
  // in Feature-Caps); no push is ever sent to such a binding. Otherwise a token is needed.
  const query = prid === undefined && param === undefined;
  if (!query && (prid === undefined || prid === null || prid.length > PN_PRID_MAX || !VALUE_RE.test(prid))) bad.push('pn-prid');
  if (param !== undefined && (param === null || param.length > PN_PARAM_MAX || !VALUE_RE.test(param))) bad.push('pn-param');
  if (bad.length > 0) {
    throw new SipError(400, `Bad ${bad.join(', ')} parameter${bad.length > 1 ? 's' : ''}`, 'REG_BAD_PUSH_PARAMS', [
      ['Warning', `399 sip-edge "malformed or oversized ${bad.join(', ')}"`],
    ]);
  }
  const p = (provider as string).toLowerCase();
  if (!(PUSH_PROVIDERS as readonly string[]).includes(p)) throw unsupportedProvider();
  if (query) return null;
  if (p === 'apns' && param !== undefined && topicOf(param as string) === null) {
    throw new SipError(400, 'Bad pn-param parameter', 'REG_BAD_PUSH_PARAMS', [['Warning', '399 sip-edge "pn-param for apns is <team id>.<bundle id>"']]);
  }
  return { provider: p as PushProvider, prid: decode(prid as string), param: param === undefined ? null : decode(param as string) };
}

function decode(v: string): string {
  try {
    return decodeURIComponent(v);
  } catch {
    return v;
  }
}

/** The push parameters of a stored binding (read from its Contact URI), or null. Never throws. */
export function pushOf(b: Pick<Binding, 'uri'>): PushParams | null {
  if (!/;pn-/i.test(b.uri)) return null;
  const params = new Map<string, string | null>();
  const q = b.uri.indexOf('?');
  const uriPart = q >= 0 ? b.uri.slice(0, q) : b.uri;
  for (const piece of uriPart.split(';').slice(1)) {
    const eq = piece.indexOf('=');
    params.set((eq < 0 ? piece : piece.slice(0, eq)).toLowerCase(), eq < 0 ? null : piece.slice(eq + 1));
  }
  try {
    return parsePushParams(params);
  } catch {
    return null;
  }
}

/**
 * A binding that sleeps (RFC 8599 §5): its push parameters are kept while the stream flow
 * it registered on is gone (the registrar wrote it back without a connection).
 */
export function isAsleep(b: Binding): boolean {
  return b.transport !== 'udp' && b.connId === null && pushOf(b) !== null;
}

/** A device token as logs and the API show it: its first 6 and last 4 characters. */
export function shortPrid(prid: string): string {
  return prid.length <= 12 ? `${prid.slice(0, 2)}…` : `${prid.slice(0, 6)}…${prid.slice(-4)}`;
}

/** A Contact URI with its pn-prid shortened (what the API and logs show). */
export function redactContact(uri: string): string {
  return uri.replace(/(;pn-prid=)([^;?>]*)/i, (_m, k: string, v: string) => k + shortPrid(v));
}

/**
 * The APNs topic of a pn-param (RFC 8599 §13.2: `<team id>.<topic>`): the part after the
 * team id, e.g. `ABCDE12345.com.example.phone.voip` → `com.example.phone.voip`. Null when
 * there is no topic after a team id.
 */
export function topicOf(param: string): string | null {
  const dot = param.indexOf('.');
  if (dot <= 0 || dot === param.length - 1) return null;
  return param.slice(dot + 1);
}

/** The `apns-push-type` of a topic: `voip` for a PushKit topic (`.voip`), else `alert`. */
export function apnsPushType(topic: string): 'voip' | 'alert' {
  return topic.endsWith('.voip') ? 'voip' : 'alert';
}
