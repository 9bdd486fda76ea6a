import { SipError } from '../errors.js';
import type { Logger } from '../logger.js';
import type { RequestAuthenticator } from '../auth/authenticator.js';
import type { SipRequest } from '../sip/message.js';
import { getHeader, getListValues, parseContacts, parseExpires, parseNameAddr } from '../sip/headers.js';
import type { IncomingRequest, Reply } from '../core/incoming.js';
import type { Flow, SipTransportName } from '../transport/types.js';
import { aorKey, ownString, type Aor, type Binding, type LocationStore, type RegisterOp } from '../store/location/location.js';
import { contactsForReply, planRegister, type ExpiresPolicy } from './bindings.js';
import { wantsGruu, type Gruus } from './gruu.js';
import { featureCaps, pushOf, PUSH_PROVIDERS } from '../push/params.js';


export interface RegistrarOptions {
  store: LocationStore;
  auth: RequestAuthenticator;
  policy: ExpiresPolicy;
  /** Parent domain of the account SIP domains (Config.sipDomain). */
  sipDomain: string;
  nodeId: string;
  log: Logger;
  now?: () => number;
  /** Called after every accepted REGISTER and on auth failures (metrics). */
  onOutcome?: (outcome: RegisterOutcome, transport: string) => void;
  /**
   * A REGISTER over a TCP/TLS/WS/WSS flow changed what that flow carries: it holds
   * live bindings until `until` (ms since the epoch; 0 = none). The transport keeps
   * it open and probes it meanwhile (README "Flows", docs/flows.md).
   */
  onFlowHeld?: (flow: Flow, until: number) => void;
  /** Flow-Timer (RFC 5626 §5.4) of 200 OKs to outbound clients over stream flows, seconds; 0 = none. */
  flowTimer?: number;
  /** A binding of `aor` was written over a stream flow of this process for the first time (the fleet's reaper index). */
  onFlowAor?: (aor: Aor) => void;
  /** Close a connection (its endpoint was removed through the API). */
  closeFlow?: (transport: SipTransportName, connId: string) => void;
  /** GRUUs (RFC 5627) for clients that ask for them; absent = none given. */
  gruus?: Gruus;
  /**
   * Push (RFC 8599, docs/push.md) is on: a binding with push parameters outlives the close
   * of its flow (asleep until it expires or registers again) instead of being removed.
   */
  push?: boolean;
  /**
   * The push services configured (docs/push.md): a Contact naming another gets 555 (RFC 8599
   * §4.1.1), with Feature-Caps listing these. Absent = every service the edge knows is accepted.
   */
  pushProviders?: readonly string[];
  /** A REGISTER over a live flow wrote these bindings (the push waker wakes held requests with them). */
  onRegistered?: (aor: Aor, bindings: readonly Binding[]) => void;
}

export type RegisterOutcome = 'registered' | 'unregistered' | 'queried' | 'challenged' | 'rejected' | 'error';

/** Extensions this registrar implements (RFC 3261 §8.2.2.3 Require handling). */
const SUPPORTED = new Set(['path', 'outbound', 'gruu']);

/**
 * REGISTER processing (RFC 3261 §10.3; kamailio registrar save.c + reply.c).
 * Authentication first, then the Contact list becomes one atomic store operation.
 */
export class Registrar {
  private readonly now: () => number;
  /**
   * connId → AORs with bindings over that flow, so a closed flow can drop them,
   * each with the latest expiry of its bindings there (ms; 0 = none left).
   */
  private readonly flows = new Map<string, Map<string, HeldAor>>();
  /** connId → the flow itself (its transport, to close or re-hold it). */
  private readonly flowOf = new Map<string, Flow>();
  /**
   * connId → the latest `until` over its AORs, kept as REGISTERs change them: a flow from
   * a proxy or SBC carries thousands of AORs, and a scan of them per REGISTER cost 6 % of
   * the edge's CPU at 2,000/s over one TCP connection.
   */
  private readonly heldOf = new Map<string, number>();

