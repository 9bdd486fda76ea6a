/**
 * SIP.js (npm `sip.js`, the WebRTC browser SIP library) run in Node over the `ws`
 * package, against the real server over WS and WSS. Endpoints are created and read
 * back through the HTTP API, as an operator would.
 *
 * Node 20 has no global WebSocket: SIP.js's web transport gets one from `ws`. The
 * shim below keeps the `sip` subprotocol SIP.js asks for, trusts the server's
 * development certificate for WSS (no verification is switched off), and records
 * every frame so that tests can assert what went over the wire.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { Registerer, RegistererState, UserAgent, version as sipJsVersion } from 'sip.js';
import type { Core } from 'sip.js';
import { secondsUntil, startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';

interface Frame {
  dir: 'out' | 'in';
  text: string;
}

/** A `ws` WebSocket that SIP.js can construct as `new WebSocket(url, "sip")`. */
class RecordingWebSocket extends WebSocket {
  /** CA for wss:// — the server's self-signed development certificate. */
  static ca: string | undefined;
  static readonly opened: RecordingWebSocket[] = [];
  readonly frames: Frame[] = [];

  constructor(url: string | URL, protocols?: string | string[]) {
    super(url, protocols ?? 'sip', { ca: RecordingWebSocket.ca });
    RecordingWebSocket.opened.push(this);
    this.on('message', (data: WebSocket.RawData) => this.frames.push({ dir: 'in', text: data.toString() }));
  }

  override send(data: unknown, ...rest: unknown[]): void {
    this.frames.push({ dir: 'out', text: String(data) });
    (super.send as (...a: unknown[]) => void).call(this, data, ...rest);
  }

  /** SIP messages recorded so far (CRLF keep-alives left out). */
  messages(dir: Frame['dir']): string[] {
    return this.frames.filter((f) => f.dir === dir && f.text.trim() !== '').map((f) => f.text);
  }
}

const header = (msg: string, name: string): string[] =>
  msg
    .split('\r\n')
    .filter((l) => l.toLowerCase().startsWith(name.toLowerCase() + ':'))
    .map((l) => l.slice(name.length + 1).trim());
const status = (msg: string): number => Number(/^SIP\/2\.0 (\d{3})/.exec(msg)?.[1] ?? NaN);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

interface Client {
  ua: UserAgent;
  registerer: Registerer;
  socket: RecordingWebSocket;
  /** Silences SIP.js's error log (for a client whose socket a test cut on purpose). */
  quiet: boolean;
}

