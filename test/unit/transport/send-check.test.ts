/**
 * A send goes out only on the connection the flow names — its id and its peer
 * address and port (docs/fleet.md "Identity"): a flow whose id matches but whose
 * peer does not (a stale binding's) is "flow gone", never written. Real sockets on
 * loopback, the real TCP and WS transports.
 */
import net from 'node:net';
import WebSocket from 'ws';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/logger.js';
import { StreamTransport } from '../../../src/transport/stream.js';
import { WsTransport } from '../../../src/transport/ws.js';
import { CONNECTION_ID_TAG, type Flow, type MessageSink, type Transport } from '../../../src/transport/types.js';
import { until } from '../../support/wait.js';

const log = createLogger('silent');
const OPTS = { host: '127.0.0.1', port: 0, maxMessageSize: 65535, idleTimeout: 30, maxConnections: 10 };
const OPTIONS = 'OPTIONS sip:x@127.0.0.1 SIP/2.0\r\nVia: SIP/2.0/TCP 127.0.0.1:1;branch=z9hG4bK1\r\nFrom: <sip:a@b>;tag=1\r\nTo: <sip:x@127.0.0.1>\r\nCall-ID: c1\r\nCSeq: 1 OPTIONS\r\nContent-Length: 0\r\n\r\n';

function sink(): MessageSink & { flows: Flow[] } {
  const flows: Flow[] = [];
  return { flows, onMessage: (_d, flow) => flows.push(flow), onFlowClosed: () => {} };
}


describe('send checks the connection is the one the flow names', () => {
  const open: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of open.splice(0)) await c();
  });

  for (const kind of ['tcp', 'ws'] as const) {
    it(`${kind}: same id and peer → written; same id, another peer port → refused; ids carry this start's tag`, async () => {
      const s = sink();
      const t: Transport = kind === 'tcp' ? new StreamTransport('tcp', OPTS, s, log) : new WsTransport('ws', { ...OPTS, allowedOrigins: [] }, s, log);
      const bound = await t.start();
      open.push(() => t.stop());
      const got: string[] = [];
      if (kind === 'tcp') {
        const c = net.connect(bound.port, '127.0.0.1');
        c.on('data', (d) => got.push(d.toString()));
        open.push(() => c.destroy());
        await new Promise((r) => c.once('connect', r));
        c.write(OPTIONS);
      } else {
        const c = new WebSocket(`ws://127.0.0.1:${bound.port}`, 'sip');
        c.on('message', (d) => got.push(d.toString()));
        open.push(() => c.close());
        await new Promise((r) => c.once('open', r));
        c.send(OPTIONS);
      }
      const flow = await until('a message on the connection', () => s.flows[0], 2000, 10);
      expect(flow.connId).toContain(`-${CONNECTION_ID_TAG}-`);
      expect(t.send(flow, Buffer.from('SIP/2.0 200 OK\r\n\r\n'))).toBe(true);
      expect(t.send({ ...flow, remotePort: flow.remotePort + 1 }, Buffer.from('SIP/2.0 999 Not For You\r\n\r\n'))).toBe(false);
      expect(t.send({ ...flow, remoteAddress: '127.0.0.9' }, Buffer.from('SIP/2.0 999 Not For You\r\n\r\n'))).toBe(false);
      await until('the 200 on the wire', () => (got.join('').includes('200 OK') ? true : undefined), 2000, 10);
      await new Promise((r) => setTimeout(r, 50));
      expect(got.join('')).not.toContain('Not For You');
    });
  }
});
