/**
 * Routes of a number through the capability: at most one; a trunk must be the account's
 * when the trunks capability is wired; numbersUsingTrunk / unrouteTrunk for the trunks
 * side; callerIdOf answers the earliest routed active number; route() is null for a
 * number nobody owns.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { DEFAULTS, type Config } from '../../../src/config.js';
import { Ledger } from '../../../src/billing/ledger.js';
import { MemoryBillingStore } from '../../../src/store/billing/memory.js';
import { MemoryDirectory } from '../../../src/store/directory/memory.js';
import { hashToken, type AccountRecord } from '../../../src/store/directory/directory.js';
import { createNumbers, type Numbers } from '../../../src/numbers/index.js';
import type { TrunkView } from '../../../src/trunks/lookup.js';

const config = { ...DEFAULTS, partners: [], production: false, nodeId: 'n', dataEncryptionKeys: [], dataKeySource: 'random' } as unknown as Readonly<Config>;
const AT = '2026-11-20T10:00:00.000Z';

function account(authId: string): AccountRecord {
  return { authId, tokenHash: hashToken('t'), passwordHash: null, name: 'n', email: 'e@x.test', country: 'IN', accountType: 'PREPAID', enabled: true, cpsLimit: 1, concurrentCallsLimit: 1, sipDomain: `${authId}.sip.test`, partnerId: null, createdAt: AT, updatedAt: AT };
}
function trunk(trunkId: string, authId: string): TrunkView {
  return { trunkId, authId, name: trunkId, trunkType: 'OUTBOUND', enabled: true, maxConcurrentCalls: 0, cpsLimit: 0, sipDomain: `${trunkId}.sip.test` };
}

describe('number routes (capability)', () => {
  let numbers: Numbers;
  let clock = Date.parse(AT);
  const a = account('MAONE');
  beforeEach(async () => {
    clock = Date.parse(AT);
    const ledger = new Ledger({ store: new MemoryBillingStore(), partners: [], defaultCurrency: 'USD' });
    const directory = new MemoryDirectory();
    await directory.createAccount(a);
    await directory.createEndpoint({ endpointId: '7', accountAuthId: a.authId, username: 'alice', alias: 'alice', appId: null, subAccount: null, allowVoice: true, allowMessage: true, allowVideo: false, allowSameDomain: true, allowOtherDomains: false, allowPhones: true, allowApps: true, createdAt: AT, updatedAt: AT });
    const trunks = new Map([['TRA', trunk('TRA', a.authId)], ['TRB', trunk('TRB', 'MAOTHER')]]);
    numbers = createNumbers({ config, redis: null, ledger, directory, now: () => clock, trunks: { trunk: async (id) => trunks.get(id) ?? null } });
    await numbers.reload();
    await ledger.change({ customer: a }, { type: 'credit', amount: 100_00000, currency: 'USD', referenceType: 'recharge', referenceId: 'r', description: 'd' });
    await numbers.purchase(a, '+918040001001', null);
    await numbers.purchase(a, '+918040001002', null);
  });

  it('a trunk must exist and be the account’s (400 naming trunk_group_id); the trunks side finds and clears its numbers', async () => {
    await expect(numbers.setRoute(a.authId, '+918040001001', 'trunk', 'TRB')).rejects.toMatchObject({ kind: 'invalid', field: 'trunk_group_id' });
    await expect(numbers.setRoute(a.authId, '+918040001001', 'trunk', 'TRX')).rejects.toMatchObject({ kind: 'invalid', field: 'trunk_group_id' });
    await numbers.setRoute(a.authId, '+918040001001', 'trunk', 'TRA');
    await numbers.setRoute(a.authId, '+918040001002', 'trunk', 'TRA');
    expect((await numbers.numbersUsingTrunk(a.authId, 'TRA')).sort()).toEqual(['+918040001001', '+918040001002']);
    expect(await numbers.numbersUsingTrunk('MAOTHER', 'TRA')).toEqual([]);
    expect((await numbers.route('+918040001001'))?.trunkGroupId).toBe('TRA');
    expect((await numbers.unrouteTrunk(a.authId, 'TRA')).length).toBe(2);
    expect(await numbers.numbersUsingTrunk(a.authId, 'TRA')).toEqual([]);
    expect((await numbers.route('+918040001001'))?.trunkGroupId).toBe(null);
  });

  it('one route at a time; the caller ID is the earliest routed number; route() is null for unsold numbers', async () => {
    expect(await numbers.route('+918040001003')).toBe(null);
    expect(await numbers.route('not a number')).toBe(null);
    await numbers.setRoute(a.authId, '+918040001002', 'endpoint', '7');
    clock += 1000;
    await numbers.setRoute(a.authId, '+918040001001', 'endpoint', '7');
    expect(await numbers.callerIdOf(a.authId, '7')).toBe('+918040001002');
    expect(await numbers.callerIdOf('MAOTHER', '7')).toBe(null);
    clock += 1000;
    await numbers.setRoute(a.authId, '+918040001002', 'trunk', 'TRA');
    expect(await numbers.route('918040001002')).toEqual({ e164: '+918040001002', authId: a.authId, subAccount: null, status: 'active', endpointId: null, applicationId: null, trunkGroupId: 'TRA' });
    expect(await numbers.callerIdOf(a.authId, '7')).toBe('+918040001001');
    await expect(numbers.setRoute(a.authId, '+918040001001', 'endpoint', '8')).rejects.toMatchObject({ field: 'endpoint_id' });
    await expect(numbers.setRoute('MAOTHER', '+918040001001', 'endpoint', '7')).rejects.toMatchObject({ kind: 'not_found' });
    await numbers.release(a.authId, '+918040001001');
    expect(await numbers.callerIdOf(a.authId, '7')).toBe(null);
    expect(await numbers.route('+918040001001')).toBe(null);
  });
});
