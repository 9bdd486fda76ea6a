/**
 * A mobile phone for the push tests (test/integration/push*.test.ts): registers over TCP with
 * RFC 8599 push parameters and a +sip.instance, sleeps (closes its connection), registers
 * again on a new connection (on any node), and answers the request it was woken for.
 */
import { randomBytes } from 'node:crypto';
import { getHeader, getHeaders } from '../../src/sip/headers.js';
import type { SipRequest } from '../../src/sip/message.js';
import { parseMessage } from '../../src/sip/parser.js';
import type { Edge, Endpoint } from './edge.js';
import { registerWithAuth, streamConn, type SipConn } from './sip-client.js';

/** A mobile phone over TCP: registers with push parameters, sleeps (closes), registers again, answers. */
export class Phone {
  conn: (SipConn & { raw: import('node:net').Socket }) | null = null;
  private cseq = 1;
  private registering = false;
  /** Requests that came before the 200 OK of a REGISTER. */
  readonly early: string[] = [];
  readonly callId = randomBytes(6).toString('hex');
  readonly instance = `<urn:uuid:${randomBytes(16).toString('hex').replace(/^(.{8})(.{4})(.{4})(.{4})/, '$1-$2-$3-$4-')}>`;
  constructor(
    private readonly edge: Edge,
    readonly e: Endpoint,
    readonly provider: 'apns' | 'fcm',
    readonly prid: string,
    readonly param: string,
  ) {}

  /** Registers over a new TCP connection to `edge` (another node of the fleet when given). */
  async register(edge: Edge = this.edge, host = '127.0.0.1'): Promise<{ status: number; featureCaps: string | undefined }> {
    const conn = await streamConn(host, edge.server.ports.tcp as number, false);
    this.conn = conn;
    const contact = `<sip:${this.e.username}@127.0.0.1:${conn.localPort};transport=tcp;pn-provider=${this.provider};pn-prid=${this.prid};pn-param=${this.param}>;+sip.instance="${this.instance}"`;
    // A request the edge sends on the new flow before the 200 OK is kept for answerCall.
    const next = conn.next.bind(conn);
    conn.next = async (ms?: number): Promise<string> => {
      for (;;) {
        const text = await next(ms);
        if (text.startsWith('SIP/2.0') || !this.registering) return text;
        this.early.push(text);
      }
    };
    this.registering = true;
    const r = await registerWithAuth(conn, {
      transport: 'TCP',
      user: this.e.username,
      domain: this.e.account.sipDomain,
      viaHost: '127.0.0.1',
      viaPort: conn.localPort,
      callId: this.callId,
      cseq: this.cseq,
      contacts: [contact],
      expires: 600,
      password: this.e.password,
      algorithm: 'MD5',
    });
    this.cseq += 2;
    this.registering = false;
    return { status: r.final.status, featureCaps: r.final.header('feature-caps') };
  }

  sleep(): void {
    this.conn?.close();
    this.conn = null;
  }

  /** Answers the next INVITE on the current connection (180, 200 with SDP), then 200s the BYE. */
  async answerCall(timeoutMs = 5000): Promise<SipRequest> {
    const conn = this.conn as SipConn;
    let invite: SipRequest | null = null;
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const text = this.early.shift() ?? (await conn.next(Math.max(100, deadline - Date.now())));
      if (text === '\r\n') continue;
      const p = parseMessage(Buffer.from(text));
      if (!p.ok || p.msg.kind !== 'request') continue;
      const req = p.msg;
      if (req.method === 'INVITE') {
        invite = req;
        conn.send(this.response(req, 180, 'Ringing', ''));
        conn.send(this.response(req, 200, 'OK', `v=0\r\no=- 1 1 IN IP4 127.0.0.1\r\ns=-\r\nc=IN IP4 127.0.0.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\na=rtpmap:0 PCMU/8000\r\n`));
      } else if (req.method === 'BYE') {
        conn.send(this.response(req, 200, 'OK', ''));
        if (!invite) throw new Error('BYE without INVITE');
        return invite;
      } else if (req.method === 'OPTIONS') {
        conn.send(this.response(req, 200, 'OK', ''));
      }
    }
  }

  private readonly tag = randomBytes(4).toString('hex');
  private response(req: SipRequest, status: number, reason: string, sdp: string): string {
    const to = getHeader(req, 'to') ?? '';
    return [
      `SIP/2.0 ${status} ${reason}`,
      ...getHeaders(req, 'via').map((v) => `Via: ${v}`),
      ...getHeaders(req, 'record-route').map((v) => `Record-Route: ${v}`),
      `From: ${getHeader(req, 'from')}`,
      `To: ${/;tag=/.test(to) ? to : `${to};tag=${this.tag}`}`,
      `Call-ID: ${getHeader(req, 'call-id')}`,
      `CSeq: ${getHeader(req, 'cseq')}`,
      `Contact: <sip:${this.e.username}@127.0.0.1:${this.conn?.localPort};transport=tcp>`,
      ...(sdp ? ['Content-Type: application/sdp'] : []),
      `Content-Length: ${Buffer.byteLength(sdp)}`,
      '',
      sdp,
    ].join('\r\n');
  }
}

