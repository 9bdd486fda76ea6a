import { createHash, randomBytes } from 'node:crypto';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import type { RequestAuthenticator } from '../auth/authenticator.js';
import { destinationOf, INTERNAL_FLOW_PREFIX, isInternalFlow, type Destination } from '../core/destination.js';
import type { IncomingRequest } from '../core/incoming.js';
import type { InviteServerTransaction } from '../core/invite-server-transaction.js';
import type { RequestProcessor } from '../core/request-processor.js';
import type { ServerTransaction } from '../core/server-transaction.js';
import type { TransactionLayer } from '../core/transaction-layer.js';
import { SipError } from '../errors.js';
import type { Logger } from '../logger.js';
import { getHeader, getHeaders, getListValues, parseDigestCredentials, parseNameAddr, tagOf } from '../sip/headers.js';
import type { SipRequest, SipResponse, SipUri } from '../sip/message.js';
import { cloneRequest, prependHeaders, removeHeaders, removeHeadersWhere, setHeader, shiftListValue } from '../sip/message-edit.js';
import { formatUri, parseUri } from '../sip/uri.js';
import type { CredentialStore } from '../store/credentials/credentials.js';
import type { AccountRecord, Directory, EndpointRecord, SubAccountRecord } from '../store/directory/directory.js';
import type { Aor, Binding, LocationStore } from '../store/location/location.js';
import type { SipTransportName } from '../transport/types.js';
import { DEFAULT_MAX_CALL_DURATION_MS, TRUNK_LIMIT_KEY, type CallLimiter } from './call-limiter.js';
import type { CallInfo, CallTracker, MessageInfo, TrackedCall } from './call-tracker.js';
import type { FlowTokens } from './flow-token.js';
import { calleeRefusal, callerRefusal, originRefusal, DIALOG_CHECKED, dialogRefusal, refusalHeaders, type Refusal, type RequestTraits, type TargetKind } from '../routing/policy.js';
import { ResponseContext, type BranchFinal } from './response-context.js';
import { isWebrtcLeg, MediaRelay, type DialogSdp } from './media-relay.js';
import { RtpengineRejectedError } from '../media/rtpengine.js';
import type { Gruus } from '../registrar/gruu.js';
import { offersVideo } from './sdp.js';
import { accountOfDomain, parseTarget, phoneNumber, telNumber } from '../routing/targets.js';
import type { CarrierSource, GatewayLeg, PstnRouting } from '../routing/pstn.js';
import type { TrunkView } from '../trunks/lookup.js';
import type { NumberRoute } from '../numbers/lookup.js';
import type { CallCharge, CallCharging } from '../billing/calls.js';
import { NO_OP_USER } from './response-context.js';
import { CALL_UUID_HEADER, HANGUP_CAUSE_HEADER, type OriginatedCall } from '../routing/origin.js';
import { isAsleep, redactContact } from '../push/params.js';

export interface ProxyOptions {
  layer: TransactionLayer;
  auth: RequestAuthenticator;
  credentials: CredentialStore;
  location: LocationStore;
  directory: Directory;
  limiter: CallLimiter;
  tokens: FlowTokens;
  /** Parent of every account SIP domain (Config.sipDomain). */
  sipDomain: string;
  /** This process (bindings of stream flows are reachable only from the node that holds the connection). */
  nodeId: string;
  /** Flows held by other processes are relayed to them (the fleet relay, docs/fleet.md); else skipped. */
  relayFlows?: boolean;
  /** Call records and callbacks (docs/events.md "Calls"); none when absent. */
  calls?: CallTracker;
  /**
   * Wakes a sleeping device (RFC 8599, docs/push.md): one push, then the binding it
   * registers again with, or null (none within PUSH_WAIT, or the push failed). Absent =
   * sleeping bindings are not reached.
   */
  push?: { wake(aor: Aor, binding: Binding, callId: string, method: string): Promise<Binding | null> };
  /** Prices, credit checks and credit cuts of calls (docs/billing.md "Calls"); calls are free when absent. */
  charging?: CallCharging;
  /** Media through rtpengine (docs/media.md "Calls"); SDP untouched when absent. */
  media?: MediaRelay;
  /** Reads GRUUs in Request-URIs (RFC 5627): a request to one reaches that device only. */
  gruus?: Gruus;
  /**
   * The phone network (docs/trunks.md): carriers' INVITEs to numbers, and calls to numbers
   * out through the caller account's OUTBOUND trunk. Absent = no trunks (numbers go to the gateway).
   */
  pstn?: PstnRouting;
  /** Where calls to telephone numbers go for accounts without an OUTBOUND trunk (Config.outboundGatewayUri); null → 503. */
  outboundGatewayUri: string | null;
  /** Where calls to applications go (Config.appServerUri); null → 503. */
  appServerUri: string | null;
  /** Ring timeout of out-of-dialog INVITEs, ms. */
  noAnswerTimeoutMs: number;
  /** A counted call whose end was never seen is forgotten after this long, ms. @default 4 hours */
  maxCallDurationMs?: number;
  /**
   * Calls the edge places itself (calls/, the B2BUA): the INVITE of an internal flow is
   * taken as placed by the account this names, without digest authentication (only this
   * process can send on an internal flow). Null = not one of its calls (403).
   */
  originated?: (ctx: IncomingRequest) => OriginatedCall | null;
  /**
   * The edge runs applications itself (calls/: answer_url XML on rtpengine): a call to an
   * application goes to it over an internal flow when APP_SERVER_URI is not set.
   */
  runsApplications?: boolean;
  /** An endpoint's MESSAGE to a messaging channel (`sip:channel-<id>@…`): its SIP status (messaging/). */
  channelMessage?: (m: { domain: string; from: string; to: string; body: Buffer; contentType: string | null }) => Promise<number>;
  log: Logger;
}


/** The address of a messaging channel (docs/messaging.md "SIP channel"). */
const CHANNEL_URI = /^sips?:channel-[^@]+@/i;

/** Methods accepted out of dialog from endpoints (issue: INVITE, MESSAGE, OPTIONS to a user). */
const OUT_OF_DIALOG = new Set(['INVITE', 'MESSAGE', 'OPTIONS']);
/** Methods that exist only inside a dialog: out of one they name nothing (481). */
const DIALOG_ONLY = new Set(['BYE', 'UPDATE', 'PRACK', 'INFO']);
const METHODS = ['INVITE', 'ACK', 'CANCEL', 'BYE', 'OPTIONS', 'MESSAGE', 'UPDATE', 'PRACK', 'INFO', 'REFER', 'NOTIFY'];
/** RFC 3261 §16.6 step 3: Max-Forwards when the request has none. */
const DEFAULT_MAX_FORWARDS = 70;
/** Timer C (RFC 3261 §16.6 step 11) for in-dialog INVITEs: more than 3 minutes. */
const TIMER_C_MS = 181_000;
/** Headers a client must not assert itself; the edge sets them on legs to gateways and app servers. */
const ASSERTED = ['p-asserted-identity', 'x-account-id', 'x-application-id', CALL_UUID_HEADER];
const WARN_AGENT = 'sip-edge';

/** A routable target after lookups. */
type Target =
  | { kind: 'endpoint'; domain: string; user: string; authId: string; endpoint: EndpointRecord; same: boolean; device: Device | null }
  | { kind: 'phone'; number: string }
  | { kind: 'app'; authId: string; appId: string }
  /** A number out through a trunk (E.164), shown to the carrier as `callerId`. */
  | { kind: 'trunk'; trunk: TrunkView; number: string; callerId: string };

/** One device of an endpoint named by a GRUU: its instance, and for a temporary GRUU the registration's Call-ID. */
interface Device {
  instance: string;
  callId: string | null;
}

/** One branch to try: the Request-URI, where it goes, the Path of a binding, headers for a trusted hop. */
interface Leg {
  uri: string;
  dest: Destination;
  path: string | null;
  extra: Array<[string, string]>;
  /** A gateway of a trunk (tried one after another, docs/trunks.md "Outbound"). */
  gateway?: GatewayTry;
  /** A sleeping device (RFC 8599): held while a push wakes it, then sent on its new flow. */
  wake?: { aor: Aor; binding: Binding };
}

/** How a trunk leg goes out: its gateway, the caller ID, the credential retry it is. */
interface GatewayTry {
  leg: GatewayLeg;
  /** The From user the carrier sees (the account's number). */
  callerId: string;
  /** 1 for the INVITE that answers the carrier's challenge (its CSeq is one up); else 0. */
  cseqOffset: number;
}

/** How long a gateway may stay silent (not even a 100 Trying) before the next one is tried, ms. */
const GATEWAY_ANSWER_MS = 2_000;

/** Most targets one request may reach through 3xx recursion, the first one included (README "Redirects"). */
const MAX_REDIRECT_TARGETS = 5;

/** What makes two targets the same (3xx recursion tries each once). */
function targetKey(t: Target): string {
  switch (t.kind) {
    case 'endpoint':
      return `e:${t.authId}:${t.endpoint.endpointId}:${t.device?.instance ?? ''}`;
    case 'phone':
      return `p:${t.number}`;
    case 'app':
      return `a:${t.authId}:${t.appId}`;
    case 'trunk':
      return `t:${t.trunk.trunkId}:${t.number}`;
  }
}

/** RFC 3841 §9.1: `Request-Disposition: no-recurse` asks proxies to pass 3xx responses upstream. */
function noRecurse(req: SipRequest): boolean {
  return getListValues(req, 'request-disposition').some((v) => v.trim().toLowerCase() === 'no-recurse');
}

/** A Contact's q (RFC 3261 §20.10), 1 when absent or unreadable. */
function qOf(q: string | null | undefined): number {
  const n = q === undefined || q === null ? NaN : Number(q);
  return Number.isFinite(n) && n >= 0 && n <= 1 ? n : 1;
}

/** Who placed an out-of-dialog request (after digest authentication), or the carrier that delivered it. */
interface Caller {
  domain: string;
  user: string;
  /** The caller endpoint; null for a call from the phone network. */
  endpoint: EndpointRecord | null;
  account: AccountRecord;
  sub: SubAccountRecord | null;
  /** A carrier's call to a number of `account` (docs/trunks.md "Inbound"). */
  carrier?: CarrierSource & { number: string; appId: string | null; route: NumberRoute };
  /** A call the edge placed itself (calls/). */
  origin?: OriginatedCall;
}

