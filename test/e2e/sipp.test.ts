/**
 * SIPp (Debian `sip-tester`) drives every REGISTER case of the registrar over UDP and
 * TCP against the real server on its embedded store. Each endpoint is created through
 * the HTTP API (partner → account → endpoint), and each test asserts SIPp's exit status
 * and call counts, then reads the endpoint back through the API.
 *
 * Over TCP a binding lives as long as SIPp's connection (README, "Flows"): scenarios
 * that end in a live binding hold the call open for a moment (their final <pause/>, -d;
 * 2 s in stale-nonce-hold.xml, whose -d is the wait for the nonce to expire), so the
 * binding is read while the flow lives, and read again after SIPp has exited, when it
 * must be gone. Over UDP it stays.
 *
 * SIPp speaks MD5 only and reads only the first challenge; the server gives User-Agents
 * containing "sipp" an MD5 challenge alone (DIGEST_MD5_ONLY_USER_AGENTS default). The
 * Debian SIPp build has no TLS ("To use a TLS transport you must compile SIPp with
 * OpenSSL"): TLS is covered by test/e2e/softphone.test.ts (baresip).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runSipp, type SippRun } from '../support/sipp.js';
import { secondsUntil, startEdge, type Account, type Edge, type Endpoint, type EndpointView } from '../support/edge.js';
import { freePort } from '../support/ports.mjs';

type Transport = 'udp' | 'tcp';

/** Seconds a nonce is fresh on this server; the stale-nonce scenario waits longer. */
const NONCE_TTL_S = 5;
/**
 * How long a scenario's final plain <pause/> (-d) holds the call, and a TCP flow, after the last 200 OK:
 * long enough to read the binding over the API on a loaded machine.
 */
const HOLD_MS = 2000;

/**
 * SIPp's error log, less its "minor watchdog" notes: those say only that SIPp itself was not scheduled
 * for 500 ms (a busy machine), not that anything went wrong on the wire.
 */
function sippErrors(run: SippRun): string {
  return run.errors
    .replace(/\S+\t\S+\t\S+: Overload warning: the minor watchdog timer \d+ms has been tripped \(\d+\), \d+ trips remaining\.\n?/g, '')
    .replace(/^The following events occurred:\n?/, '')
    .trim();
}

