import type { SipUri } from '../sip/message.js';

/**
 * How the edge reads a Request-URI (pure). Account SIP domains are
 * `<auth_id lower-cased>.<sipDomain>` (docs/design.md); an account's applications
 * are `sip:<app_id>@app.<account domain>` (the Application resource's
 * `sip_uri`); telephone numbers are `tel:` URIs, `user=phone` SIP URIs
 * (RFC 3261 §19.1.6) or a user part of digits.
 */
export type ParsedTarget =
  /** `user` in account domain `domain` (possibly the caller's, when the host was this server). */
  | { kind: 'account'; domain: string; authId: string; user: string }
  | { kind: 'app'; domain: string; authId: string; appId: string }
  | { kind: 'phone'; number: string }
  /** Nothing the edge can route to. */
  | { kind: 'unknown' };

/** The Auth ID whose account owns `domain`, or null when it is not an account domain. */
export function accountOfDomain(domain: string, sipDomain: string): string | null {
  const suffix = '.' + sipDomain;
  if (!domain.endsWith(suffix)) return null;
  const label = domain.slice(0, -suffix.length);
  if (label === '' || label.includes('.') || !/^[a-z0-9]+$/.test(label)) return null;
  return label.toUpperCase();
}

// Visual separators of RFC 3966 §3 (phonedigit): '-', '.', '(', ')'.
const VISUAL = /[-.()]/g;
const NUMBER = /^\+?\d{3,15}$/;

/** A telephone number as the gateway gets it: visual separators removed (`+1 (415) 555-0100` → `+14155550100`). */
export function phoneNumber(text: string): string | null {
  const n = text.replace(VISUAL, '').replace(/\s+/g, '');
  return NUMBER.test(n) ? n : null;
}

/** The number of a `tel:` URI (RFC 3966: up to its first parameter). */
export function telNumber(u: SipUri): string {
  const body = u.raw.slice(4);
  const semi = body.indexOf(';');
  return semi < 0 ? body : body.slice(0, semi);
}

/**
 * Classifies a Request-URI. `callerDomain` stands in for a host that is this
 * server itself (phones that dial `bob@<server ip>`).
 */
export function parseTarget(uri: SipUri, opts: { sipDomain: string; callerDomain: string; isOwnHost: (u: SipUri) => boolean }): ParsedTarget {
  if (uri.scheme === 'tel') {
    const n = phoneNumber(telNumber(uri));
    return n ? { kind: 'phone', number: n } : { kind: 'unknown' };
  }
  if (uri.scheme !== 'sip' && uri.scheme !== 'sips') return { kind: 'unknown' };
  const user = uri.user;
  if (user === null) return { kind: 'unknown' };
  if (uri.params.get('user') === 'phone') {
    const n = phoneNumber(user.split(';')[0]);
    return n ? { kind: 'phone', number: n } : { kind: 'unknown' };
  }
  if (uri.host.startsWith('app.')) {
    const domain = uri.host.slice(4);
    const authId = accountOfDomain(domain, opts.sipDomain);
    if (authId && /^\d+$/.test(user)) return { kind: 'app', domain, authId, appId: user };
  }
  let domain: string | null = null;
  if (accountOfDomain(uri.host, opts.sipDomain)) domain = uri.host;
  else if (uri.host === opts.sipDomain || opts.isOwnHost(uri)) domain = opts.callerDomain;
  if (domain !== null) return { kind: 'account', domain, authId: accountOfDomain(domain, opts.sipDomain) as string, user };
  const n = phoneNumber(user);
  return n ? { kind: 'phone', number: n } : { kind: 'unknown' };
}
