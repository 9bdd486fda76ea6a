/**
 * The Endpoint policy flags (the interface specification's Endpoint) and the sub-account KYC
 * block, enforced by the edge on out-of-dialog requests: for each, the refused
 * case (403 with a Warning and a Reason naming the flag) and the allowed one
 * (the request reaches the callee, the gateway or the app server, and a 200
 * comes back). Endpoints, sub-accounts and applications are made over the HTTP
 * API of the real server; requests come from a small UDP user agent, so that
 * every header of the answer can be asserted.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getHeader } from '../../src/sip/headers.js';
import type { SipResponse } from '../../src/sip/message.js';
import { sdp, startEdge, TestDialog, TestUa, type Account, type Edge, type Endpoint, type Flags } from '../support/proxy-harness.js';

const NUMBER = '+14155550100';

describe('endpoint policy flags and the KYC block at the edge', () => {
  let edge: Edge;
  let account: Account;
  let other: Account;
  let gateway: TestUa;
  let appServer: TestUa;
  const uas: TestUa[] = [];
  let n = 0;

  beforeAll(async () => {
    gateway = await TestUa.start(0);
    appServer = await TestUa.start(0);
    edge = await startEdge({
      OUTBOUND_GATEWAY_URI: `sip:127.0.0.1:${gateway.port}`,
      APP_SERVER_URI: `sip:127.0.0.1:${appServer.port}`,
      SIP_TLS_PORT: 'off',
      SIP_WSS_PORT: 'off',
    });
    account = await edge.newAccount();
    other = await edge.newAccount();
  });
  afterAll(async () => {
    for (const u of uas) u.close();
    gateway?.close();
    appServer?.close();
    await edge?.stop();
  });

  /** A new endpoint with `flags`, and a user agent for it (registered when `register`). */
  const party = async (flags: Flags & { sub_account?: string } = {}, opts: { in?: Account; register?: boolean } = {}): Promise<{ e: Endpoint; ua: TestUa; uri: string }> => {
    const e = await edge.newEndpoint(opts.in ?? account, `pol${++n}`, flags);
    const ua = await TestUa.start(edge.server.ports.udp as number, e);
    uas.push(ua);
    if (opts.register !== false) expect(await ua.register()).toBe(200);
    return { e, ua, uri: `sip:${e.username}@${e.account.sipDomain}` };
  };

  /** 403 naming the flag in Warning and Reason. */
  const refused = (res: SipResponse, flag: string, party: 'caller' | 'callee'): void => {
    expect(res.status).toBe(403);
    if (flag === 'kyc_calls_blocked') expect(getHeader(res, 'warning')).toMatch(/^399 \S+ "kyc_calls_blocked/);
    else expect(getHeader(res, 'warning')).toBe(`399 sip-edge "${flag} is false for the ${party}"`);
    expect(getHeader(res, 'reason')).toBe(`SIP;cause=403;text="${flag}"`);
  };

  describe('allow_voice', () => {
    it('refuses an INVITE from a caller with allow_voice false, and to a callee with allow_voice false', async () => {
      const mute = await party({ allow_voice: false });
      const normal = await party();
      refused(await mute.ua.call('INVITE', normal.uri), 'allow_voice', 'caller');
      refused(await normal.ua.call('INVITE', mute.uri), 'allow_voice', 'callee');
      expect(mute.ua.requests).toHaveLength(0);
    });

    it('lets the call through once allow_voice is true (an editable flag)', async () => {
      const a = await party({ allow_voice: false });
      const b = await party();
      await edge.updateEndpoint(a.e, { allow_voice: true });
      expect((await a.ua.call('INVITE', b.uri)).status).toBe(200);
      expect(b.ua.requests.map((r) => r.method)).toEqual(['INVITE', 'BYE']);
    });
  });

  describe('allow_video', () => {
    it('refuses an offer with an active m=video line when the caller or the callee has allow_video false (the default)', async () => {
      const a = await party();
      const b = await party({ allow_video: true });
      refused(await a.ua.call('INVITE', b.uri, { video: true }), 'allow_video', 'caller');
      refused(await b.ua.call('INVITE', a.uri, { video: true }), 'allow_video', 'callee');
    });

    it('lets video through when both allow it, and audio-only offers through regardless', async () => {
      const a = await party({ allow_video: true });
      const b = await party({ allow_video: true });
      const c = await party();
      expect((await a.ua.call('INVITE', b.uri, { video: true })).status).toBe(200);
      expect(b.ua.requests[0].body.toString()).toMatch(/^m=video \d+ RTP\/AVP 96$/m);
      expect((await c.ua.call('INVITE', a.uri)).status).toBe(200);
    });
  });

  describe('allow_message', () => {
    it('refuses a MESSAGE from a caller with allow_message false, and to a callee with it false', async () => {
      const a = await party({ allow_message: false });
      const b = await party();
      refused(await a.ua.call('MESSAGE', b.uri), 'allow_message', 'caller');
      refused(await b.ua.call('MESSAGE', a.uri), 'allow_message', 'callee');
    });

    it('delivers a MESSAGE between endpoints that allow it, body unchanged', async () => {
      const a = await party();
      const b = await party();
      expect((await a.ua.call('MESSAGE', b.uri)).status).toBe(200);
      expect(b.ua.requests[0].method).toBe('MESSAGE');
      expect(b.ua.requests[0].body.toString()).toBe('hello');
    });
  });

  describe('allow_same_domain', () => {
    it('refuses a call within the account domain when the caller or the callee has allow_same_domain false', async () => {
      const a = await party({ allow_same_domain: false });
      const b = await party();
      refused(await a.ua.call('INVITE', b.uri), 'allow_same_domain', 'caller');
      refused(await b.ua.call('MESSAGE', a.uri), 'allow_same_domain', 'callee');
    });

    it('connects calls within the account domain by default', async () => {
      const a = await party();
      const b = await party();
      expect((await a.ua.call('INVITE', b.uri)).status).toBe(200);
    });
  });

  describe('allow_other_domains', () => {
    it('refuses a call to an endpoint of another account by default (false)', async () => {
      const a = await party();
      const b = await party({ allow_other_domains: true }, { in: other });
      refused(await a.ua.call('INVITE', b.uri), 'allow_other_domains', 'caller');
      const c = await party({ allow_other_domains: true });
      const d = await party({}, { in: other });
      refused(await c.ua.call('INVITE', d.uri), 'allow_other_domains', 'callee');
    });

    it('connects endpoints of different accounts when both allow other domains', async () => {
      const a = await party({ allow_other_domains: true });
      const b = await party({ allow_other_domains: true }, { in: other });
      expect((await a.ua.call('INVITE', b.uri)).status).toBe(200);
      expect(b.ua.requests[0].uri).toMatch(new RegExp(`^sip:${b.e.username}@127\\.0\\.0\\.1:${b.ua.port}$`));
    });
  });

  describe('allow_phones', () => {
    it('refuses a call to a telephone number when allow_phones is false', async () => {
      const a = await party({ allow_phones: false }, { register: false });
      refused(await a.ua.call('INVITE', `tel:${NUMBER}`), 'allow_phones', 'caller');
      refused(await a.ua.call('INVITE', `sip:${NUMBER}@${account.sipDomain}`), 'allow_phones', 'caller');
    });

    it('routes a number to the outbound gateway, with the account and the caller asserted', async () => {
      const a = await party({}, { register: false });
      const before = gateway.requests.length;
      expect((await a.ua.call('INVITE', `sip:+1-415-555-0100@${account.sipDomain}`)).status).toBe(200);
      const invite = gateway.requests[before];
      expect(invite.method).toBe('INVITE');
      expect(invite.uri).toBe(`sip:${NUMBER}@127.0.0.1:${gateway.port}`);
      expect(getHeader(invite, 'x-account-id')).toBe(account.authId);
      expect(getHeader(invite, 'p-asserted-identity')).toBe(`<${a.uri}>`);
      expect(getHeader(invite, 'proxy-authorization')).toBeUndefined();
      expect(gateway.requests[before + 1].method).toBe('BYE');
    });
  });

  describe('allow_apps', () => {
    it('refuses a call to an application of the account when allow_apps is false', async () => {
      const appId = await edge.newApplication(account);
      const a = await party({ allow_apps: false }, { register: false });
      refused(await a.ua.call('INVITE', `sip:${appId}@app.${account.sipDomain}`), 'allow_apps', 'caller');
    });

    it('routes a call to an application to the app server with its app_id', async () => {
      const appId = await edge.newApplication(account);
      const a = await party({}, { register: false });
      const before = appServer.requests.length;
      expect((await a.ua.call('INVITE', `sip:${appId}@app.${account.sipDomain}`)).status).toBe(200);
      const invite = appServer.requests[before];
      expect(invite.uri).toBe(`sip:${appId}@127.0.0.1:${appServer.port}`);
      expect(getHeader(invite, 'x-application-id')).toBe(appId);
      expect(getHeader(invite, 'x-account-id')).toBe(account.authId);
      // Another account's application is not reachable.
      const b = await party({}, { in: other, register: false });
      expect((await b.ua.call('INVITE', `sip:${appId}@app.${account.sipDomain}`)).status).toBe(404);
    });
  });

  describe('KYC block of customer_use sub-accounts', () => {
    it('refuses calls to phones from an endpoint of a customer_use sub-account whose KYC is pending', async () => {
      const sub = await edge.newSubAccount(account, 'customer_use');
      const a = await party({ sub_account: sub }, { register: false });
      refused(await a.ua.call('INVITE', `tel:${NUMBER}`), 'kyc_calls_blocked', 'caller');
      // Calls to endpoints are not calls to phones.
      const b = await party();
      expect((await a.ua.call('INVITE', b.uri)).status).toBe(200);
    });

    it('lets an endpoint of a personal_use sub-account call phones', async () => {
      const sub = await edge.newSubAccount(account, 'personal_use');
      const a = await party({ sub_account: sub }, { register: false });
      expect((await a.ua.call('INVITE', `tel:${NUMBER}`)).status).toBe(200);
    });
  });

  /** Sends a hand-made request; resolves with its final response. */
  const raw = async (ua: TestUa, lines: (callId: string) => string[]): Promise<SipResponse> => {
    const callId = `raw-${++n}-${Date.now()}`;
    const done = ua.next((m) => m.kind === 'response' && m.status >= 200 && getHeader(m, 'call-id') === callId);
    ua.send([...lines(callId), 'Content-Length: 0', '', ''].join('\r\n'));
    return (await done) as SipResponse;
  };
  const common = (ua: TestUa, callId: string, method: string, toTag = ''): string[] => [
    `Via: SIP/2.0/UDP 127.0.0.1:${ua.port};branch=z9hG4bK${callId};rport`,
    `From: <${ua.aor}>;tag=f${n}`,
    `To: <sip:x@${account.sipDomain}>${toTag}`,
    `Call-ID: ${callId}`,
    `CSeq: 1 ${method}`,
  ];

  describe('request checks (RFC 3261 §16.3, §16.4)', () => {
    it('answers 483 to Max-Forwards 0 and 420 with Unsupported to a Proxy-Require', async () => {
      const { ua } = await party({}, { register: false });
      const hops = await raw(ua, (cid) => [`INVITE sip:x@${account.sipDomain} SIP/2.0`, 'Max-Forwards: 0', ...common(ua, cid, 'INVITE')]);
      expect(hops.status).toBe(483);
      const ext = await raw(ua, (cid) => [`MESSAGE sip:x@${account.sipDomain} SIP/2.0`, 'Proxy-Require: foo', ...common(ua, cid, 'MESSAGE')]);
      expect(ext.status).toBe(420);
      expect(getHeader(ext, 'unsupported')).toBe('foo');
    });

    it('answers 481 to a BYE out of dialog and to a CANCEL that matches nothing, 405 to SUBSCRIBE', async () => {
      const { ua } = await party({}, { register: false });
      expect((await raw(ua, (cid) => [`BYE sip:x@${account.sipDomain} SIP/2.0`, ...common(ua, cid, 'BYE')])).status).toBe(481);
      expect((await raw(ua, (cid) => [`CANCEL sip:x@${account.sipDomain} SIP/2.0`, ...common(ua, cid, 'CANCEL')])).status).toBe(481);
      const sub = await raw(ua, (cid) => [`SUBSCRIBE sip:x@${account.sipDomain} SIP/2.0`, 'Event: presence', ...common(ua, cid, 'SUBSCRIBE')]);
      expect(sub.status).toBe(405);
      expect(getHeader(sub, 'allow')).toMatch(/INVITE/);
    });

    it('relays no in-dialog request without a valid flow token of this edge (404)', async () => {
      const { ua } = await party({}, { register: false });
      const port = edge.server.ports.udp as number;
      const plain = await raw(ua, (cid) => [`BYE sip:x@127.0.0.1:${ua.port} SIP/2.0`, ...common(ua, cid, 'BYE', ';tag=t1')]);
      expect(plain.status).toBe(404);
      const forged = Buffer.from(`udp||127.0.0.1|${ua.port}`).toString('base64url') + '.AAAAAAAAAAAA';
      const withRoute = await raw(ua, (cid) => [
        `BYE sip:x@127.0.0.1:${ua.port} SIP/2.0`,
        `Route: <sip:${forged}@127.0.0.1:${port};transport=udp;lr>`,
        ...common(ua, cid, 'BYE', ';tag=t1'),
      ]);
      expect(withRoute.status).toBe(404);
    });
  });

  describe('policy on every request of a dialog (issue 28 item 3)', () => {
    // An account of its own: these calls must not use up the shared account's cps_limit.
    let dialogs: Account;
    beforeAll(async () => {
      dialogs = await edge.newAccount();
    });
    const offer = (port: number, video: boolean) => ({ type: 'application/sdp', text: sdp(port, video) });

    it('applies a flag turned off during a call to the next re-INVITE and MESSAGE of either party; an audio re-INVITE and the BYE still pass', async () => {
      const a = await party({ allow_video: true }, { in: dialogs });
      const b = await party({ allow_video: true }, { in: dialogs });
      expect((await a.ua.call('INVITE', b.uri, { keep: true })).status).toBe(200);
      const dialog = a.ua.lastDialog as TestDialog;
      // Video while both allow it reaches the callee.
      expect((await dialog.request('INVITE', 10, offer(a.ua.port, true))).status).toBe(200);
      const reached = b.ua.requests.filter((r) => r.method === 'INVITE').length;
      expect(reached).toBe(2);
      await edge.updateEndpoint(b.e, { allow_video: false, allow_message: false });
      refused(await dialog.request('INVITE', 11, offer(a.ua.port, true)), 'allow_video', 'callee');
      refused(await dialog.request('UPDATE', 12, offer(a.ua.port, true)), 'allow_video', 'callee');
      refused(await dialog.request('MESSAGE', 13, { type: 'text/plain', text: 'hi' }), 'allow_message', 'callee');
      await edge.updateEndpoint(a.e, { allow_video: false });
      await edge.updateEndpoint(b.e, { allow_video: true });
      refused(await dialog.request('INVITE', 14, offer(a.ua.port, true)), 'allow_video', 'caller');
      // None of the refused requests reached the callee.
      expect(b.ua.requests.filter((r) => r.method === 'INVITE')).toHaveLength(reached);
      expect(b.ua.requests.some((r) => r.method === 'UPDATE' || r.method === 'MESSAGE')).toBe(false);
      expect((await dialog.request('INVITE', 15, offer(a.ua.port, false))).status).toBe(200);
      expect(await dialog.bye()).toBe(200);
    });

    it('refuses a re-INVITE from a party whose endpoint was deleted during the call, and lets its BYE through', async () => {
      const a = await party({}, { in: dialogs });
      const b = await party({}, { in: dialogs });
      expect((await a.ua.call('INVITE', b.uri, { keep: true })).status).toBe(200);
      const dialog = a.ua.lastDialog as TestDialog;
      const del = await fetch(`${edge.base}/api/v1/Account/${dialogs.authId}/Endpoint/${a.e.endpointId}/`, {
        method: 'DELETE',
        headers: { 'X-Auth-ID': dialogs.authId, 'X-Auth-Token': dialogs.authToken },
      });
      expect(del.status).toBe(204);
      const res = await dialog.request('INVITE', 10, offer(a.ua.port, false));
      expect(res.status).toBe(403);
      expect(getHeader(res, 'warning')).toBe('399 sip-edge "the caller\'s endpoint was removed"');
      expect(b.ua.requests.filter((r) => r.method === 'INVITE')).toHaveLength(1);
      expect(await dialog.bye()).toBe(200);
    });
  });

  describe('routing outcomes', () => {
    it('answers 404 for no such endpoint and 480 for an endpoint without a binding', async () => {
      const a = await party({}, { register: false });
      const absent = await party({}, { register: false });
      expect((await a.ua.call('INVITE', `sip:nobody@${account.sipDomain}`)).status).toBe(404);
      expect((await a.ua.call('MESSAGE', absent.uri)).status).toBe(480);
    });

    it('proxies an OPTIONS to a user (authenticated) and answers one to the server itself', async () => {
      const a = await party({}, { register: false });
      const b = await party();
      expect((await a.ua.call('OPTIONS', b.uri)).status).toBe(200);
      expect(b.ua.requests.map((r) => r.method)).toEqual(['OPTIONS']);
      const local = await raw(a.ua, (cid) => [`OPTIONS sip:${account.sipDomain} SIP/2.0`, ...common(a.ua, cid, 'OPTIONS')]);
      expect(local.status).toBe(200);
      expect(getHeader(local, 'allow')).toMatch(/INVITE.*MESSAGE/);
    });

    it('relays the callee\'s refusal (486) to the caller', async () => {
      const a = await party({}, { register: false });
      const b = await party();
      b.ua.answerStatus = 486;
      expect((await a.ua.call('INVITE', b.uri)).status).toBe(486);
    });
  });
});
