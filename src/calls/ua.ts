/**
 * The user agent of the calls the edge places (docs/calls.md "Signalling"). Each leg is
 * one SIP dialog whose peer is the edge's own proxy: the leg's messages go into the
 * router over an internal flow (`b2b:<leg id>`, core/destination.ts), and what the proxy
 * sends back to that flow comes here. So a placed leg gets everything a phone's call
 * gets — routing to bindings, forking, trunks and failover, limits, credit, KYC, flow
 * tokens across the fleet, the CDR — and this module only speaks RFC 3261 as a UA:
 * INVITE/ACK/CANCEL/BYE out, BYE/INFO/re-INVITE/OPTIONS in.
 *
 * The channel is reliable and in-process, so there are no retransmissions here; the
 * proxy's transactions face the network.
 */
import { randomBytes } from 'node:crypto';
import { INTERNAL_FLOW_PREFIX, type Destination } from '../core/destination.js';
import type { Logger } from '../logger.js';
import { getHeader, getListValues, parseCSeq, parseNameAddr, tagOf } from '../sip/headers.js';
import type { SipRequest, SipResponse } from '../sip/message.js';
import { parseMessage } from '../sip/parser.js';
import { buildResponse, serializeMessage } from '../sip/response.js';
import type { Flow } from '../transport/types.js';
import { HANGUP_CAUSE_HEADER } from '../routing/origin.js';
import type { StoredDialog } from '../store/live-calls/live-calls.js';

/** How the UA reaches the router (app.ts wires `router.inject`). */
export interface UaHost {
  inject(data: Buffer, flow: Flow): void;
  /** Server header / User-Agent. */
  agent: string;
  /** Host written in our Contact and Via (the advertised SIP host). */
  host: string;
}

/** What a leg reports to its call. */
export interface LegEvents {
  /** A 1xx other than 100 (ringing or early media). */
  onProvisional?(status: number, sdp: string | null): void;
  /** The 2xx (the leg is confirmed and ACKed). */
  onAnswered?(sdp: string | null): void;
  /** The INVITE failed (final ≥ 300), or the leg was cancelled before an answer. */
  onFailed?(status: number, reason: string, warning: string | null): void;
  /** The peer sent BYE (answered 200 here). */
  onBye?(reason: string | null): void;
  /** A DTMF digit by SIP INFO (application/dtmf-relay). */
  onInfoDigit?(digit: string): void;
}

export type LegState = 'idle' | 'calling' | 'early' | 'confirmed' | 'terminated';

/** What another process needs to end this leg's dialog (kept with the live call). */
export type DialogSnapshot = StoredDialog;

let counter = 0;
const rid = (): string => `${randomBytes(6).toString('hex')}${(++counter).toString(36)}`;

/** One dialog of a placed call. */
export class SipLeg {
  readonly id: string;
  callId: string;
  readonly localTag = rid();
  state: LegState = 'idle';
  remoteTag: string | null = null;
  /** The remote party's SDP (its answer). */
  remoteSdp: string | null = null;
  private localSdp = '';
  private cseq = 1;
  private inviteCseq = 1;
  private inviteBranch = '';
  private from = '';
  private to = '';
  private requestUri = '';
  private remoteTarget: string | null = null;
  private routes: string[] = [];
  private readonly pending = new Map<string, (res: SipResponse) => void>();
  private cancelled = false;
  /** An INVITE this leg answers (a call to an application: the leg is the UAS). */
  private incoming: SipRequest | null = null;

  constructor(
    private readonly ua: UserAgent,
    readonly events: LegEvents,
    id?: string,
  ) {
    this.id = id ?? rid();
    this.callId = `b2b-${this.id}@${ua.host.host}`;
  }

  get flow(): Flow {
    return this.ua.flowOf(this.id);
  }

  /** Sends the INVITE (`from`/`to` are name-addrs without tags; `headers` extra). */
  invite(o: { requestUri: string; from: string; to: string; sdp: string; headers?: Array<[string, string]> }): void {
    this.state = 'calling';
    this.requestUri = o.requestUri;
    this.from = `${o.from};tag=${this.localTag}`;
    this.to = o.to;
    this.localSdp = o.sdp;
    this.inviteCseq = this.cseq++;
    this.inviteBranch = this.ua.branch();
    const extra = (o.headers ?? []).map(([n, v]) => ({ name: n.toLowerCase(), value: v }));
    this.send(this.request('INVITE', this.requestUri, this.inviteCseq, this.inviteBranch, [...extra, { name: 'content-type', value: 'application/sdp' }], Buffer.from(o.sdp)));
  }