describe('SIPp REGISTER cases against the server on its embedded store', () => {
  let edge: Edge;
  let account: Account;
  let n = 0;

  beforeAll(async () => {
    edge = await startEdge({ NONCE_TTL: String(NONCE_TTL_S) });
    account = await edge.newAccount();
  });
  afterAll(async () => {
    await edge?.stop();
  });

  const newEndpoint = (t: Transport): Promise<Endpoint> => edge.newEndpoint(account, `sipp${t}${++n}`);

  /** SIPp ran its one call to the end: exit status 0, 1 successful call, no errors. */
  const succeeded = (run: SippRun): void => {
    expect(sippErrors(run), run.stdout + run.stderr).toBe('');
    expect(run.code, run.stdout + run.stderr).toBe(0);
    expect(run.successful).toBe(1);
    expect(run.failed).toBe(0);
  };

  /**
   * Runs one scenario for endpoint `e` (its password, or `password`), reading the endpoint
   * over the API until `live` holds while SIPp runs. Resolves after SIPp exited, with the
   * view seen while it ran (if `live` was given) and the view afterwards.
   */
  const drive = async (
    t: Transport,
    e: Endpoint,
    scenario: string,
    o: { live?: (v: EndpointView) => boolean; pauseMs?: number; password?: string } = {},
  ): Promise<{ run: SippRun; during: EndpointView | null; after: EndpointView }> => {
    const running = runSipp({
      scenario,
      port: t === 'udp' ? edge.server.ports.udp! : edge.server.ports.tcp!,
      transport: t,
      users: [{ user: e.username, domain: e.account.sipDomain, password: o.password ?? e.password }],
      pauseMs: o.pauseMs ?? 0,
      timeoutMs: 30_000,
      // SIPp would take 5060 when free, where another suite's stale binding may still send requests.
      localPort: await freePort(),
    });
    let during: EndpointView | null = null;
    if (o.live) during = await edge.waitForEndpoint(e, o.live, 15_000);
    const run = await running;
    succeeded(run);
    // A TCP binding goes when SIPp's connection closes; give the close a moment to arrive.
    const after =
      t === 'tcp' ? await edge.waitForEndpoint(e, (v) => v.sip_registered === 'false', 5000) : await edge.endpoint(e);
    return { run, during, after };
  };

  const registered = (v: EndpointView): boolean => v.sip_registered === 'true';
  /** Over UDP the binding seen during the run is still there; over TCP it went with the flow. */
  const afterwards = (t: Transport, during: EndpointView | null, after: EndpointView): void => {
    if (t === 'udp') {
      expect(after.sip_registered).toBe('true');
      expect(after.sip_registrations).toEqual(during?.sip_registrations);
    } else {
      expect(after.sip_registered).toBe('false');
      expect(after.sip_registrations).toEqual([]);
    }
  };

  describe.each(['udp', 'tcp'] as const)('over %s', (t) => {
    const hold = t === 'tcp' ? HOLD_MS : 0;

    it('registers with digest auth (401, then credentials, then 200): the API shows the binding, SIPp\'s User-Agent and where it came from', async () => {
      const e = await newEndpoint(t);
      const started = Date.now();
      const { during, after } = await drive(t, e, 'register.xml', { live: registered, pauseMs: hold });
      expect(during!.sip_user_agent).toBe(`SIPp-${e.username}`);
      expect(during!.sip_registrations).toHaveLength(1);
      const [b] = during!.sip_registrations;
      expect(b.contact).toMatch(new RegExp(`^sip:${e.username}@127\\.0\\.0\\.1:\\d+;transport=${t}$`, 'i'));
      expect(b.received).toMatch(new RegExp(`^sip:127\\.0\\.0\\.1:\\d+;transport=${t}$`));
      expect(b.transport).toBe(t);
      expect(Date.parse(during!.sip_expires!)).toBeGreaterThanOrEqual(started + 3600_000 - 1000);
      expect(secondsUntil(during!.sip_expires)).toBeLessThanOrEqual(3600);
      afterwards(t, during, after);
    });

    it('refreshes on the same Call-ID with a higher CSeq: still one binding, expiry renewed', async () => {
      const e = await newEndpoint(t);
      const started = Date.now();
      // The refresh comes ≥ 200 ms (the scenario's pause) after the first registration: wait for the
      // expiry it sets, which the first registration's cannot reach.
      const renewed = (v: EndpointView): boolean => registered(v) && Date.parse(v.sip_expires!) >= started + 3600_000 + 200;
      const { during, after } = await drive(t, e, 'register-refresh-hold.xml', { live: renewed, pauseMs: hold });
      expect(during!.sip_registrations).toHaveLength(1);
      expect(secondsUntil(during!.sip_expires)).toBeLessThanOrEqual(3600);
      afterwards(t, during, after);
    });

    it('registers two contacts of one endpoint in one REGISTER, each with its own expiry', async () => {
      const e = await newEndpoint(t);
      const { during, after } = await drive(t, e, 'register-multi.xml', {
        live: (v) => v.sip_registrations.length === 2,
        pauseMs: hold,
      });
      const bindings = [...during!.sip_registrations].sort((a, b) => Date.parse(a.expires) - Date.parse(b.expires));
      expect(bindings[0].contact).toMatch(new RegExp(`^sip:${e.username}-2@127\\.0\\.0\\.1:\\d+;transport=${t}$`, 'i'));
      expect(secondsUntil(bindings[0].expires)).toBeGreaterThan(1700);
      expect(secondsUntil(bindings[0].expires)).toBeLessThanOrEqual(1800);
      expect(bindings[1].contact).toMatch(new RegExp(`^sip:${e.username}@127\\.0\\.0\\.1:\\d+;transport=${t}$`, 'i'));
      expect(secondsUntil(bindings[1].expires)).toBeGreaterThan(3500);
      expect(secondsUntil(bindings[1].expires)).toBeLessThanOrEqual(3600);
      afterwards(t, during, after);
    });

    it('removes one contact with Expires: 0 (the 200 OK lists none): the endpoint reads unregistered', async () => {
      const e = await newEndpoint(t);
      const { after } = await drive(t, e, 'unregister.xml');
      expect(after.sip_registered).toBe('false');
      expect(after.sip_registrations).toEqual([]);
    });

    it('removes every binding with Contact: * and Expires: 0: the endpoint reads unregistered', async () => {
      const e = await newEndpoint(t);
      const { after } = await drive(t, e, 'unregister-all.xml');
      expect(after.sip_registered).toBe('false');
      expect(after.sip_registrations).toEqual([]);
    });

    it('answers a too-brief Expires with 423 and Min-Expires; the retry registers for that minimum', async () => {
      const e = await newEndpoint(t);
      const { during, after } = await drive(t, e, 'interval-too-brief-hold.xml', { live: registered, pauseMs: hold });
      expect(during!.sip_registrations).toHaveLength(1);
      expect(secondsUntil(during!.sip_expires)).toBeGreaterThan(30);
      expect(secondsUntil(during!.sip_expires)).toBeLessThanOrEqual(60);
      afterwards(t, during, after);
    });

    it('refuses a wrong password with a fresh 401 and stores nothing', async () => {
      const e = await newEndpoint(t);
      const { after } = await drive(t, e, 'wrong-password.xml', { password: 'not-the-password' });
      expect(after.sip_registered).toBe('false');
      expect(after.sip_registrations).toEqual([]);
    });
  });

  // Both transports at once: each waits out the nonce lifetime.
  describe('stale nonce', () => {
    it.concurrent.each(['udp', 'tcp'] as const)(
      'over %s: a refresh reusing an expired nonce gets 401 stale=true, and SIPp succeeds with the fresh nonce',
      async (t) => {
        const e = await newEndpoint(t);
        const pauseMs = (NONCE_TTL_S + 1) * 1000;
        const started = Date.now();
        const { during, after } = await drive(t, e, 'stale-nonce-hold.xml', {
          // The first registration is live during the pause too: wait for the binding the refresh
          // (after the pause, with the fresh nonce) wrote.
          live: (v) => registered(v) && Date.parse(v.sip_expires!) >= started + 3600_000 + pauseMs,
          pauseMs,
        });
        expect(during!.sip_registrations).toHaveLength(1);
        afterwards(t, during, after);
      },
      30_000,
    );
  });
});
