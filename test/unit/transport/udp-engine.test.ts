/**
 * Both UDP engines behind the Transport interface (docs/udp-engine.md): node:dgram and
 * the batched native engine (recvmmsg/sendmmsg addon), the latter where it is built.
 * Real sockets on loopback. The same cases run on each engine; the native-only cases
 * cover its counters and its send backlog (EAGAIN).
 */
import dgram from 'node:dgram';
import { afterEach, describe, expect, it } from 'vitest';
import { createLogger } from '../../../src/logger.js';
import { createUdpTransport, resolveUdpEngine, UdpTransport, type UdpEngine } from '../../../src/transport/udp.js';
import { loadNativeUdp, NativeUdpTransport } from '../../../src/transport/udp-native.js';
import type { Flow, MessageSink, Transport } from '../../../src/transport/types.js';
import { until } from '../../support/wait.js';

const log = createLogger('silent');
const native = loadNativeUdp();
/** The engines of this machine: node:dgram always, native where src/transport/native/build.mjs built it. */
export const UDP_ENGINES: UdpEngine[] = 'addon' in native ? ['dgram', 'native'] : ['dgram'];

function make(engine: UdpEngine, sink: MessageSink, host = '127.0.0.1', max = 65535): Transport & { readonly engine: UdpEngine } {
  const t = createUdpTransport(host, 0, sink, log, max, engine);
  expect(t.engine).toBe(engine);
  return t;
}

interface Got {
  data: Buffer;
  flow: Flow;
}

function collect(): MessageSink & { got: Got[] } {
  const got: Got[] = [];
  return { got, onMessage: (data, flow) => got.push({ data, flow }), onFlowClosed: () => {} };
}

async function client(type: 'udp4' | 'udp6' = 'udp4'): Promise<dgram.Socket & { inbox: Buffer[] }> {
  const c = dgram.createSocket(type) as dgram.Socket & { inbox: Buffer[] };
  c.inbox = [];
  c.on('message', (m) => c.inbox.push(m));
  await new Promise<void>((r) => c.bind(0, type === 'udp4' ? '127.0.0.1' : '::1', () => r()));
  return c;
}

describe('SIP_UDP_ENGINE', () => {
  it('dgram is always node:dgram; auto is native where it loads; native without the addon refuses to start', () => {
    expect(resolveUdpEngine('dgram', false)).toEqual({ engine: 'dgram', reason: null });
    const auto = resolveUdpEngine('auto', false);
    if ('addon' in native) {
      expect(auto).toEqual({ engine: 'native', reason: null });
      expect(resolveUdpEngine('native', false).engine).toBe('native');
    } else {
      expect(auto.engine).toBe('dgram');
      expect(auto.reason).toMatch(/native UDP engine is/);
      expect(() => resolveUdpEngine('native', false)).toThrow(/SIP_UDP_ENGINE=native/);
    }
  });
});