  /**
   * Takes an INVITE as its UAS (a call to an application, docs/calls.md "Inbound"): the
   * dialog's route set is the Record-Route as received, the remote target its Contact.
   */
  accept(invite: SipRequest): void {
    this.incoming = invite;
    this.callId = getHeader(invite, 'call-id') ?? this.callId;
    this.remoteTag = tagOf(getHeader(invite, 'from'));
    this.to = getHeader(invite, 'from') ?? '';
    this.from = `${getHeader(invite, 'to') ?? ''};tag=${this.localTag}`;
    this.remoteTarget = parseNameAddr(getListValues(invite, 'contact')[0] ?? '')?.uri.raw ?? null;
    this.requestUri = this.remoteTarget ?? invite.uri;
    this.routes = getListValues(invite, 'record-route');
    this.remoteSdp = invite.body.length > 0 ? invite.body.toString('utf8') : null;
    const cseq = parseCSeq(getHeader(invite, 'cseq') ?? '');
    this.inviteCseq = cseq?.seq ?? 1;
    this.state = 'early';
  }

  /** Answers the INVITE it took: a provisional (180, 183 with SDP) or the 200 (SDP). */
  respond(status: number, reason: string, sdp: string | null): void {
    const invite = this.incoming;
    if (!invite || this.state === 'confirmed' || this.state === 'terminated') return;
    const headers: Array<[string, string]> = [['Server', this.ua.host.agent]];
    for (const rr of getListValues(invite, 'record-route')) headers.push(['Record-Route', rr]);
    if (status > 100) headers.push(['Contact', this.contact()]);
    if (sdp) headers.push(['Content-Type', 'application/sdp']);
    this.ua.send(buildResponse(invite, status, reason, { toTag: this.localTag, headers, body: sdp ? Buffer.from(sdp) : undefined }), this.flow);
    if (status >= 200 && status < 300) {
      this.localSdp = sdp ?? '';
      this.state = 'confirmed';
    } else if (status >= 300) this.state = 'terminated';
  }

  /** CANCEL before an answer (the INVITE then fails with 487). */
  cancel(): void {
    if (this.state !== 'calling' && this.state !== 'early') return;
    if (this.incoming) {
      // Ours to refuse: the caller's INVITE gets 480 (the application ended it first).
      this.respond(480, 'Temporarily Unavailable', null);
      return;
    }
    this.cancelled = true;
    const req = this.request('CANCEL', this.requestUri, this.inviteCseq, this.inviteBranch, [], Buffer.alloc(0), { noToTag: true });
    this.send(req);
  }

  /** BYE once confirmed; CANCEL before. Resolves when it is answered (or at once). */
  async hangup(reason?: string, extra: Array<[string, string]> = []): Promise<void> {
    if (this.state === 'calling' || this.state === 'early') {
      this.cancel();
      return;
    }
    if (this.state !== 'confirmed') return;
    this.state = 'terminated';
    const headers = [...(reason ? [{ name: 'reason', value: reason }] : []), ...extra.map(([name, value]) => ({ name, value }))];
    await this.inDialog('BYE', headers, Buffer.alloc(0), 2000);
  }

  snapshot(): DialogSnapshot {
    return {
      legId: this.id,
      callId: this.callId,
      localTag: this.localTag,
      remoteTag: this.remoteTag,
      from: this.from,
      to: this.to,
      requestUri: this.requestUri,
      remoteTarget: this.remoteTarget,
      routes: this.routes,
      cseq: this.cseq,
    };
  }

  // --- from the proxy -------------------------------------------------------------

  /** A message for this leg. */
  receive(msg: SipRequest | SipResponse): void {
    if (msg.kind === 'response') this.onResponse(msg);
    else this.onRequest(msg);
  }