/**
 * The transaction-stateful proxy of the edge (RFC 3261 §16): authenticates
 * out-of-dialog requests of endpoints with Proxy-Authorization (§22.3), applies
 * the Endpoint policy flags and the account call limits, forks to every live
 * binding over the flow it registered on, Record-Routes twice with flow tokens
 * (RFC 5626 §5) so in-dialog requests come back through the edge and go out over
 * the right flow, and routes in-dialog requests by those Route values without
 * authentication. SDP passes through untouched.
 */
export class SipProxy implements RequestProcessor {
  readonly methods = METHODS;
  private readonly log: Logger;
  /** Call-ID → account and admission time, for calls counted against account limits (released on final non-2xx or BYE). */
  private readonly counted = new Map<string, { account: string; at: number; trunks: string[] }>();
  private readonly maxCallMs: number;
  private readonly gateway: SipUri | null;
  private readonly appServer: SipUri | null;

  constructor(private readonly opts: ProxyOptions) {
    this.log = opts.log;
    this.gateway = opts.outboundGatewayUri ? parseUri(opts.outboundGatewayUri) : null;
    this.appServer = opts.appServerUri ? parseUri(opts.appServerUri) : null;
    this.maxCallMs = opts.maxCallDurationMs ?? DEFAULT_MAX_CALL_DURATION_MS;
  }

  accepts(ctx: IncomingRequest): boolean {
    const { req } = ctx;
    if (req.method === 'REGISTER') return false;
    if (req.method !== 'OPTIONS') return true;
    // An OPTIONS to the server itself (no user part, out of dialog) is the keep-alive/capability probe answered locally.
    if (toTag(req) !== null) return true;
    const u = parseUri(req.uri);
    return u !== null && (u.scheme === 'tel' || u.user !== null);
  }

  async onRequest(ctx: IncomingRequest, tx: ServerTransaction): Promise<void> {
    const req = ctx.req;
    this.checkRequest(req);
    const loop = loopHash(req, ctx.callId);
    // §16.3 step 4: a Via of ours with the same loop hash means the request came back unchanged.
    for (const v of getListValues(req, 'via').slice(1)) {
      const own = this.opts.layer.ownBranch(/;\s*branch=([^;\s,]+)/i.exec(v)?.[1] ?? null);
      if (own && own.loop === loop) throw new SipError(482, 'Loop Detected', 'PROXY_LOOP');
    }
    const token = this.preprocessRoutes(req, ctx.callId);
    if (toTag(req) !== null) return this.inDialog(ctx, tx, token);
    if (!OUT_OF_DIALOG.has(req.method)) {
      if (DIALOG_ONLY.has(req.method)) throw new SipError(481, 'Call/Transaction Does Not Exist', 'PROXY_NO_DIALOG');
      throw new SipError(405, 'Method Not Allowed', 'PROXY_METHOD', [['Allow', 'REGISTER, INVITE, ACK, CANCEL, BYE, MESSAGE, OPTIONS, UPDATE, PRACK, INFO']]);
    }
    return this.outOfDialog(ctx, tx, loop);
  }

  /** RFC 3261 §16.3 steps 3 and 5: Max-Forwards and Proxy-Require. */
  private checkRequest(req: SipRequest): void {
    const mf = getHeader(req, 'max-forwards');
    if (mf !== undefined) {
      if (!/^\s*\d{1,3}\s*$/.test(mf)) throw new SipError(400, 'Bad Max-Forwards', 'PROXY_BAD_MAX_FORWARDS');
      if (Number(mf) === 0) throw new SipError(483, 'Too Many Hops', 'PROXY_TOO_MANY_HOPS');
    }
    const required = getListValues(req, 'proxy-require');
    if (required.length > 0) throw new SipError(420, 'Bad Extension', 'PROXY_BAD_EXTENSION', [['Unsupported', required.join(', ')]]);
  }

  /**
   * RFC 3261 §16.4: a Request-URI of ours (a strict router before us) is
   * replaced by the last Route; Route values of ours at the top are removed.
   * Returns the flow named by the last of our Route values that carried a flow
   * token, i.e. where the request goes.
   */
  private preprocessRoutes(req: SipRequest, callId: string): Destination | null {
    let dest: Destination | null = null;
    const ruri = parseUri(req.uri);
    // Only a value we placed in a Record-Route (it carries our flow token): a Request-URI
    // that merely names this server (`sip:bob@<our ip>`) is a target, not a strict route.
    const strict = ruri ? this.tokenOf(ruri, callId) : null;
    if (strict) {
      dest = strict;
      const routes = getListValues(req, 'route');
      const last = routes.length > 0 ? parseNameAddr(routes[routes.length - 1]) : null;
      if (last) {
        removeHeaders(req, 'route');
        prependHeaders(req, 'route', routes.slice(0, -1));
        req.uri = last.uri.raw;
      }
    }
    for (;;) {
      const top = getListValues(req, 'route')[0];
      if (top === undefined) break;
      const na = parseNameAddr(top);
      if (!na || !this.isOurs(na.uri, callId)) break;
      shiftListValue(req, 'route');
      dest = this.tokenOf(na.uri, callId) ?? dest;
    }
    return dest;
  }

  private isOurs(u: SipUri, callId: string): boolean {
    return this.opts.layer.isOwnUri(u) || this.tokenOf(u, callId) !== null;
  }

  private tokenOf(u: SipUri, callId: string): Destination | null {
    return u.user ? this.opts.tokens.decode(u.user, callId) : null;
  }

  // --- in dialog -------------------------------------------------------------------

  /**
   * A request inside a dialog the edge Record-Routed: no authentication, routed
   * to the flow its Route names (§16.12 loose routing). Without one of our flow
   * tokens it is not ours to relay.
   */
  private async inDialog(ctx: IncomingRequest, tx: ServerTransaction, dest: Destination | null): Promise<void> {
    const req = ctx.req;
    if (!dest) throw new SipError(404, 'Not Found', 'PROXY_NO_ROUTE', [['Warning', `399 ${WARN_AGENT} "in-dialog request without a Route of this edge"`]]);
    if (req.method === 'BYE') {
      this.release(ctx.callId);
      // The call's end, whichever node the BYE reached (its flow token names the account).
      // The edge's own user agent names why it hangs up (docs/calls.md "Causes"); no one else may.
      const cause = isInternalFlow(ctx.flow) ? (getHeader(req, HANGUP_CAUSE_HEADER) ?? null) : null;
      removeHeaders(req, HANGUP_CAUSE_HEADER);
      if (dest.callDomain && this.opts.calls) void this.opts.calls.bye(dest.callDomain, ctx.callId, tagOf(getHeader(req, 'from')), cause);
      // The media session ends with the dialog: the node whose BYE takes the mapping deletes it
      // (the flow token names the engine too, should the store not have it).
      // The BYE goes on meanwhile.
      if (dest.media && this.opts.media) {
        const relay = this.opts.media;
        const tokenEngine = dest.media;
        void relay.session(ctx.callId, true).then((s) => relay.delete(ctx.callId, s?.engine ?? tokenEngine));
      }
    }
    if (DIALOG_CHECKED.has(req.method)) await this.checkDialogPolicy(ctx);
    const fwd = cloneRequest(req);
    decrementMaxForwards(fwd);
    const restore = dest.cseqOffset ? shiftCseq(fwd, dest.cseqOffset) : undefined;
    const media = dest.media && (req.method === 'INVITE' || req.method === 'UPDATE') ? await this.dialogMedia(ctx, dest, dest.media, fwd) : null;
    const context = new ResponseContext({
      layer: this.opts.layer,
      log: this.log,
      server: tx,
      transformUp: media ? (up) => media(up) : undefined,
      noAnswerMs: req.method === 'INVITE' ? TIMER_C_MS : undefined,
      flowFailure: { status: 430, reason: 'Flow Failed' },
    });
    tx.onCancel = () => context.cancelByCaller();
    context.fork(fwd, dest, { loop: loopHash(req, ctx.callId), restore });
  }

  /**
   * The policy of a request inside a dialog (README "Policy in dialogs"): each party that
   * is an endpoint of this edge is read as it is now. A party whose endpoint was deleted,
   * or whose account or sub-account was disabled, since the dialog began gets 403 for
   * anything but ending it; a flag turned off applies to the next offer or MESSAGE.
   */
  private async checkDialogPolicy(ctx: IncomingRequest): Promise<void> {
    const req = ctx.req;
    const [sender, recipient] = await Promise.all([this.dialogParty(getHeader(req, 'from')), this.dialogParty(getHeader(req, 'to'))]);
    for (const [p, party] of [
      [sender, 'caller'],
      [recipient, 'callee'],
    ] as const) {
      if (p === 'gone') throw new SipError(403, 'Forbidden', 'POLICY_DIALOG_PARTY_GONE', [['Warning', `399 ${WARN_AGENT} "the ${party}'s endpoint was removed"`]]);
      if (p === 'disabled') throw new SipError(403, 'Forbidden', 'POLICY_DIALOG_PARTY_DISABLED', [['Warning', `399 ${WARN_AGENT} "the ${party}'s account is disabled"`]]);
    }
    const traits: RequestTraits = { method: req.method, video: (req.method === 'INVITE' || req.method === 'UPDATE') && offersVideo(getHeader(req, 'content-type'), req.body) };
    const refusal = dialogRefusal(typeof sender === 'string' ? null : sender, typeof recipient === 'string' ? null : recipient, traits);
    if (refusal) {
      this.log.info({ callId: ctx.callId, method: req.method, flag: refusal.flag, party: refusal.party }, 'refused by policy in dialog');
      throw new SipError(403, 'Forbidden', `POLICY_${refusal.flag.toUpperCase()}`, refusalHeaders(refusal, WARN_AGENT));
    }
  }

  /**
   * The endpoint a From or To of a dialog names: null when it is not one of this edge's
   * account domains (a phone, a gateway, an application); 'gone' when the account domain is
   * ours but the endpoint no longer exists; 'disabled' when its account or sub-account is off.
   */
  private async dialogParty(header: string | undefined): Promise<EndpointRecord | null | 'gone' | 'disabled'> {
    const na = parseNameAddr(header ?? '');
    if (!na || (na.uri.scheme !== 'sip' && na.uri.scheme !== 'sips') || !na.uri.user) return null;
    const authId = accountOfDomain(na.uri.host, this.opts.sipDomain);
    if (!authId) return null;
    const cred = await this.opts.credentials.get(na.uri.host, na.uri.user);
    if (!cred) return phoneNumber(na.uri.user) ? null : 'gone';
    const [endpoint, account] = await Promise.all([this.opts.directory.getEndpoint(authId, cred.endpointId), this.opts.directory.getAccount(authId)]);
    if (!endpoint || !account) return 'gone';
    if (!account.enabled) return 'disabled';
    if (endpoint.subAccount) {
      const sub = await this.opts.directory.getSubAccount(authId, endpoint.subAccount);
      if (sub && !sub.enabled) return 'disabled';
    }
    return endpoint;
  }

