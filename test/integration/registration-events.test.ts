/**
 * The registration event stream (docs/events.md), end to end with SIPp phones:
 * an SSE client sees `registered` within 100 ms of the REGISTER's 200 (SIPp's own
 * receive timestamp), `expired` within 2 s of a 2 s binding's lapse with no
 * request sent, `removed` after a password change; it disconnects, things happen,
 * it reconnects with Last-Event-ID and gets exactly the missed events. On the
 * embedded store, and on Redis with the stream served by another node than the
 * one that took the REGISTERs.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startEdge, type Account, type Edge, type Endpoint } from '../support/edge.js';
import { runSipp } from '../support/sipp.js';
import { openEventStream, type SseEvent, type SseStream } from '../support/sse.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { until } from '../support/wait.js';

interface EventData {
  id: string;
  event: string;
  timestamp: string;
  endpoint_id: string | null;
  username: string;
  transport: string;
  sip_contact: string;
  received: string;
  sip_user_agent: string | null;
  expiry: string;
  instance: string | null;
  sip_registered: string;
}

const data = (e: SseEvent): EventData => JSON.parse(e.data) as EventData;

/** When SIPp received the (first) 200 OK, from its message trace (local time, µs). */
function sipp200At(messages: string): number {
  const m = /-{10,} (\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d\.\d{3})\d*\n\w+ message received \[\d+\] bytes :\n\nSIP\/2\.0 200 /.exec(messages);
  if (!m) throw new Error(`no 200 OK in SIPp's trace:\n${messages.slice(0, 2000)}`);
  return new Date(`${m[1]}T${m[2]}`).getTime();
}

const setups = [
  { name: 'embedded store, one node', redis: false },
  { name: 'Redis, the stream served by another node than the one that took the REGISTERs', redis: true },
];