  private onResponse(res: SipResponse): void {
    const cseq = parseCSeq(getHeader(res, 'cseq') ?? '');
    if (!cseq) return;
    if (cseq.method !== 'INVITE' || cseq.seq !== this.inviteCseq) {
      const branch = /;\s*branch=([^;\s,]+)/i.exec(getListValues(res, 'via')[0] ?? '')?.[1] ?? '';
      const waiter = this.pending.get(branch);
      if (waiter && res.status >= 200) {
        this.pending.delete(branch);
        waiter(res);
      }
      return;
    }
    const tag = tagOf(getHeader(res, 'to'));
    const sdp = res.body.length > 0 ? res.body.toString('utf8') : null;
    if (res.status < 200) {
      if (res.status === 100 || this.state !== 'calling' && this.state !== 'early') return;
      this.state = 'early';
      this.events.onProvisional?.(res.status, sdp);
      return;
    }
    if (res.status < 300) {
      if (this.state === 'confirmed' || this.state === 'terminated') {
        // Another fork's 2xx (or a retransmission of ours): ACK it; a second dialog is ended at once.
        if (tag !== this.remoteTag) this.endStray(res, tag);
        return;
      }
      this.remoteTag = tag;
      this.remoteTarget = parseNameAddr(getListValues(res, 'contact')[0] ?? '')?.uri.raw ?? null;
      // RFC 3261 §12.1.2: the UAC's route set is the Record-Route in reverse.
      this.routes = getListValues(res, 'record-route').reverse();
      this.to = getHeader(res, 'to') ?? this.to;
      this.remoteSdp = sdp;
      this.state = 'confirmed';
      this.sendAck();
      if (this.cancelled) {
        // The CANCEL crossed the 2xx: the call is up, so it is ended with a BYE (§9.1).
        void this.hangup();
        this.events.onFailed?.(487, 'Request Terminated', null);
        return;
      }
      this.events.onAnswered?.(sdp);
      return;
    }
    // A non-2xx final: ACKed on the INVITE's branch (§17.1.1.3).
    const ack = this.request('ACK', this.requestUri, this.inviteCseq, this.inviteBranch, [], Buffer.alloc(0));
    setTo(ack, getHeader(res, 'to') ?? this.to);
    this.send(ack);
    if (this.state === 'terminated' || this.state === 'confirmed') return;
    this.state = 'terminated';
    this.events.onFailed?.(res.status, res.reason, getHeader(res, 'warning') ?? null);
  }