  onAck(ctx: IncomingRequest): void {
    const req = ctx.req;
    if (toTag(req) === null) return; // an ACK of a transaction we no longer hold
    const dest = this.preprocessRoutes(req, ctx.callId);
    if (!dest) {
      this.log.debug({ callId: ctx.callId }, 'ACK without a Route of this edge dropped');
      return;
    }
    const fwd = cloneRequest(req);
    decrementMaxForwards(fwd);
    if (dest.cseqOffset) shiftCseq(fwd, dest.cseqOffset);
    if (dest.media && this.opts.media && hasSdp(req)) {
      // The answer to a late offer (the 2xx offered): through the engine before it goes on.
      void this.ackAnswer(ctx, dest, dest.media, fwd).then(() => this.forwardAck(ctx, fwd, dest));
      return;
    }
    this.forwardAck(ctx, fwd, dest);
  }

  private forwardAck(ctx: IncomingRequest, fwd: SipRequest, dest: Destination): void {
    // §16.11: a stateless forward computes its branch from the request, so a retransmitted ACK gets the same one.
    const branch = 'z9hG4bK' + createHash('sha1').update(`${ctx.via.branch ?? ''}|${ctx.via.host}|${ctx.callId}`).digest('hex').slice(0, 20);
    this.opts.layer.forwardStateless(fwd, dest, branch);
  }

  /** Which side of a relayed dialog a message with From tag `from` comes from, and what each side speaks. */
  private async dialogSides(ctx: IncomingRequest, dest: Destination, engine: string, sdp: string | null): Promise<{ engine: string; senderWebrtc: boolean; recipientWebrtc: boolean }> {
    const s = await this.opts.media!.session(ctx.callId);
    if (!s) {
      // Not in the store (lapsed, or the store is away): the transports tell.
      return { engine, senderWebrtc: isWebrtcLeg(ctx.flow.transport, sdp), recipientWebrtc: isWebrtcLeg(dest.transport, null) };
    }
    const fromCaller = tagOf(getHeader(ctx.req, 'from')) === s.fromTag;
    return {
      engine: s.engine,
      senderWebrtc: fromCaller ? s.callerWebrtc : s.calleeWebrtc,
      recipientWebrtc: fromCaller ? s.calleeWebrtc : s.callerWebrtc,
    };
  }

  /**
   * A re-INVITE or UPDATE of a relayed call: its offer through the call's engine
   * (rewritten into `fwd`), and the rewrite of the response that answers it. Without
   * SDP (a re-INVITE asking for an offer), the 2xx's SDP is the offer and the ACK
   * answers it. Throws 488 when the engine refuses the SDP, 503 when it cannot be reached.
   */
  private async dialogMedia(ctx: IncomingRequest, dest: Destination, tokenEngine: string, fwd: SipRequest): Promise<(up: SipResponse) => Promise<void>> {
    const relay = this.opts.media!;
    const req = ctx.req;
    const sdp = hasSdp(req) ? req.body.toString('utf8') : null;
    const sides = await this.dialogSides(ctx, dest, tokenEngine, sdp);
    const fromTag = tagOf(getHeader(req, 'from')) ?? '';
    const to = toTag(req) ?? '';
    const base = { callId: ctx.callId, engine: sides.engine };
    if (sdp !== null) {
      try {
        fwd.body = Buffer.from(await relay.dialogOffer({ ...base, fromTag, toTag: to, sdp, towardsWebrtc: sides.recipientWebrtc }));
      } catch (err) {
        throw mediaError(err);
      }
    }
    return async (up) => {
      if (!hasSdp(up) || up.status < 180 || up.status >= 300) return;
      const body = up.body.toString('utf8');
      up.body = Buffer.from(
        sdp !== null
          ? await relay.dialogAnswer({ ...base, fromTag, toTag: to, sdp: body, towardsWebrtc: sides.senderWebrtc })
          : await relay.dialogOffer({ ...base, fromTag: tagOf(getHeader(up, 'to')) ?? to, toTag: fromTag, sdp: body, towardsWebrtc: sides.senderWebrtc }),
      );
    };
  }

  /** An ACK with SDP answers the offer of a 2xx (late offer): through the call's engine, the offerer's tag first. */
  private async ackAnswer(ctx: IncomingRequest, dest: Destination, tokenEngine: string, fwd: SipRequest): Promise<void> {
    const sdp = ctx.req.body.toString('utf8');
    try {
      const sides = await this.dialogSides(ctx, dest, tokenEngine, sdp);
      const m: DialogSdp = {
        callId: ctx.callId,
        engine: sides.engine,
        fromTag: toTag(ctx.req) ?? '',
        toTag: tagOf(getHeader(ctx.req, 'from')) ?? '',
        sdp,
        towardsWebrtc: sides.recipientWebrtc,
      };
      fwd.body = Buffer.from(await this.opts.media!.dialogAnswer(m));
    } catch (err) {
      // An ACK cannot be refused: it goes on as sent, and the media may not flow.
      this.log.warn({ callId: ctx.callId, err: err instanceof Error ? err.message : String(err) }, 'media answer in ACK failed; ACK forwarded as sent');
    }
  }

  onCancel(_ctx: IncomingRequest, tx: InviteServerTransaction): void {
    tx.onCancel?.();
  }

  // --- out of dialog ---------------------------------------------------------------

  private async outOfDialog(ctx: IncomingRequest, tx: ServerTransaction, loop: string): Promise<void> {
    const req = ctx.req;
    if (isInternalFlow(ctx.flow)) return this.originate(ctx, tx, loop);
    const carrier = this.opts.pstn ? await this.opts.pstn.carrierOf(req, getHeader(req, 'from'), ctx.flow.remoteAddress) : null;
    const caller = carrier ? await this.carrierCaller(ctx, carrier) : await this.authenticate(ctx);
    // An endpoint's MESSAGE to a messaging channel's address (`sip:channel-<id>@<its domain>`).
    if (req.method === 'MESSAGE' && caller.endpoint && this.opts.channelMessage && CHANNEL_URI.test(req.uri)) {
      const status = await this.opts.channelMessage({ domain: caller.domain, from: caller.user, to: req.uri, body: req.body, contentType: getHeader(req, 'content-type') ?? null });
      tx.respond(status, status < 300 ? 'OK' : status === 404 ? 'Not Found' : status === 415 ? 'Unsupported Media Type' : status === 413 ? 'Request Entity Too Large' : 'Server Internal Error');
      return;
    }
    if (req.method === 'MESSAGE' && this.opts.calls) {
      const calls = this.opts.calls;
      // A MESSAGE the edge itself refuses (not registered, policy) is reported as failed too.
      return this.placeCall(ctx, tx, loop, caller, null).catch((err: unknown) => {
        if (err instanceof SipError && err.status >= 300) calls.message(this.messageInfo(ctx, caller), err.status);
        throw err;
      });
    }
    if (req.method !== 'INVITE' || !this.opts.calls) return this.placeCall(ctx, tx, loop, caller, null);
    // An INVITE of an authenticated endpoint is a call attempt: it leaves a record
    // even when the edge itself refuses it (not registered, policy, limits).
    const info: CallInfo = {
      domain: caller.domain,
      authId: caller.account.authId,
      subAccount: caller.sub?.authId ?? null,
      sipCallId: ctx.callId,
      fromTag: tagOf(getHeader(req, 'from')) ?? '',
      fromNumber: caller.user,
      toNumber: caller.carrier ? caller.carrier.number : targetNumber(req.uri),
      context: 'endpoint',
      endpoint: caller.endpoint,
      ...(caller.carrier
        ? { direction: 'inbound' as const, appId: caller.carrier.appId, pstn: { trunkId: caller.carrier.trunk.trunkId, number: caller.carrier.number, carrier: caller.carrier.address } }
        : {}),
    };
    try {
      await this.placeCall(ctx, tx, loop, caller, info);
    } catch (err) {
      if (err instanceof SipError && err.status >= 300) {
        this.opts.calls.unanswered(this.opts.calls.started(info), { status: err.status, how: err.code === 'PROXY_NOT_REGISTERED' ? 'rejected-here' : 'refused' });
      }
      throw err;
    }
  }

  /** An INVITE of the edge's own user agent (calls/): placed for the account it names, recorded as its leg. */
  private async originate(ctx: IncomingRequest, tx: ServerTransaction, loop: string): Promise<void> {
    const o = ctx.req.method === 'INVITE' || ctx.req.method === 'MESSAGE' ? (this.opts.originated?.(ctx) ?? null) : null;
    if (!o) throw new SipError(403, 'Forbidden', 'PROXY_NOT_ORIGINATED');
    const domain = `${o.account.authId.toLowerCase()}.${this.opts.sipDomain}`;
    const caller: Caller = { domain, user: o.user, endpoint: o.endpoint, account: o.account, sub: o.sub, origin: o };
    // A messaging channel's MESSAGE to an endpoint (docs/messaging.md "SIP channel"): no call record.
    if (ctx.req.method === 'MESSAGE') return this.placeCall(ctx, tx, loop, caller, null);
    const info: CallInfo = {
      domain,
      authId: o.account.authId,
      subAccount: o.sub?.authId ?? null,
      sipCallId: ctx.callId,
      fromTag: tagOf(getHeader(ctx.req, 'from')) ?? '',
      fromNumber: o.user,
      toNumber: targetNumber(ctx.req.uri),
      context: 'endpoint',
      endpoint: o.endpoint,
      origin: o.record,
    };
    try {
      await this.placeCall(ctx, tx, loop, caller, info);
    } catch (err) {
      if (err instanceof SipError && err.status >= 300 && this.opts.calls) {
        this.opts.calls.unanswered(this.opts.calls.started(info), { status: err.status, how: err.code === 'PROXY_NOT_REGISTERED' ? 'rejected-here' : 'refused' });
      }
      throw err;
    }
  }

