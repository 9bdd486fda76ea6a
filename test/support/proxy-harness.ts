/**
 * Shared by the proxy suites (test/integration/proxy-*.test.ts and others): SIPp
 * runs that can be paired caller ↔ callee, and a small UDP user agent for
 * requests whose answers are asserted header by header. The server and its API
 * client are ./edge.ts (re-exported here).
 */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { getHeader, getHeaders, getListValues, parseNameAddr } from '../../src/sip/headers.js';
import type { SipMessage, SipRequest, SipResponse } from '../../src/sip/message.js';
import { parseMessage } from '../../src/sip/parser.js';
import { authorize, registerMessage } from './sip-client.js';
import { runSipp } from './sipp.js';

export { sleep, startEdge, type Account, type Edge, type Endpoint, type Flags } from './edge.js';
import type { Endpoint } from './edge.js';

// --- SIPp -------------------------------------------------------------------------

export interface SippResult {
  code: number | null;
  successful: number;
  failed: number;
  /** SIPp's error log without watchdog notes and late retransmissions after a successful end (a busy machine, not a protocol fault). */
  errors: string;
  /** Every message SIPp sent and received (-trace_msg). */
  messages: string;
}

export interface SippCall {
  scenario: string;
  /** The edge's address. @default '127.0.0.1' */
  host?: string;
  port: number;
  transport: 'udp' | 'tcp';
  endpoint: Endpoint;
  /** Shared by caller and callee: SIPp maps an incoming INVITE to a call by Call-ID only. */
  cidStr: string;
  keys?: Record<string, string>;
  /** Duration of the scenario's plain <pause/>, ms. */
  pauseMs?: number;
  timeoutS?: number;
}

/** Runs one SIPp call (-m 1) as endpoint `o.endpoint`, messages recorded; resolves when SIPp exits. */
export async function sipp(o: SippCall): Promise<SippResult> {
  const e = o.endpoint;
  const r = await runSipp({
    scenario: o.scenario,
    host: o.host,
    port: o.port,
    transport: o.transport,
    users: [{ user: e.username, domain: e.account.sipDomain, password: e.password }],
    calls: 1,
    cidStr: o.cidStr,
    keys: o.keys,
    pauseMs: o.pauseMs,
    timeoutMs: (o.timeoutS ?? 30) * 1000,
    traceMessages: true,
    recvTimeoutMs: null,
  });
  return { code: r.code, successful: r.successful, failed: r.failed, errors: r.errors, messages: r.messages };
}

/** A Call-ID pattern for -cid_str, unique per test. */
export function cidStr(): string {
  return `proxy-${randomBytes(5).toString('hex')}-%u@sipp`;
}

// --- a small UDP user agent ---------------------------------------------------------

export interface Received {
  msg: SipMessage;
  text: string;
}

/**
 * A UDP user agent for tests that assert headers: registers with digest,
 * sends out-of-dialog requests (answering 407 once), answers incoming INVITE
 * (180, then 200 with SDP or `answerStatus`), MESSAGE and OPTIONS, and BYE.
 * Used as an endpoint, and unregistered as the outbound gateway or app server.
 */
export class TestUa {
  readonly requests: SipRequest[] = [];
  /** When each of {@link requests} arrived (ms since the epoch). */
  readonly requestTimes: number[] = [];
  /** The source `address:port` of each request received (ACK included), in order: who sent it on the wire. */
  readonly requestSources: Array<{ method: string; from: string }> = [];
  /** Every response received, in order. */
  readonly responses: SipResponse[] = [];
  private readonly socket: dgram.Socket;
  private waiters: Array<{ match: (m: SipMessage) => boolean; resolve: (m: SipMessage) => void }> = [];
  private cseq = 1;
  port = 0;
  /** The address it listens and sends from. */
  local = '127.0.0.1';
  /** Status for incoming INVITEs (200 answers with SDP). */
  answerStatus = 200;
  /** Expires of {@link register}, seconds. */
  expires = 600;
  /** The address of the edge node this UA talks to (a fleet test uses several). */
  edgeHost = '127.0.0.1';
  /** The dialog of the last answered call placed with `keep`. */
  lastDialog: TestDialog | null = null;

