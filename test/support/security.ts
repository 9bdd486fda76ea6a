/**
 * Shared helpers of the hardening and operability tests: a UDP SIP client bound
 * to a chosen loopback address (127.0.0.2… act as distinct sources), a
 * REGISTER-with-digest round trip, and a /metrics reader.
 */
import { randomBytes } from 'node:crypto';
import dgram from 'node:dgram';
import { authorize, parseResponse, registerMessage, type Resp } from './sip-client.js';

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));
export const callId = (): string => randomBytes(8).toString('hex');

/** A UDP SIP client on `bindHost` that matches responses to requests by Call-ID. */
export interface UdpClient {
  readonly host: string;
  readonly port: number;
  send(text: string | Buffer): void;
  /** Send and wait for the response carrying this Call-ID. */
  request(text: string, callId: string, timeoutMs?: number): Promise<Resp>;
  /** Responses that matched no waiting request. */
  stray: number;
  close(): void;
}

export async function udpClient(bindHost: string, serverPort: number, serverHost = '127.0.0.1'): Promise<UdpClient> {
  const s = dgram.createSocket('udp4');
  const waiting = new Map<string, (r: Resp) => void>();
  const client = {
    host: bindHost,
    port: 0,
    stray: 0,
    send: (t: string | Buffer) => s.send(t, serverPort, serverHost),
    request(text: string, id: string, timeoutMs = 3000): Promise<Resp> {
      return new Promise<Resp>((resolve, reject) => {
        const t = setTimeout(() => {
          waiting.delete(id);
          reject(new Error(`no response for Call-ID ${id} within ${timeoutMs} ms`));
        }, timeoutMs);
        waiting.set(id, (r) => {
          clearTimeout(t);
          resolve(r);
        });
        s.send(text, serverPort, serverHost);
      });
    },
    close: () => s.close(),
  };
  s.on('message', (m) => {
    const text = m.toString();
    const id = /\r\nCall-ID:\s*([^\r\n]+)/i.exec(text)?.[1]?.trim();
    const w = id === undefined ? undefined : waiting.get(id);
    if (w && id !== undefined) {
      waiting.delete(id);
      w(parseResponse(text));
    } else client.stray++;
  });
  await new Promise<void>((r) => s.bind(0, bindHost, () => r()));
  client.port = s.address().port;
  return client;
}

export interface Endpoint {
  user: string;
  domain: string;
  password: string;
}

/** One REGISTER, challenged, answered with `password`; returns both responses. */
export async function register(
  c: UdpClient,
  e: Endpoint,
  password = e.password,
  opts: { expires?: number; contact?: string; timeoutMs?: number } = {},
): Promise<{ first: Resp; final: Resp }> {
  const id = callId();
  const base = {
    transport: 'UDP' as const,
    user: e.user,
    domain: e.domain,
    viaHost: c.host,
    viaPort: c.port,
    callId: id,
    expires: opts.expires ?? 300,
    contacts: [opts.contact ?? `<sip:${e.user}@${c.host}:${c.port}>`],
  };
  const first = await c.request(registerMessage({ ...base, cseq: 1 }), id);
  if (first.status !== 401) return { first, final: first };
  const challenge = first.all('www-authenticate').find((h) => h.includes('algorithm=MD5')) ?? first.all('www-authenticate')[0];
  const authorization = authorize(challenge, { user: e.user, password, method: 'REGISTER', uri: `sip:${e.domain}` });
  const final = await c.request(registerMessage({ ...base, cseq: 2, authorization }), id, opts.timeoutMs);
  return { first, final };
}

/** Prometheus text → { 'name{labels}': value }. */
export async function scrape(httpPort: number): Promise<Map<string, number>> {
  const res = await fetch(`http://127.0.0.1:${httpPort}/metrics`);
  const out = new Map<string, number>();
  for (const line of (await res.text()).split('\n')) {
    if (line === '' || line.startsWith('#')) continue;
    const sp = line.lastIndexOf(' ');
    out.set(line.slice(0, sp), Number(line.slice(sp + 1)));
  }
  return out;
}

/** One series' value (0 when absent): metric(m, 'sip_bans_total') or metric(m, 'x', { reason: 'rate' }). */
export function metric(m: Map<string, number>, name: string, labels: Record<string, string> = {}): number {
  const want = Object.entries(labels);
  let sum = 0;
  for (const [k, v] of m) {
    const brace = k.indexOf('{');
    const n = brace < 0 ? k : k.slice(0, brace);
    if (n !== name) continue;
    if (want.every(([lk, lv]) => k.includes(`${lk}="${lv}"`))) sum += v;
  }
  return sum;
}

export function options(host: string, port: number, id: string, transport = 'UDP'): string {
  return [
    'OPTIONS sip:127.0.0.1 SIP/2.0',
    `Via: SIP/2.0/${transport} ${host}:${port};branch=z9hG4bK${randomBytes(6).toString('hex')};rport`,
    'Max-Forwards: 70',
    'From: <sip:probe@127.0.0.1>;tag=p1',
    'To: <sip:127.0.0.1>',
    `Call-ID: ${id}`,
    'CSeq: 1 OPTIONS',
    'Content-Length: 0',
    '',
    '',
  ].join('\r\n');
}
