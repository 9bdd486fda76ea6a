import { SipError } from '../errors.js';
import type { ContactList, NameAddr } from '../sip/message.js';
import type { Binding, BindingWrite, RegisterOp } from '../store/location/location.js';
import { parsePushParams } from '../push/params.js';

/** Registrar limits, from Config. */
export interface ExpiresPolicy {
  minExpires: number;
  maxExpires: number;
  defaultExpires: number;
  /** Raise a too-short interval to minExpires instead of answering 423. */
  clampMinExpires: boolean;
  maxContacts: number;
}

/** What the registrar knows of the REGISTER besides its Contacts. */
export interface RegisterContext {
  callId: string;
  cseq: number;
  /** Expires header value, or null when absent/unparseable. */
  expiresHeader: number | null;
  now: number;
  userAgent: string | null;
  received: string;
  transport: Binding['transport'];
  path: string | null;
  nodeId: string | null;
  connId: string | null;
  /** The endpoint whose credential the REGISTER proved (registration events name it). */
  endpointId?: string;
}

/**
 * Turns the Contact list of a REGISTER into one store operation (RFC 3261 §10.3
 * steps 6 and 7; kamailio save.c). Pure: throws SipError for refusals.
 */
export function planRegister(contacts: ContactList | null, ctx: RegisterContext, policy: ExpiresPolicy): RegisterOp {
  const op: RegisterOp = {
    callId: ctx.callId,
    cseq: ctx.cseq,
    now: ctx.now,
    removeAll: false,
    writes: [],
    removes: [],
    maxContacts: policy.maxContacts,
  };
  if (contacts === null) throw new SipError(400, 'Bad Contact', 'REG_BAD_CONTACT');
  if (contacts.star) {
    // RFC 3261 §10.3 step 6: '*' only with Expires: 0 and no other Contact, else 400.
    if (ctx.expiresHeader !== 0) throw new SipError(400, 'Invalid Contact * (needs Expires: 0)', 'REG_STAR_EXPIRES');
    op.removeAll = true;
    return op;
  }
  const seen = new Set<string>();
  for (const c of contacts.contacts) {
    const scheme = c.uri.scheme;
    if (scheme !== 'sip' && scheme !== 'sips') throw new SipError(400, 'Unsupported Contact URI scheme', 'REG_BAD_CONTACT');
    // RFC 8599: push parameters are checked before anything is written (400 / 555).
    parsePushParams(c.uri.params);
    const requested = contactExpires(c, ctx.expiresHeader, policy.defaultExpires);
    const key = bindingKey(c);
    if (seen.has(key)) continue; // the same contact twice in one REGISTER: the first wins
    seen.add(key);
    if (requested === 0) {
      op.removes.push(key);
      continue;
    }
    let expires = requested;
    if (expires < policy.minExpires) {
      // RFC 3261 §10.3 step 7: 423 Interval Too Brief with Min-Expires.
      if (!policy.clampMinExpires) {
        throw new SipError(423, 'Interval Too Brief', 'REG_INTERVAL_TOO_BRIEF', [['Min-Expires', String(policy.minExpires)]]);
      }
      expires = policy.minExpires;
    }
    if (expires > policy.maxExpires) expires = policy.maxExpires;
    const write: BindingWrite = {
      key,
      uri: c.uri.raw,
      contact: c.raw,
      expiresAt: ctx.now + expires * 1000,
      callId: ctx.callId,
      cseq: ctx.cseq,
      userAgent: ctx.userAgent,
      received: ctx.received,
      transport: ctx.transport,
      path: ctx.path,
      q: qValue(c),
      instanceId: instanceOf(c),
      regId: regIdOf(c),
      nodeId: ctx.nodeId,
      connId: ctx.connId,
      ...(ctx.endpointId !== undefined ? { endpointId: ctx.endpointId } : {}),
    };
    op.writes.push(write);
  }
  return op;
}

