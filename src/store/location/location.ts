/**
 * The location service (RFC 3261 §10.3, kamailio usrloc): bindings of an
 * address-of-record to contacts. Two implementations: RedisLocationStore
 * (production) and MemoryLocationStore (the embedded default). Both pass the
 * same contract suite (test/contract/location-store.test.ts).
 *
 * An AOR is identified by its account SIP domain and endpoint username, both
 * lower-case: `{ domain: 'acme.sip.localhost', user: 'alice' }`.
 */

import type { SipTransportName } from '../../sip/transport-name.js';

export type { SipTransportName };

export interface Aor {
  /** Account SIP domain, lower-case; the hash tag of every Redis key of the account. */
  domain: string;
  /** Endpoint username (as provisioned; alphanumeric). */
  user: string;
}

/** One registered contact of an endpoint. */
export interface Binding {
  /**
   * Identity of the binding within its AOR: `<+sip.instance>;reg-id=<n>` when the
   * contact carries them (RFC 5626), else the Contact URI as sent.
   */
  key: string;
  /** Contact URI as sent (no display name, no header parameters). */
  uri: string;
  /** The whole Contact header value as sent, echoed in 200 OK with a fresh `expires`. */
  contact: string;
  /** Absolute expiry, milliseconds since the epoch. */
  expiresAt: number;
  /** When this binding was last written (milliseconds since the epoch). */
  updatedAt: number;
  callId: string;
  cseq: number;
  userAgent: string | null;
  /** Where the REGISTER really came from: `sip:<ip>:<port>;transport=<t>`. */
  received: string;
  transport: SipTransportName;
  /** Path header value(s), comma-joined, as received (RFC 3327), or null. */
  path: string | null;
  /** q-value as written, or null. */
  q: number | null;
  instanceId: string | null;
  regId: number | null;
  /** The process that took the REGISTER (its flow's owner; for UDP, the node the phone answers). */
  nodeId: string | null;
  /** For TCP/TLS/WS/WSS: the connection that carries the flow; null for UDP. */
  connId: string | null;
  /** The endpoint's id (registration events name it); absent in bindings written before it was kept. */
  endpointId?: string | null;
}

/** A binding the REGISTER asks to add or refresh (expires > 0). */
export type BindingWrite = Omit<Binding, 'updatedAt'>;

/**
 * One REGISTER, applied atomically (RFC 3261 §10.3 steps 6-8): every removal and
 * write happens, or none does.
 */
export interface RegisterOp {
  callId: string;
  cseq: number;
  /** Current time, ms; everything with expiresAt <= now is treated as absent. */
  now: number;
  /** `Contact: *` with Expires 0: remove every binding (subject to Call-ID/CSeq order). */
  removeAll: boolean;
  /** Bindings to write (expires > 0), keyed by Binding.key. */
  writes: BindingWrite[];
  /** Keys of bindings to remove (expires = 0). */
  removes: string[];
  /** Most live bindings allowed after the operation. */
  maxContacts: number;
}

/**
 * A REGISTER naming a contact whose binding carries the same Call-ID and CSeq,
 * written at most this long ago, is a retransmission of the request that wrote it
 * (it reached another worker, or came after the transaction was forgotten): it
 * succeeds and changes nothing, as in kamailio usrloc (cseq_delay). Later, the
 * same CSeq is a replay: out of order. Timer J (64*T1, RFC 3261 §17.2.2).
 */
export const RETRANSMISSION_WINDOW_MS = 32_000;

export type RegisterResult =
  | { ok: true; bindings: Binding[] }
  /**
   * OUT_OF_ORDER: an existing binding has the same Call-ID and a higher CSeq, or
   * an equal one written more than RETRANSMISSION_WINDOW_MS ago (RFC 3261 §10.3
   * step 7: SHOULD reject with 500).
   * TOO_MANY: the write would exceed maxContacts.
   */
  | { ok: false; code: 'OUT_OF_ORDER' | 'TOO_MANY'; bindings: Binding[] };

/** What happened to a binding (docs/events.md). */
export type RegistrationEventKind = 'registered' | 'refreshed' | 'unregistered' | 'expired' | 'removed';

/**
 * One registration event, written by the store in the same atomic step as the
 * change it reports. `id` orders the events of an account (`<ms>-<seq>`, a Redis
 * stream id), so a reader resumes after the last id it saw.
 */
export interface RegistrationEvent {
  id: string;
  event: RegistrationEventKind;
  /** When it happened, ms since the epoch. */
  at: number;
  aor: Aor;
  /** The binding as it was (removed, expired) or is now (registered, refreshed). */
  binding: Binding;
  /** Whether the endpoint has a live binding after the event (its `sip_registered`). */
  registered: boolean;
}

