/**
 * The phone network's routing decisions (src/routing/pstn.ts) over stand-in lookups: which
 * number a carrier dialled and whether it routes, the caller ID of a call out, the gateways
 * a call tries, and the carrier's challenge answered.
 */
import { describe, expect, it } from 'vitest';
import type { AuthOutcome, RequestAuthenticator } from '../../../src/auth/authenticator.js';
import { computeHa1, verifyDigest } from '../../../src/auth/digest.js';
import { SipError } from '../../../src/errors.js';
import { createLogger } from '../../../src/logger.js';
import type { NumberLookup, NumberRoute } from '../../../src/numbers/lookup.js';
import { PstnRouting, type CarrierSource } from '../../../src/routing/pstn.js';
import { parseDigestCredentials } from '../../../src/sip/headers.js';
import type { SipRequest, SipResponse } from '../../../src/sip/message.js';
import type { AccountRecord } from '../../../src/store/directory/directory.js';
import type { TransactionLayer } from '../../../src/core/transaction-layer.js';
import { GatewayHealth } from '../../../src/trunks/gateways.js';
import type { GatewayView, TrunkLookup, TrunkView } from '../../../src/trunks/lookup.js';

const trunkView = (over: Partial<TrunkView> = {}): TrunkView => ({
  trunkId: 'T1',
  authId: 'MA1',
  name: 'carrier',
  trunkType: 'INBOUND',
  enabled: true,
  maxConcurrentCalls: 0,
  cpsLimit: 0,
  sipDomain: 't1.sip.test',
  ...over,
});
const route = (over: Partial<NumberRoute> = {}): NumberRoute => ({
  e164: '+918040000001',
  authId: 'MA1',
  subAccount: null,
  status: 'active',
  endpointId: 'E1',
  applicationId: null,
  trunkGroupId: null,
  ...over,
});
const account = { authId: 'MA1', country: 'IN' } as AccountRecord;

function routing(o: { routes?: NumberRoute[]; callerIds?: Record<string, string>; gateways?: GatewayView[]; acl?: TrunkView[]; auth?: AuthOutcome } = {}) {
  const numbers: NumberLookup = {
    route: async (e164) => o.routes?.find((r) => r.e164 === e164) ?? null,
    callerIdOf: async (_a, endpointId) => o.callerIds?.[endpointId] ?? null,
  };
  const trunks: TrunkLookup = {
    inboundByAddress: async () => o.acl ?? [],
    secretByUsername: async () => null,
    trunk: async (id) => (id === 'T1' ? trunkView() : null),
    outboundOf: async () => trunkView({ trunkType: 'OUTBOUND' }),
    gatewaysOf: async () => o.gateways ?? [],
    secretOf: async () => ({ trunkId: 'T1', authId: 'MA1', username: 'acme', ha1Md5: '', ha1Sha256: '', password: 'pw' }),
  };
  const health = new GatewayHealth({ layer: {} as TransactionLayer, intervalS: 30, fromHost: 'sip.test', log: createLogger('silent') });
  const carrierAuth: RequestAuthenticator = { authenticate: async () => o.auth ?? { ok: false, kind: 'challenge', headers: [['Proxy-Authenticate', 'Digest realm="sip.test"']], reason: 'no-credentials' } };
  return { pstn: new PstnRouting({ numbers, trunks, health, carrierAuth, sipDomain: 'sip.test' }), health };
}

const refusal = async (p: Promise<unknown>): Promise<{ status: number; code: string; warning?: string }> => {
  try {
    await p;
  } catch (e) {
    if (e instanceof SipError) return { status: e.status, code: e.code, warning: e.headers.find(([n]) => n === 'Warning')?.[1] };
    throw e;
  }
  throw new Error('not refused');
};
const req = (from: string): SipRequest => ({ kind: 'request', method: 'INVITE', uri: 'sip:+918040000001@edge', headers: [{ name: 'from', value: from }], body: Buffer.alloc(0) });