describe('SIP.js in Node over ws', () => {
  let edge: Edge;
  let account: Account;
  const clients: Client[] = [];
  const savedWebSocket = (globalThis as { WebSocket?: unknown }).WebSocket;

  beforeAll(async () => {
    edge = await startEdge();
    account = await edge.newAccount();
    RecordingWebSocket.ca = edge.devCertificate();
    (globalThis as { WebSocket?: unknown }).WebSocket = RecordingWebSocket;
  });
  afterAll(async () => {
    for (const c of clients) await c.ua.stop().catch(() => {});
    (globalThis as { WebSocket?: unknown }).WebSocket = savedWebSocket;
    await edge?.stop();
  });

  /** A started UserAgent (its WebSocket open) and a Registerer for `e`. */
  const connect = async (t: 'ws' | 'wss', e: Endpoint, opts: { password?: string; expires?: number } = {}): Promise<Client> => {
    const server = t === 'ws' ? `ws://127.0.0.1:${edge.server.ports.ws}` : `wss://127.0.0.1:${edge.server.ports.wss}`;
    const c = { quiet: false } as Client;
    const ua = new UserAgent({
      uri: UserAgent.makeURI(`sip:${e.username}@${e.account.sipDomain}`),
      authorizationUsername: e.username,
      authorizationPassword: opts.password ?? e.password,
      transportOptions: { server },
      logLevel: 'error',
      logBuiltinEnabled: false,
      logConnector: (level, category, _label, content) => {
        if (!c.quiet) console.error(`SIP.js ${level} ${category}: ${content}`);
      },
    });
    const before = RecordingWebSocket.opened.length;
    await ua.start();
    const socket = RecordingWebSocket.opened[before];
    const registerer = new Registerer(ua, { expires: opts.expires ?? 600, logConfiguration: false });
    c.ua = ua;
    c.registerer = registerer;
    c.socket = socket;
    clients.push(c);
    return c;
  };

  /** register() and wait for its final outcome: the response that ended it. */
  const register = (r: Registerer): Promise<{ accepted: boolean; response: Core.IncomingResponse }> =>
    new Promise((resolve, reject) => {
      r.register({
        requestDelegate: {
          onAccept: (response) => resolve({ accepted: true, response }),
          onReject: (response) => resolve({ accepted: false, response }),
        },
      }).catch(reject);
    });

  let n = 0;
  const newEndpoint = (): Promise<Endpoint> => edge.newEndpoint(account, `sipjs${++n}`);

  describe.each(['ws', 'wss'] as const)('over %s', (t) => {
    it('registers with digest auth: the endpoint reads sip_registered "true", SIP.js\'s User-Agent, and a received address with the transport', async () => {
      const e = await newEndpoint();
      const c = await connect(t, e);
      expect(c.socket.protocol).toBe('sip');

      const { accepted, response } = await register(c.registerer);
      expect(accepted).toBe(true);
      expect(response.message.statusCode).toBe(200);
      expect(c.registerer.state).toBe(RegistererState.Registered);

      // On the wire: unauthenticated REGISTER → 401 with an RFC 8760 SHA-256 challenge and an MD5 one;
      // SIP.js (MD5 only) answers the MD5 challenge.
      const [first, second] = c.socket.messages('out');
      const [challenge, ok] = c.socket.messages('in');
      expect(header(first, 'Authorization')).toEqual([]);
      expect(status(challenge)).toBe(401);
      expect(header(challenge, 'WWW-Authenticate').map((h) => /algorithm=([\w-]+)/.exec(h)?.[1])).toEqual(['SHA-256', 'MD5']);
      expect(header(second, 'Authorization')[0]).toMatch(/algorithm=MD5/);
      expect(status(ok)).toBe(200);

      const v = await edge.endpoint(e);
      expect(v.sip_registered).toBe('true');
      expect(v.sip_user_agent).toBe(`SIP.js/${sipJsVersion}`);
      expect(v.sip_registration?.received).toMatch(new RegExp(`^sip:127\\.0\\.0\\.1:\\d+;transport=${t}$`));
      expect(v.sip_registration?.contact).toMatch(/^sip:\w+@\w+\.invalid;transport=ws$/);
      expect(v.sip_registrations).toHaveLength(1);
      expect(v.sip_registrations[0].transport).toBe(t);
      expect(secondsUntil(v.sip_expires)).toBeGreaterThan(500);
      expect(secondsUntil(v.sip_expires)).toBeLessThanOrEqual(600);
    });

    it('re-registers on the same Call-ID with a higher CSeq: still one binding, its expiry renewed', async () => {
      const e = await newEndpoint();
      const c = await connect(t, e);
      expect((await register(c.registerer)).accepted).toBe(true);
      const before = await edge.endpoint(e);
      await sleep(20);

      const again = await register(c.registerer);
      expect(again.accepted).toBe(true);
      expect(c.registerer.state).toBe(RegistererState.Registered);
      const after = await edge.endpoint(e);
      expect(after.sip_registered).toBe('true');
      expect(after.sip_registrations).toHaveLength(1);
      expect(after.sip_registration?.contact).toBe(before.sip_registration?.contact);
      expect(Date.parse(after.sip_expires!)).toBeGreaterThan(Date.parse(before.sip_expires!));

      const registers = c.socket.messages('out').filter((m) => m.startsWith('REGISTER '));
      expect(new Set(registers.map((m) => header(m, 'Call-ID')[0])).size).toBe(1);
      const cseqs = registers.map((m) => parseInt(header(m, 'CSeq')[0], 10));
      expect(cseqs).toEqual([...cseqs].sort((a, b) => a - b));
      expect(new Set(cseqs).size).toBe(cseqs.length);
    });

    it('unregisters with Expires 0: the endpoint reads sip_registered "false" while the WebSocket stays open', async () => {
      const e = await newEndpoint();
      const c = await connect(t, e);
      expect((await register(c.registerer)).accepted).toBe(true);
      expect((await edge.endpoint(e)).sip_registered).toBe('true');

      const unregistered = new Promise<void>((resolve) =>
        c.registerer.stateChange.addListener((s) => s === RegistererState.Unregistered && resolve()),
      );
      await c.registerer.unregister();
      await unregistered;
      const last = c.socket.messages('out').filter((m) => m.startsWith('REGISTER ')).at(-1)!;
      expect(header(last, 'Contact')[0]).toMatch(/;expires=0\b/);
      expect(c.ua.isConnected()).toBe(true);
      const v = await edge.endpoint(e);
      expect(v.sip_registered).toBe('false');
      expect(v.sip_user_agent).toBeNull();
      expect(v.sip_registrations).toEqual([]);
    });

    it('refuses a wrong password with 401, and SIP.js reports the registration as failed', async () => {
      const e = await newEndpoint();
      const c = await connect(t, e, { password: 'not-the-password' });
      const states: RegistererState[] = [];
      c.registerer.stateChange.addListener((s) => states.push(s));

      const { accepted, response } = await register(c.registerer);
      expect(accepted).toBe(false);
      expect(response.message.statusCode).toBe(401);
      expect(c.registerer.state).toBe(RegistererState.Unregistered);
      expect(states).not.toContain(RegistererState.Registered);

      // SIP.js did answer the challenge: its second REGISTER carried credentials, and was refused.
      const registers = c.socket.messages('out').filter((m) => m.startsWith('REGISTER '));
      expect(registers).toHaveLength(2);
      expect(header(registers[1], 'Authorization')[0]).toMatch(/^Digest .*username="sipjs\d+"/);
      expect(c.socket.messages('in').map(status)).toEqual([401, 401]);

      const v = await edge.endpoint(e);
      expect(v.sip_registered).toBe('false');
      expect(v.sip_registrations).toEqual([]);
    });

    it('follows 423 Interval Too Brief: SIP.js retries with Min-Expires and the binding gets that expiry', async () => {
      const e = await newEndpoint();
      const c = await connect(t, e, { expires: 30 });
      const registered = new Promise<void>((resolve) =>
        c.registerer.stateChange.addListener((s) => s === RegistererState.Registered && resolve()),
      );
      await c.registerer.register();
      await registered;
      const codes = c.socket.messages('in').map(status);
      expect(codes).toContain(423);
      expect(codes.at(-1)).toBe(200);
      const brief = c.socket.messages('in').find((m) => status(m) === 423)!;
      expect(header(brief, 'Min-Expires')).toEqual(['60']);

      const v = await edge.endpoint(e);
      expect(v.sip_registered).toBe('true');
      expect(secondsUntil(v.sip_expires)).toBeGreaterThan(30);
      expect(secondsUntil(v.sip_expires)).toBeLessThanOrEqual(60);
    });

    it('drops the binding at once when the WebSocket closes without an unregister (the flow is gone)', async () => {
      const e = await newEndpoint();
      const c = await connect(t, e);
      expect((await register(c.registerer)).accepted).toBe(true);
      expect((await edge.endpoint(e)).sip_registered).toBe('true');

      c.quiet = true; // SIP.js will log the lost transport, and fail to unregister at the end
      c.socket.terminate(); // no REGISTER Expires 0, no close handshake: the TCP connection just goes
      const v = await edge.waitForEndpoint(e, (x) => x.sip_registered === 'false', 2000);
      expect(v.sip_registrations).toEqual([]);
    });
  });
});
