/**
 * A raw WebSocket phone for fleet tests: registers with a Contact of its own,
 * answers every request but ACK with 200 (echoing Via, From, To, Call-ID, CSeq and
 * Record-Route, with a Contact), and keeps every frame it received, so a test can
 * count on the wire what reached it.
 */
import type { Endpoint } from './edge.js';
import { randomBytes } from 'node:crypto';
import { authorize, parseResponse, registerWithAuth, wsConn, type Resp } from './sip-client.js';

export type WsPhone = Awaited<ReturnType<typeof wsPhone>>;

/** A raw WebSocket phone: registers with its own Contact, answers every request 200, keeps every frame. */
export async function wsPhone(url: string, e: Endpoint, label: string) {
  const conn = await wsConn(url);
  const frames: string[] = [];
  const contact = `<sip:${e.username}@${label}.invalid;transport=ws>`;
  const r = await registerWithAuth(conn, {
    transport: 'WS',
    user: e.username,
    domain: e.account.sipDomain,
    viaHost: `${label}.invalid`,
    viaPort: 0,
    callId: `${label}-${Date.now()}`,
    password: e.password,
    contacts: [contact],
    expires: 600,
  });
  const waiters: Array<{ match: (r: Resp) => boolean; resolve: (r: Resp) => void }> = [];
  conn.ws.on('message', (d) => {
    const text = d.toString();
    frames.push(text);
    if (text.startsWith('SIP/2.0 ')) {
      const res = parseResponse(text);
      const w = waiters.find((x) => x.match(res));
      if (w) {
        waiters.splice(waiters.indexOf(w), 1);
        w.resolve(res);
      }
      return;
    }
    const m = /^([A-Z]+) sip/.exec(text);
    if (!m || m[1] === 'ACK') return;
    const keep = text.split('\r\n').filter((l) => /^(via|from|to|call-id|cseq|record-route):/i.test(l));
    const to = keep.findIndex((l) => /^to:/i.test(l));
    if (to >= 0 && !/;tag=/.test(keep[to] as string)) keep[to] += `;tag=${label}`;
    conn.ws.send(['SIP/2.0 200 OK', ...keep, `Contact: ${contact}`, 'Content-Length: 0', '', ''].join('\r\n'));
  });
  const count = (method: string): number => frames.filter((f) => f.startsWith(`${method} `)).length;
  const final = (callId: string, method: string): Promise<Resp> =>
    new Promise((resolve, reject) => {
      const t = setTimeout(() => reject(new Error(`${label}: no final response to ${method}`)), 10_000);
      waiters.push({
        match: (x) => x.status >= 200 && x.header('call-id') === callId && (x.header('cseq') ?? '').endsWith(method),
        resolve: (x) => {
          clearTimeout(t);
          resolve(x);
        },
      });
    });
  const send = (lines: string[], body = ''): void => {
    conn.ws.send([...lines, `Content-Length: ${Buffer.byteLength(body)}`, '', body].join('\r\n'));
  };
  /**
   * Places a call to `target` through the edge (answering a 407 once): INVITE, the
   * 200, ACK along the route set, BYE. Resolves with the INVITE's and the BYE's
   * final statuses.
   */
  async function call(target: string): Promise<{ invite: number; bye: number | null }> {
    const callId = `${label}-call-${randomBytes(6).toString('hex')}`;
    const tag = randomBytes(4).toString('hex');
    const body = 'v=0\r\no=- 1 1 IN IP4 192.0.2.1\r\ns=-\r\nc=IN IP4 192.0.2.1\r\nt=0 0\r\nm=audio 40000 RTP/AVP 0\r\n';
    const invite = (cseq: number, branch: string, auth: string | null): void =>
      send(
        [
          `INVITE ${target} SIP/2.0`,
          `Via: SIP/2.0/WS ${label}.invalid;branch=${branch}`,
          'Max-Forwards: 70',
          `From: <sip:${e.username}@${e.account.sipDomain}>;tag=${tag}`,
          `To: <${target}>`,
          `Call-ID: ${callId}`,
          `CSeq: ${cseq} INVITE`,
          `Contact: ${contact}`,
          ...(auth ? [`Proxy-Authorization: ${auth}`] : []),
          'Content-Type: application/sdp',
        ],
        body,
      );
    const ack = (cseq: number, branch: string, ruri: string, to: string, routes: string[]): void =>
      send([`ACK ${ruri} SIP/2.0`, `Via: SIP/2.0/WS ${label}.invalid;branch=${branch}`, 'Max-Forwards: 70', ...routes.map((x) => `Route: ${x}`), `From: <sip:${e.username}@${e.account.sipDomain}>;tag=${tag}`, `To: ${to}`, `Call-ID: ${callId}`, `CSeq: ${cseq} ACK`]);
    let branch = `z9hG4bK${randomBytes(6).toString('hex')}`;
    let res = final(callId, 'INVITE');
    invite(1, branch, null);
    let r = await res;
    if (r.status === 407) {
      ack(1, branch, target, r.header('to') ?? '', []);
      const auth = authorize(r.header('proxy-authenticate') ?? '', { user: e.username, password: e.password, method: 'INVITE', uri: target });
      branch = `z9hG4bK${randomBytes(6).toString('hex')}`;
      res = final(callId, 'INVITE');
      invite(2, branch, auth);
      r = await res;
    }
    if (r.status !== 200) return { invite: r.status, bye: null };
    const routes = r.all('record-route').reverse();
    const ruri = /<([^>]+)>/.exec(r.header('contact') ?? '')?.[1] ?? target;
    const to = r.header('to') ?? '';
    ack(2, `z9hG4bK${randomBytes(6).toString('hex')}`, ruri, to, routes);
    const byeDone = final(callId, 'BYE');
    send([`BYE ${ruri} SIP/2.0`, `Via: SIP/2.0/WS ${label}.invalid;branch=z9hG4bK${randomBytes(6).toString('hex')}`, 'Max-Forwards: 70', ...routes.map((x) => `Route: ${x}`), `From: <sip:${e.username}@${e.account.sipDomain}>;tag=${tag}`, `To: ${to}`, `Call-ID: ${callId}`, 'CSeq: 3 BYE']);
    return { invite: 200, bye: (await byeDone).status };
  }
  return { conn, frames, count, call, status: r.final.status };
}
