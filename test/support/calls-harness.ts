/**
 * What the tests of placed calls share (calls-placed, calls-fleet, calls-recording): a UDP
 * socket standing for a phone's media address, and a SIPp phone registered with
 * register.xml then answering with a UAS scenario on the same port (SIPp maps messages to
 * calls by Call-ID, so one scenario cannot hold both the REGISTER and the edge's INVITE).
 */
import { createSocket, type Socket } from 'node:dgram';
import { expect } from 'vitest';
import type { Account, Edge, Endpoint } from './edge.js';
import { freePort } from './ports.mjs';
import { runSipp, type SippRun } from './sipp.js';

/** A phone's media address: the arrival time of every RTP packet (not RTCP) sent to it. */
export async function rtpSink(): Promise<{ port: number; times: number[]; socket: Socket }> {
  const socket = createSocket('udp4');
  const times: number[] = [];
  socket.on('message', (m) => {
    if (m.length >= 12 && (m[0] as number) >> 6 === 2 && !((m[1] as number) >= 200 && (m[1] as number) <= 204)) times.push(Date.now());
  });
  await new Promise<void>((r) => socket.bind(0, '127.0.0.1', r));
  return { port: socket.address().port, times, socket };
}

/**
 * A SIPp phone for endpoint `e` of `account`, registered through `edge` (UDP), then answering
 * `calls` calls with `scenario` (key `sink_port`: its SDP's media port; `pauseMs`: the
 * scenario's plain pauses). Resolves once the binding is live; `run` settles when SIPp exits.
 */
export async function registeredPhone(
  edge: Edge,
  account: Account,
  e: Endpoint,
  scenario: string,
  o: { sinkPort: number; calls?: number; pauseMs?: number; timeoutMs?: number },
): Promise<{ run: Promise<SippRun> }> {
  const localPort = await freePort();
  const mediaPort = await freePort();
  const users = [{ user: e.username, domain: account.sipDomain, password: e.password }];
  const port = edge.server.ports.udp as number;
  const reg = await runSipp({ scenario: 'register.xml', port, transport: 'udp', users, localPort, timeoutMs: 15_000 });
  expect(reg.code, reg.errors).toBe(0);
  const run = runSipp({
    scenario,
    port,
    transport: 'udp',
    users,
    calls: o.calls ?? 1,
    localPort,
    keys: { sink_port: o.sinkPort },
    pauseMs: o.pauseMs,
    recvTimeoutMs: null,
    traceMessages: true,
    timeoutMs: o.timeoutMs ?? 60_000,
    extraArgs: ['-mp', String(mediaPort)],
  });
  await edge.waitBindings(e, 1);
  return { run };
}
