/**
 * A client of rtpengine's NG control protocol over UDP (docs/media.md).
 *
 * A request is one datagram `<cookie> <bencoded dictionary>` whose dictionary
 * holds `command` and the command's parameters; the reply is `<cookie> <dictionary>`
 * with `result` (`ok`, `pong`, `error` + `error-reason`, or `load limit`). The
 * cookie is unique per request and kept across retransmissions, so rtpengine
 * answers a retransmitted request from its cache instead of running it twice.
 *
 * Several engines: a NEW call goes to the next engine by smooth weighted round
 * robin among those up (weight 0 = draining: no new calls). A call already on an
 * engine keeps it: the caller stores the engine id {@link NgResult.engine} that
 * `offer` returns (with the call, in the store) and passes it to every later
 * command of that call. An engine that does not answer a request (after the
 * retries) is marked down; a new call then fails over to the next engine at once.
 * Down engines get a `ping` every `recheckIntervalMs` and are put back when one is
 * answered. Commands pinned to a down engine fail at once (RtpengineUnavailableError).
 *
 * The client never logs: `onRequest` and `onEngineChange` report what happens, so
 * the server can count (sip_media_engine_* metrics, src/metrics.ts) and log it.
 */
import { randomBytes } from 'node:crypto';
import { createSocket, type RemoteInfo, type Socket } from 'node:dgram';
import { lookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import { BencodeError, decode, encode, type BencodeInput, type BencodeText } from './bencode.js';

// ---------------------------------------------------------------- errors

/** Base of every failure of the client; `code` is stable (undici style). */
export class RtpengineError extends Error {
  constructor(
    message: string,
    readonly code: string,
    /** The engine id (`host:port`) the failure happened on; null when none was tried. */
    readonly engine: string | null,
    readonly command: string,
    options?: { cause?: unknown },
  ) {
    super(message, options);
    this.name = 'RtpengineError';
  }
}

/** rtpengine answered `result: error` (or `load limit`): `reason` is its `error-reason`. */
export class RtpengineRejectedError extends RtpengineError {
  constructor(
    readonly reason: string,
    engine: string,
    command: string,
    /** The whole reply dictionary. */
    readonly reply: NgReply,
  ) {
    super(`rtpengine ${engine} refused ${command}: ${reason}`, 'RTPENGINE_REJECTED', engine, command);
    this.name = 'RtpengineRejectedError';
  }
}

/** The engine answered none of the transmissions of a request within the timeout. */
export class RtpengineTimeoutError extends RtpengineError {
  constructor(
    engine: string,
    command: string,
    readonly attempts: number,
    readonly ms: number,
  ) {
    super(`rtpengine ${engine} did not answer ${command} (${attempts} transmissions, ${Math.round(ms)} ms)`, 'RTPENGINE_TIMEOUT', engine, command);
    this.name = 'RtpengineTimeoutError';
  }
}

/** No engine could take the request: all down (or draining), or the pinned engine is unknown. */
export class RtpengineUnavailableError extends RtpengineError {
  constructor(message: string, engine: string | null, command: string, options?: { cause?: unknown }) {
    super(message, 'RTPENGINE_UNAVAILABLE', engine, command, options);
    this.name = 'RtpengineUnavailableError';
  }
}

// ---------------------------------------------------------------- types

/** One engine's NG address, as RTPENGINE_NG lists it (`host:port[=weight]`). */
export interface RtpengineAddress {
  host: string;
  port: number;
  /** Share of new calls relative to the others; 0 = draining (only calls already on it). @default 1 */
  weight?: number;
}

/** A decoded reply dictionary (strings as UTF-8 text). */
export type NgReply = { [key: string]: BencodeText };

/**
 * Parameters of a command, with rtpengine's own key names (its docs/ng_control_protocol.md);
 * any other key is passed through as written.
 */
export interface NgParams {
  'call-id'?: string;
  'from-tag'?: string;
  'to-tag'?: string;
  /** Per-branch state when an offer forks (one offer per branch). */
  'via-branch'?: string;
  [key: string]: BencodeInput | undefined;
}

/** Parameters of a call command: Call-ID and From tag are required. */
export interface NgCallParams extends NgParams {
  'call-id': string;
  'from-tag': string;
}

/** Parameters of `offer` and `answer`: the SDP and how to rewrite it. */
export interface NgSdpParams extends NgCallParams {
  sdp: string;
  /** Flags such as `trust-address`, `strict-source`, `generate-mid`, `SDES-off`. */
  flags?: readonly string[];
  /** `origin`, `session-connection`, … */
  replace?: readonly string[];
  /** `offer`, `require`, `demux`, `accept`, `reject`. */
  'rtcp-mux'?: readonly string[];
  ICE?: 'remove' | 'force' | 'default' | 'force-relay' | 'optional';
  DTLS?: 'off' | 'no' | 'passive' | 'active';
  /** `off`, or suites to offer/strip. */
  SDES?: readonly string[];
  /** `RTP/AVP`, `RTP/SAVP`, `UDP/TLS/RTP/SAVPF`, … */
  'transport-protocol'?: string;
  /** Logical interfaces of the two sides, when rtpengine has several. */
  direction?: readonly [string, string];
  /** Where the SDP really came from: `['IP4', '192.0.2.1']` (the `trust-address` counterpart). */
  'received-from'?: readonly [string, string];
}

/**
 * The SDP rewrite for each kind of leg, as tested against rtpengine
 * (test/integration/rtpengine-ng.test.ts; docs/media.md "Flags per leg"). Spread the
 * set of the leg the SDP is GOING TO into an offer's or answer's parameters:
 * an offer from a browser to a desk phone takes `LEG_FLAGS.plain`, the phone's
 * answer going back to the browser takes `LEG_FLAGS.webrtc`.
 */
export const LEG_FLAGS = Object.freeze({
  /** Towards a plain RTP endpoint (desk phone, trunk): RTP/AVP, no ICE, no DTLS, RTCP on its own port. */
  plain: Object.freeze({
    'transport-protocol': 'RTP/AVP',
    ICE: 'remove',
    DTLS: 'off',
    SDES: ['off'],
    'rtcp-mux': ['demux'],
    replace: ['origin', 'session-connection'],
  }),
  /** Towards a WebRTC endpoint (browser): ICE (rtpengine's candidates), DTLS-SRTP with rtpengine passive, rtcp-mux, no SDES keys. */
  webrtc: Object.freeze({
    'transport-protocol': 'UDP/TLS/RTP/SAVPF',
    ICE: 'force',
    DTLS: 'passive',
    SDES: ['off'],
    'rtcp-mux': ['offer', 'require'],
    replace: ['origin', 'session-connection'],
  }),
} as const);

/** What a command returns. */
export interface NgResult {
  /** The engine id (`host:port`) that answered: store it with the call and pass it to later commands. */
  engine: string;
  reply: NgReply;
  /** rtpengine's `warning`, when it gave one. */
  warning?: string;
}

/** What `offer` and `answer` return: the rewritten SDP to forward. */
export interface NgSdpResult extends NgResult {
  sdp: string;
}

/** How a request ended, for metrics: `ok`, `rejected` (result error / load limit), `timeout`, `bad_reply`, `send_error`. */
export type NgOutcome = 'ok' | 'rejected' | 'timeout' | 'bad_reply' | 'send_error';

/** One finished request to one engine (a failover makes one event per engine tried). */
export interface NgRequestEvent {
  engine: string;
  command: string;
  outcome: NgOutcome;
  /** From the first transmission to the end, ms. */
  ms: number;
  /** Transmissions sent (1 + retransmissions). */
  attempts: number;
}

/** An engine marked down (`up: false`) or put back (`up: true`). */
export interface NgEngineChange {
  engine: string;
  up: boolean;
  /** Why: the failure that took it out, or `ping answered`. */
  reason: string;
}

/** What the client knows about one engine now. */
export interface NgEngineStatus {
  id: string;
  host: string;
  port: number;
  weight: number;
  up: boolean;
  /** Epoch ms it was marked down; null while up. */
  downSince: number | null;
}

export interface RtpengineClientOptions {
  /** At least one; ids are `host:port` (`[v6]:port`). */
  engines: readonly RtpengineAddress[];
  /** Wait for a reply to each transmission, ms (Kamailio rtpengine_tout_ms). @default 1000 */
  timeoutMs?: number;
  /** Retransmissions (same cookie) after the first timeout before the engine counts as not answering. @default 2 */
  retries?: number;
  /** How often a down engine is pinged to be put back, ms. @default 5000 */
  recheckIntervalMs?: number;
  /** Called after every request to an engine (metrics). Must not throw. */
  onRequest?: (e: NgRequestEvent) => void;
  /** Called when an engine is marked down or put back (logs). Must not throw. */
  onEngineChange?: (e: NgEngineChange) => void;
}

/** Every default in one place. */
export const RTPENGINE_DEFAULTS = Object.freeze({ timeoutMs: 1000, retries: 2, recheckIntervalMs: 5000 });

/** Largest request sent: a UDP datagram's payload over IPv4. */
const MAX_DATAGRAM = 65_507;

// ---------------------------------------------------------------- client

interface Engine {
  readonly id: string;
  readonly host: string;
  readonly port: number;
  readonly weight: number;
  up: boolean;
  downSince: number | null;
  /** Smooth weighted round robin state (nginx's upstream algorithm). */
  current: number;
  /** Resolved address; null until the first request (and again after a mark-down, to re-resolve). */
  address: { address: string; family: 4 | 6 } | null;
}

interface Pending {
  readonly engine: Engine;
  /** Where it was sent: only a reply from there is taken. */
  readonly address: string;
  readonly command: string;
  readonly packet: Buffer;
  readonly started: number;
  readonly retries: number;
  attempts: number;
  timer: NodeJS.Timeout | null;
  resolve(r: NgReply): void;
  reject(e: Error): void;
}

/** The id of an engine address: `host:port`, IPv6 in brackets. */
export function engineId(a: { host: string; port: number }): string {
  return isIP(a.host) === 6 ? `[${a.host}]:${a.port}` : `${a.host}:${a.port}`;
}

export class RtpengineClient {
  private readonly list: Engine[];
  private readonly byId = new Map<string, Engine>();
  private readonly pending = new Map<string, Pending>();
  private readonly sockets: { 4: Socket | null; 6: Socket | null } = { 4: null, 6: null };
  private readonly timeoutMs: number;
  private readonly retries: number;
  private readonly recheckMs: number;
  private readonly onRequest: (e: NgRequestEvent) => void;
  private readonly onEngineChange: (e: NgEngineChange) => void;
  /** Cookie = a random prefix per client (several clients share an engine's reply cache) + a sequence. */
  private readonly cookiePrefix = randomBytes(6).toString('hex');
  private seq = 0;
  private recheckTimer: NodeJS.Timeout | null = null;
  private rechecking = false;
  private closed = false;

  constructor(opts: RtpengineClientOptions) {
    if (opts.engines.length === 0) throw new TypeError('RtpengineClient needs at least one engine');
    this.timeoutMs = opts.timeoutMs ?? RTPENGINE_DEFAULTS.timeoutMs;
    this.retries = opts.retries ?? RTPENGINE_DEFAULTS.retries;
    this.recheckMs = opts.recheckIntervalMs ?? RTPENGINE_DEFAULTS.recheckIntervalMs;
    if (!(this.timeoutMs > 0) || !Number.isInteger(this.retries) || this.retries < 0 || !(this.recheckMs > 0)) {
      throw new TypeError('RtpengineClient: timeoutMs and recheckIntervalMs must be > 0, retries an integer ≥ 0');
    }
    this.onRequest = opts.onRequest ?? (() => {});
    this.onEngineChange = opts.onEngineChange ?? (() => {});
    this.list = opts.engines.map((a) => {
      const weight = a.weight ?? 1;
      if (!Number.isInteger(a.port) || a.port < 1 || a.port > 65535) throw new TypeError(`bad rtpengine port ${a.port}`);
      if (!Number.isInteger(weight) || weight < 0) throw new TypeError(`bad rtpengine weight ${weight}`);
      const e: Engine = { id: engineId(a), host: a.host, port: a.port, weight, up: true, downSince: null, current: 0, address: null };
      if (this.byId.has(e.id)) throw new TypeError(`rtpengine ${e.id} listed twice`);
      this.byId.set(e.id, e);
      return e;
    });
  }

  /** Every engine and whether it is up. */
  engines(): NgEngineStatus[] {
    return this.list.map((e) => ({ id: e.id, host: e.host, port: e.port, weight: e.weight, up: e.up, downSince: e.downSince }));
  }

  /**
   * Offer an SDP. Without `engine` (a new call) an engine is chosen and, if it does
   * not answer, the next one; with `engine` (a re-offer of a call already relayed)
   * that engine only. The result's `engine` is the one to keep for the call.
   */
  async offer(params: NgSdpParams, engine?: string): Promise<NgSdpResult> {
    return sdpResult(await this.command('offer', params, engine), 'offer');
  }

  /** Answer on the engine that took the offer (needs `to-tag`). */
  async answer(params: NgSdpParams & { 'to-tag': string }, engine: string): Promise<NgSdpResult> {
    return sdpResult(await this.command('answer', params, engine), 'answer');
  }

  /** End the call's session (or one branch: `via-branch`, or one leg: `to-tag`). */
  delete(params: NgCallParams, engine: string): Promise<NgResult> {
    return this.command('delete', params, engine);
  }

  /** The session's state and counters (`totals`, `tags`, `created` …). */
  query(params: NgParams & { 'call-id': string }, engine: string): Promise<NgResult> {
    return this.command('query', params, engine);
  }

  /** `ping` one engine (a single transmission); a reply puts a down engine back. */
  async ping(engine: string): Promise<NgResult> {
    const e = this.byId.get(engine);
    if (e === undefined) throw new RtpengineUnavailableError(`rtpengine ${engine} is not configured`, engine, 'ping');
    const reply = await this.request(e, 'ping', {}, 0);
    if (!e.up) this.markUp(e, 'ping answered');
    return result(e, reply);
  }

  /**
   * Any NG command (`list`, `statistics`, `start recording`, …). Without `engine`
   * it goes where a new call would go (with failover); with it, to that engine only.
   */
  async command(name: string, params: NgParams, engine?: string): Promise<NgResult> {
    if (this.closed) throw new RtpengineError('rtpengine client closed', 'RTPENGINE_CLOSED', engine ?? null, name);
    if (engine !== undefined) {
      const e = this.byId.get(engine);
      if (e === undefined) throw new RtpengineUnavailableError(`rtpengine ${engine} is not configured`, engine, name);
      // Taken out means no NEW calls. The calls it holds live only there, so their commands
      // (answer, delete, query) still go to it — one transmission while it is out, so a dead
      // engine costs one timeout — and an answer puts it back at once.
      const reply = await this.request(e, name, params, e.up ? this.retries : 0);
      if (!e.up) this.markUp(e, `${name} answered`);
      return result(e, reply);
    }
    const tried = new Set<Engine>();
    let last: unknown = null;
    for (;;) {
      const e = this.pick(tried);
      if (e === null) {
        const why = tried.size === 0 ? 'no rtpengine is up' : `no rtpengine answered (${[...tried].map((t) => t.id).join(', ')})`;
        throw new RtpengineUnavailableError(why, null, name, last === null ? undefined : { cause: last });
      }
      tried.add(e);
      try {
        return result(e, await this.request(e, name, params, this.retries));
      } catch (err) {
        // A refusal is about the request (bad SDP, unknown call) except overload: try the next engine.
        if (err instanceof RtpengineRejectedError && err.reason !== 'load limit') throw err;
        if (!(err instanceof RtpengineError) || err.code === 'RTPENGINE_CLOSED' || err.code === 'RTPENGINE_BAD_REQUEST') throw err;
        last = err;
      }
    }
  }

  /** The engine a new call would get now, without sending anything (null: none up). */
  choose(): string | null {
    return this.pick(new Set(), false)?.id ?? null;
  }

  /** Reject what is pending, stop the rechecks, close the sockets. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.recheckTimer) clearInterval(this.recheckTimer);
    this.recheckTimer = null;
    for (const [cookie, p] of this.pending) {
      if (p.timer) clearTimeout(p.timer);
      this.pending.delete(cookie);
      p.reject(new RtpengineError('rtpengine client closed', 'RTPENGINE_CLOSED', p.engine.id, p.command));
    }
    await Promise.all(
      ([4, 6] as const).map((f) => {
        const s = this.sockets[f];
        this.sockets[f] = null;
        return s === null ? undefined : new Promise<void>((r) => s.close(() => r()));
      }),
    );
  }

  // ------------------------------------------------------------ internals

  /**
   * Smooth weighted round robin (nginx's upstream algorithm) over the engines up,
   * with weight > 0, not yet tried: each adds its weight to its score, the highest
   * score wins and pays the total back; `commit: false` only looks.
   */
  private pick(exclude: ReadonlySet<Engine>, commit = true): Engine | null {
    let total = 0;
    let best: Engine | null = null;
    for (const e of this.list) {
      if (!e.up || e.weight === 0 || exclude.has(e)) continue;
      total += e.weight;
      if (best === null || e.current + e.weight > best.current + best.weight) best = e;
    }
    if (best === null || !commit) return best;
    for (const e of this.list) if (e.up && e.weight > 0 && !exclude.has(e)) e.current += e.weight;
    best.current -= total;
    return best;
  }

  private markDown(e: Engine, reason: string): void {
    if (!e.up) return;
    e.up = false;
    e.downSince = Date.now();
    e.current = 0;
    e.address = null; // re-resolve a host name before the next try
    this.notify({ engine: e.id, up: false, reason });
    if (this.recheckTimer === null && !this.closed) {
      this.recheckTimer = setInterval(() => void this.recheck(), this.recheckMs);
      this.recheckTimer.unref();
    }
  }

  private markUp(e: Engine, reason: string): void {
    if (e.up) return;
    e.up = true;
    e.downSince = null;
    this.notify({ engine: e.id, up: true, reason });
    if (this.list.every((x) => x.up) && this.recheckTimer !== null) {
      clearInterval(this.recheckTimer);
      this.recheckTimer = null;
    }
  }

  /** Ping every down engine once (one transmission each); the answer puts it back. */
  private async recheck(): Promise<void> {
    if (this.rechecking || this.closed) return;
    this.rechecking = true;
    try {
      await Promise.all(
        this.list
          .filter((e) => !e.up)
          .map(async (e) => {
            try {
              await this.request(e, 'ping', {}, 0);
              this.markUp(e, 'ping answered');
            } catch {
              // still down
            }
          }),
      );
    } finally {
      this.rechecking = false;
    }
  }

  private async resolve(e: Engine): Promise<{ address: string; family: 4 | 6 }> {
    if (e.address !== null) return e.address;
    const fam = isIP(e.host);
    // An IPv6 literal in its canonical form, as a reply's source address reads.
    const literal = fam === 6 ? new URL(`udp://[${e.host}]`).hostname.slice(1, -1) : e.host;
    const a = fam !== 0 ? { address: literal, family: fam as 4 | 6 } : await lookup(e.host).then((r) => ({ address: r.address, family: r.family as 4 | 6 }));
    e.address = a;
    return a;
  }

  private socket(family: 4 | 6): Socket {
    let s = this.sockets[family];
    if (s !== null) return s;
    s = createSocket(family === 4 ? 'udp4' : 'udp6');
    s.on('message', (msg, rinfo) => this.onMessage(msg, rinfo));
    // An ICMP error or a closed interface must not crash the process; requests time out instead.
    s.on('error', () => {});
    s.unref();
    this.sockets[family] = s;
    return s;
  }

  /** One request to one engine: transmit, retransmit on timeout, settle on the reply. */
  private async request(e: Engine, command: string, params: NgParams, retries: number): Promise<NgReply> {
    if (this.closed) throw new RtpengineError('rtpengine client closed', 'RTPENGINE_CLOSED', e.id, command);
    const started = performance.now();
    let addr: { address: string; family: 4 | 6 };
    try {
      addr = await this.resolve(e);
    } catch (err) {
      this.report(e, command, 'send_error', started, 0);
      this.markDown(e, `cannot resolve ${e.host}: ${(err as Error).message}`);
      throw new RtpengineUnavailableError(`rtpengine ${e.id}: cannot resolve ${e.host}`, e.id, command, { cause: err });
    }
    const cookie = `${this.cookiePrefix}${(this.seq++).toString(36)}`;
    let body: Buffer;
    try {
      body = encode({ ...params, command });
    } catch (err) {
      throw new RtpengineError(`cannot encode ${command}: ${(err as Error).message}`, 'RTPENGINE_BAD_REQUEST', e.id, command, { cause: err });
    }
    const packet = Buffer.concat([Buffer.from(`${cookie} `, 'latin1'), body]);
    if (packet.length > MAX_DATAGRAM) {
      throw new RtpengineError(`${command} of ${packet.length} bytes does not fit one datagram`, 'RTPENGINE_BAD_REQUEST', e.id, command);
    }
    const sock = this.socket(addr.family);
    return new Promise<NgReply>((resolve, reject) => {
      const p: Pending = { engine: e, address: addr.address, command, packet, started, retries, attempts: 0, timer: null, resolve, reject };
      this.pending.set(cookie, p);
      this.transmit(cookie, p, sock);
    });
  }

  private transmit(cookie: string, p: Pending, sock: Socket): void {
    p.attempts++;
    sock.send(p.packet, p.engine.port, p.address, (err) => {
      if (err && this.pending.get(cookie) === p) this.settleFailure(cookie, p, 'send_error', `send: ${err.message}`);
    });
    p.timer = setTimeout(() => {
      if (this.pending.get(cookie) !== p) return;
      if (p.attempts <= p.retries && !this.closed) this.transmit(cookie, p, sock);
      else this.settleFailure(cookie, p, 'timeout', 'no answer');
    }, this.timeoutMs);
  }

  private settleFailure(cookie: string, p: Pending, outcome: 'timeout' | 'send_error', why: string): void {
    if (p.timer) clearTimeout(p.timer);
    this.pending.delete(cookie);
    const ms = this.report(p.engine, p.command, outcome, p.started, p.attempts);
    this.markDown(p.engine, `${p.command}: ${why}`);
    p.reject(
      outcome === 'timeout'
        ? new RtpengineTimeoutError(p.engine.id, p.command, p.attempts, ms)
        : new RtpengineUnavailableError(`rtpengine ${p.engine.id}: ${why}`, p.engine.id, p.command),
    );
  }

  private onMessage(msg: Buffer, rinfo: RemoteInfo): void {
    const sp = msg.indexOf(0x20);
    if (sp <= 0 || sp > 64) return; // not a reply of ours
    const cookie = msg.toString('latin1', 0, sp);
    const p = this.pending.get(cookie);
    if (p === undefined) return; // late (after a timeout) or a duplicate
    if (rinfo.port !== p.engine.port || rinfo.address !== p.address) return; // not from that engine
    if (p.timer) clearTimeout(p.timer);
    this.pending.delete(cookie);
    let reply: unknown;
    try {
      reply = decode(msg.subarray(sp + 1), { strings: 'utf8' });
    } catch (err) {
      this.report(p.engine, p.command, 'bad_reply', p.started, p.attempts);
      const why = err instanceof BencodeError ? err.message : String(err);
      p.reject(new RtpengineError(`rtpengine ${p.engine.id} sent a malformed reply to ${p.command}: ${why}`, 'RTPENGINE_BAD_REPLY', p.engine.id, p.command, { cause: err }));
      return;
    }
    if (typeof reply !== 'object' || reply === null || Array.isArray(reply) || typeof (reply as NgReply).result !== 'string') {
      this.report(p.engine, p.command, 'bad_reply', p.started, p.attempts);
      p.reject(new RtpengineError(`rtpengine ${p.engine.id} answered ${p.command} without a result`, 'RTPENGINE_BAD_REPLY', p.engine.id, p.command));
      return;
    }
    const r = reply as NgReply;
    if (r.result === 'ok' || r.result === 'pong') {
      this.report(p.engine, p.command, 'ok', p.started, p.attempts);
      p.resolve(r);
      return;
    }
    this.report(p.engine, p.command, 'rejected', p.started, p.attempts);
    const reason = r.result === 'error' ? (typeof r['error-reason'] === 'string' ? r['error-reason'] : 'unspecified error') : String(r.result);
    p.reject(new RtpengineRejectedError(reason, p.engine.id, p.command, r));
  }

  private notify(c: NgEngineChange): void {
    try {
      this.onEngineChange(c);
    } catch {
      // a logging hook must not break a call
    }
  }

  private report(e: Engine, command: string, outcome: NgOutcome, started: number, attempts: number): number {
    const ms = performance.now() - started;
    try {
      this.onRequest({ engine: e.id, command, outcome, ms, attempts });
    } catch {
      // a metrics hook must not break a call
    }
    return ms;
  }
}

function result(e: Engine, reply: NgReply): NgResult {
  const r: NgResult = { engine: e.id, reply };
  if (typeof reply.warning === 'string') r.warning = reply.warning;
  return r;
}

function sdpResult(r: NgResult, command: string): NgSdpResult {
  const sdp = r.reply.sdp;
  if (typeof sdp !== 'string') throw new RtpengineError(`rtpengine ${r.engine} answered ${command} without an SDP`, 'RTPENGINE_BAD_REPLY', r.engine, command);
  return { ...r, sdp };
}