/** RFC 3261 §10.2.1.1: the contact's expires parameter wins over the Expires header. */
function contactExpires(c: NameAddr, header: number | null, dflt: number): number {
  const p = c.params.get('expires');
  if (p !== undefined && p !== null && /^\d+$/.test(p)) return Math.min(Number(p), 0xffffffff);
  if (p !== undefined && p !== null) throw new SipError(400, 'Bad expires parameter', 'REG_BAD_EXPIRES');
  return header ?? dflt;
}

function instanceOf(c: NameAddr): string | null {
  const v = c.params.get('+sip.instance');
  return v ? v.replace(/^"|"$/g, '') : null;
}

function regIdOf(c: NameAddr): number | null {
  const v = c.params.get('reg-id');
  return v && /^\d{1,9}$/.test(v) ? Number(v) : null;
}

function qValue(c: NameAddr): number | null {
  const v = c.params.get('q');
  if (!v) return null;
  const n = Number(v);
  if (!Number.isFinite(n) || n < 0 || n > 1) throw new SipError(400, 'Bad q value', 'REG_BAD_Q');
  return n;
}

/**
 * A binding's identity (docs/design.md "Storage"): +sip.instance with reg-id when the
 * contact carries them (RFC 5626 §6), else the Contact URI. RFC 3261 §10.3 step
 * 7 compares URIs by §19.1.4 rules; scheme and host compare case-insensitively.
 */
export function bindingKey(c: NameAddr): string {
  const instance = instanceOf(c);
  if (instance) {
    const regId = regIdOf(c);
    return regId === null ? instance : `${instance};reg-id=${regId}`;
  }
  const u = c.uri;
  const user = u.user ?? '';
  return `${u.scheme}:${user}${user ? '@' : ''}${u.host}${u.port !== null ? `:${u.port}` : ''}${paramsKey(u.params)}`;
}

function paramsKey(params: Map<string, string | null>): string {
  if (params.size === 0) return '';
  const parts: string[] = [];
  for (const [k, v] of params) parts.push(v === null ? k : `${k}=${v.toLowerCase()}`);
  parts.sort();
  return ';' + parts.join(';');
}

/**
 * The Contact header values of a 200 OK (RFC 3261 §10.3 step 8): every current
 * binding, each as it was sent, with `expires` set to its remaining seconds.
 */
export function contactsForReply(bindings: readonly Binding[], now: number, extra?: (b: Binding) => string[]): string[] {
  return bindings.map((b) => withExpires(b.contact, Math.max(0, Math.round((b.expiresAt - now) / 1000)), extra?.(b)));
}

/** Contact parameters the registrar sets itself: what the client sent under these names is replaced. */
const OWN_PARAMS = /^(expires|pub-gruu|temp-gruu)\s*(=|$)/i;

/** Replace or append the header parameter `expires` of a Contact value, keeping the rest as sent. */
export function withExpires(contact: string, seconds: number, extra: readonly string[] = []): string {
  // Header params start after the '>' closing a name-addr (display names and
  // quoted param values may hold '<', '>' and ';'), or after the URI of an addr-spec.
  let i = 0;
  let inQuote = false;
  let angle = -1;
  for (; i < contact.length; i++) {
    const c = contact[i];
    if (inQuote) {
      if (c === '\\') i++;
      else if (c === '"') inQuote = false;
    } else if (c === '"') inQuote = true;
    else if (c === '<') {
      angle = contact.indexOf('>', i);
      break;
    } else if (c === ';') break;
  }
  const cut = angle >= 0 ? angle + 1 : i;
  const params = splitParams(contact.slice(cut)).filter((p) => !OWN_PARAMS.test(p));
  params.push(`expires=${seconds}`, ...extra);
  return `${contact.slice(0, cut)};${params.join(';')}`;
}

/** Split `;a=1;b="x;y"` into ['a=1', 'b="x;y"'], honouring quoted strings. */
function splitParams(tail: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inQuote = false;
  for (let i = 0; i < tail.length; i++) {
    const c = tail[i];
    if (inQuote) {
      cur += c;
      if (c === '\\' && i + 1 < tail.length) cur += tail[++i];
      else if (c === '"') inQuote = false;
    } else if (c === ';') {
      if (cur.trim()) out.push(cur.trim());
      cur = '';
    } else {
      if (c === '"') inQuote = true;
      cur += c;
    }
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}
