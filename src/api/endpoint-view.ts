/**
 * The Endpoint object as the API shows it (the spec's table): live registration
 * state from the bindings (docs/api.md "Registration state"), times as ISO 8601.
 */
import type { ApplicationRecord, EndpointRecord } from '../store/directory/directory.js';
import type { Binding } from '../store/location/location.js';
import type { Customer } from './context.js';
import { isAsleep, pushOf, redactContact, shortPrid } from '../push/params.js';

/**
 * `host:port` of a Contact URI (the spec's sip_contact). A URI without a port
 * gets its scheme/transport default (RFC 3261 §19.1.2; RFC 7118 for ws/wss).
 */
export function contactHostPort(uri: string): string {
  const m = /^(sips?):(?:[^@]*@)?(\[[^\]]+\]|[^:;?>]+)(?::(\d+))?([^?>]*)/i.exec(uri.trim());
  if (!m) return uri;
  const [, scheme = 'sip', host = '', port, rest = ''] = m;
  if (port) return `${host}:${port}`;
  const transport = /;transport=([a-z]+)/i.exec(rest)?.[1]?.toLowerCase();
  const def =
    transport === 'wss' ? 443 : transport === 'ws' ? 80 : scheme.toLowerCase() === 'sips' || transport === 'tls' ? 5061 : 5060;
  return `${host}:${def}`;
}

const DAY_MS = 86_400_000;
/** Years 0000-9999 only: outside them toISOString writes ±YYYYYY. */
const ISO_MAX_MS = 253_402_300_800_000;
let isoDay = Number.NaN;
let isoDayPrefix = '';
const pad2 = (n: number): string => (n < 10 ? `0${n}` : `${n}`);
const pad3 = (n: number): string => (n < 10 ? `00${n}` : n < 100 ? `0${n}` : `${n}`);

/**
 * `new Date(ms).toISOString()`, faster: a list page formats a hundred expiry
 * times, nearly all on the same day, so the date part is kept and only the time
 * of day is written (test/api/iso-time.test.ts compares the two).
 */
export function iso(ms: number): string {
  const t = Math.trunc(ms);
  if (!(t >= 0 && t < ISO_MAX_MS)) return new Date(ms).toISOString();
  const day = Math.floor(t / DAY_MS);
  if (day !== isoDay) {
    isoDayPrefix = new Date(day * DAY_MS).toISOString().slice(0, 11);
    isoDay = day;
  }
  let r = t - day * DAY_MS;
  const h = Math.floor(r / 3_600_000);
  r -= h * 3_600_000;
  const m = Math.floor(r / 60_000);
  r -= m * 60_000;
  const sec = Math.floor(r / 1000);
  return `${isoDayPrefix}${pad2(h)}:${pad2(m)}:${pad2(sec)}.${pad3(r - sec * 1000)}Z`;
}

export function registrationView(b: Binding) {
  const push = pushOf(b);
  return {
    // A device token is the device's secret: only its ends are shown (docs/push.md).
    contact: push ? redactContact(b.uri) : b.uri,
    expires: iso(b.expiresAt),
    user_agent: b.userAgent,
    received: b.received,
    path: b.path,
    ...(push ? { push: { provider: push.provider, prid: shortPrid(push.prid), asleep: isAsleep(b) } } : {}),
  };
}

/** The resource path of an endpoint as the caller reaches it. */
export function resourceUri(pathAuthId: string, endpointId: string): string {
  return `/v1/Account/${pathAuthId}/Endpoint/${endpointId}/`;
}

export function sipUri(c: Customer, username: string): string {
  return `sip:${username}@${c.account.sipDomain}`;
}

/**
 * The Endpoint object of the spec's table. `detail` (retrieve) adds
 * sip_registration while registered, the full application object, and the
 * additive sip_registrations array of every live binding.
 */
export function endpointView(
  c: Customer,
  pathAuthId: string,
  e: EndpointRecord,
  app: ApplicationRecord | null,
  bindings: Binding[],
  detail: boolean,
): Record<string, unknown> {
  // Stores return bindings most recently refreshed first: that one gives contact and
  // user agent; the endpoint stays registered until the last of them lapses
  // (docs/api.md "Registration state").
  const b = bindings[0];
  let until = 0;
  for (const x of bindings) if (x.expiresAt > until) until = x.expiresAt;
  const view: Record<string, unknown> = {
    endpoint_id: e.endpointId,
    username: e.username,
    alias: e.alias,
    sip_uri: sipUri(c, e.username),
    sip_registered: b ? 'true' : 'false',
    sip_contact: b ? contactHostPort(redactContact(b.uri)) : null,
    sip_expires: b ? iso(until) : null,
    sip_user_agent: b ? b.userAgent : null,
    application: app
      ? detail
        ? { app_id: app.appId, app_name: app.settings.app_name, answer_url: app.settings.answer_url, answer_method: app.settings.answer_method }
        : { app_id: app.appId, app_name: app.settings.app_name }
      : null,
    allow_voice: e.allowVoice,
    allow_message: e.allowMessage,
    allow_video: e.allowVideo,
    allow_same_domain: e.allowSameDomain,
    allow_other_domains: e.allowOtherDomains,
    allow_phones: e.allowPhones,
    allow_apps: e.allowApps,
    sub_account: e.subAccount,
    resource_uri: resourceUri(pathAuthId, e.endpointId),
    created_at: e.createdAt,
    updated_at: e.updatedAt,
  };
  if (detail) {
    if (b) view.sip_registration = registrationView(b);
    view.sip_registrations = bindings.map((x) => ({ ...registrationView(x), sip_contact: contactHostPort(redactContact(x.uri)), transport: x.transport }));
  }
  return view;
}
