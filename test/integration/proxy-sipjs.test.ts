/**
 * WebSocket clients through the edge, with SIP.js (npm `sip.js`, the browser SIP
 * library) run in Node over `ws`: a SIP.js UA over WS calls a SIPp UAS on UDP
 * (set up and torn down; signalling only — a stand-in session description
 * handler provides the SDP, since Node has no WebRTC), a SIPp UAC on UDP calls a
 * SIP.js UA (reached over its WebSocket flow although its Contact host is
 * `.invalid`, BYE included), and two SIP.js UAs exchange MESSAGE.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import {
  Inviter,
  Messager,
  Registerer,
  SessionState,
  UserAgent,
  type Invitation,
  type Session,
  type SessionDescriptionHandler,
  type SessionDescriptionHandlerFactory,
} from 'sip.js';
import { TestUa, cidStr, sdp, sipp, sleep, startEdge, type Account, type Edge, type Endpoint } from '../support/proxy-harness.js';

/** Signalling only: a fixed audio offer/answer instead of WebRTC. */
class StaticSdp implements SessionDescriptionHandler {
  close(): void {}
  getDescription(): Promise<{ body: string; contentType: string }> {
    return Promise.resolve({ body: sdp(40000, false), contentType: 'application/sdp' });
  }
  hasDescription(contentType: string): boolean {
    return contentType === 'application/sdp';
  }
  setDescription(): Promise<void> {
    return Promise.resolve();
  }
  sendDtmf(): boolean {
    return false;
  }
}
const staticSdp: SessionDescriptionHandlerFactory = () => new StaticSdp();

/** Node 20 has no WebSocket global: SIP.js's transport constructs this one, subprotocol `sip`. */
class NodeWebSocket extends WebSocket {
  static readonly opened: NodeWebSocket[] = [];
  constructor(url: string | URL, protocols?: string | string[]) {
    super(url, protocols ?? 'sip');
    NodeWebSocket.opened.push(this);
  }
}

function waitState(s: Session, state: SessionState, timeoutMs = 10_000): Promise<void> {
  if (s.state === state) return Promise.resolve();
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`session did not reach ${state} (is ${s.state})`)), timeoutMs);
    s.stateChange.addListener((st) => {
      if (st === state) {
        clearTimeout(t);
        resolve();
      }
    });
  });
}