describe.each(UDP_ENGINES)('UDP engine %s', (engine) => {
  const open: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of open.splice(0).reverse()) await c();
  });

  it('delivers each datagram with its flow and answers to the source', async () => {
    const s = collect();
    const t = make(engine, s);
    const bound = await t.start();
    open.push(() => t.stop());
    const c = await client();
    open.push(() => c.close());
    for (let i = 0; i < 3; i++) c.send(`hello ${i}`, bound.port, '127.0.0.1');
    await until('3 datagrams', () => (s.got.length >= 3 ? true : undefined));
    expect(s.got.map((g) => g.data.toString())).toEqual(['hello 0', 'hello 1', 'hello 2']);
    const f = s.got[0]!.flow;
    expect(f).toEqual({ transport: 'udp', remoteAddress: '127.0.0.1', remotePort: c.address().port, localAddress: '127.0.0.1', localPort: bound.port, connId: null });
    for (const g of s.got) expect(t.send(g.flow, Buffer.from(`re ${g.data.toString()}`))).toBe(true);
    await until('3 replies', () => (c.inbox.length >= 3 ? true : undefined));
    expect(c.inbox.map((b) => b.toString())).toEqual(['re hello 0', 're hello 1', 're hello 2']);
  });

  it('a datagram kept by the sink is not overwritten by later ones', async () => {
    const s = collect();
    const t = make(engine, s);
    const bound = await t.start();
    open.push(() => t.stop());
    const c = await client();
    open.push(() => c.close());
    for (let i = 0; i < 200; i++) c.send(`message number ${i}`, bound.port, '127.0.0.1');
    await until('200 datagrams', () => (s.got.length >= 200 ? true : undefined));
    s.got.forEach((g, i) => expect(g.data.toString()).toBe(`message number ${i}`));
  });

  it('drops datagrams larger than SIP_MAX_MESSAGE_SIZE and empty ones', async () => {
    const s = collect();
    const t = make(engine, s, '127.0.0.1', 1024);
    const bound = await t.start();
    open.push(() => t.stop());
    const c = await client();
    open.push(() => c.close());
    c.send(Buffer.alloc(2000, 'x'), bound.port, '127.0.0.1');
    c.send(Buffer.alloc(0), bound.port, '127.0.0.1');
    c.send(Buffer.alloc(1024, 'y'), bound.port, '127.0.0.1');
    c.send('after', bound.port, '127.0.0.1');
    await until('the last datagram', () => (s.got.some((g) => g.data.toString() === 'after') ? true : undefined));
    expect(s.got.map((g) => g.data.length)).toEqual([1024, 5]);
    if (t instanceof NativeUdpTransport) expect(t.stats().truncated).toBe(1);
  });

  it('dual stack (::): an IPv4 peer reads as plain IPv4 and is answered; an IPv6 peer as IPv6', async () => {
    const s = collect();
    const t = make(engine, s, '::');
    const bound = await t.start();
    open.push(() => t.stop());
    const c4 = await client('udp4');
    const c6 = await client('udp6');
    open.push(() => c4.close(), () => c6.close());
    c4.send('v4', bound.port, '127.0.0.1');
    await until('v4', () => (s.got.length >= 1 ? true : undefined));
    c6.send('v6', bound.port, '::1');
    await until('v6', () => (s.got.length >= 2 ? true : undefined));
    expect(s.got[0]!.flow.remoteAddress).toBe('127.0.0.1');
    expect(s.got[1]!.flow.remoteAddress).toBe('::1');
    expect(s.got[1]!.flow.remotePort).toBe(c6.address().port);
    t.send(s.got[0]!.flow, Buffer.from('to v4'));
    t.send(s.got[1]!.flow, Buffer.from('to v6'));
    await until('both replies', () => (c4.inbox.length >= 1 && c6.inbox.length >= 1 ? true : undefined));
    expect(c4.inbox[0]!.toString()).toBe('to v4');
    expect(c6.inbox[0]!.toString()).toBe('to v6');
  });

  it('sends to a host name (looked up, as node:dgram does)', async () => {
    const t = make(engine, collect());
    await t.start();
    open.push(() => t.stop());
    const c = await client();
    open.push(() => c.close());
    const flow: Flow = { transport: 'udp', remoteAddress: 'localhost', remotePort: c.address().port, localAddress: '', localPort: 0, connId: null };
    t.send(flow, Buffer.from('by name'));
    await until('the datagram', () => (c.inbox.length >= 1 ? true : undefined));
    expect(c.inbox[0]!.toString()).toBe('by name');
  });

  it('a second server on the same port fails with EADDRINUSE; send after stop is refused', async () => {
    const t = make(engine, collect());
    const bound = await t.start();
    const t2 = createUdpTransport('127.0.0.1', bound.port, collect(), log, 65535, engine);
    await expect(t2.start()).rejects.toMatchObject({ code: 'EADDRINUSE' });
    await t.stop();
    const flow: Flow = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: 9, localAddress: '', localPort: 0, connId: null };
    expect(t.send(flow, Buffer.from('x'))).toBe(false);
  });

  it('20,000 datagrams from 4 sources: each delivered once, each answered once (a window of 256 in flight)', async () => {
    const s: MessageSink & { n: number; seen: Set<string> } = {
      n: 0,
      seen: new Set(),
      onMessage(data, flow) {
        this.n++;
        this.seen.add(data.toString());
        t.send(flow, data);
      },
      onFlowClosed: () => {},
    };
    const t = make(engine, s);
    const bound = await t.start();
    open.push(() => t.stop());
    const PER = 5000;
    const clients = await Promise.all([client(), client(), client(), client()]);
    open.push(...clients.map((c) => () => c.close()));
    await Promise.all(
      clients.map(
        (c, k) =>
          new Promise<void>((resolve, reject) => {
            let sent = 0;
            let answered = 0;
            const timer = setTimeout(() => reject(new Error(`source ${k}: ${answered} of ${PER} answered`)), 20_000);
            const pump = (): void => {
              while (sent < PER && sent - answered < 256) c.send(`${k}:${sent++}`, bound.port, '127.0.0.1');
            };
            c.on('message', () => {
              answered++;
              if (answered === PER) {
                clearTimeout(timer);
                resolve();
              } else pump();
            });
            pump();
          }),
      ),
    );
    expect(s.n).toBe(4 * PER);
    expect(s.seen.size).toBe(4 * PER);
    for (const c of clients) {
      expect(c.inbox.length).toBe(PER);
      expect(new Set(c.inbox.map((b) => b.toString())).size).toBe(PER);
    }
  });
});

// Where the addon was not built (no C compiler at install), these cases are replaced by
// the fallback's own (below), so no case is skipped on either kind of machine.
if (!('addon' in native)) {
  describe('native engine not built on this machine', () => {
    it('auto falls back to node:dgram and says why once; native refuses to start, naming the reason', () => {
      expect(native).toHaveProperty('error');
      const lines: Array<Record<string, unknown>> = [];
      const logs = createLogger('info', { write: (l: string) => void lines.push(JSON.parse(l) as Record<string, unknown>) });
      expect(createUdpTransport('127.0.0.1', 0, collect(), logs, 65535, 'auto')).toBeInstanceOf(UdpTransport);
      expect(lines.filter((l) => l.udpEngine === 'dgram')).toHaveLength(1);
      expect(String(lines[0]?.msg)).toMatch(/^udp engine: node:dgram; the native UDP engine is /);
      expect(() => createUdpTransport('127.0.0.1', 0, collect(), logs, 65535, 'native')).toThrow(/SIP_UDP_ENGINE=native: the native UDP engine is /);
    });
  });
}