describe('PstnRouting: a carrier\'s call', () => {
  const carrier: CarrierSource = { trunk: trunkView(), how: 'acl', address: '192.0.2.9' };

  it('reads the dialled number from the Request-URI (national digits in the account\'s country) or the To', async () => {
    const { pstn } = routing({ routes: [route()] });
    expect((await pstn.inboundNumber(carrier, account, 'sip:08040000001@edge', undefined)).e164).toBe('+918040000001');
    expect((await pstn.inboundNumber(carrier, account, 'sip:edge', '<tel:+918040000001>')).e164).toBe('+918040000001');
  });

  it('refuses: 404 for a number of another account or none, 480 inactive or unrouted, 403 a disabled trunk — each saying which', async () => {
    const { pstn } = routing({ routes: [route(), route({ e164: '+918040000002', authId: 'MA2' }), route({ e164: '+918040000003', status: 'inactive' }), route({ e164: '+918040000004', endpointId: null })] });
    expect(await refusal(pstn.inboundNumber(carrier, account, 'sip:+918040000002@edge', undefined))).toMatchObject({ status: 404, code: 'ROUTE_UNKNOWN_NUMBER' });
    expect(await refusal(pstn.inboundNumber(carrier, account, 'sip:+918049999999@edge', undefined))).toMatchObject({ status: 404 });
    expect(await refusal(pstn.inboundNumber(carrier, account, 'sip:alice@edge', undefined))).toMatchObject({ status: 404 });
    expect(await refusal(pstn.inboundNumber(carrier, account, 'sip:+918040000003@edge', undefined))).toMatchObject({ status: 480, warning: expect.stringMatching(/inactive/) });
    expect(await refusal(pstn.inboundNumber(carrier, account, 'sip:+918040000004@edge', undefined))).toMatchObject({ status: 480, warning: expect.stringMatching(/no route/) });
    const off = { ...carrier, trunk: trunkView({ enabled: false }) };
    expect(await refusal(pstn.inboundNumber(off, account, 'sip:+918040000001@edge', undefined))).toMatchObject({ status: 403, warning: expect.stringMatching(/trunk T1 is disabled/) });
  });

  it('takes a source in an ACL as the trunk\'s whatever its From; an endpoint\'s From is not a carrier; anything else is challenged', async () => {
    expect(await routing({ acl: [trunkView()] }).pstn.carrierOf(req('<sip:+14155550100@carrier.example>;tag=1'), '<sip:+14155550100@carrier.example>;tag=1', '192.0.2.9')).toMatchObject({ how: 'acl' });
    const { pstn } = routing();
    expect(await pstn.carrierOf(req('<sip:alice@ma1.sip.test>;tag=1'), '<sip:alice@ma1.sip.test>;tag=1', '192.0.2.9')).toBeNull();
    expect(await refusal(pstn.carrierOf(req('<sip:+1415@carrier.example>;tag=1'), '<sip:+1415@carrier.example>;tag=1', '192.0.2.9'))).toMatchObject({ status: 407 });
    const authed = routing({ auth: { ok: true, user: 'acme', credential: { endpointId: 'trunk:T1', ha1Md5: '', ha1Sha256: '' } } });
    expect(await authed.pstn.carrierOf(req('<sip:+1415@carrier.example>;tag=1'), '<sip:+1415@carrier.example>;tag=1', '192.0.2.9')).toMatchObject({ how: 'digest', trunk: { trunkId: 'T1' } });
  });
});

describe('PstnRouting: a call out', () => {
  it('shows a number of the account as caller ID: the From\'s if owned and active, else the endpoint\'s; 403 without', async () => {
    const { pstn } = routing({ routes: [route(), route({ e164: '+918040000002', authId: 'MA2' }), route({ e164: '+918040000003', status: 'inactive' })], callerIds: { E1: '+918040000001' } });
    expect(await pstn.callerId(account, 'E2', '+918040000001')).toBe('+918040000001');
    expect(await pstn.callerId(account, 'E1', 'alice')).toBe('+918040000001');
    // Another account's number, or an inactive one, is not shown: the endpoint's own instead.
    expect(await pstn.callerId(account, 'E1', '+918040000002')).toBe('+918040000001');
    expect(await pstn.callerId(account, 'E1', '08040000003')).toBe('+918040000001');
    expect(await refusal(pstn.callerId(account, 'E2', '+918040000002'))).toMatchObject({ status: 403, code: 'ROUTE_NO_CALLER_ID' });
  });

  it('tries enabled gateways by priority, skips those down, and answers 503 when none is left', async () => {
    const gws: GatewayView[] = [
      { id: 'b', uri: 'sip:192.0.2.2:5070;transport=tcp', priority: 2, weight: 1, enabled: true },
      { id: 'a', uri: 'sip:192.0.2.1', priority: 1, weight: 1, enabled: true },
      { id: 'x', uri: 'sip:192.0.2.3', priority: 0, weight: 1, enabled: false },
    ];
    const { pstn, health } = routing({ gateways: gws });
    const trunk = trunkView({ trunkType: 'OUTBOUND' });
    const legs = await pstn.gatewayLegs(trunk, '+14155550100');
    expect(legs.map((l) => [l.uri, l.dest.transport, l.dest.port])).toEqual([
      ['sip:+14155550100@192.0.2.1', 'udp', 5060],
      ['sip:+14155550100@192.0.2.2:5070;transport=tcp', 'tcp', 5070],
    ]);
    pstn.gatewayFailed(legs[0]);
    expect((await pstn.gatewayLegs(trunk, '+14155550100')).map((l) => l.gateway)).toEqual(['sip:192.0.2.2:5070;transport=tcp']);
    health.failed('T1', 'sip:192.0.2.2:5070;transport=tcp');
    expect(await refusal(pstn.gatewayLegs(trunk, '+14155550100'))).toMatchObject({ status: 503, code: 'TRUNK_NO_GATEWAY' });
    health.stop();
  });

  it('answers a 407 with the trunk\'s credential (Proxy-Authorization) and a 401 with Authorization', async () => {
    const { pstn } = routing();
    for (const [status, header] of [
      [407, 'proxy-authenticate'],
      [401, 'www-authenticate'],
    ] as const) {
      const challenge = { kind: 'response', status, reason: 'x', headers: [{ name: header, value: 'Digest realm="carrier", nonce="n1", qop="auth"' }], body: Buffer.alloc(0) } as SipResponse;
      const answer = await pstn.challengeAnswer('T1', challenge, 'INVITE', 'sip:+1415@192.0.2.1');
      expect(answer?.[0]).toBe(status === 407 ? 'proxy-authorization' : 'authorization');
      const creds = parseDigestCredentials(answer?.[1] ?? '')!;
      expect(verifyDigest(creds, { method: 'INVITE', algorithm: 'MD5', ha1: computeHa1('MD5', 'acme', 'carrier', 'pw') })).toBe('ok');
    }
  });
});