  private async placeCall(ctx: IncomingRequest, tx: ServerTransaction, loop: string, caller: Caller, info: CallInfo | null): Promise<void> {
    const req = ctx.req;
    const traits: RequestTraits = { method: req.method, video: req.method === 'INVITE' && offersVideo(getHeader(req, 'content-type'), req.body) };
    const target = await this.resolve(req.uri, caller);
    this.checkPolicy(ctx, caller, traits, target);
    const legs = await this.legsOf(target, caller);
    // Only a call or a message wakes a sleeping device (RFC 8599 §5.3).
    if (req.method !== 'INVITE' && req.method !== 'MESSAGE' && legs.some((l) => l.wake)) {
      for (let i = legs.length - 1; i >= 0; i--) if (legs[i]?.wake) legs.splice(i, 1);
      if (legs.length === 0) throw new SipError(480, 'Temporarily Unavailable', 'PROXY_NOT_REGISTERED');
    }
    // A trunk's gateways are tried one after another (docs/trunks.md "Outbound"): the first
    // now, the others as each fails.
    const spares = target.kind === 'trunk' ? legs.splice(1) : [];
    const charge = req.method === 'INVITE' && info ? await this.quote(ctx, caller, target) : null;

    if (req.method === 'INVITE') await this.admit(caller.account, ctx.callId, [caller.carrier?.trunk, target.kind === 'trunk' ? target.trunk : undefined]);
    if (info) {
      info.context = target.kind;
      // The application's XML is run here: its answer_url is fetched, not sent Ring/StartApp.
      if (target.kind === 'app' && !this.appServer && this.opts.runsApplications) info.runsApp = true;
      if (charge) info.charge = charge;
      if (target.kind === 'trunk') {
        // The carrier is the gateway that answers (set then); none for a call no gateway answered.
        info.pstn ??= { trunkId: target.trunk.trunkId, number: target.callerId, carrier: null };
        if (!caller.carrier) info.toNumber = target.number;
      }
    }
    const call: TrackedCall | null = info && this.opts.calls ? this.opts.calls.started(info) : null;
    const calls = this.opts.calls;
    if (tx.cancelled) {
      // The caller CANCELed while we were looking things up (§16.10).
      this.release(ctx.callId);
      tx.respond(487, 'Request Terminated');
      if (call && calls) calls.unanswered(call, { status: 487, how: 'cancelled' });
      return;
    }

    // Media: the caller's offer through rtpengine, once per branch that needs it (docs/media.md "Calls").
    const media = req.method === 'INVITE' ? await this.offerMedia(ctx, legs) : null;
    if (media?.failed) {
      this.release(ctx.callId);
      throw media.failed;
    }

    // Targets already tried by this request (3xx recursion never goes back to one: loop-safe).
    const tried = new Set([targetKey(target)]);
    // The leg of each branch of the response context, in fork order (a leg dropped for
    // media has no branch, so branch i is not always legs[i]).
    const legOfBranch: number[] = [];
    const context: ResponseContext = new ResponseContext({
      layer: this.opts.layer,
      log: this.log,
      server: tx,
      transformUp: media?.engine ? (up, b) => this.answerMedia(ctx, media, legs, up, legOfBranch[b] ?? b) : undefined,
      noAnswerMs: req.method === 'INVITE' ? this.opts.noAnswerTimeoutMs : undefined,
      // A binding whose connection closed an instant ago: not reachable, as if not registered.
      flowFailure: target.kind === 'endpoint' ? { status: 480, reason: 'Temporarily Unavailable' } : undefined,
      // RFC 3261 §16.5/§16.7 step 4, README "Redirects": Contacts of a 3xx become branches,
      // unless the request asked for no recursion (RFC 3841 Request-Disposition: no-recurse).
      failover: spares.length > 0 || target.kind === 'trunk' ? (final, b) => this.failover(ctx, final, legs, legOfBranch[b] ?? b, spares, media, context, forkLeg) : undefined,
      redirect: noRecurse(req) || caller.carrier
        ? undefined
        : async (up) => {
            const more = await this.redirectLegs(ctx, caller, traits, tried, up);
            if (more.length === 0 || !context.open) return 0;
            let added = 0;
            for (const leg of more) {
              const i = legs.push(leg) - 1;
              if (media && !(await this.offerMediaLeg(ctx, media, leg, i))) continue;
              if (!context.open) break;
              forkLeg(leg, i);
              added++;
            }
            return added;
          },
      events:
        req.method === 'INVITE'
          ? {
              onRinging: () => call && calls?.rang(call),
              onAnswered: (ok, branch) => {
                const leg = legs[legOfBranch[branch] ?? branch];
                if (call) calls?.answered(call, leg?.gateway?.leg.dest.address);
                if (call && charge && leg) this.chargeAnswered(ctx, call, charge, ok, leg.dest);
              },
              onFinal: (status, endedBy) => {
                if (status < 300) return;
                this.release(ctx.callId);
                if (media?.engine) this.opts.media?.delete(ctx.callId, media.engine);
                if (call && calls) {
                  calls.unanswered(call, { status, how: endedBy === 'caller-cancel' ? 'cancelled' : endedBy === 'no-answer' ? 'no-answer' : 'refused' });
                }
              },
            }
          : req.method === 'MESSAGE' && calls
            ? { onFinal: (status) => (caller.endpoint ? calls.message(this.messageInfo(ctx, caller), status) : undefined) }
            : undefined,
    });
    tx.onCancel = () => context.cancelByCaller();
    const forkLeg = (leg: Leg, i: number): void => {
      const fwd = cloneRequest(req);
      const relayed = media?.legs[i] === 'relayed';
      const offered = media?.sdp[i];
      if (typeof offered === 'string') fwd.body = Buffer.from(offered);
      // §16.6 step 2: the Request-URI becomes the target (the Contact of the binding).
      fwd.uri = leg.uri;
      decrementMaxForwards(fwd);
      // The edge is the only route out of dialog; credentials for our realm stay here (§22.3).
      removeHeaders(fwd, 'route');
      removeHeadersWhere(fwd, 'proxy-authorization', (v) => parseDigestCredentials(v)?.params.get('realm')?.toLowerCase() === caller.domain);
      // RFC 3325 §5: identity is asserted to trusted hops only (gateway, app server); never taken from a client.
      for (const h of ASSERTED) removeHeaders(fwd, h);
      for (const [n, v] of leg.extra) fwd.headers.push({ name: n, value: v });
      // The application runtime's leg takes the call's uuid (its CallUUID is the CDR's).
      if (isInternalFlow(leg.dest) && call) fwd.headers.push({ name: CALL_UUID_HEADER, value: call.callUuid });
      // RFC 3327 §5.2: the Path of the binding becomes the Route towards it.
      if (leg.path) prependHeaders(fwd, 'route', getListValuesOf(leg.path));
      const g = leg.gateway;
      const restore = g ? this.asCarrierSees(fwd, g) : undefined;
      if (req.method === 'INVITE') this.recordRoute(fwd, ctx, leg.dest, call ? caller.domain : undefined, relayed ? media?.engine : undefined, g?.cseqOffset);
      legOfBranch.push(i);
      context.fork(fwd, leg.dest, { loop, restore, answerTimeoutMs: g ? GATEWAY_ANSWER_MS : undefined });
    };
    caller.origin?.admitted();
    for (const [i, leg] of legs.entries()) {
      if (media?.legs[i] === 'dropped') continue; // needed the relay, and no engine took it
      if (leg.wake) {
        legOfBranch.push(i);
        context.hold(this.wakeLeg(ctx, leg.wake, legs, media, context, forkLeg), { status: 480, reason: 'Temporarily Unavailable' });
        continue;
      }
      forkLeg(leg, i);
    }
  }

  /** A sleeping device's branch (RFC 8599): pushed, then forked on the flow it registers again on; 0 when it did not. */
  private async wakeLeg(
    ctx: IncomingRequest,
    wake: { aor: Aor; binding: Binding },
    legs: Leg[],
    media: MediaPlan | null,
    context: ResponseContext,
    forkLeg: (leg: Leg, i: number) => void,
  ): Promise<number> {
    const b = await (this.opts.push as NonNullable<ProxyOptions['push']>).wake(wake.aor, wake.binding, ctx.callId, ctx.req.method);
    if (!b || !context.open) return 0;
    const dest = this.bindingDestination(b);
    if (!dest) return 0;
    const ready: Leg = { uri: b.uri, dest, path: b.path, extra: [] };
    const j = legs.push(ready) - 1;
    if (media && !(await this.offerMediaLeg(ctx, media, ready, j))) return 0;
    if (!context.open) return 0;
    forkLeg(ready, j);
    return 1;
  }

  // --- the phone network (docs/trunks.md) -----------------------------------------

  /**
   * A carrier's out-of-dialog request: an INVITE to a number of the trunk's account (405 for
   * any other method). The "caller" is the account that owns the number; the call is placed
   * to the number's route ({@link carrierTarget}).
   */
  private async carrierCaller(ctx: IncomingRequest, carrier: CarrierSource): Promise<Caller> {
    const req = ctx.req;
    if (req.method !== 'INVITE') throw new SipError(405, 'Method Not Allowed', 'TRUNK_METHOD', [['Allow', 'INVITE, ACK, CANCEL, BYE, UPDATE, PRACK, INFO']]);
    const pstn = this.opts.pstn as PstnRouting;
    const account = await this.opts.directory.getAccount(carrier.trunk.authId);
    if (!account) throw new SipError(404, 'Not Found', 'ROUTE_UNKNOWN_NUMBER');
    const route = await pstn.inboundNumber(carrier, account, req.uri, getHeader(req, 'to'));
    if (!account.enabled) throw new SipError(403, 'Forbidden', 'PROXY_ACCOUNT_DISABLED', [['Warning', `399 ${WARN_AGENT} "account disabled"`]]);
    const sub = route.subAccount ? await this.opts.directory.getSubAccount(account.authId, route.subAccount) : null;
    if (sub && !sub.enabled) throw new SipError(403, 'Forbidden', 'PROXY_SUBACCOUNT_DISABLED', [['Warning', `399 ${WARN_AGENT} "sub-account disabled"`]]);
    const from = parseNameAddr(getHeader(req, 'from') ?? '');
    const user = from?.uri.scheme === 'tel' ? telNumber(from.uri) : (from?.uri.user ?? 'anonymous');
    this.log.info({ callId: ctx.callId, trunk: carrier.trunk.trunkId, how: carrier.how, number: route.e164 }, 'call from the phone network');
    return {
      domain: account.sipDomain,
      user,
      endpoint: null,
      account,
      sub,
      carrier: { ...carrier, number: route.e164, appId: route.applicationId, route },
    };
  }

