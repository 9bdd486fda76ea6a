/**
 * A raw WebSocket phone for fleet tests: registers with a Contact of its own,
 * answers every request but ACK with 200 (echoing Via, From, To, Call-ID, CSeq and
 * Record-Route, with a Contact), and keeps every frame it received, so a test can
 * count on the wire what reached it.
 */
import type { Endpoint } from './edge.js';
import { registerWithAuth, wsConn } from './sip-client.js';

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
  conn.ws.on('message', (d) => {
    const text = d.toString();
    frames.push(text);
    const m = /^([A-Z]+) sip/.exec(text);
    if (!m || m[1] === 'ACK') return;
    const keep = text.split('\r\n').filter((l) => /^(via|from|to|call-id|cseq|record-route):/i.test(l));
    const to = keep.findIndex((l) => /^to:/i.test(l));
    if (to >= 0 && !/;tag=/.test(keep[to] as string)) keep[to] += `;tag=${label}`;
    conn.ws.send(['SIP/2.0 200 OK', ...keep, `Contact: ${contact}`, 'Content-Length: 0', '', ''].join('\r\n'));
  });
  const count = (method: string): number => frames.filter((f) => f.startsWith(`${method} `)).length;
  return { conn, frames, count, status: r.final.status };
}
