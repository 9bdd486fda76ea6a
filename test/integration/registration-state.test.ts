/**
 * Disabled means offline (issue 13, README "Disabled accounts"), on the real
 * server with a real UDP phone, on both stores: a REGISTER for an endpoint of a
 * disabled sub-account gets 403 and writes nothing; disabling unregisters its
 * devices at once; enabling lets them register again. Endpoints of the main
 * account are not touched.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { getHeader } from '../../src/sip/headers.js';
import type { SipResponse } from '../../src/sip/message.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { startEdge, TestUa, type Edge, type Endpoint } from '../support/proxy-harness.js';

describe.each(['memory', 'redis'] as const)('registration state: several devices, disabled sub-accounts (%s store)', (kind) => {
  let redis: RedisServerHandle | null = null;
  let edge: Edge;
  const uas: TestUa[] = [];

  beforeAll(async () => {
    if (kind === 'redis') redis = await startRedis();
    edge = await startEdge(redis ? { REDIS_URL: redis.url } : {});
  });
  afterAll(async () => {
    for (const ua of uas) ua.close();
    await edge?.stop();
    await redis?.stop();
  });

  const api = async (method: string, path: string, e: Endpoint, body?: unknown): Promise<{ status: number; json: Record<string, unknown> }> => {
    const headers: Record<string, string> = { accept: 'application/json', 'x-auth-id': e.account.authId, 'x-auth-token': e.account.authToken };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const res = await fetch(`http://127.0.0.1:${edge.server.ports.http}${path}`, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
    const text = await res.text();
    return { status: res.status, json: text ? (JSON.parse(text) as Record<string, unknown>) : {} };
  };
  const registered = async (e: Endpoint): Promise<string> =>
    String((await api('GET', `/api/v1/Account/${e.account.authId}/Endpoint/${e.endpointId}/`, e)).json.sip_registered);
  const phone = async (e: Endpoint): Promise<TestUa> => {
    const ua = await TestUa.start(edge.server.ports.udp as number, e);
    uas.push(ua);
    return ua;
  };

  it('two devices with Expires 300 and 60: sip_expires is the later expiry, contact the latest REGISTER', async () => {
    const a = await edge.newAccount();
    const alice = await edge.newEndpoint(a, 'alice');
    const desk = await phone(alice);
    desk.expires = 300;
    const mobile = await phone(alice);
    mobile.expires = 60;
    const t0 = Date.now();
    expect(await desk.register()).toBe(200);
    expect(await mobile.register()).toBe(200);
    const one = (await api('GET', `/api/v1/Account/${a.authId}/Endpoint/${alice.endpointId}/`, alice)).json;
    const listed = ((await api('GET', `/api/v1/Account/${a.authId}/Endpoint/?sip_registered=true`, alice)).json.objects as Array<Record<string, unknown>>)[0] ?? {};
    for (const view of [one, listed]) {
      expect(view.sip_registered).toBe('true');
      expect(Math.abs(Date.parse(String(view.sip_expires)) - (t0 + 300_000))).toBeLessThan(3000);
      expect(view.sip_contact).toBe(`127.0.0.1:${mobile.port}`);
    }
    expect((one.sip_registrations as unknown[]).length).toBe(2);
  });

  it('403 while disabled, bindings removed at disable, registering again after enable', async () => {
    const a = await edge.newAccount();
    const sub = await edge.newSubAccount(a, 'personal_use');
    const carol = await edge.newEndpoint(a, 'carol', { sub_account: sub });
    const dave = await edge.newEndpoint(a, 'dave');
    const carolPhone = await phone(carol);
    const davePhone = await phone(dave);
    expect(await carolPhone.register()).toBe(200);
    expect(await davePhone.register()).toBe(200);
    expect(await registered(carol)).toBe('true');

    const subPath = `/api/v1/Account/${a.authId}/Subaccount/${sub}/`;
    expect((await api('POST', subPath, carol, { enabled: false })).status).toBe(202);
    // Unregistered before the API answered; the main account's endpoint keeps its binding.
    expect(await registered(carol)).toBe('false');
    expect(await registered(dave)).toBe('true');

    // A REGISTER now: the right password, 403 with a reason, nothing written.
    const refused = await registerResponse(carolPhone);
    expect(refused.status).toBe(403);
    expect(getHeader(refused, 'warning') ?? '').toMatch(/disabled/);
    expect(await registered(carol)).toBe('false');

    // An endpoint created in the disabled sub-account is offline from the start.
    const erin = await edge.newEndpoint(a, 'erin', { sub_account: sub });
    expect(await (await phone(erin)).register()).toBe(403);
    expect(await registered(erin)).toBe('false');

    // A password change while disabled keeps it disabled.
    await edge.updateEndpoint(carol, { password: 'carol-New-Secret-9' });
    const carolNew = await phone({ ...carol, password: 'carol-New-Secret-9' });
    expect(await carolNew.register()).toBe(403);

    expect((await api('POST', subPath, carol, { enabled: true })).status).toBe(202);
    expect(await carolNew.register()).toBe(200);
    expect(await registered(carol)).toBe('true');
    expect(await (await phone(erin)).register()).toBe(200);
    expect(await registered(erin)).toBe('true');
    expect(await registered(dave)).toBe('true');
  });
});

/** One REGISTER of `ua` (its challenge answered), returning the final response itself. */
async function registerResponse(ua: TestUa): Promise<SipResponse> {
  await ua.register();
  const last = ua.responses[ua.responses.length - 1];
  if (!last) throw new Error('no response');
  return last;
}
