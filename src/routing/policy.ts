import type { EndpointRecord, SubAccountRecord } from '../store/directory/directory.js';

/** The Endpoint flags of the interface specification's Endpoint (docs/api.md) the edge enforces, plus the sub-account KYC block. */
export type PolicyFlag =
  | 'allow_voice'
  | 'allow_video'
  | 'allow_message'
  | 'allow_same_domain'
  | 'allow_other_domains'
  | 'allow_phones'
  | 'allow_apps'
  | 'kyc_calls_blocked';

/** Why a request is refused: the flag and whose it is. */
export interface Refusal {
  flag: PolicyFlag;
  party: 'caller' | 'callee';
}

/** What kind of target a request has, as far as policy cares. */
export type TargetKind = 'same_domain' | 'other_domain' | 'phone' | 'app';

/** What the request is about (RFC 3261 method; video from the SDP offer). */
export interface RequestTraits {
  method: string;
  /** The INVITE's offer has an active m=video line. */
  video: boolean;
}

/**
 * The caller's side of the policy (pure): what it may place. Order: the kind
 * of session (voice, video, message), then the kind of target, then the KYC
 * block of customer_use sub-accounts for calls to phones.
 */
export function callerRefusal(
  caller: EndpointRecord,
  sub: SubAccountRecord | null,
  req: RequestTraits,
  target: TargetKind,
): Refusal | null {
  const r = sessionRefusal(caller, req) ?? targetRefusal(caller, target);
  if (r) return { flag: r, party: 'caller' };
  // the specification's SubAccount (docs/api.md): customer_use sub-accounts must complete their own KYC before placing calls.
  if (req.method === 'INVITE' && target === 'phone' && sub && sub.kycMode === 'customer_use' && sub.kycCallsBlocked) {
    return { flag: 'kyc_calls_blocked', party: 'caller' };
  }
  return null;
}

/**
 * A call the platform places from one of the account's numbers (the Calls API, no caller
 * endpoint): only the KYC block applies, as for an endpoint of the same sub-account.
 */
export function originRefusal(sub: SubAccountRecord | null, req: RequestTraits, target: TargetKind): Refusal | null {
  if (req.method === 'INVITE' && target === 'phone' && sub && sub.kycMode === 'customer_use' && sub.kycCallsBlocked) {
    return { flag: 'kyc_calls_blocked', party: 'caller' };
  }
  return null;
}

/** The callee's side (pure): what it may receive, from whom (`phone`: a call from the phone network). */
export function calleeRefusal(callee: EndpointRecord, req: RequestTraits, target: 'same_domain' | 'other_domain' | 'phone'): Refusal | null {
  const r = sessionRefusal(callee, req) ?? targetRefusal(callee, target);
  return r ? { flag: r, party: 'callee' } : null;
}

/**
 * A request inside a dialog (pure): the session flags of each party as they are now, so
 * that a flag turned off during a call applies to its next re-INVITE, UPDATE or MESSAGE.
 * `sender` sent the request (its From), `recipient` is its To; null when that party is
 * not an endpoint of this edge (a phone, an application). The target kind was decided
 * when the dialog was made and is not asked again. BYE, ACK, CANCEL and PRACK are never
 * refused (ending or completing a session must always work).
 */
export function dialogRefusal(sender: EndpointRecord | null, recipient: EndpointRecord | null, req: RequestTraits): Refusal | null {
  if (!DIALOG_CHECKED.has(req.method)) return null;
  // An UPDATE carries an offer like a re-INVITE (RFC 3311): it is checked as one.
  const traits = req.method === 'UPDATE' ? { ...req, method: 'INVITE' } : req;
  const s = sender ? sessionRefusal(sender, traits) : null;
  if (s) return { flag: s, party: 'caller' };
  const r = recipient ? sessionRefusal(recipient, traits) : null;
  return r ? { flag: r, party: 'callee' } : null;
}

/** In-dialog methods the session policy applies to (the rest always pass). */
export const DIALOG_CHECKED: ReadonlySet<string> = new Set(['INVITE', 'UPDATE', 'MESSAGE']);

function sessionRefusal(e: EndpointRecord, req: RequestTraits): PolicyFlag | null {
  if (req.method === 'INVITE') {
    if (!e.allowVoice) return 'allow_voice';
    if (req.video && !e.allowVideo) return 'allow_video';
  } else if (req.method === 'MESSAGE' && !e.allowMessage) {
    return 'allow_message';
  }
  return null;
}

function targetRefusal(e: EndpointRecord, target: TargetKind): PolicyFlag | null {
  switch (target) {
    case 'same_domain':
      return e.allowSameDomain ? null : 'allow_same_domain';
    case 'other_domain':
      return e.allowOtherDomains ? null : 'allow_other_domains';
    case 'phone':
      return e.allowPhones ? null : 'allow_phones';
    case 'app':
      return e.allowApps ? null : 'allow_apps';
  }
}

/** The 403's Warning (RFC 3261 §20.43, code 399: miscellaneous) and Reason (RFC 3326) naming the flag. */
export function refusalHeaders(r: Refusal, host: string): Array<[string, string]> {
  const text =
    r.flag === 'kyc_calls_blocked'
      ? 'kyc_calls_blocked: the caller\'s sub-account must complete KYC before calling phones'
      : `${r.flag} is false for the ${r.party}`;
  return [
    ['Warning', `399 ${host} "${text}"`],
    ['Reason', `SIP;cause=403;text="${r.flag}"`],
  ];
}