describe.each(setups)('registration events over SSE: $name', ({ redis: withRedis }) => {
  let redis: RedisServerHandle | null = null;
  let sipNode: Edge;
  let apiNode: Edge;
  let a: Account;
  const streams: SseStream[] = [];

  beforeAll(async () => {
    const env: Record<string, string> = { SIP_MIN_EXPIRES: '1' };
    if (withRedis) {
      redis = await startRedis();
      env.REDIS_URL = redis.url;
    }
    sipNode = await startEdge(env);
    apiNode = withRedis ? await startEdge(env) : sipNode;
    a = await apiNode.newAccount();
  }, 60_000);
  afterAll(async () => {
    for (const s of streams) s.close();
    await sipNode?.stop();
    if (apiNode !== sipNode) await apiNode?.stop();
    await redis?.stop();
  });

  const url = (): string => `${apiNode.base}/api/v1/Account/${a.authId}/RegistrationEvent/`;
  const auth = (): Record<string, string> => ({ 'x-auth-id': a.authId, 'x-auth-token': a.authToken });
  const open = async (lastId?: string | null): Promise<SseStream> => {
    const s = await openEventStream(url(), auth(), lastId);
    streams.push(s);
    expect(s.status).toBe(200);
    expect(s.headers['content-type']).toMatch(/^text\/event-stream/);
    return s;
  };
  const register = async (e: Endpoint, expires: number, scenario = 'register.xml') => {
    const r = await runSipp({
      scenario,
      port: sipNode.server.ports.udp as number,
      transport: 'udp',
      users: [{ user: e.username, domain: a.sipDomain, password: e.password }],
      keys: { expires },
      traceMessages: true,
    });
    expect(r.failed, r.errors).toBe(0);
    expect(r.successful).toBe(1);
    return r;
  };
  const next = (s: SseStream, user: string, kind: string, timeoutMs = 5000): Promise<SseEvent> =>
    until(`${kind} of ${user}`, () => s.events.find((e) => e.event === kind && data(e).username === user), timeoutMs);

  it('registered within 100 ms of the 200, expired within 2 s of the lapse, removed after a password change', async () => {
    const alice = await apiNode.newEndpoint(a, 'alice');
    const bob = await apiNode.newEndpoint(a, 'bob');
    const s = await open();

    const r = await register(alice, 3600);
    const ok = sipp200At(r.messages);
    const reg = await next(s, 'alice', 'registered');
    const d = data(reg);
    console.log(`registered event ${reg.at - ok} ms after SIPp received the 200`);
    expect(reg.at - ok).toBeLessThan(100);
    expect(d).toMatchObject({ endpoint_id: alice.endpointId, username: 'alice', transport: 'udp', sip_registered: 'true', sip_user_agent: 'SIPp-alice' });
    expect(d.sip_contact).toMatch(/^sip:alice@127\.0\.0\.1:\d+/);
    expect(d.received).toMatch(/^sip:127\.0\.0\.1:\d+/);
    expect(reg.id).toBe(d.id);

    // A 2 s binding, then silence: the sweep reports it.
    const r2 = await register(bob, 2);
    const lapse = sipp200At(r2.messages) + 2000;
    const exp = await next(s, 'bob', 'expired', 6000);
    console.log(`expired event ${exp.at - lapse} ms after the binding lapsed`);
    expect(exp.at - lapse).toBeLessThan(2000);
    expect(exp.at).toBeGreaterThanOrEqual(lapse - 50);
    expect(data(exp)).toMatchObject({ username: 'bob', sip_registered: 'false', endpoint_id: bob.endpointId });

    await apiNode.updateEndpoint(alice, { password: 'a-brand-new-Secret-7' });
    const rm = await next(s, 'alice', 'removed');
    expect(data(rm)).toMatchObject({ username: 'alice', sip_registered: 'false' });
  }, 60_000);

  it('a client that reconnects with Last-Event-ID gets exactly the events it missed', async () => {
    const carol = await apiNode.newEndpoint(a, 'carol');
    const dave = await apiNode.newEndpoint(a, 'dave');
    const erin = await apiNode.newEndpoint(a, 'erin');
    const s = await open();
    await register(carol, 3600);
    await next(s, 'carol', 'registered');
    const seen = s.lastId;
    s.close();
    // While it is away: a registration and its refresh, a new registration, a registration and its removal (Expires: 0).
    await register(carol, 3600, 'register-refresh.xml');
    await register(dave, 3600);
    await register(erin, 3600, 'unregister.xml');
    // What the log holds after `seen`, as the JSON page gives it.
    const page = await fetch(`${url()}?after=${seen}`, { headers: auth() });
    expect(page.status).toBe(200);
    const missed = ((await page.json()) as { objects: EventData[] }).objects;
    expect(missed.map((e) => `${e.event}:${e.username}`)).toEqual(
      expect.arrayContaining(['registered:carol', 'refreshed:carol', 'registered:dave', 'registered:erin', 'unregistered:erin']),
    );
    const back = await open(seen);
    await until('the missed events', () => (back.events.length >= missed.length ? true : undefined), 5000);
    await new Promise((r) => setTimeout(r, 300));
    expect(back.events.map((e) => e.id)).toEqual(missed.map((e) => e.id));
    expect(back.events.map((e) => e.event)).toEqual(missed.map((e) => e.event));
  }, 60_000);

  it('a sub-account sees the events of its own endpoints only', async () => {
    const sr = await fetch(`${apiNode.base}/api/v1/Account/${a.authId}/Subaccount/`, {
      method: 'POST',
      headers: { ...auth(), 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'branch office', kyc_mode: 'customer_use' }),
    });
    expect(sr.status).toBe(201);
    const sub = (await sr.json()) as { auth_id: string; auth_token: string };
    const mine = await apiNode.newEndpoint(a, 'subphone', { sub_account: sub.auth_id });
    const theirs = await apiNode.newEndpoint(a, 'mainphone');
    await register(theirs, 3600);
    await register(mine, 3600);
    const subAuth = { 'x-auth-id': sub.auth_id, 'x-auth-token': sub.auth_token };
    const subUrl = `${apiNode.base}/api/v1/Account/${sub.auth_id}/RegistrationEvent/`;
    const page = (await (await fetch(`${subUrl}?limit=500`, { headers: subAuth })).json()) as { objects: EventData[] };
    expect(page.objects.map((e) => `${e.event}:${e.username}`)).toEqual(['registered:subphone']);
    // Another account's path: not found, as for every resource.
    expect((await fetch(url(), { headers: subAuth })).status).toBe(404);
  }, 30_000);

  it('the JSON page: after/limit, 400 on a bad id, 406 for other media types, 401 without credentials', async () => {
    const all = (await (await fetch(`${url()}?limit=500`, { headers: auth() })).json()) as { objects: EventData[]; meta: { next: string | null } };
    expect(all.objects.length).toBeGreaterThan(4);
    const two = (await (await fetch(`${url()}?limit=2`, { headers: auth() })).json()) as { objects: EventData[]; meta: { next: string | null } };
    expect(two.objects.map((e) => e.id)).toEqual(all.objects.slice(0, 2).map((e) => e.id));
    expect(two.meta.next).toBe(all.objects[1]?.id);
    const rest = (await (await fetch(`${url()}?limit=2&after=${two.meta.next}`, { headers: auth() })).json()) as { objects: EventData[] };
    expect(rest.objects.map((e) => e.id)).toEqual(all.objects.slice(2, 4).map((e) => e.id));
    expect((await fetch(`${url()}?after=nope`, { headers: auth() })).status).toBe(400);
    expect((await fetch(url(), { headers: { ...auth(), 'last-event-id': '12; DROP' } })).status).toBe(400);
    expect((await fetch(url(), { headers: { ...auth(), accept: 'text/html' } })).status).toBe(406);
    expect((await fetch(url())).status).toBe(401);
  });
});