  constructor(
    /** The edge node's SIP port this UA sends to (a fleet test moves it to reach another node). */
    public edgePort: number,
    readonly user: string,
    private readonly domain: string,
    private readonly password: string,
  ) {
    this.socket = dgram.createSocket('udp4');
    this.socket.on('message', (data, rinfo) => this.onMessage(data, `${rinfo.address}:${rinfo.port}`));
  }

  /** `localAddress`: where it listens and sends from (a carrier on 127.0.0.10). @default '127.0.0.1' */
  static async start(edgePort: number, e?: Endpoint, localAddress = '127.0.0.1'): Promise<TestUa> {
    const ua = new TestUa(edgePort, e?.username ?? 'gw', e?.account.sipDomain ?? 'gw.invalid', e?.password ?? '');
    ua.local = localAddress;
    await new Promise<void>((r) => ua.socket.bind(0, localAddress, () => r()));
    ua.port = ua.socket.address().port;
    return ua;
  }

  get aor(): string {
    return `sip:${this.user}@${this.domain}`;
  }

  send(text: string, port = this.edgePort): void {
    this.socket.send(text, port, this.edgeHost);
  }

  close(): void {
    this.socket.close();
  }

  private onMessage(data: Buffer, from: string): void {
    const p = parseMessage(data);
    if (!p.ok) return;
    const m = p.msg;
    if (m.kind === 'request') this.requestSources.push({ method: m.method, from });
    if (m.kind === 'response') this.responses.push(m);
    const w = this.waiters.find((x) => x.match(m));
    if (w) {
      this.waiters = this.waiters.filter((x) => x !== w);
      w.resolve(m);
    }
    if (m.kind === 'request') this.answer(m);
  }

