/**
 * Push across a fleet (RFC 8599, docs/push.md "Fleet"): two nodes (127.0.0.2 and .3, one
 * Redis). A phone registers over TCP with node .2 and sleeps; a call for it reaches node
 * .2, which pushes once; the phone registers again with node .3; node .3 tells node .2
 * (Redis pub/sub), whose held INVITE goes out through the fleet relay over the phone's
 * new connection on .3, and the call completes.
 */
import { randomBytes } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startApnsStub, type ApnsStub } from '../support/push-stubs.js';
import { Phone } from '../support/push-phone.js';
import { startEdge, TestUa, type Edge } from '../support/proxy-harness.js';
import { startRedis, type RedisServerHandle } from '../support/redis-server.mjs';
import { makeTestCa, type TestCa } from '../support/test-ca.js';

const HOSTS = ['127.0.0.2', '127.0.0.3'] as const;

describe('push on two nodes: INVITE at one, the new REGISTER at the other', () => {
  let ca: TestCa;
  let apns: ApnsStub;
  let redis: RedisServerHandle;
  const nodes: Edge[] = [];
  /** The phone of the first test, left registered (awake) with node .3. */
  let awake: { phone: Phone; n2: Edge } | null = null;

  beforeAll(async () => {
    ca = makeTestCa();
    apns = await startApnsStub(ca);
    redis = await startRedis();
    for (const host of HOSTS) {
      nodes.push(
        await startEdge({
          REDIS_URL: redis.url,
          SIP_HOST: host,
          NODE_ID: `p${host.slice(-1)}`,
          NONCE_SECRET: 'push-fleet-nonce-secret-0123456789ab',
          NODE_EXTRA_CA_CERTS: ca.caCertFile,
          APNS_URL: apns.url,
          APNS_KEY_FILE: apns.keyFile,
          APNS_KEY_ID: apns.keyId,
          APNS_TEAM_ID: apns.teamId,
          PUSH_WAIT: '2',
        }),
      );
    }
  }, 60_000);

  afterAll(async () => {
    for (const n of nodes) await n.stop();
    await redis?.stop();
    await apns?.close();
    ca?.remove();
  });

  it('the phone sleeps on .2, the INVITE at .2 pushes once, it registers with .3 and gets the call', async () => {
    const [n2, n3] = nodes as [Edge, Edge];
    const account = await n2.newAccount();
    const e = await n2.newEndpoint(account, 'mobile');
    const phone = new Phone(n2, e, 'apns', randomBytes(32).toString('hex'), 'ABCDE12345.com.example.phone.voip');
    expect((await phone.register(n2, HOSTS[0])).status).toBe(200);
    phone.sleep();
    await n2.waitForEndpoint(e, (v) => (v.sip_registrations as Array<{ push?: { asleep: boolean } }> | undefined)?.[0]?.push?.asleep === true);

    const caller = await n2.newEndpoint(account, 'caller');
    const ua = await TestUa.start(n2.server.ports.udp as number, caller);
    ua.edgeHost = HOSTS[0];
    try {
      expect(await ua.register()).toBe(200);
      const seen = apns.pushes.length;
      const call = ua.call('INVITE', `sip:mobile@${account.sipDomain}`);
      const push = await apns.next(seen, 5000);
      expect(push.token).toBe(phone.prid);
      expect(push.jwtOk).toBe(true);
      // The phone wakes and its REGISTER lands on the other node.
      expect((await phone.register(n3, HOSTS[1])).status).toBe(200);
      const answered = phone.answerCall(8000);
      expect((await call).status).toBe(200);
      const invite = await answered;
      expect(invite.method).toBe('INVITE');
      expect(apns.pushes.length - seen).toBe(1);
      awake = { phone, n2 };
    } finally {
      ua.close();
    }
  }, 20_000);

  it('node .3 dies (SIGKILL) with the phone connected: the survivor keeps its binding, asleep, instead of removing it', async () => {
    if (!awake) throw new Error('needs the first test');
    const { phone, n2 } = awake;
    const n3 = nodes[1] as Edge;
    const before = await n2.endpoint(phone.e);
    expect((before.sip_registrations as Array<{ push?: { asleep: boolean } }>)[0]?.push?.asleep).toBe(false);
    n3.server.child.kill('SIGKILL');
    // The reaper on .2 finds .3 silent after 5 s (docs/fleet.md).
    const v = await n2.waitForEndpoint(phone.e, (x) => (x.sip_registrations as Array<{ push?: { asleep: boolean } }> | undefined)?.[0]?.push?.asleep === true, 12_000);
    expect(v.sip_registered).toBe('true');
    phone.sleep();
  }, 20_000);
});