describe('SIP.js over WebSocket through the edge', () => {
  let edge: Edge;
  let account: Account;
  const agents: UserAgent[] = [];
  const saved = (globalThis as { WebSocket?: unknown }).WebSocket;
  let n = 0;

  beforeAll(async () => {
    (globalThis as { WebSocket?: unknown }).WebSocket = NodeWebSocket;
    edge = await startEdge({ SIP_TLS_PORT: 'off', SIP_WSS_PORT: 'off' });
    account = await edge.newAccount();
  });
  afterAll(async () => {
    // A UA whose socket was cut would wait on its transport to unregister: do not wait for it.
    await Promise.all(agents.map((ua) => Promise.race([ua.stop().catch(() => {}), sleep(1000)])));
    (globalThis as { WebSocket?: unknown }).WebSocket = saved;
    await edge?.stop();
  });

  /** A started, registered SIP.js UA for a new endpoint. */
  const agent = async (onInvite?: (i: Invitation) => void, onMessage?: (body: string) => void): Promise<{ ua: UserAgent; e: Endpoint }> => {
    const e = await edge.newEndpoint(account, `sipjs${++n}`);
    const ua = new UserAgent({
      uri: UserAgent.makeURI(`sip:${e.username}@${account.sipDomain}`),
      authorizationUsername: e.username,
      authorizationPassword: e.password,
      transportOptions: { server: `ws://127.0.0.1:${edge.server.ports.ws}` },
      sessionDescriptionHandlerFactory: staticSdp,
      logLevel: 'error',
      delegate: {
        onInvite,
        onMessage: (m) => {
          onMessage?.(m.request.body);
          void m.accept();
        },
      },
    });
    agents.push(ua);
    await ua.start();
    const registered = new Promise<void>((resolve, reject) => {
      void new Registerer(ua, { expires: 300 }).register({
        requestDelegate: { onAccept: () => resolve(), onReject: (r) => reject(new Error(`REGISTER: ${r.message.statusCode}`)) },
      });
    });
    await registered;
    return { ua, e };
  };

  it('a SIP.js UA over WS calls a SIPp UAS on UDP: 407, answer, ACK and BYE through the edge', async () => {
    const { ua } = await agent();
    const b = await edge.newEndpoint(account, `sippuas${++n}`);
    const cid = cidStr();
    const callee = sipp({ scenario: 'call-uas-answer.xml', port: edge.server.ports.udp as number, transport: 'udp', endpoint: b, cidStr: cid });
    await edge.waitBindings(b, 1);
    const inviter = new Inviter(ua, UserAgent.makeURI(`sip:${b.username}@${account.sipDomain}`) as NonNullable<ReturnType<typeof UserAgent.makeURI>>, {
      // The SIPp callee knows its call by Call-ID: the one of its REGISTER (-cid_str, call 1).
      // (sip.js passes params through to the outgoing request message, whose options include callId.)
      params: { callId: cid.replace('%u', '1') } as NonNullable<ConstructorParameters<typeof Inviter>[2]>['params'],
    });
    await inviter.invite();
    await waitState(inviter, SessionState.Established);
    await inviter.bye();
    await waitState(inviter, SessionState.Terminated);
    const run = await callee;
    expect(run.errors).toBe('');
    expect(run.code).toBe(0);
    expect(run.successful).toBe(1);
    // The INVITE reached the UDP callee with a WS-facing and a UDP-facing Record-Route.
    expect(run.messages).toMatch(/Record-Route: <sip:[^>]+;transport=udp;lr>(, |\r\nRecord-Route: )<sip:[^>]+;transport=ws;lr>/);
  });

  it('a SIPp UAC on UDP reaches a SIP.js UA over its WebSocket flow (Contact host .invalid), and its BYE does too', async () => {
    let session: Invitation | null = null;
    const { e } = await agent((inv) => {
      session = inv;
      void inv.accept();
    });
    const a = await edge.newEndpoint(account, `sippuac${++n}`);
    const run = await sipp({
      scenario: 'call-uac.xml',
      port: edge.server.ports.udp as number,
      transport: 'udp',
      endpoint: a,
      cidStr: cidStr(),
      keys: { callee: e.username },
      pauseMs: 300,
    });
    expect(run.errors).toBe('');
    expect(run.code).toBe(0);
    expect(run.successful).toBe(1);
    expect(session).not.toBeNull();
    await waitState(session as unknown as Invitation, SessionState.Terminated);
    // The 200 from the WS side came back with its .invalid Contact, unchanged.
    expect(run.messages).toMatch(/Contact: <sip:[^@]+@[a-z0-9]+\.invalid;transport=ws>/);
  });

  it('answers 430 Flow Failed to an in-dialog request for a WS client whose connection dropped (RFC 5626 §5.3)', async () => {
    const before = NodeWebSocket.opened.length;
    const { e } = await agent((inv) => void inv.accept());
    const socket = NodeWebSocket.opened[before];
    const caller = await edge.newEndpoint(account, `udpcaller${++n}`);
    const ua = await TestUa.start(edge.server.ports.udp as number, caller);
    try {
      expect((await ua.call('INVITE', `sip:${e.username}@${account.sipDomain}`, { keep: true })).status).toBe(200);
      socket.terminate();
      await sleep(100);
      expect(await ua.lastDialog!.bye()).toBe(430);
    } finally {
      ua.close();
    }
  });

  it('two SIP.js UAs over WS exchange MESSAGE', async () => {
    const got: string[] = [];
    const { ua: alice } = await agent();
    const { e: bob } = await agent(undefined, (body) => got.push(body));
    const accepted = new Promise<number>((resolve) => {
      void new Messager(alice, UserAgent.makeURI(`sip:${bob.username}@${account.sipDomain}`) as NonNullable<ReturnType<typeof UserAgent.makeURI>>, 'hello bob').message({
        requestDelegate: { onAccept: (r) => resolve(r.message.statusCode ?? 0), onReject: (r) => resolve(r.message.statusCode ?? 0) },
      });
    });
    expect(await accepted).toBe(200);
    for (let i = 0; i < 20 && got.length === 0; i++) await sleep(25);
    expect(got).toEqual(['hello bob']);
  });
});