  /** Where a carrier's call goes: the number's endpoint, application or forwarding trunk. */
  private async carrierTarget(caller: Caller & { carrier: NonNullable<Caller['carrier']> }): Promise<Target> {
    const { route } = caller.carrier;
    const authId = caller.account.authId;
    if (route.endpointId) {
      const endpoint = await this.opts.directory.getEndpoint(authId, route.endpointId);
      if (!endpoint) throw new SipError(480, 'Temporarily Unavailable', 'ROUTE_NUMBER_UNROUTED', [['Warning', `399 ${WARN_AGENT} "number ${route.e164} has no route"`]]);
      return { kind: 'endpoint', domain: caller.account.sipDomain, user: endpoint.username, authId, endpoint, same: false, device: null };
    }
    if (route.applicationId) {
      const app = await this.opts.directory.getApplication(authId, route.applicationId);
      if (!app) throw new SipError(480, 'Temporarily Unavailable', 'ROUTE_NUMBER_UNROUTED', [['Warning', `399 ${WARN_AGENT} "number ${route.e164} has no route"`]]);
      if (!app.settings.enabled) throw new SipError(480, 'Temporarily Unavailable', 'PROXY_APPLICATION_DISABLED');
      return { kind: 'app', authId, appId: route.applicationId };
    }
    const trunk = route.trunkGroupId ? await (this.opts.pstn as PstnRouting).trunkOf(authId, route.trunkGroupId) : null;
    if (!trunk || !trunk.enabled) throw new SipError(480, 'Temporarily Unavailable', 'ROUTE_TRUNK_UNAVAILABLE', [['Warning', `399 ${WARN_AGENT} "the trunk of number ${route.e164} is disabled or gone"`]]);
    // Forwarded: the carrier's caller ID goes on (the account's number was dialled, not used to call).
    return { kind: 'trunk', trunk, number: route.e164, callerId: caller.user };
  }

  /** A call to a number: out through the account's OUTBOUND trunk, else the operator's gateway. */
  private async phoneTarget(dialled: string, caller: Caller): Promise<Target> {
    const pstn = this.opts.pstn;
    const placer = caller.endpoint !== null || caller.origin !== undefined;
    const trunk = pstn && placer ? await pstn.outboundTrunk(caller.account.authId) : null;
    if (!pstn || !trunk) return { kind: 'phone', number: dialled };
    const number = pstn.number(dialled, caller.account);
    let callerId: string;
    if (caller.origin?.callerId) callerId = caller.origin.callerId;
    else if (caller.endpoint) callerId = await pstn.callerId(caller.account, caller.endpoint.endpointId, caller.user);
    else throw new SipError(403, 'Forbidden', 'ROUTE_NO_CALLER_ID', [['Warning', `399 ${WARN_AGENT} "the call has no number of the account to show"`]]);
    return { kind: 'trunk', trunk, number, callerId };
  }

  /**
   * What the carrier sees of a trunk leg (docs/trunks.md "Caller ID"): the From names the
   * account's number, the CSeq is one up on a challenge's retry. Returns what responses
   * must carry back upstream instead.
   */
  private asCarrierSees(fwd: SipRequest, g: GatewayTry): Array<[string, string]> {
    const restore: Array<[string, string]> = [];
    const from = getHeader(fwd, 'from');
    const na = from ? parseNameAddr(from) : null;
    if (from && na) {
      restore.push(['from', from]);
      const tag = na.params.get('tag');
      setHeader(fwd, 'from', `<sip:${g.callerId}@${this.opts.sipDomain};user=phone>${tag ? `;tag=${tag}` : ''}`);
    }
    if (g.cseqOffset > 0) restore.push(...shiftCseq(fwd, g.cseqOffset));
    return restore;
  }

  /**
   * A trunk leg ended without a 2xx (docs/trunks.md "Outbound"): a challenge is answered
   * once with the trunk's credential on the same gateway; a 5xx, 408, timeout or transport
   * error moves on to the next gateway (4xx and 6xx are the carrier's answer and go up).
   */
  private async failover(
    ctx: IncomingRequest,
    final: BranchFinal,
    legs: Leg[],
    i: number,
    spares: Leg[],
    media: MediaPlan | null,
    context: ResponseContext,
    forkLeg: (leg: Leg, i: number) => void,
  ): Promise<number> {
    const leg = legs[i];
    const g = leg?.gateway;
    if (!g) return 0;
    const pstn = this.opts.pstn as PstnRouting;
    let next: Leg | undefined;
    if ((final.status === 401 || final.status === 407) && final.response && g.cseqOffset === 0) {
      const header = await pstn.challengeAnswer(g.leg.trunkId, final.response, ctx.req.method, leg.uri);
      if (!header) return 0;
      next = { ...leg, extra: [...leg.extra, header], gateway: { ...g, cseqOffset: 1 } };
    } else if (final.status === 408 || final.status >= 500 && final.status < 600) {
      if (final.response === null) pstn.gatewayFailed(g.leg); // silent or unreachable (a 5xx is an answer)
      next = spares.shift();
    }
    while (next && context.open) {
      const candidate: Leg = next;
      try {
        const dest = candidate.gateway && candidate.dest.transport !== 'udp' ? await pstn.connect(candidate.gateway.leg) : candidate.dest;
        const ready: Leg = { ...candidate, dest };
        const j = legs.push(ready) - 1;
        if (media && !(await this.offerMediaLeg(ctx, media, ready, j))) return 0;
        if (!context.open) return 0;
        this.log.info({ callId: ctx.callId, gateway: ready.gateway?.leg.gateway, after: final.status, auth: ready.gateway?.cseqOffset === 1 }, 'trying the next way out');
        forkLeg(ready, j);
        return 1;
      } catch (err) {
        if (candidate.gateway) pstn.gatewayFailed(candidate.gateway.leg);
        this.log.info({ callId: ctx.callId, gateway: candidate.gateway?.leg.gateway, err: err instanceof Error ? err.message : String(err) }, 'gateway not reachable');
        next = spares.shift();
      }
    }
    return 0;
  }

  /** The Endpoint policy flags and the KYC block for a request of `caller` to `target` (403 naming the flag). */
  private checkPolicy(ctx: IncomingRequest, caller: Caller, traits: RequestTraits, target: Target): void {
    const kind: TargetKind = target.kind === 'endpoint' ? (target.same ? 'same_domain' : 'other_domain') : target.kind === 'trunk' ? 'phone' : target.kind;
    const calleeSide = caller.carrier ? 'phone' : target.kind === 'endpoint' && target.same ? 'same_domain' : 'other_domain';
    const refusal: Refusal | null =
      (caller.endpoint ? callerRefusal(caller.endpoint, caller.sub, traits, kind) : null) ??
      (caller.origin && !caller.endpoint ? originRefusal(caller.sub, traits, kind) : null) ??
      (target.kind === 'endpoint' ? calleeRefusal(target.endpoint, traits, calleeSide) : null);
    if (refusal) {
      this.log.info({ callId: ctx.callId, method: traits.method, flag: refusal.flag, party: refusal.party }, 'refused by policy');
      throw new SipError(403, 'Forbidden', `POLICY_${refusal.flag.toUpperCase()}`, refusalHeaders(refusal, WARN_AGENT));
    }
  }

  /** The legs of a target: the live bindings of an endpoint, or the gateway / app server. */
  private async legsOf(target: Target, caller: Caller): Promise<Leg[]> {
    const legs: Leg[] = [];
    const asserted = `<sip:${caller.user}@${caller.domain}>`;
    if (target.kind === 'endpoint') {
      let bindings = await this.opts.location.lookup({ domain: target.domain, user: target.user });
      const device = target.device;
      if (device) {
        // RFC 5627 §5.5: a GRUU reaches the bindings of that instance only; a temporary
        // one only while the registration that minted it (its Call-ID) lives.
        bindings = bindings.filter((b) => b.instanceId === device.instance && (device.callId === null || b.callId === device.callId));
        if (bindings.length === 0) throw new SipError(480, 'Temporarily Unavailable', 'PROXY_GRUU_GONE');
      }
      for (const b of bindings) {
        const dest = this.bindingDestination(b);
        if (dest) legs.push({ uri: b.uri, dest, path: b.path, extra: [] });
        else if (this.opts.push && isAsleep(b)) legs.push({ uri: b.uri, dest: sleepingDest(b), path: b.path, extra: [], wake: { aor: { domain: target.domain, user: target.user }, binding: b } });
      }
      if (legs.length === 0) throw new SipError(480, 'Temporarily Unavailable', 'PROXY_NOT_REGISTERED');
    } else if (target.kind === 'trunk') {
      const pstn = this.opts.pstn as PstnRouting;
      for (const g of await pstn.gatewayLegs(target.trunk, target.number)) {
        let dest = g.dest;
        if (legs.length === 0 && dest.transport !== 'udp') {
          // The first one is sent at once: its TCP/TLS connection now (the others' when their turn comes).
          try {
            dest = await pstn.connect(g);
          } catch (err) {
            pstn.gatewayFailed(g);
            this.log.info({ gateway: g.gateway, err: err instanceof Error ? err.message : String(err) }, 'gateway not reachable');
            continue;
          }
        }
        legs.push({
          uri: g.uri,
          dest,
          path: null,
          extra: [['p-asserted-identity', `<sip:${target.callerId}@${this.opts.sipDomain};user=phone>`]],
          gateway: { leg: g, callerId: target.callerId, cseqOffset: 0 },
        });
      }
      if (legs.length === 0) throw new SipError(503, 'Service Unavailable', 'TRUNK_NO_GATEWAY', [['Retry-After', '30'], ['Warning', `399 ${WARN_AGENT} "no origination URI of trunk ${target.trunk.trunkId} is reachable"`]]);
    } else if (target.kind === 'phone') {
      if (!this.gateway) throw new SipError(503, 'Service Unavailable', 'PROXY_NO_GATEWAY', [['Warning', `399 ${WARN_AGENT} "no outbound gateway is configured"`]]);
      legs.push({
        uri: withUser(this.gateway, target.number),
        dest: await uriDestination(this.gateway),
        path: null,
        extra: [
          ['p-asserted-identity', asserted],
          ['x-account-id', caller.account.authId],
        ],
      });
    } else if (!this.appServer && this.opts.runsApplications) {
      // The edge's own application runtime (docs/calls.md "Inbound"): an internal flow of this process.
      const connId = `${INTERNAL_FLOW_PREFIX}in-${randomBytes(8).toString('hex')}`;
      legs.push({
        uri: `sip:${target.appId}@${caller.domain}`,
        dest: { transport: 'tcp', address: '127.0.0.1', port: 0, connId, node: this.opts.relayFlows ? this.opts.nodeId : null },
        path: null,
        extra: [
          ['x-account-id', target.authId],
          ['x-application-id', target.appId],
        ],
      });
    } else {
      if (!this.appServer) throw new SipError(503, 'Service Unavailable', 'PROXY_NO_APP_SERVER', [['Warning', `399 ${WARN_AGENT} "no application server is configured"`]]);
      legs.push({
        uri: withUser(this.appServer, target.appId),
        dest: await uriDestination(this.appServer),
        path: null,
        extra: [
          ['p-asserted-identity', asserted],
          ['x-account-id', target.authId],
          ['x-application-id', target.appId],
        ],
      });
    }
    return legs;
  }