  constructor(private readonly opts: RegistrarOptions) {
    this.now = opts.now ?? Date.now;
  }

  async handle(ctx: IncomingRequest): Promise<Reply> {
    const { log } = this.opts;
    const { req, flow, received } = ctx;
    // RFC 3261 §10.3 step 2: Require with extensions we lack → 420.
    const unsupported = getListValues(req, 'require').filter((o) => !SUPPORTED.has(o.toLowerCase()));
    if (unsupported.length > 0) {
      throw new SipError(420, 'Bad Extension', 'REG_BAD_EXTENSION', [['Unsupported', unsupported.join(', ')]]);
    }

    // Step 3: the To header holds the address-of-record; its host names the account.
    const to = parseNameAddr(getHeader(req, 'to') ?? '');
    if (!to || (to.uri.scheme !== 'sip' && to.uri.scheme !== 'sips') || !to.uri.user) {
      throw new SipError(400, 'Bad To header', 'REG_BAD_AOR');
    }
    const aor: Aor = { domain: to.uri.host, user: to.uri.user };

    const auth = await this.opts.auth.authenticate(req, aor.domain, aor.user, false, flow.remoteAddress);
    if (!auth.ok) {
      this.opts.onOutcome?.(auth.kind === 'challenge' ? 'challenged' : 'rejected', flow.transport);
      if (auth.kind === 'bad-request') throw new SipError(400, 'Bad Request', 'AUTH_URI_MISMATCH', [['Warning', '399 sip-edge "digest uri does not name the Request-URI"']]);
      if (auth.kind === 'forbidden') throw new SipError(403, 'Forbidden', auth.reason === 'cooling-off' ? 'AUTH_COOLING_OFF' : 'AUTH_USER_MISMATCH');
      log.debug({ aor: aorKey(aor), reason: auth.reason, src: received }, 'register challenged');
      return { status: 401, reason: 'Unauthorized', headers: auth.headers };
    }

    // An endpoint of a disabled account or sub-account is offline: it proved its
    // password, so it is told why (README "Disabled accounts"); nothing is written.
    if (auth.credential.disabled) {
      this.opts.onOutcome?.('rejected', flow.transport);
      throw new SipError(403, 'Forbidden', 'REG_DISABLED', [['Warning', '399 sip-edge "account disabled"']]);
    }

    const now = this.now();
    const stream = flow.connId !== null;
    const pathValues = getListValues(req, 'path');
    const expiresHeaderRaw = getHeader(req, 'expires');
    const expiresHeader = expiresHeaderRaw === undefined ? null : parseExpires(expiresHeaderRaw);
    if (expiresHeaderRaw !== undefined && expiresHeader === null) throw new SipError(400, 'Bad Expires header', 'REG_BAD_EXPIRES');
    const cseq = ctx.cseq.seq;
    const contacts = getHeader(req, 'contact') === undefined ? undefined : parseContacts(req);

    // RFC 8599 §4.1.1: a push service this edge does not send through (not configured) → 555.
    const offered = this.opts.pushProviders;
    if (offered && contacts && !contacts.star) {
      for (const c of contacts.contacts) {
        const p = c.uri.params.get('pn-provider')?.toLowerCase();
        if (p && (PUSH_PROVIDERS as readonly string[]).includes(p) && !offered.includes(p)) {
          this.opts.onOutcome?.('rejected', flow.transport);
          throw new SipError(555, 'Push Notification Service Not Supported', 'REG_PUSH_PROVIDER', offered.length > 0 ? [['Feature-Caps', featureCaps(offered)]] : []);
        }
      }
    }
    let bindings: Binding[];
    let outcome: RegisterOutcome;
    let heldUntil = 0;
    if (contacts === undefined) {
      // Step 6 (no Contact): a query; answer with the current bindings.
      bindings = await this.opts.store.lookup(aor, now);
      outcome = 'queried';
    } else {
      const op = planRegister(
        contacts,
        {
          callId: ctx.callId,
          cseq,
          expiresHeader,
          now,
          userAgent: getHeader(req, 'user-agent') ?? null,
          received,
          transport: flow.transport,
          path: pathValues.length > 0 ? pathValues.join(',') : null,
          // Every binding names the process that took it: a UDP phone behind NAT answers only
          // the node it registered with, so requests to it leave from that node (docs/fleet.md).
          nodeId: this.opts.nodeId,
          connId: flow.connId,
          endpointId: auth.credential.endpointId,
        },
        this.opts.policy,
      );
      // RFC 8599 §4.1.1: a device is known by its pn-prid too. A binding with the same token
      // under another key (no +sip.instance, a new port after waking) is the same device:
      // replaced, not kept asleep beside it.
      if (this.opts.push) await this.replaceSameDevice(aor, op, now);
      const result = await this.opts.store.register(aor, op);
      if (!result.ok) {
        this.opts.onOutcome?.('rejected', flow.transport);
        if (result.code === 'OUT_OF_ORDER') {
          // Step 7: same Call-ID with a CSeq not above the stored one.
          throw new SipError(500, 'Out of Order Request', 'REG_OUT_OF_ORDER', [['Retry-After', '1']]);
        }
        throw new SipError(403, 'Too Many Contacts', 'REG_TOO_MANY_CONTACTS');
      }
      bindings = result.bindings;
      outcome = op.writes.length > 0 ? 'registered' : 'unregistered';
      if (op.writes.length > 0 && this.opts.onRegistered) {
        const written = new Set(op.writes.map((w) => w.key));
        this.opts.onRegistered(aor, bindings.filter((b) => written.has(b.key)));
      }
      if (stream) heldUntil = this.trackFlow(flow, aor, bindings, op.writes.length > 0);
      log.debug({ aor: aorKey(aor), contacts: bindings.length, src: received }, outcome);
    }
    this.opts.onOutcome?.(outcome, flow.transport);

    // Step 8: 200 OK with every current binding and its remaining time.
    const headers: Array<[string, string]> = [];
    const gruus = this.opts.gruus;
    // RFC 5627 §5.4: each Contact with a +sip.instance gets its public and a new temporary GRUU.
    const gruuParams =
      gruus && wantsGruu(getListValues(req, 'supported'))
        ? (b: Binding): string[] =>
            b.instanceId === null
              ? []
              : [`pub-gruu="${gruus.pub(aor.domain, aor.user, b.instanceId)}"`, `temp-gruu="${gruus.temp(aor.domain, aor.user, b.instanceId, b.callId)}"`]
        : undefined;
    for (const c of contactsForReply(bindings, now, gruuParams)) headers.push(['Contact', c]);
    const first = bindings[0];
    if (first?.path && supports(req, 'path')) headers.push(['Path', first.path]);
    if (bindings.some((b) => b.regId !== null && b.connId === flow.connId) && supports(req, 'outbound')) {
      headers.push(['Require', 'outbound']);
    }
    // RFC 5626 §5.4: how often an outbound client should send CRLF keep-alives on this flow.
    const flowTimer = this.opts.flowTimer ?? 0;
    if (flowTimer > 0 && heldUntil > now && outbound(req, bindings, flow.connId)) headers.push(['Flow-Timer', String(flowTimer)]);
    // RFC 8599 §5.1: the push service of the binding is named back in Feature-Caps.
    const pns = new Set<string>();
    if (this.opts.push) for (const c of contacts && !contacts.star ? contacts.contacts : []) if (c.params.get('expires') !== '0') {
      const p = c.uri.params.get('pn-provider');
      if (p) pns.add(p.toLowerCase());
    }
    if (pns.size > 0) headers.push(['Feature-Caps', featureCaps([...pns])]);
    headers.push(['Date', new Date(now).toUTCString()]);
    return { status: 200, reason: 'OK', headers };
  }