/** At most this many events are kept per account (docs/events.md "Retention"). */
export const EVENT_LOG_MAX = 10_000;
/** Events older than this are dropped, ms (24 h). */
export const EVENT_LOG_RETENTION_MS = 24 * 3600 * 1000;

/** Whether `a` is a later event id than `b` (`<ms>-<seq>`). */
export function eventIdAfter(a: string, b: string): boolean {
  const [am, as] = a.split('-').map(Number) as [number, number];
  const [bm, bs] = b.split('-').map(Number) as [number, number];
  return am !== bm ? am > bm : as > bs;
}

/** An event id as a client may send it (`after`, `Last-Event-ID`). */
export function isEventId(s: string): boolean {
  return /^\d{1,15}-\d{1,15}$/.test(s);
}

export interface LocationStore {
  /** Apply one REGISTER; returns the live bindings afterwards, most recently updated first. */
  register(aor: Aor, op: RegisterOp): Promise<RegisterResult>;
  /** Live bindings of one AOR (expiresAt > now), most recently updated first. */
  lookup(aor: Aor, now?: number): Promise<Binding[]>;
  /** Live bindings of many AORs in one round trip (the HTTP list view). */
  lookupMany(aors: Aor[], now?: number): Promise<Map<string, Binding[]>>;
  /** Remove every binding of the AOR (password change, endpoint delete). Returns how many were live. */
  removeAll(aor: Aor): Promise<number>;
  /** Remove the given binding keys of one AOR (the flow that carried them closed). */
  removeKeys(aor: Aor, keys: string[]): Promise<number>;
  /** Count of live bindings in the whole store, by transport (metrics, tests). Not for request paths. */
  countLive(now?: number): Promise<Record<SipTransportName, number>>;
  /**
   * Registration events of one account with ids after `after` (all kept when null),
   * oldest first, at most `limit`. Empty when the store keeps no events.
   */
  registrationEvents(domain: string, after: string | null, limit: number): Promise<RegistrationEvent[]>;
  /** The id of the newest event kept for the account, or null (a stream without Last-Event-ID starts after it). */
  newestRegistrationEventId(domain: string): Promise<string | null>;
  /**
   * Remove bindings that lapsed by `now`, each with an `expired` event; returns how
   * many. Runs on a timer (docs/events.md "Expiry sweep"): an endpoint that stops
   * refreshing is reported without waiting for a request to meet its binding.
   */
  sweepExpired(now?: number): Promise<number>;
  /** Probe the backend (readiness). */
  ping(): Promise<boolean>;
  close(): Promise<void>;
}

/** Map key of an AOR in lookupMany results. */
export function aorKey(aor: Aor): string {
  return `${aor.user}@${aor.domain}`;
}

/**
 * The order every store returns bindings in: most recently updated first, then by
 * key. Code-unit comparison (not localeCompare) so the order does not depend on
 * the process locale and both stores agree byte for byte.
 */
export function compareBindings(a: Binding, b: Binding): number {
  if (a.updatedAt !== b.updatedAt) return b.updatedAt - a.updatedAt;
  return a.key < b.key ? -1 : a.key > b.key ? 1 : 0;
}

/**
 * The binding a store keeps for one write: exactly the Binding fields, as given,
 * stamped with `updatedAt = now`. Listing the fields (rather than spreading) keeps
 * stray properties of the caller's object out of both stores alike.
 */
/**
 * `s` in memory of its own. A substring of 13 characters or more is, in V8, a
 * view into the string it was cut from — here the whole request text — and keeps
 * all of it alive as long as it is kept: ≈800 bytes per stored binding instead of
 * the few dozen its fields need.
 */
export function ownString(s: string): string {
  return s.length < 13 ? s : Buffer.from(s, 'utf8').toString('utf8');
}

/** A binding whose strings hold no request text alive (for stores that keep objects). */
export function ownBinding(b: Binding): Binding {
  return {
    ...b,
    key: ownString(b.key),
    uri: ownString(b.uri),
    contact: ownString(b.contact),
    callId: ownString(b.callId),
    userAgent: b.userAgent === null ? null : ownString(b.userAgent),
    received: ownString(b.received),
    path: b.path === null ? null : ownString(b.path),
    instanceId: b.instanceId === null ? null : ownString(b.instanceId),
  };
}

export function bindingFromWrite(w: BindingWrite, now: number): Binding {
  return {
    key: w.key,
    uri: w.uri,
    contact: w.contact,
    expiresAt: w.expiresAt,
    updatedAt: now,
    callId: w.callId,
    cseq: w.cseq,
    userAgent: w.userAgent,
    received: w.received,
    transport: w.transport,
    path: w.path,
    q: w.q,
    instanceId: w.instanceId,
    regId: w.regId,
    nodeId: w.nodeId,
    connId: w.connId,
    ...(w.endpointId !== undefined ? { endpointId: w.endpointId } : {}),
  };
}
