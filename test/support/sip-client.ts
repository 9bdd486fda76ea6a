/**
 * A minimal SIP client for tests that need exact control of the bytes (WS/WSS
 * subprotocol checks, TLS, IPv6, retransmissions). Digest is computed here with
 * node:crypto directly, independently of src/auth, so the server is checked
 * against a second implementation. Real third-party clients (SIPp, sip.js) are
 * used elsewhere.
 */
import { createHash, randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import net from 'node:net';
import tls from 'node:tls';
import { WebSocket } from 'ws';

export interface Resp {
  status: number;
  reason: string;
  headers: Array<[string, string]>;
  raw: string;
  header(name: string): string | undefined;
  all(name: string): string[];
}

export function parseResponse(raw: string): Resp {
  const [head] = raw.split('\r\n\r\n');
  const lines = head.split('\r\n');
  const m = /^SIP\/2\.0 (\d{3}) (.*)$/.exec(lines[0]);
  if (!m) throw new Error(`not a SIP response: ${lines[0]}`);
  const headers: Array<[string, string]> = lines.slice(1).map((l) => {
    const i = l.indexOf(':');
    return [l.slice(0, i).trim().toLowerCase(), l.slice(i + 1).trim()];
  });
  return {
    status: Number(m[1]),
    reason: m[2],
    headers,
    raw,
    header: (n) => headers.find(([k]) => k === n.toLowerCase())?.[1],
    all: (n) => headers.filter(([k]) => k === n.toLowerCase()).map(([, v]) => v),
  };
}

export interface RegisterSpec {
  transport: 'UDP' | 'TCP' | 'TLS' | 'WS' | 'WSS';
  user: string;
  domain: string;
  viaHost: string;
  viaPort: number;
  callId: string;
  cseq: number;
  branch?: string;
  expires?: number | string | null;
  contacts?: string[];
  authorization?: string;
  userAgent?: string;
  extra?: string[];
}

export function registerMessage(s: RegisterSpec): string {
  const branch = s.branch ?? `z9hG4bK${randomBytes(6).toString('hex')}`;
  const contacts = s.contacts ?? [`<sip:${s.user}@${s.viaHost}:${s.viaPort};transport=${s.transport.toLowerCase()}>`];
  const lines = [
    `REGISTER sip:${s.domain} SIP/2.0`,
    `Via: SIP/2.0/${s.transport} ${s.viaHost}:${s.viaPort};branch=${branch};rport`,
    'Max-Forwards: 70',
    `From: <sip:${s.user}@${s.domain}>;tag=${s.callId.slice(0, 8)}`,
    `To: <sip:${s.user}@${s.domain}>`,
    `Call-ID: ${s.callId}`,
    `CSeq: ${s.cseq} REGISTER`,
    ...contacts.map((c) => `Contact: ${c}`),
    ...(s.expires === null || s.expires === undefined ? [] : [`Expires: ${s.expires}`]),
    ...(s.authorization ? [`Authorization: ${s.authorization}`] : []),
    `User-Agent: ${s.userAgent ?? 'sip-edge-test-client/1'}`,
    ...(s.extra ?? []),
    'Content-Length: 0',
  ];
  return lines.join('\r\n') + '\r\n\r\n';
}

function h(alg: string, s: string): string {
  return createHash(alg === 'SHA-256' ? 'sha256' : 'md5').update(s).digest('hex');
}

/** Answer one WWW-Authenticate challenge value (qop=auth) the RFC 7616 way. */
export function authorize(challenge: string, o: { user: string; password: string; method: string; uri: string; nc?: number }): string {
  const p = (k: string): string => {
    const m = new RegExp(`${k}="?([^",]+)"?`, 'i').exec(challenge);
    return m ? m[1] : '';
  };
  const realm = p('realm');
  const nonce = p('nonce');
  const alg = p('algorithm') || 'MD5';
  const qop = 'auth';
  const nc = (o.nc ?? 1).toString(16).padStart(8, '0');
  const cnonce = randomBytes(8).toString('hex');
  const ha1 = h(alg, `${o.user}:${realm}:${o.password}`);
  const ha2 = h(alg, `${o.method}:${o.uri}`);
  const response = h(alg, `${ha1}:${nonce}:${nc}:${cnonce}:${qop}:${ha2}`);
  return `Digest username="${o.user}", realm="${realm}", nonce="${nonce}", uri="${o.uri}", response="${response}", algorithm=${alg}, qop=${qop}, nc=${nc}, cnonce="${cnonce}"`;
}

/** A connection that sends SIP text and yields each response. */
export interface SipConn {
  localPort: number;
  localHost: string;
  send(text: string): void;
  next(timeoutMs?: number): Promise<string>;
  close(): void;
}

class Inbox {
  private queue: string[] = [];
  private waiters: Array<(s: string) => void> = [];
  push(s: string): void {
    const w = this.waiters.shift();
    if (w) w(s);
    else this.queue.push(s);
  }
  next(timeoutMs = 3000): Promise<string> {
    const q = this.queue.shift();
    if (q !== undefined) return Promise.resolve(q);
    return new Promise((resolve, reject) => {
      const t = setTimeout(() => {
        this.waiters = this.waiters.filter((w) => w !== done);
        reject(new Error(`no SIP message within ${timeoutMs} ms`));
      }, timeoutMs);
      const done = (s: string): void => {
        clearTimeout(t);
        resolve(s);
      };
      this.waiters.push(done);
    });
  }
}

export async function udpConn(host: string, port: number): Promise<SipConn> {
  const family = host.includes(':') ? 'udp6' : 'udp4';
  const s = dgram.createSocket(family);
  const inbox = new Inbox();
  s.on('message', (m) => inbox.push(m.toString()));
  await new Promise<void>((r) => s.bind(0, host, () => r()));
  return {
    localPort: s.address().port,
    localHost: host,
    send: (t) => s.send(t, port, host),
    next: (ms) => inbox.next(ms),
    close: () => s.close(),
  };
}

/** TCP or TLS; splits the stream on Content-Length (responses here carry none or small bodies). */
export async function streamConn(host: string, port: number, useTls: boolean): Promise<SipConn & { raw: net.Socket }> {
  const sock: net.Socket = await new Promise((resolve, reject) => {
    const s = useTls
      ? tls.connect({ host, port, rejectUnauthorized: false }, () => resolve(s))
      : net.connect({ host, port }, () => resolve(s));
    s.once('error', reject);
  });
  const inbox = new Inbox();
  let buf = '';
  sock.on('data', (d: Buffer) => {
    buf += d.toString();
    for (;;) {
      // A CRLF keep-alive pong (RFC 5626 §4.4.1); responses never start with CRLF.
      if (buf.startsWith('\r\n')) {
        inbox.push('\r\n');
        buf = buf.slice(2);
        continue;
      }
      const end = buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const len = Number(/content-length:\s*(\d+)/i.exec(buf.slice(0, end))?.[1] ?? 0);
      if (buf.length < end + 4 + len) return;
      inbox.push(buf.slice(0, end + 4 + len));
      buf = buf.slice(end + 4 + len);
    }
  });
  sock.on('error', () => {});
  return {
    raw: sock,
    localPort: sock.localPort ?? 0,
    localHost: sock.localAddress ?? host,
    send: (t) => sock.write(t),
    next: (ms) => inbox.next(ms),
    close: () => sock.destroy(),
  };
}

export async function wsConn(url: string, protocols: string[] = ['sip']): Promise<SipConn & { ws: WebSocket }> {
  const ws = new WebSocket(url, protocols, { rejectUnauthorized: false });
  const inbox = new Inbox();
  ws.on('message', (d) => inbox.push(d.toString()));
  await new Promise<void>((resolve, reject) => {
    ws.once('open', () => resolve());
    ws.once('error', reject);
    ws.once('unexpected-response', (_req, res) => reject(new Error(`upgrade refused: ${res.statusCode}`)));
  });
  return {
    ws,
    localPort: 0,
    localHost: 'df7jal23ls0d.invalid',
    send: (t) => ws.send(t),
    next: (ms) => inbox.next(ms),
    close: () => ws.close(),
  };
}

/** REGISTER, answer the challenge, return the final response. */
export async function registerWithAuth(
  conn: SipConn,
  s: Omit<RegisterSpec, 'cseq' | 'authorization'> & { password: string; cseq?: number; algorithm?: 'MD5' | 'SHA-256' },
): Promise<{ first: Resp; final: Resp }> {
  const cseq = s.cseq ?? 1;
  conn.send(registerMessage({ ...s, cseq }));
  const first = parseResponse(await conn.next());
  if (first.status !== 401) return { first, final: first };
  const challenges = first.all('www-authenticate');
  const challenge = challenges.find((c) => c.includes(`algorithm=${s.algorithm ?? 'SHA-256'}`)) ?? challenges[0];
  const authorization = authorize(challenge, { user: s.user, password: s.password, method: 'REGISTER', uri: `sip:${s.domain}` });
  conn.send(registerMessage({ ...s, cseq: cseq + 1, authorization }));
  return { first, final: parseResponse(await conn.next()) };
}