  /**
   * Notes the AOR's bindings on a stream flow after a REGISTER and tells the
   * transport how long the flow now carries live bindings (the latest expiry over
   * every AOR on it). Returns that time (ms; 0 = none).
   */
  private trackFlow(flow: Flow, aor: Aor, bindings: readonly Binding[], wrote: boolean): number {
    const connId = flow.connId as string;
    let until = 0;
    for (const b of bindings) if (b.connId === connId && b.nodeId === this.opts.nodeId && b.expiresAt > until) until = b.expiresAt;
    let m = this.flows.get(connId);
    const k = aorKey(aor);
    let entry = m?.get(k);
    if (!entry) {
      if (!wrote) return 0;
      if (!m) {
        this.flows.set(connId, (m = new Map()));
        this.flowOf.set(connId, flow);
      }
      // Kept for the life of the flow: copies, not slices of the request text.
      entry = { domain: ownString(aor.domain), user: ownString(aor.user), until: 0 };
      m.set(ownString(k), entry);
      this.opts.onFlowAor?.(entry);
    }
    const before = entry.until;
    entry.until = until;
    // What a liveness probe over this flow names (README "Flows"): the latest binding here.
    for (const b of bindings) {
      if (b.connId === connId && b.nodeId === this.opts.nodeId && b.expiresAt === until) {
        if (entry.probeUri !== b.uri) entry.probeUri = ownString(b.uri);
        if (entry.probeCallId !== b.callId) entry.probeCallId = ownString(b.callId);
      }
    }
    let held = this.heldOf.get(connId) ?? 0;
    if (until >= held) held = until;
    else if (before >= held) held = latestUntil(m as Map<string, HeldAor>); // the latest one moved earlier
    this.heldOf.set(connId, held);
    this.opts.onFlowHeld?.(flow, held);
    return held;
  }