/** `describe` where the addon is built; elsewhere nothing is registered (the block above stands in). */
const whereBuilt = ('addon' in native ? describe : () => undefined) as (name: string, fn: () => void) => void;

whereBuilt('native engine only', () => {
  const open: Array<() => unknown> = [];
  afterEach(async () => {
    for (const c of open.splice(0).reverse()) await c();
  });

  it('replies queued in one tick leave with one sendmmsg; a wake-up is one call into JS', async () => {
    const s = collect();
    const t = make('native', s) as NativeUdpTransport;
    const bound = await t.start();
    open.push(() => t.stop());
    const c = await client();
    open.push(() => c.close());
    const flow: Flow = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: c.address().port, localAddress: '', localPort: 0, connId: null };
    const before = t.stats().sendmmsgCalls;
    for (let i = 0; i < 50; i++) t.send(flow, Buffer.from(`r${i}`));
    await until('50 replies', () => (c.inbox.length >= 50 ? true : undefined));
    expect(t.stats().sendmmsgCalls - before).toBe(1);
    expect(c.inbox.map((b) => b.toString())).toEqual(Array.from({ length: 50 }, (_, i) => `r${i}`));
    expect(t.stats().sent).toBe(50);
    for (let i = 0; i < 10; i++) c.send(`q${i}`, bound.port, '127.0.0.1');
    await until('10 datagrams', () => (s.got.length >= 10 ? true : undefined));
    const st = t.stats();
    expect(st.received).toBe(10);
    expect(st.batches).toBeLessThanOrEqual(10);
    expect(st.batches).toBeGreaterThanOrEqual(1);
  });

  it('EAGAIN: what the kernel does not take waits in the backlog, leaves in order when writable, later sends queue behind it', async () => {
    const t = make('native', collect()) as NativeUdpTransport;
    await t.start();
    open.push(() => t.stop());
    const c = await client();
    open.push(() => c.close());
    const flow: Flow = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: c.address().port, localAddress: '', localPort: 0, connId: null };
    t.failNextSends(1);
    for (let i = 0; i < 20; i++) t.send(flow, Buffer.from(`a${i}`));
    t.flush(); // the first sendmmsg meets EAGAIN: all 20 wait; the writable poll sends them
    expect(t.stats().queued).toBe(20);
    for (let i = 0; i < 5; i++) t.send(flow, Buffer.from(`b${i}`));
    await until('25 datagrams', () => (c.inbox.length >= 25 ? true : undefined));
    expect(c.inbox.map((b) => b.toString())).toEqual([...Array.from({ length: 20 }, (_, i) => `a${i}`), ...Array.from({ length: 5 }, (_, i) => `b${i}`)]);
    const st = t.stats();
    expect(st.backlog).toBe(0);
    expect(st.sent).toBe(25);
    expect(st.dropped).toBe(0);
  });

  it('SIP_UDP_SHED_AGE_MS: datagrams that waited longer unread are dropped before the sink and counted; fresh ones pass', async () => {
    const s = collect();
    const t = createUdpTransport('127.0.0.1', 0, s, log, 65535, 'native', 150) as NativeUdpTransport;
    const bound = await t.start();
    open.push(() => t.stop());
    const c = await client();
    open.push(() => c.close());
    await new Promise<void>((resolve) => {
      for (let i = 0; i < 5; i++) c.send(`old ${i}`, bound.port, '127.0.0.1', i === 4 ? () => {
        // The event loop is busy for 300 ms while the five wait in the socket.
        const end = Date.now() + 300;
        while (Date.now() < end);
        resolve();
      } : undefined);
    });
    for (let i = 0; i < 3; i++) c.send(`new ${i}`, bound.port, '127.0.0.1');
    await until('the fresh datagrams', () => (s.got.length >= 3 ? true : undefined));
    await new Promise((r) => setTimeout(r, 50));
    expect(s.got.map((g) => g.data.toString())).toEqual(['new 0', 'new 1', 'new 2']);
    expect(t.stats().shed).toBe(5);
  });

  it('auto with SIP_HOST a name (not an address) takes node:dgram, which looks it up; native refuses it', async () => {
    const t = createUdpTransport('localhost', 0, collect(), log, 65535, 'auto');
    expect(t).toBeInstanceOf(UdpTransport);
    await t.start();
    await t.stop();
    expect(() => createUdpTransport('localhost', 0, collect(), log, 65535, 'native')).toThrow(/SIP_HOST must be an IP address/);
  });

  it('SIP_UDP_ENGINE=dgram gives node:dgram even where the native engine is built', () => {
    expect(createUdpTransport('127.0.0.1', 0, collect(), log, 65535, 'dgram')).toBeInstanceOf(UdpTransport);
    expect(createUdpTransport('127.0.0.1', 0, collect(), log, 65535, 'auto')).toBeInstanceOf(NativeUdpTransport);
  });
});