  private onRequest(req: SipRequest): void {
    const reply = (status: number, reason: string, headers: Array<[string, string]> = [], body?: Buffer): void => {
      this.ua.send(buildResponse(req, status, reason, { toTag: this.localTag, headers: [['Server', this.ua.host.agent], ...headers], body }), this.flow);
    };
    switch (req.method) {
      case 'ACK':
        return;
      case 'CANCEL': {
        // §9.2: the CANCEL is answered 200, the INVITE 487 (when still unanswered).
        reply(200, 'OK');
        if (this.incoming && this.state === 'early') {
          this.respond(487, 'Request Terminated', null);
          this.events.onFailed?.(487, 'Request Terminated', null);
        }
        return;
      }
      case 'BYE': {
        reply(200, 'OK');
        if (this.state === 'terminated') return;
        this.state = 'terminated';
        this.events.onBye?.(getHeader(req, 'reason') ?? null);
        return;
      }
      case 'INVITE':
      case 'UPDATE':
        // A session refresh or hold from the peer: our side of the session is unchanged.
        reply(200, 'OK', [['Contact', this.contact()], ['Content-Type', 'application/sdp']], Buffer.from(this.localSdp));
        return;
      case 'INFO': {
        const m = /signal\s*=\s*([0-9*#A-D])/i.exec(req.body.toString('utf8'));
        reply(200, 'OK');
        if (m) this.events.onInfoDigit?.((m[1] as string).toUpperCase());
        return;
      }
      case 'OPTIONS':
        reply(200, 'OK', [['Allow', 'INVITE, ACK, CANCEL, BYE, INFO, OPTIONS, UPDATE']]);
        return;
      default:
        reply(405, 'Method Not Allowed', [['Allow', 'INVITE, ACK, CANCEL, BYE, INFO, OPTIONS, UPDATE']]);
    }
  }

  // --- building messages ------------------------------------------------------------

  private contact(): string {
    return `<sip:${INTERNAL_FLOW_PREFIX.slice(0, -1)}-${this.id}@${this.ua.host.host};transport=tcp>`;
  }

  private request(
    method: string,
    uri: string,
    cseq: number,
    branch: string,
    extra: Array<{ name: string; value: string }>,
    body: Buffer,
    o: { noToTag?: boolean } = {},
  ): SipRequest {
    const inDialog = this.state === 'confirmed' || this.state === 'terminated';
    const headers = [
      { name: 'via', value: `SIP/2.0/TCP ${this.ua.host.host};branch=${branch}` },
      { name: 'max-forwards', value: '70' },
      ...(inDialog && method !== 'CANCEL' ? this.routes.map((r) => ({ name: 'route', value: r })) : []),
      { name: 'from', value: this.from },
      { name: 'to', value: o.noToTag || !this.remoteTag ? this.to : withTag(this.to, this.remoteTag) },
      { name: 'call-id', value: this.callId },
      { name: 'cseq', value: `${cseq} ${method}` },
      ...(method === 'INVITE' ? [{ name: 'contact', value: this.contact() }, { name: 'allow', value: 'INVITE, ACK, CANCEL, BYE, INFO, OPTIONS, UPDATE' }] : []),
      { name: 'user-agent', value: this.ua.host.agent },
      ...extra,
    ];
    return { kind: 'request', method, uri, headers, body };
  }

  private sendAck(): void {
    const ack = this.request('ACK', this.remoteTarget ?? this.requestUri, this.inviteCseq, this.ua.branch(), [], Buffer.alloc(0));
    this.send(ack);
  }

  /** A 2xx of another fork: ACK and BYE on that dialog (RFC 3261 §13.2.2.4). */
  private endStray(res: SipResponse, tag: string | null): void {
    if (!tag) return;
    const target = parseNameAddr(getListValues(res, 'contact')[0] ?? '')?.uri.raw ?? this.requestUri;
    const routes = getListValues(res, 'record-route').reverse();
    const to = getHeader(res, 'to') ?? this.to;
    for (const method of ['ACK', 'BYE']) {
      const req = this.request(method, target, method === 'ACK' ? this.inviteCseq : this.cseq++, this.ua.branch(), routes.map((r) => ({ name: 'route', value: r })), Buffer.alloc(0));
      setTo(req, to);
      req.headers = req.headers.filter((h) => h.name !== 'route' || routes.includes(h.value));
      this.send(req);
    }
  }

  private inDialog(method: string, extra: Array<{ name: string; value: string }>, body: Buffer, timeoutMs: number): Promise<SipResponse | null> {
    const branch = this.ua.branch();
    const req = this.request(method, this.remoteTarget ?? this.requestUri, this.cseq++, branch, extra, body);
    return new Promise((resolve) => {
      const t = setTimeout(() => {
        this.pending.delete(branch);
        resolve(null);
      }, timeoutMs);
      t.unref();
      this.pending.set(branch, (res) => {
        clearTimeout(t);
        resolve(res);
      });
      this.send(req);
    });
  }

  private send(req: SipRequest): void {
    this.ua.send(serializeMessage(req), this.flow);
  }
}

/** A dialog of a leg another process ran (it died): ended from here with a BYE (docs/calls.md "Node failure"). */
export function byeFor(d: DialogSnapshot, host: UaHost, cause: string): Buffer {
  const headers = [
    { name: 'via', value: `SIP/2.0/TCP ${host.host};branch=z9hG4bK${rid()}` },
    { name: 'max-forwards', value: '70' },
    ...d.routes.map((r) => ({ name: 'route', value: r })),
    { name: 'from', value: d.from },
    { name: 'to', value: d.remoteTag ? withTag(d.to, d.remoteTag) : d.to },
    { name: 'call-id', value: d.callId },
    { name: 'cseq', value: `${d.cseq + 10} BYE` },
    { name: HANGUP_CAUSE_HEADER, value: cause },
    { name: 'user-agent', value: host.agent },
  ];
  return serializeMessage({ kind: 'request', method: 'BYE', uri: d.remoteTarget ?? d.requestUri, headers, body: Buffer.alloc(0) });
}

/** Leg ids of calls to applications start with this (the proxy names the internal flow). */
export const INBOUND_LEG = 'in-';

/** The legs of this process, and the internal flows they use. */
export class UserAgent {
  private readonly legs = new Map<string, SipLeg>();
  /** A new INVITE for an application (its leg id, the request): the service takes it. */
  onInvite: ((legId: string, invite: SipRequest) => void) | null = null;
  /** MESSAGEs sent out of dialog, waiting for their final response (by their flow's id). */
  private readonly messages = new Map<string, (status: number) => void>();

  /**
   * Sends one MESSAGE (RFC 3428) into the proxy, out of any dialog; resolves with its final
   * status (408 when none came within `timeoutMs`). `register` is told its Call-ID first (the
   * proxy asks whom it is sent for).
   */
  message(o: { from: string; to: string; contentType: string; body: string; timeoutMs: number; register: (callId: string) => void; forget: (callId: string) => void }): Promise<number> {
    const id = rid();
    const callId = `b2b-msg-${id}@${this.host.host}`;
    o.register(callId);
    const req: SipRequest = {
      kind: 'request',
      method: 'MESSAGE',
      uri: o.to,
      headers: [
        { name: 'via', value: `SIP/2.0/TCP ${this.host.host};branch=${this.branch()}` },
        { name: 'max-forwards', value: '70' },
        { name: 'from', value: `<${o.from}>;tag=${rid()}` },
        { name: 'to', value: `<${o.to}>` },
        { name: 'call-id', value: callId },
        { name: 'cseq', value: '1 MESSAGE' },
        { name: 'user-agent', value: this.host.agent },
        { name: 'content-type', value: o.contentType },
      ],
      body: Buffer.from(o.body),
    };
    return new Promise<number>((resolve) => {
      const t = setTimeout(() => done(408), o.timeoutMs);
      t.unref();
      const done = (status: number): void => {
        clearTimeout(t);
        this.messages.delete(id);
        o.forget(callId);
        resolve(status);
      };
      this.messages.set(id, done);
      this.send(serializeMessage(req), this.flowOf(id));
    });
  }

  constructor(
    readonly host: UaHost,
    private readonly log: Logger,
  ) {}

  leg(events: LegEvents, id?: string): SipLeg {
    const l = new SipLeg(this, events, id);
    this.legs.set(l.id, l);
    return l;
  }

  forget(leg: SipLeg): void {
    this.legs.delete(leg.id);
  }

  flowOf(legId: string): Flow {
    return { transport: 'tcp', remoteAddress: '127.0.0.1', remotePort: 0, localAddress: '127.0.0.1', localPort: 0, connId: `${INTERNAL_FLOW_PREFIX}${legId}` };
  }

  branch(): string {
    return `z9hG4bK${rid()}`;
  }

  send(data: Buffer, flow: Flow): void {
    this.host.inject(data, flow);
  }

  /**
   * Bytes the proxy sent to an internal flow. A message for a leg this process does not
   * have (it ended) gets 481 when it is a request; responses are dropped.
   */
  deliver(d: Pick<Destination, 'connId'>, data: Buffer): boolean {
    const id = (d.connId ?? '').slice(INTERNAL_FLOW_PREFIX.length);
    const parsed = parseMessage(data);
    if (!parsed.ok) return true;
    const leg = this.legs.get(id);
    if (leg) {
      leg.receive(parsed.msg);
      return true;
    }
    const msg = parsed.msg;
    if (msg.kind === 'response' && msg.status >= 200) this.messages.get(id)?.(msg.status);
    // A call the proxy routed to an application this edge runs (docs/calls.md "Inbound").
    if (msg.kind === 'request' && msg.method === 'INVITE' && id.startsWith(INBOUND_LEG) && tagOf(getHeader(msg, 'to')) === null && this.onInvite) {
      this.onInvite(id, msg);
      return true;
    }
    if (msg.kind === 'request' && msg.method !== 'ACK') {
      this.log.debug({ method: msg.method, leg: id }, 'request for a leg that is gone: 481');
      this.send(buildResponse(msg, 481, 'Call/Transaction Does Not Exist', { toTag: rid(), headers: [['Server', this.host.agent]] }), this.flowOf(id));
    }
    return true;
  }
}

function withTag(nameAddr: string, tag: string): string {
  return tagOf(nameAddr) ? nameAddr : `${nameAddr};tag=${tag}`;
}

function setTo(req: SipRequest, to: string): void {
  for (const h of req.headers) if (h.name === 'to') h.value = to;
}