  /**
   * A TCP/TLS/WS flow closed: its bindings can never be reached again
   * (docs/design.md), so they are removed at once — except, with push on, those with
   * RFC 8599 push parameters: they sleep (docs/push.md). Bindings of the same AOR that
   * moved to another flow are kept.
   */
  async flowClosed(connId: string): Promise<void> {
    const aors = this.flows.get(connId);
    if (!aors) return;
    this.flows.delete(connId);
    this.flowOf.delete(connId);
    this.heldOf.delete(connId);
    for (const aor of aors.values()) {
      try {
        const live = await this.opts.store.lookup(aor, this.now());
        const gone = live.filter((b) => b.connId === connId && b.nodeId === this.opts.nodeId);
        // RFC 8599: a device with push parameters sleeps; it is woken by a push, not removed.
        const sleeping = this.opts.push ? gone.filter((b) => pushOf(b) !== null) : [];
        const keys = gone.filter((b) => !sleeping.includes(b)).map((b) => b.key);
        if (keys.length > 0) await this.opts.store.removeKeys(aor, keys);
        if (sleeping.length > 0) await this.sleep(aor, sleeping);
      } catch (err) {
        this.opts.log.warn({ err, aor: aorKey(aor) }, 'could not remove bindings of a closed flow');
      }
    }
  }

  /** Adds to `op` the removal of other bindings carrying a pn-prid that one of its writes carries. */
  private async replaceSameDevice(aor: Aor, op: RegisterOp, now: number): Promise<void> {
    const prids = new Map<string, string>();
    for (const w of op.writes) {
      const p = pushOf(w);
      if (p) prids.set(p.prid, w.key);
    }
    if (prids.size === 0) return;
    for (const b of await this.opts.store.lookup(aor, now)) {
      const p = pushOf(b);
      const key = p ? prids.get(p.prid) : undefined;
      if (key !== undefined && key !== b.key && !op.removes.includes(b.key) && !op.writes.some((w) => w.key === b.key)) op.removes.push(b.key);
    }
  }

