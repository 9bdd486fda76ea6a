import { randomBytes } from 'node:crypto';
import { networkInterfaces } from 'node:os';
import type { Logger } from '../logger.js';
import { getHeader, getListValues, parseCSeq, parseVia, tagOf } from '../sip/headers.js';
import type { SipRequest, SipResponse, SipUri } from '../sip/message.js';
import { prependHeaders } from '../sip/message-edit.js';
import { serializeMessage } from '../sip/response.js';
import type { BoundAddress, Flow, SipTransportName, Transport } from '../transport/types.js';
import type { ClientTransaction, ClientTransactionUser } from './client-transaction.js';
import { isInternalFlow, sendTo, uriHost, type Destination, type FlowRelay } from './destination.js';
import type { IncomingRequest } from './incoming.js';
import { InviteClientTransaction } from './invite-client-transaction.js';
import { InviteServerTransaction } from './invite-server-transaction.js';
import { NonInviteClientTransaction } from './non-invite-client-transaction.js';
import { NonInviteServerTransaction } from './non-invite-server-transaction.js';
import type { ServerTransaction, ServerTransactionHost } from './server-transaction.js';
import { DEFAULT_TIMERS, type TimerSettings } from './timers.js';
import { transactionKey } from './server-transaction-table.js';

export interface TransactionLayerOptions {
  transports: ReadonlyMap<SipTransportName, Transport>;
  log: Logger;
  /** Value of the Server header of generated responses. */
  server: string;
  /** Host written into our Via and Record-Route; null = the listening address (or this machine's first address when that is a wildcard). */
  advertisedHost?: string | null;
  timers?: TimerSettings;
  /** Flows held by other processes of a fleet (docs/fleet.md "Relay"); absent = this process only. */
  relay?: FlowRelay | null;
  /** Where bytes for an internal flow of this process go (the edge's own user agent, calls/). */
  internal?: ((d: Destination, data: Buffer) => boolean) | null;
}

/** RFC 3261 §8.1.1.7: every branch we generate starts with the magic cookie. */
const MAGIC = 'z9hG4bK';

/**
 * The transaction layer of the stateful proxy (RFC 3261 §17): tables of server
 * and client transactions, branch generation, our Via, response matching
 * (§17.1.3) and request matching (§17.2.3), and the local addresses written into
 * Via and Record-Route. Shared by the router (which feeds it) and the proxy
 * (which opens transactions through it).
 */
export class TransactionLayer implements ServerTransactionHost {
  readonly timers: TimerSettings;
  readonly serverHeader: string;
  private readonly servers = new Map<string, ServerTransaction>();
  private readonly clients = new Map<string, ClientTransaction>();
  private readonly branchPrefix: string;
  private branchCounter = 0;
  private readonly tagPrefix = randomBytes(4).toString('hex');
  private tagCounter = 0;
  private readonly local = new Map<SipTransportName, { host: string; port: number }>();
  private readonly ownHosts = new Set<string>();
  private readonly ownPorts = new Set<number>();
  /** The first final response of a stateful server transaction went out (the router's metrics hook). */
  onFinal: ((tx: ServerTransaction, status: number) => void) | null = null;

  constructor(private readonly opts: TransactionLayerOptions) {
    this.timers = opts.timers ?? DEFAULT_TIMERS;
    // In a fleet the branch names the process, so the owner of a response can be found.
    this.branchPrefix = opts.relay?.branchTag ?? randomBytes(4).toString('hex');
    this.serverHeader = opts.server;
    if (opts.advertisedHost) this.ownHosts.add(opts.advertisedHost.toLowerCase());
  }

  // --- local addresses --------------------------------------------------------

  /** Record where a listener is bound (after start): its Via sent-by and what counts as our own URI. */
  setListening(name: SipTransportName, bound: BoundAddress): void {
    const wildcard = bound.address === '0.0.0.0' || bound.address === '::';
    const host = this.opts.advertisedHost ?? (wildcard ? firstAddress() : bound.address);
    this.local.set(name, { host: uriHost(host), port: bound.port });
    this.ownPorts.add(bound.port);
    this.ownHosts.add(uriHost(host).toLowerCase());
    if (wildcard) for (const a of allAddresses()) this.ownHosts.add(uriHost(a).toLowerCase());
    else this.ownHosts.add(uriHost(bound.address).toLowerCase());
  }

