/**
 * A Server-Sent Events client for tests (WHATWG HTML §9.2 event stream format):
 * opens a stream with `Accept: text/event-stream` (and `Last-Event-ID` when
 * resuming), parses it, and records every event with the time it arrived.
 */
import http from 'node:http';

export interface SseEvent {
  id: string | null;
  event: string;
  data: string;
  /** Date.now() when the event's blank line arrived. */
  at: number;
}

export interface SseStream {
  status: number;
  headers: http.IncomingHttpHeaders;
  events: SseEvent[];
  /** Comment lines seen (heartbeats). */
  comments: string[];
  /** The id of the last event (what a client sends as Last-Event-ID). */
  lastId: string | null;
  closed: boolean;
  close(): void;
}

export function openEventStream(url: string, headers: Record<string, string>, lastEventId?: string | null): Promise<SseStream> {
  return new Promise((resolve, reject) => {
    const req = http.get(url, { headers: { accept: 'text/event-stream', ...headers, ...(lastEventId ? { 'last-event-id': lastEventId } : {}) } }, (res) => {
      const s: SseStream = {
        status: res.statusCode ?? 0,
        headers: res.headers,
        events: [],
        comments: [],
        lastId: lastEventId ?? null,
        closed: false,
        close: () => {
          s.closed = true;
          req.destroy();
        },
      };
      let buf = '';
      let cur: { id: string | null; event: string; data: string[] } = { id: null, event: 'message', data: [] };
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => {
        buf += chunk;
        let nl: number;
        while ((nl = buf.indexOf('\n')) >= 0) {
          const line = buf.slice(0, nl).replace(/\r$/, '');
          buf = buf.slice(nl + 1);
          if (line === '') {
            if (cur.id !== null) s.lastId = cur.id;
            if (cur.data.length > 0) s.events.push({ id: cur.id, event: cur.event, data: cur.data.join('\n'), at: Date.now() });
            cur = { id: null, event: 'message', data: [] };
            continue;
          }
          if (line.startsWith(':')) {
            s.comments.push(line.slice(1).trim());
            continue;
          }
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'id') cur.id = value;
          else if (field === 'event') cur.event = value;
          else if (field === 'data') cur.data.push(value);
        }
      });
      res.on('close', () => (s.closed = true));
      resolve(s);
    });
    req.on('error', (e) => reject(e));
  });
}