  /**
   * Writes bindings back without their (closed) connection: asleep (RFC 8599), still
   * registered until they expire. A Call-ID of its own marks the write, so the device's
   * next REGISTER (its own Call-ID, any CSeq) replaces it.
   */
  async sleep(aor: Aor, bindings: readonly Binding[]): Promise<void> {
    const now = this.now();
    const callId = `asleep-${now.toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
    const res = await this.opts.store.register(aor, {
      callId,
      cseq: 1,
      now,
      removeAll: false,
      removes: [],
      maxContacts: Number.MAX_SAFE_INTEGER,
      writes: bindings.map((b) => {
        const { updatedAt: _u, ...w } = b;
        return { ...w, callId, cseq: 1, connId: null };
      }),
    });
    if (!res.ok) this.opts.log.warn({ aor: aorKey(aor), code: res.code }, 'could not keep a sleeping binding');
  }

  /**
   * What to probe a quiet stream flow with (README "Flows"): the binding on it that lives
   * longest. Null when the flow holds no live binding of this process.
   */
  flowProbe(connId: string): FlowProbe | null {
    const m = this.flows.get(connId);
    if (!m) return null;
    let best: HeldAor | null = null;
    for (const e of m.values()) if (e.probeUri && e.probeCallId && e.until > this.now() && (!best || e.until > best.until)) best = e;
    return best ? { aor: { domain: best.domain, user: best.user }, uri: best.probeUri as string, callId: best.probeCallId as string } : null;
  }

  /**
   * The API removed every binding of an endpoint (password change, delete,
   * disable): the TCP/TLS/WS flows that carried its bindings are closed unless
   * another endpoint still uses them (docs/design.md "Domain model"); a flow that
   * stays is held only as long as the bindings left on it need (its hold time is
   * recomputed, so it can be cut as idle once they end). Returns how many flows
   * were closed.
   */
  endpointRemoved(aor: Aor): number {
    const k = aorKey(aor);
    let closed = 0;
    for (const [connId, m] of this.flows) {
      if (!m.delete(k)) continue;
      const flow = this.flowOf.get(connId);
      if (m.size > 0) {
        const held = latestUntil(m);
        this.heldOf.set(connId, held);
        if (flow) this.opts.onFlowHeld?.(flow, held);
        continue;
      }
      this.flows.delete(connId);
      this.flowOf.delete(connId);
      this.heldOf.delete(connId);
      if (flow) {
        this.opts.closeFlow?.(flow.transport, connId);
        closed++;
      }
    }
    return closed;
  }
}

/** The latest `until` over a flow's AORs (0 = none). */
function latestUntil(m: Map<string, HeldAor>): number {
  let held = 0;
  for (const e of m.values()) if (e.until > held) held = e.until;
  return held;
}

/** An AOR with bindings on a flow, and the latest expiry among them (ms). */
interface HeldAor extends Aor {
  until: number;
  /** Contact URI and Call-ID of that latest binding: what a liveness probe names. */
  probeUri?: string;
  probeCallId?: string;
}

/** What an OPTIONS probe over a flow names: the AOR and the Contact and Call-ID of its latest live binding there. */
export interface FlowProbe {
  aor: Aor;
  uri: string;
  callId: string;
}

/**
 * The client registered with outbound (RFC 5626): it says `Supported: outbound`,
 * or a binding on this flow carries +sip.instance and reg-id (§4.2), or its
 * Contact URI carries `ob`.
 */
function outbound(req: SipRequest, bindings: readonly Binding[], connId: string | null): boolean {
  if (supports(req, 'outbound')) return true;
  return bindings.some((b) => b.connId === connId && ((b.regId !== null && b.instanceId !== null) || /;ob(?=[;>?]|$)/i.test(b.uri)));
}

function supports(req: SipRequest, option: string): boolean {
  return getListValues(req, 'supported').some((o) => o.toLowerCase() === option);
}