  /** `host:port` of our listener for a transport, or null when it is off. */
  sentBy(t: SipTransportName): { host: string; port: number } | null {
    return this.local.get(t) ?? null;
  }

  /** Whether a SIP URI names this server (host one of ours and port one of our listeners; RFC 3261 §16.4). */
  isOwnUri(u: SipUri): boolean {
    if (u.scheme !== 'sip' && u.scheme !== 'sips') return false;
    if (!this.ownHosts.has(u.host)) return false;
    const port = u.port ?? (u.scheme === 'sips' || u.params.get('transport') === 'tls' ? 5061 : 5060);
    return this.ownPorts.has(port);
  }

  // --- server transactions ----------------------------------------------------

  private serverKey(method: string, ctx: IncomingRequest): string {
    const via = ctx.via;
    return transactionKey(method, via.branch, `${via.host}:${via.port ?? ''}`, ctx.callId, ctx.cseq.seq, tagOf(getHeader(ctx.req, 'from')), getListValues(ctx.req, 'via')[0] ?? '');
  }

  /**
   * The server transaction of a request (RFC 3261 §17.2.3): a new one, or the
   * existing one when this is a retransmission (`retransmission: true`).
   */
  serverTransaction(ctx: IncomingRequest, startedAt: bigint): { tx: ServerTransaction; retransmission: boolean } {
    const key = this.serverKey(ctx.req.method, ctx);
    const existing = this.servers.get(key);
    if (existing) return { tx: existing, retransmission: true };
    const tx =
      ctx.req.method === 'INVITE'
        ? new InviteServerTransaction(this, key, ctx.req, ctx.flow, startedAt)
        : new NonInviteServerTransaction(this, key, ctx.req, ctx.flow, startedAt);
    this.servers.set(key, tx);
    return { tx, retransmission: false };
  }

  /** The INVITE server transaction a CANCEL or ACK names (same branch and sent-by; §9.2, §17.2.3). */
  inviteTransaction(ctx: IncomingRequest): InviteServerTransaction | null {
    const tx = this.servers.get(this.serverKey('INVITE', ctx));
    return tx instanceof InviteServerTransaction ? tx : null;
  }

  // --- client transactions ----------------------------------------------------

  /** A new branch (RFC 3261 §8.1.1.7); `loop` is a loop-detection hash (§16.6 step 8) carried inside it. */
  newBranch(loop = ''): string {
    return `${MAGIC}${this.branchPrefix}${loop ? '.' + loop : ''}.${(++this.branchCounter).toString(36)}`;
  }

  /**
   * An OPTIONS liveness probe (README "Flows"; Kamailio nathelper's SIP ping) for a stream
   * flow, sent outside any transaction: `uri` is the binding's Contact, `callId` its
   * REGISTER's Call-ID (a client that maps messages by Call-ID, like SIPp, finds it). Its
   * answer matches no transaction and is dropped; only its arrival matters.
   */
  optionsProbe(t: SipTransportName, aor: string, uri: string, callId: string): Buffer {
    const branch = `${this.newBranch()}.p`;
    const l = this.local.get(t);
    const host = l ? l.host : '127.0.0.1';
    return Buffer.from(
      `OPTIONS ${uri} SIP/2.0\r\n` +
        `Via: ${this.via(t, branch)}\r\n` +
        'Max-Forwards: 70\r\n' +
        `From: <sip:ping@${host}>;tag=${branch.slice(-12)}\r\n` +
        `To: <sip:${aor}>\r\n` +
        `Call-ID: ${callId}\r\n` +
        `CSeq: ${++this.branchCounter} OPTIONS\r\n` +
        `User-Agent: ${this.serverHeader}\r\n` +
        'Content-Length: 0\r\n\r\n',
    );
  }

  /** Whether a branch was generated by this process; its loop hash, when it has one. */
  ownBranch(branch: string | null): { loop: string } | null {
    if (!branch || !branch.startsWith(MAGIC + this.branchPrefix)) return null;
    const parts = branch.slice(MAGIC.length + this.branchPrefix.length).split('.');
    return { loop: parts.length === 3 ? parts[1] : '' };
  }