  /**
   * The legs a 3xx's Contacts lead to (RFC 3261 §16.5, README "Redirects"): in q order, at
   * most {@link MAX_REDIRECT_TARGETS} new targets per request in all, each one a target this
   * edge routes itself (an endpoint, a number, an application of the caller's account) and
   * allowed to the caller by policy, as if it had dialled it; never one already tried. A
   * Contact naming another host is not followed: the edge is no open relay.
   */
  private async redirectLegs(ctx: IncomingRequest, caller: Caller, traits: RequestTraits, tried: Set<string>, up: SipResponse): Promise<Leg[]> {
    const contacts = getListValues(up, 'contact')
      .map((v, i) => ({ na: parseNameAddr(v), i }))
      .filter((c): c is { na: NonNullable<ReturnType<typeof parseNameAddr>>; i: number } => c.na !== null)
      .map((c) => ({ uri: c.na.uri.raw, q: qOf(c.na.params.get('q')), i: c.i }))
      .sort((a, b) => b.q - a.q || a.i - b.i);
    const legs: Leg[] = [];
    for (const c of contacts) {
      if (tried.size > MAX_REDIRECT_TARGETS) break;
      let target: Target;
      try {
        target = await this.resolve(c.uri, caller);
        const key = targetKey(target);
        if (tried.has(key)) continue;
        tried.add(key);
        this.checkPolicy(ctx, caller, traits, target);
        const found = await this.legsOf(target, caller);
        // A trunk's first gateway only: a redirect has no failover of its own.
        legs.push(...(target.kind === 'trunk' ? found.slice(0, 1) : found));
      } catch (err) {
        this.log.debug({ callId: ctx.callId, contact: c.uri, err: err instanceof Error ? err.message : String(err) }, 'redirect contact not followed');
      }
    }
    if (legs.length > 0) this.log.info({ callId: ctx.callId, status: up.status, legs: legs.length }, 'recursing on a redirect');
    return legs;
  }

  /**
   * The price and credit check of a call (docs/billing.md "Calls"): 402 when the payer's
   * available balance does not cover the first increment, 403 for a number without a rate.
   */
  private async quote(ctx: IncomingRequest, caller: Caller, target: Target): Promise<CallCharge | null> {
    const charging = this.opts.charging;
    // A call from the phone network is free to its account unless it is forwarded out through a trunk.
    if (!charging || (caller.carrier && target.kind !== 'trunk')) return null;
    const q = await charging.quote(
      caller.account,
      target.kind === 'phone' || target.kind === 'trunk' ? { kind: 'phone', number: target.number } : target.kind === 'app' ? { kind: 'app' } : { kind: 'endpoint', uri: `sip:${target.user}@${target.domain}` },
    );
    if (q.ok) return q.charge;
    this.log.info({ callId: ctx.callId, account: caller.account.authId, status: q.status, reason: q.reason }, 'call refused by billing');
    if (q.status === 402) throw new SipError(402, 'Payment Required', 'BILLING_NO_CREDIT', [['Warning', `399 ${WARN_AGENT} "${q.reason}"`]]);
    throw new SipError(403, 'Forbidden', 'BILLING_UNRATED', [['Warning', `399 ${WARN_AGENT} "${q.reason}"`]]);
  }

  /**
   * A rated call was answered through this node: it joins its payer's live set, and this
   * node ends it — a BYE to each party — when the payer's balance runs out.
   */
  private chargeAnswered(ctx: IncomingRequest, call: TrackedCall, charge: CallCharge, ok: SipResponse, calleeDest: Destination): void {
    const charging = this.opts.charging as CallCharging;
    const dialog = dialogOf(ctx, ok, this.ownFlow(ctx), calleeDest, (v) => {
      const na = parseNameAddr(v);
      return na !== null && this.isOurs(na.uri, ctx.callId);
    });
    void charging
      .answered(call.callUuid, charge, Date.now(), this.maxCallMs, () => this.endDialog(dialog, call))
      .catch((err: unknown) => this.log.warn({ callId: ctx.callId, err: err instanceof Error ? err.message : String(err) }, 'call not watched for credit'));
  }

  /**
   * Ends a dialog the edge Record-Routed (Kamailio dialog's dlg_end_dlg): a BYE to the
   * callee as if from the caller and one to the caller as if from the callee, each over
   * that party's flow, with `Reason: SIP;cause=402`. The call's record ends as
   * CREDIT_EXHAUSTED; its limiter slot and media session are released.
   */
  private endDialog(d: DialogEnds, call: TrackedCall): void {
    const reason = 'SIP;cause=402;text="credit exhausted"';
    const bye = (uri: string, routes: string[], from: string, to: string, cseq: number): SipRequest => ({
      kind: 'request',
      method: 'BYE',
      uri,
      headers: [
        ...routes.map((r) => ({ name: 'route', value: r })),
        { name: 'max-forwards', value: '70' },
        { name: 'from', value: from },
        { name: 'to', value: to },
        { name: 'call-id', value: d.callId },
        { name: 'cseq', value: `${cseq} BYE` },
        { name: 'reason', value: reason },
      ],
      body: Buffer.alloc(0),
    });
    this.opts.layer.request(bye(d.calleeTarget, d.calleeRoutes, d.callerFrom, d.calleeTo, d.callerCseq + 100), d.calleeDest, NO_OP_USER);
    this.opts.layer.request(bye(d.callerTarget, d.callerRoutes, d.calleeTo, d.callerFrom, 1_000_000), d.callerDest, NO_OP_USER);
    this.release(d.callId);
    if (this.opts.media) {
      const relay = this.opts.media;
      void relay.session(d.callId, true).then((s) => s && relay.delete(d.callId, s.engine));
    }
    void this.opts.calls?.cut(call.domain, d.callId);
  }

  private messageInfo(ctx: IncomingRequest, caller: Caller): MessageInfo {
    return {
      domain: caller.domain,
      authId: caller.account.authId,
      subAccount: caller.sub?.authId ?? null,
      sipCallId: ctx.callId,
      fromNumber: caller.user,
      toNumber: targetNumber(ctx.req.uri),
      endpoint: caller.endpoint as EndpointRecord, // MESSAGEs come from endpoints only (carriers: 405)
      contentType: getHeader(ctx.req, 'content-type') ?? null,
      body: ctx.req.body,
    };
  }

  /**
   * The caller's SDP offer through rtpengine for each leg the relay takes (per
   * MEDIA_RELAY): `sdp[i]` is what leg i gets. A leg that needs the relay (WebRTC on
   * one side only) is dropped when no engine takes it; `failed` (503, or 488 when
   * the engine refused the SDP) when that leaves no leg. One engine for every branch
   * of a call. An INVITE without SDP (late offer) only picks the engine: the 2xx
   * makes the offer, the ACK answers it.
   */
  private async offerMedia(ctx: IncomingRequest, legs: Array<{ dest: Destination }>): Promise<MediaPlan | null> {
    const relay = this.opts.media;
    if (!relay) return null;
    const sdp = hasSdp(ctx.req) ? ctx.req.body.toString('utf8') : null;
    const callerWebrtc = isWebrtcLeg(ctx.flow.transport, sdp);
    const plan: MediaPlan = { engine: undefined, fromTag: tagOf(getHeader(ctx.req, 'from')) ?? '', callerWebrtc, late: sdp === null, legs: [], sdp: [], earlyTags: [], failed: null, refused: null, tried: false };
    let dropped = 0;
    for (const [i, leg] of legs.entries()) if (!(await this.offerMediaLeg(ctx, plan, leg, i))) dropped++;
    if (dropped === legs.length) {
      plan.failed = mediaError(plan.refused);
      relay.counted(plan.refused ? 'refused' : 'failed');
    } else if (plan.tried) relay.counted(plan.engine ? 'relayed' : 'unrelayed');
    return plan;
  }

  /**
   * Leg `i` of the plan (a first branch, or one a 3xx added): its offer through the call's
   * engine when MEDIA_RELAY relays it. False when the leg is dropped (it needed the relay
   * and no engine took it, or the engine refused the SDP).
   */
  private async offerMediaLeg(ctx: IncomingRequest, plan: MediaPlan, leg: { dest: Destination }, i: number): Promise<boolean> {
    const relay = this.opts.media;
    plan.legs[i] = 'plain';
    if (!relay) return true;
    const calleeWebrtc = isWebrtcLeg(leg.dest.transport, null);
    if (!relay.relays(plan.callerWebrtc, calleeWebrtc)) return true;
    plan.tried = true;
    const needed = MediaRelay.needed(plan.callerWebrtc, calleeWebrtc);
    if (plan.late) {
      plan.engine ??= relay.choose() ?? undefined;
      if (plan.engine) plan.legs[i] = 'relayed';
      else if (needed) {
        plan.legs[i] = 'dropped';
        return false;
      }
      return true;
    }
    try {
      const r = await relay.offer({ callId: ctx.callId, fromTag: plan.fromTag, branch: `b${i}`, sdp: ctx.req.body.toString('utf8'), calleeWebrtc, engine: plan.engine });
      plan.engine = r.engine;
      plan.sdp[i] = r.sdp;
      plan.legs[i] = 'relayed';
      return true;
    } catch (err) {
      // An engine that refuses the SDP refuses the call (488), needed or not: the SDP is the
      // problem, and MEDIA_RELAY=always promises that no address goes through unrelayed.
      // An engine that cannot be reached only stops the calls that need it.
      const drop = needed || err instanceof RtpengineRejectedError;
      if (err instanceof RtpengineRejectedError) plan.refused = err;
      this.log.warn({ callId: ctx.callId, needed, err: err instanceof Error ? err.message : String(err) }, drop ? 'media relay failed: branch dropped' : 'media relay failed: branch not relayed');
      if (drop) plan.legs[i] = 'dropped';
      return !drop;
    }
  }

