/**
 * A real HTTPS callback receiver on loopback for the webhook tests: records every
 * request (method, URL, headers, body) and every TCP connection, and answers as told.
 */
import { createServer, type Server } from 'node:https';
import type { IncomingHttpHeaders, IncomingMessage, ServerResponse } from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ReceivedRequest {
  method: string;
  url: string;
  headers: IncomingHttpHeaders;
  body: string;
}

export interface HttpsReceiver {
  port: number;
  requests: ReceivedRequest[];
  /** TCP connections accepted (a refused callback must make none). */
  connections: number;
  close(): Promise<void>;
}

/** `answer` handles each request after its body was read; it must end the response (or never, to hang). */
export async function startHttpsReceiver(
  tls: { key: string; cert: string },
  answer: (req: ReceivedRequest, res: ServerResponse) => void,
  host = '127.0.0.1',
): Promise<HttpsReceiver> {
  const state = { requests: [] as ReceivedRequest[], connections: 0 };
  const server: Server = createServer(tls, (req: IncomingMessage, res: ServerResponse) => {
    let body = '';
    req.setEncoding('utf8');
    req.on('data', (c: string) => (body += c));
    req.on('end', () => {
      const r = { method: req.method ?? '', url: req.url ?? '', headers: req.headers, body };
      state.requests.push(r);
      answer(r, res);
    });
  });
  server.on('connection', () => state.connections++);
  await new Promise<void>((resolve) => server.listen(0, host, resolve));
  return {
    port: (server.address() as AddressInfo).port,
    get requests() {
      return state.requests;
    },
    get connections() {
      return state.connections;
    },
    close: () =>
      new Promise<void>((resolve) => {
        server.closeAllConnections();
        server.close(() => resolve());
      }),
  };
}