  /** Our Via for a request leaving over `t` (§16.6 step 8, §18.1.1; rport per RFC 3581). */
  via(t: SipTransportName, branch: string): string {
    const l = this.local.get(t);
    const sentBy = l ? `${l.host}:${l.port}` : '127.0.0.1';
    return `SIP/2.0/${t.toUpperCase()} ${sentBy};branch=${branch};rport`;
  }

  /**
   * Sends a request statefully: puts our Via (a new branch, or `branch` for a
   * CANCEL, which must carry the branch of the INVITE it cancels — §9.1) on top
   * and starts an INVITE or non-INVITE client transaction.
   */
  request(req: SipRequest, dest: Destination, user: ClientTransactionUser, opts: { branch?: string; loop?: string } = {}): ClientTransaction {
    const branch = opts.branch ?? this.newBranch(opts.loop);
    prependHeaders(req, 'via', [this.via(dest.transport, branch)]);
    const key = `${branch}\u0000${req.method}`;
    const tx =
      req.method === 'INVITE'
        ? new InviteClientTransaction(this, key, branch, req, dest, user)
        : new NonInviteClientTransaction(this, key, branch, req, dest, user);
    this.clients.set(key, tx);
    tx.start();
    return tx;
  }

  /** Forwards a request without a transaction (the ACK of a 2xx; RFC 3261 §16.11 branch rules). */
  forwardStateless(req: SipRequest, dest: Destination, branch: string): boolean {
    prependHeaders(req, 'via', [this.via(dest.transport, branch)]);
    return this.send(dest, serializeMessage(req));
  }

  /**
   * Matches a response to a client transaction (RFC 3261 §17.1.3: the top Via
   * branch and the CSeq method). False when none matches: a stray response.
   */
  receiveResponse(res: SipResponse): boolean {
    const top = parseVia(getListValues(res, 'via')[0] ?? '');
    const cseq = parseCSeq(getHeader(res, 'cseq') ?? '');
    if (!top?.branch || !cseq) return false;
    const tx = this.clients.get(`${top.branch}\u0000${cseq.method}`);
    if (!tx) return false;
    tx.receive(res);
    return true;
  }

  /**
   * A response no transaction here matched, whose top Via branch another process
   * of the fleet made (it came over a flow this process holds): relayed to it.
   * True when it was handed over.
   */
  relayStray(res: SipResponse, data: Buffer, flow: Flow): boolean {
    const relay = this.opts.relay;
    if (!relay) return false;
    const branch = parseVia(getListValues(res, 'via')[0] ?? '')?.branch ?? '';
    if (!branch.startsWith(MAGIC)) return false;
    const tag = branch.slice(MAGIC.length, MAGIC.length + this.branchPrefix.length);
    if (tag === this.branchPrefix || !/^[0-9a-f]{8}$/.test(tag)) return false;
    relay.response(tag, data, flow);
    return true;
  }

  // --- ServerTransactionHost / TransactionHost ---------------------------------

  send(d: Destination, data: Buffer): boolean {
    if (isInternalFlow(d) && (!d.node || !this.opts.relay || d.node === this.opts.relay.self)) return this.opts.internal?.(d, data) ?? false;
    const ok = sendTo(this.opts.transports, d, data, this.opts.relay);
    if (!ok) this.opts.log.debug({ transport: d.transport, connId: d.connId, to: `${d.address}:${d.port}` }, 'message dropped: flow gone');
    return ok;
  }

  terminated(key: string): void {
    if (!this.servers.delete(key)) this.clients.delete(key);
  }

  newTag(): string {
    return `${this.tagPrefix}${(++this.tagCounter).toString(36)}`;
  }

  finalSent(tx: ServerTransaction, status: number): void {
    this.onFinal?.(tx, status);
  }

  /** Open transactions (metrics, tests). */
  get size(): { server: number; client: number } {
    return { server: this.servers.size, client: this.clients.size };
  }

  stop(): void {
    for (const tx of [...this.servers.values()]) tx.terminate();
    for (const tx of [...this.clients.values()]) tx.terminate();
  }
}


function allAddresses(): string[] {
  const out: string[] = [];
  for (const list of Object.values(networkInterfaces())) for (const a of list ?? []) out.push(a.address);
  return out;
}

function firstAddress(): string {
  for (const list of Object.values(networkInterfaces())) {
    for (const a of list ?? []) if (!a.internal && a.family === 'IPv4') return a.address;
  }
  return '127.0.0.1';
}