  /**
   * A response with SDP on branch `i`: the callee's answer through the engine that
   * took that branch's offer (or, for a late offer, the 2xx's offer). The 2xx that
   * wins keeps its branch; the others' offers go, and the call's engine and sides
   * are stored for the rest of the dialog (docs/media.md "Calls").
   */
  private async answerMedia(ctx: IncomingRequest, plan: MediaPlan, legs: Array<{ dest: Destination }>, up: SipResponse, i: number): Promise<void> {
    const relay = this.opts.media;
    if (!relay || !plan.engine || plan.legs[i] !== 'relayed') return;
    const toTag = tagOf(getHeader(up, 'to'));
    if (!toTag) return;
    const final = up.status >= 200 && up.status < 300;
    const body = up.body.toString('utf8');
    if (plan.late) {
      // Only the 2xx offers (an 18x's SDP would need PRACK, not supported by the edge).
      if (!final) return;
      up.body = Buffer.from(
        await relay.dialogOffer({ callId: ctx.callId, engine: plan.engine, fromTag: toTag, toTag: plan.fromTag, sdp: body, towardsWebrtc: plan.callerWebrtc }),
      );
    } else {
      up.body = Buffer.from(
        await relay.answer({ callId: ctx.callId, fromTag: plan.fromTag, toTag, branch: `b${i}`, sdp: body, callerWebrtc: plan.callerWebrtc, engine: plan.engine }),
      );
      if (!final) plan.earlyTags[i] = toTag;
    }
    if (final && plan.winner === undefined) {
      plan.winner = i;
      // The branch that answered keeps the session; the other branches' offers go.
      for (const [j, l] of plan.legs.entries()) if (j !== i && l === 'relayed' && !plan.late) relay.delete(ctx.callId, plan.engine, `b${j}`, plan.fromTag, plan.earlyTags[j]);
      const dest = legs[i]?.dest;
      const calleeWebrtc = isWebrtcLeg(dest?.transport ?? 'udp', body);
      // Stored before the 2xx goes up, so the ACK and what follows find it on any node.
      await relay.remember(ctx.callId, { engine: plan.engine, fromTag: plan.fromTag, callerWebrtc: plan.callerWebrtc, calleeWebrtc });
    }
  }

  /** Proxy authentication of an endpoint (RFC 3261 §22.3): realm and user from the From URI. */
  private async authenticate(ctx: IncomingRequest): Promise<Caller> {
    const from = parseNameAddr(getHeader(ctx.req, 'from') ?? '');
    if (!from || (from.uri.scheme !== 'sip' && from.uri.scheme !== 'sips') || !from.uri.user) {
      throw new SipError(403, 'Forbidden', 'PROXY_BAD_FROM', [['Warning', `399 ${WARN_AGENT} "From is not an endpoint of this edge"`]]);
    }
    const domain = from.uri.host;
    const authId = accountOfDomain(domain, this.opts.sipDomain);
    if (!authId) throw new SipError(403, 'Forbidden', 'PROXY_FOREIGN_FROM', [['Warning', `399 ${WARN_AGENT} "From is not an endpoint of this edge"`]]);
    // The source address feeds the password-guessing guard, as for REGISTER.
    const out = await this.opts.auth.authenticate(ctx.req, domain, from.uri.user, true, ctx.flow.remoteAddress);
    if (!out.ok) {
      if (out.kind === 'bad-request') throw new SipError(400, 'Bad Request', 'AUTH_URI_MISMATCH', [['Warning', '399 sip-edge "digest uri does not name the Request-URI"']]);
      if (out.kind === 'forbidden') throw new SipError(403, 'Forbidden', out.reason === 'cooling-off' ? 'AUTH_COOLING_OFF' : 'AUTH_USER_MISMATCH');
      this.log.debug({ callId: ctx.callId, reason: out.reason, src: ctx.received }, 'request challenged');
      throw new SipError(407, 'Proxy Authentication Required', 'AUTH_CHALLENGE', out.headers);
    }
    const [endpoint, account] = await Promise.all([
      this.opts.directory.getEndpoint(authId, out.credential.endpointId),
      this.opts.directory.getAccount(authId),
    ]);
    if (!endpoint || !account) throw new SipError(403, 'Forbidden', 'PROXY_NO_ENDPOINT');
    if (!account.enabled) throw new SipError(403, 'Forbidden', 'PROXY_ACCOUNT_DISABLED', [['Warning', `399 ${WARN_AGENT} "account disabled"`]]);
    const sub = endpoint.subAccount ? await this.opts.directory.getSubAccount(authId, endpoint.subAccount) : null;
    if (sub && !sub.enabled) throw new SipError(403, 'Forbidden', 'PROXY_SUBACCOUNT_DISABLED', [['Warning', `399 ${WARN_AGENT} "sub-account disabled"`]]);
    return { domain, user: from.uri.user, endpoint, account, sub };
  }

  /** Request-URI → target: an endpoint (404 when none), an application of the caller's account, a number. */
  private async resolve(requestUri: string, caller: Caller): Promise<Target> {
    if (caller.carrier) return this.carrierTarget(caller as Caller & { carrier: NonNullable<Caller['carrier']> });
    let uri = parseUri(requestUri);
    if (!uri) throw new SipError(416, 'Unsupported URI Scheme', 'PROXY_BAD_URI');
    const gruu = this.opts.gruus?.parse(uri) ?? null;
    if (gruu === 'invalid') throw new SipError(404, 'Not Found', 'PROXY_BAD_GRUU');
    // A temporary GRUU hides the user: target the endpoint it names (the URI's host is its account domain).
    if (gruu?.kind === 'temp') uri = { ...uri, user: gruu.user };
    const device: Device | null = gruu ? { instance: gruu.instance, callId: gruu.kind === 'temp' ? gruu.callId : null } : null;
    const t = parseTarget(uri, { sipDomain: this.opts.sipDomain, callerDomain: caller.domain, isOwnHost: (u) => this.opts.layer.isOwnUri(u) });
    switch (t.kind) {
      case 'phone':
        return this.phoneTarget(t.number, caller);
      case 'app': {
        // Applications are reachable only from their own account.
        const app = t.authId === caller.account.authId ? await this.opts.directory.getApplication(t.authId, t.appId) : null;
        if (!app) throw new SipError(404, 'Not Found', 'PROXY_NO_APPLICATION');
        if (!app.settings.enabled) throw new SipError(480, 'Temporarily Unavailable', 'PROXY_APPLICATION_DISABLED');
        return { kind: 'app', authId: t.authId, appId: t.appId };
      }
      case 'account': {
        const cred = await this.opts.credentials.get(t.domain, t.user);
        const endpoint = cred ? await this.opts.directory.getEndpoint(t.authId, cred.endpointId) : null;
        if (endpoint) {
          return { kind: 'endpoint', domain: t.domain, user: t.user, authId: t.authId, endpoint, same: t.domain === caller.domain, device };
        }
        // A number dialled in the account's domain (`+14155550100@acme…`) goes to the gateway.
        const n = phoneNumber(t.user);
        if (n) return this.phoneTarget(n, caller);
        throw new SipError(404, 'Not Found', 'PROXY_NO_ENDPOINT');
      }
      default:
        throw new SipError(404, 'Not Found', 'PROXY_UNKNOWN_TARGET');
    }
  }

  /**
   * Where a binding is reached: over the flow it registered on for stream
   * transports (whatever its Contact host says — `.invalid` for WebSocket), at the
   * address its REGISTER came from for UDP (NAT). Null when another node holds
   * the flow.
   */
  private bindingDestination(b: Binding): Destination | null {
    const r = parseUri(b.received);
    if (!r || r.port === null) return null;
    const address = r.host.startsWith('[') ? r.host.slice(1, -1) : r.host;
    // UDP: named with the process it registered through, so that the request leaves from
    // that node (a NATed phone answers only the address it registered with; docs/fleet.md).
    if (b.transport === 'udp') return { transport: 'udp', address, port: r.port, connId: null, node: this.opts.relayFlows ? b.nodeId : null };
    if (!b.connId) return null;
    if (b.nodeId !== this.opts.nodeId) {
      // Held by another process of the fleet: relayed to it when the fleet relay is on.
      if (!this.opts.relayFlows || !b.nodeId) {
        this.log.debug({ key: redactContact(b.key), nodeId: b.nodeId }, 'binding held by another process: skipped');
        return null;
      }
      return { transport: b.transport, address, port: r.port, connId: b.connId, node: b.nodeId };
    }
    // The owner is named even when it is this process: a flow token made from it must
    // lead an in-dialog request that reaches another process back here.
    return { transport: b.transport, address, port: r.port, connId: b.connId, node: this.opts.relayFlows ? this.opts.nodeId : null };
  }

  /**
   * Two Record-Route values (RFC 3261 §16.6 step 4; RFC 5658 double
   * Record-Routing): the top one faces the callee (its transport, a token of the
   * callee's flow), the next faces the caller (the ingress transport, a token
   * of the caller's flow). Whichever side sends an in-dialog request, the last
   * of our Route values it carries names the other side's flow.
   */
  private recordRoute(fwd: SipRequest, ctx: IncomingRequest, egress: Destination, callDomain?: string, mediaEngine?: string, cseqOffset?: number): void {
    const { tokens } = this.opts;
    const rr = (t: SipTransportName, token: string): string => {
      const l = this.opts.layer.sentBy(t);
      return `<sip:${token}@${l ? `${l.host}:${l.port}` : '127.0.0.1'};transport=${t};lr>`;
    };
    prependHeaders(fwd, 'record-route', [
      rr(egress.transport, tokens.encode(egress, ctx.callId, callDomain, mediaEngine, cseqOffset)),
      rr(ctx.flow.transport, tokens.encode(this.ownFlow(ctx), ctx.callId, callDomain, mediaEngine)),
    ]);
  }