  /** The next message matching `match` (responses included). */
  next(match: (m: SipMessage) => boolean, timeoutMs = 5000): Promise<SipMessage> {
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${this.user}: no matching message within ${timeoutMs} ms`)), timeoutMs);
      this.waiters.push({
        match,
        resolve: (m) => {
          clearTimeout(t);
          resolve(m);
        },
      });
    });
  }

  private answer(req: SipRequest): void {
    if (req.method === 'ACK') return;
    this.requests.push(req);
    this.requestTimes.push(Date.now());
    const respond = (status: number, reason: string, extra: string[] = [], body = ''): void => {
      const lines = [`SIP/2.0 ${status} ${reason}`];
      for (const v of getHeaders(req, 'via')) lines.push(`Via: ${v}`);
      for (const rr of getHeaders(req, 'record-route')) lines.push(`Record-Route: ${rr}`);
      lines.push(`From: ${getHeader(req, 'from')}`);
      const to = getHeader(req, 'to') ?? '';
      lines.push(`To: ${to}${status > 100 && !/;\s*tag=/i.test(to) ? ';tag=ua' + this.port : ''}`);
      lines.push(`Call-ID: ${getHeader(req, 'call-id')}`, `CSeq: ${getHeader(req, 'cseq')}`);
      lines.push(`Contact: <sip:${this.user}@${this.local}:${this.port}>`, ...extra, `Content-Length: ${Buffer.byteLength(body)}`, '', body);
      // RFC 3261 §18.2.2: to the address in the top Via (received, else sent-by) and its port.
      this.socket.send(lines.join('\r\n'), portOfTopVia(req), hostOfTopVia(req) ?? this.edgeHost);
    };
    if (req.method === 'INVITE') {
      respond(180, 'Ringing');
      if (this.answerStatus === 200) respond(200, 'OK', ['Content-Type: application/sdp'], sdp(this.port, false));
      else respond(this.answerStatus, 'Refused');
    } else {
      respond(200, 'OK');
    }
  }

  /** REGISTER with digest (SHA-256 challenge answered); resolves with the final status. */
  async register(): Promise<number> {
    const callId = randomBytes(6).toString('hex');
    const msg = (auth: string | null): string =>
      registerMessage({
        transport: 'UDP',
        user: this.user,
        domain: this.domain,
        viaHost: '127.0.0.1',
        viaPort: this.port,
        callId,
        cseq: this.cseq++,
        contacts: [`<sip:${this.user}@${this.local}:${this.port}>`],
        expires: this.expires,
        authorization: auth ?? undefined,
      });
    const isReg = (m: SipMessage): boolean => m.kind === 'response' && getHeader(m, 'call-id') === callId;
    this.send(msg(null));
    const first = (await this.next(isReg)) as SipResponse;
    if (first.status !== 401) return first.status;
    const challenge = getHeaders(first, 'www-authenticate')[0];
    this.send(msg(authorize(challenge, { user: this.user, password: this.password, method: 'REGISTER', uri: `sip:${this.domain}` })));
    return ((await this.next(isReg)) as SipResponse).status;
  }

  /**
   * Sends an out-of-dialog request to `target` through the edge, answering a 407
   * once; resolves with the final response. A 200 to an INVITE is ACKed and
   * the call hung up (BYE along the Record-Route) unless `keep`.
   */
  async call(
    method: 'INVITE' | 'MESSAGE' | 'OPTIONS',
    target: string,
    opts: { video?: boolean; keep?: boolean; sdp?: string; callId?: string; headers?: string[] } = {},
  ): Promise<SipResponse> {
    const callId = opts.callId ?? randomBytes(8).toString('hex');
    const tag = randomBytes(4).toString('hex');
    const body = method === 'INVITE' ? (opts.sdp ?? sdp(this.port, opts.video ?? false)) : method === 'MESSAGE' ? 'hello' : '';
    const type = method === 'INVITE' ? 'application/sdp' : method === 'MESSAGE' ? 'text/plain' : null;
    const build = (cseq: number, auth: string | null): string =>
      [
        `${method} ${target} SIP/2.0`,
        `Via: SIP/2.0/UDP ${this.local}:${this.port};branch=z9hG4bK${randomBytes(6).toString('hex')};rport`,
        'Max-Forwards: 70',
        `From: <${this.aor}>;tag=${tag}`,
        `To: <${target}>`,
        `Call-ID: ${callId}`,
        `CSeq: ${cseq} ${method}`,
        `Contact: <sip:${this.user}@${this.local}:${this.port}>`,
        ...(opts.headers ?? []),
        ...(auth ? [`Proxy-Authorization: ${auth}`] : []),
        ...(type ? [`Content-Type: ${type}`] : []),
        `Content-Length: ${Buffer.byteLength(body)}`,
        '',
        body,
      ].join('\r\n');
    const final = (m: SipMessage): boolean => m.kind === 'response' && m.status >= 200 && getHeader(m, 'call-id') === callId;
    this.send(build(1, null));
    let res = (await this.next(final)) as SipResponse;
    if (method === 'INVITE') this.ackNon2xx(res, target, callId, tag, 1);
    if (res.status === 407) {
      const challenge = getHeaders(res, 'proxy-authenticate')[0];
      this.send(build(2, authorize(challenge, { user: this.user, password: this.password, method, uri: target })));
      res = (await this.next(final, 15_000)) as SipResponse;
      if (method === 'INVITE') this.ackNon2xx(res, target, callId, tag, 2);
    }
    if (method === 'INVITE' && res.status === 200) {
      const dialog = new TestDialog(this, res, callId, tag);
      dialog.send('ACK', 2);
      if (opts.keep) this.lastDialog = dialog;
      else await dialog.bye();
    }
    return res;
  }

  private ackNon2xx(res: SipResponse, target: string, callId: string, tag: string, cseq: number): void {
    if (res.status < 300) return;
    // RFC 3261 §17.1.1.3: same branch as the INVITE — recovered from the response's Via.
    const via = getListValues(res, 'via')[0];
    this.send(
      [
        `ACK ${target} SIP/2.0`,
        `Via: ${via.replace(/;received=[^;]*/, '').replace(/;rport=\d+/, ';rport')}`,
        'Max-Forwards: 70',
        `From: <${this.aor}>;tag=${tag}`,
        `To: ${getHeader(res, 'to')}`,
        `Call-ID: ${callId}`,
        `CSeq: ${cseq} ACK`,
        'Content-Length: 0',
        '',
        '',
      ].join('\r\n'),
    );
  }
}

/** The caller's side of an answered call: route set from the 200's Record-Route, reversed (RFC 3261 §12.1.2). */
export class TestDialog {
  private readonly routes: string[];
  private readonly target: string;

  constructor(
    private readonly ua: TestUa,
    private readonly ok: SipResponse,
    private readonly callId: string,
    private readonly tag: string,
  ) {
    this.routes = getListValues(ok, 'record-route').reverse();
    this.target = parseNameAddr(getHeader(ok, 'contact') ?? '')?.uri.raw ?? '';
  }

  send(method: string, cseq: number, body?: { type: string; text: string }): void {
    const ua = this.ua;
    this.ua.send(
      [
        `${method} ${this.target} SIP/2.0`,
        `Via: SIP/2.0/UDP ${ua.local}:${ua.port};branch=z9hG4bK${randomBytes(6).toString('hex')};rport`,
        'Max-Forwards: 70',
        ...this.routes.map((r) => `Route: ${r}`),
        `From: <${ua.aor}>;tag=${this.tag}`,
        `To: ${getHeader(this.ok, 'to')}`,
        `Call-ID: ${this.callId}`,
        `CSeq: ${cseq} ${method}`,
        ...(method === 'INVITE' ? [`Contact: <sip:${ua.user}@${ua.local}:${ua.port}>`] : []),
        ...(body ? [`Content-Type: ${body.type}`] : []),
        `Content-Length: ${body ? Buffer.byteLength(body.text) : 0}`,
        '',
        body?.text ?? '',
      ].join('\r\n'),
    );
  }

  /** An in-dialog request (re-INVITE, UPDATE, MESSAGE …) and its final response; a 2xx to a re-INVITE is ACKed. */
  async request(method: string, cseq: number, body?: { type: string; text: string }): Promise<SipResponse> {
    const done = this.ua.next((m) => m.kind === 'response' && m.status >= 200 && getHeader(m, 'call-id') === this.callId && getHeader(m, 'cseq') === `${cseq} ${method}`);
    this.send(method, cseq, body);
    const res = (await done) as SipResponse;
    if (method === 'INVITE' && res.status < 300) this.send('ACK', cseq);
    return res;
  }

  async bye(): Promise<number> {
    const done = this.ua.next((m) => m.kind === 'response' && getHeader(m, 'call-id') === this.callId && /BYE/.test(getHeader(m, 'cseq') ?? ''));
    this.send('BYE', 3);
    return ((await done) as SipResponse).status;
  }
}

function hostOfTopVia(req: SipRequest): string | null {
  const v = getListValues(req, 'via')[0] ?? '';
  const received = /;received=([^;\s]+)/.exec(v)?.[1];
  const host = received ?? /^SIP\/2\.0\/\w+\s+([^:;\s]+)/i.exec(v.trim())?.[1];
  return host && /^\d+\.\d+\.\d+\.\d+$/.test(host) ? host : null;
}

function portOfTopVia(req: SipRequest): number {
  const v = getListValues(req, 'via')[0] ?? '';
  const rport = /;rport=(\d+)/.exec(v)?.[1];
  return Number(rport ?? /:(\d+)/.exec(v.split(/\s+/)[1] ?? '')?.[1] ?? 5060);
}

/** A minimal offer: audio, plus an active video stream when asked. */
export function sdp(port: number, video: boolean): string {
  const lines = ['v=0', `o=- ${port} 1 IN IP4 127.0.0.1`, 's=-', 'c=IN IP4 127.0.0.1', 't=0 0', `m=audio ${port + 2} RTP/AVP 0`, 'a=rtpmap:0 PCMU/8000'];
  if (video) lines.push(`m=video ${port + 4} RTP/AVP 96`, 'a=rtpmap:96 VP8/90000');
  return lines.join('\r\n') + '\r\n';
}