  /** The flow a request came in on, named with this process (flow tokens, relay; a UDP peer's NAT knows this node). */
  private ownFlow(ctx: IncomingRequest): Destination {
    const d = destinationOf(ctx.flow);
    return this.opts.relayFlows ? { ...d, node: this.opts.nodeId } : d;
  }

  // --- account limits --------------------------------------------------------------

  private async admit(account: AccountRecord, callId: string, trunks: Array<TrunkView | undefined> = []): Promise<void> {
    const keys: string[] = [];
    // A trunk's own limits (0 = none): the carrier's calls in, or the calls out through it.
    for (const t of trunks) {
      if (!t || keys.includes(TRUNK_LIMIT_KEY + t.trunkId)) continue;
      const limits = { cps: t.cpsLimit > 0 ? t.cpsLimit : Number.MAX_SAFE_INTEGER, concurrent: t.maxConcurrentCalls > 0 ? t.maxConcurrentCalls : Number.MAX_SAFE_INTEGER };
      const r = await this.opts.limiter.admit(TRUNK_LIMIT_KEY + t.trunkId, callId, limits);
      if (r !== 'ok') {
        for (const k of keys) void this.opts.limiter.release(k, callId).catch(() => undefined);
        const what = r === 'cps' ? 'cps_limit' : 'max_concurrent_calls';
        throw new SipError(503, 'Service Unavailable', r === 'cps' ? 'TRUNK_LIMIT_CPS' : 'TRUNK_LIMIT_CONCURRENT', [
          ['Retry-After', r === 'cps' ? '1' : '5'],
          ['Warning', `399 ${WARN_AGENT} "${what} of trunk ${t.trunkId} reached"`],
        ]);
      }
      keys.push(TRUNK_LIMIT_KEY + t.trunkId);
    }
    const r = await this.opts.limiter.admit(account.authId, callId, { cps: account.cpsLimit, concurrent: account.concurrentCallsLimit });
    if (r !== 'ok') for (const k of keys) void this.opts.limiter.release(k, callId).catch(() => undefined);
    if (r === 'cps') {
      throw new SipError(503, 'Service Unavailable', 'LIMIT_CPS', [['Retry-After', '1'], ['Warning', `399 ${WARN_AGENT} "cps_limit of the account reached"`]]);
    }
    if (r === 'concurrent') {
      throw new SipError(503, 'Service Unavailable', 'LIMIT_CONCURRENT', [
        ['Retry-After', '5'],
        ['Warning', `399 ${WARN_AGENT} "concurrent_calls_limit of the account reached"`],
      ]);
    }
    const now = Date.now();
    // Calls whose end this node never saw (the BYE went elsewhere, a device vanished) are
    // forgotten here as the limiter forgets them: after the longest call.
    if (this.counted.size > 0 && this.counted.size % 1024 === 0) {
      for (const [id, c] of this.counted) if (now - c.at > this.maxCallMs) this.counted.delete(id);
    }
    this.counted.set(callId, { account: account.authId, at: now, trunks: keys });
  }

  private release(callId: string): void {
    const c = this.counted.get(callId);
    if (c === undefined) return;
    this.counted.delete(callId);
    for (const k of [c.account, ...c.trunks]) this.opts.limiter.release(k, callId).catch((err: unknown) => this.log.warn({ err, callId }, 'could not release a call slot'));
  }
}

function toTag(req: SipRequest): string | null {
  return tagOf(getHeader(req, 'to'));
}

/**
 * The loop-detection part of our branch (RFC 3261 §16.6 step 8): a hash of
 * what a looping request keeps unchanged.
 */
function loopHash(req: SipRequest, callId: string): string {
  const h = createHash('sha1');
  h.update(req.uri).update('\u0000').update(getHeader(req, 'from') ?? '').update('\u0000').update(getHeader(req, 'to') ?? '');
  h.update('\u0000').update(callId).update('\u0000').update(getHeader(req, 'cseq') ?? '');
  for (const r of getHeaders(req, 'route')) h.update('\u0000').update(r);
  for (const p of getHeaders(req, 'proxy-require')) h.update('\u0000').update(p);
  return h.digest('hex').slice(0, 10);
}

/** RFC 3261 §16.6 step 3. */
function decrementMaxForwards(req: SipRequest): void {
  const mf = Number((getHeader(req, 'max-forwards') ?? '').trim() || NaN);
  setHeader(req, 'max-forwards', String(Number.isInteger(mf) ? Math.max(0, mf - 1) : DEFAULT_MAX_FORWARDS));
}

function getListValuesOf(value: string): string[] {
  return getListValues({ kind: 'request', method: '', uri: '', headers: [{ name: 'x', value }], body: Buffer.alloc(0) }, 'x');
}

/**
 * Raises a request's CSeq number by `offset` (the carrier saw one more INVITE than the
 * caller sent, docs/trunks.md); returns the header its responses must carry back.
 */
function shiftCseq(fwd: SipRequest, offset: number): Array<[string, string]> {
  const cseq = getHeader(fwd, 'cseq') ?? '';
  const m = /^\s*(\d+)\s+(\S+)/.exec(cseq);
  if (!m) return [];
  setHeader(fwd, 'cseq', `${Number(m[1]) + offset} ${m[2]}`);
  return [['cseq', cseq]];
}

/** `base` (the gateway or app server URI) with `user` as its user part. */
function withUser(base: SipUri, user: string): string {
  return formatUri({ ...base, user, password: null, headers: null });
}

/** The destination of a configured URI: UDP to its host (resolved) and port. */
async function uriDestination(u: SipUri): Promise<Destination> {
  const host = u.host.startsWith('[') ? u.host.slice(1, -1) : u.host;
  const address = isIP(host) ? host : (await lookup(host)).address;
  return { transport: 'udp', address, port: u.port ?? 5060, connId: null };
}

/** The number or username a Request-URI dials (its user part, else the whole URI). */
function targetNumber(uri: string): string {
  const u = parseUri(uri);
  if (!u) return uri;
  if (u.scheme === 'tel') return telNumber(u);
  return u.user ?? u.host;
}

/** The media side of one INVITE through the relay (docs/media.md "Calls"). */
interface MediaPlan {
  /** The engine holding the call; undefined when no branch is relayed. */
  engine: string | undefined;
  fromTag: string;
  callerWebrtc: boolean;
  /** The INVITE had no SDP: the 2xx offers, the ACK answers. */
  late: boolean;
  /** Per leg: relayed, sent as is, or dropped (it needed the relay and no engine took it). */
  legs: Array<'relayed' | 'plain' | 'dropped'>;
  /** Per relayed leg: the offer rewritten for it. */
  sdp: Array<string | undefined>;
  /** Per leg: the To tag of its early answer (18x with SDP), whose dialogue goes if the branch loses. */
  earlyTags: Array<string | undefined>;
  /** Why the call cannot proceed (every leg dropped): 503, or 488 when the engine refused the SDP. */
  failed: SipError | null;
  /** The engine refused an offer (a leg dropped for it). */
  refused: RtpengineRejectedError | null;
  /** Some leg was for the relay to take (counted once in sip_media_calls_total). */
  tried: boolean;
  /** The branch whose 2xx won. */
  winner?: number;
}

/** Whether a message carries an SDP body. */
function hasSdp(m: SipRequest | SipResponse): boolean {
  if (m.body.length === 0) return false;
  return (getHeader(m, 'content-type') ?? '').split(';')[0]?.trim().toLowerCase() === 'application/sdp';
}

/** The answer to a request whose media the relay could not take: 488 when the engine refused the SDP, else 503 (null: no engine took it). */
function mediaError(err: unknown): SipError {
  if (err instanceof RtpengineRejectedError) {
    return new SipError(488, 'Not Acceptable Here', 'MEDIA_REFUSED', [['Warning', `399 ${WARN_AGENT} "media relay refused the SDP"`]]);
  }
  return new SipError(503, 'Service Unavailable', 'MEDIA_UNAVAILABLE', [['Warning', `399 ${WARN_AGENT} "no media relay available"`]]);
}

/** What it takes to end a dialog from the middle (both BYEs; RFC 3261 §12.2.1.1). */
interface DialogEnds {
  callId: string;
  /** The caller's From (with its tag) and the callee's To (with its tag, from the 2xx). */
  callerFrom: string;
  calleeTo: string;
  callerCseq: number;
  /** Remote targets: the callee's Contact (from the 2xx) and the caller's (from the INVITE). */
  calleeTarget: string;
  callerTarget: string;
  /** Route sets beyond this edge, towards each party (from the 2xx's Record-Route). */
  calleeRoutes: string[];
  callerRoutes: string[];
  calleeDest: Destination;
  callerDest: Destination;
}

/**
 * The dialog of an answered INVITE as this edge sees it: the 2xx's Record-Route holds the
 * hops towards the callee above this edge's two values and the hops towards the caller
 * below them (§16.6 step 4 and §12.1.1).
 */
function dialogOf(ctx: IncomingRequest, ok: SipResponse, callerDest: Destination, calleeDest: Destination, isOurs: (rr: string) => boolean): DialogEnds {
  const rr = getListValues(ok, 'record-route');
  const first = rr.findIndex(isOurs);
  let last = first;
  while (last + 1 < rr.length && isOurs(rr[last + 1] as string)) last++;
  const above = first >= 0 ? rr.slice(0, first) : [];
  const below = first >= 0 ? rr.slice(last + 1) : [];
  const contactOf = (m: SipRequest | SipResponse): string => parseNameAddr(getHeader(m, 'contact') ?? '')?.uri.raw ?? '';
  return {
    callId: ctx.callId,
    callerFrom: getHeader(ctx.req, 'from') ?? '',
    calleeTo: getHeader(ok, 'to') ?? '',
    callerCseq: ctx.cseq.seq,
    calleeTarget: contactOf(ok) || ctx.req.uri,
    callerTarget: contactOf(ctx.req),
    // Towards the callee: the values above ours, nearest first (reversed: the top one is the callee's nearest).
    calleeRoutes: above.slice().reverse(),
    // Towards the caller: the values below ours, in order (the first is nearest to this edge).
    callerRoutes: below,
    calleeDest,
    callerDest,
  };
}

/** Where a sleeping device was last reached (what the media plan is made for until it wakes). */
function sleepingDest(b: Binding): Destination {
  const r = parseUri(b.received);
  const address = r ? (r.host.startsWith('[') ? r.host.slice(1, -1) : r.host) : '0.0.0.0';
  return { transport: b.transport, address, port: r?.port ?? 0, connId: null };
}
