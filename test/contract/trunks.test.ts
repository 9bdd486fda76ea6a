/**
 * One trunks contract, three backends: the trunks capability (createTrunks) on
 * MemoryTrunkStore, RedisTrunkStore on a real redis-server and on a 3-master Redis
 * Cluster. What routing reads (TrunkLookup): inbound trunks by source address over
 * IPv4/IPv6 CIDRs, credentials by platform-unique username with HA1 that verifies,
 * an account's outbound trunk and its gateways; on Redis, a change made through one
 * node is seen by another within a second.
 */
import { createHash } from 'node:crypto';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import type { RedisClient } from '../../src/store/redis/client.js';
import { RedisEvents } from '../../src/store/redis/notices.js';
import { MemoryTrunkStore } from '../../src/store/trunks/memory.js';
import { RedisTrunkStore } from '../../src/store/trunks/redis.js';
import { createTrunks, TrunkError, type Trunks } from '../../src/trunks/index.js';
import { createLogger } from '../../src/logger.js';
import { createSecretBox } from '../../src/security/secret-box.js';
import { redisBackends } from '../support/redis-backends.js';
import { testConfig } from '../support/api-harness.js';

const rb = redisBackends();
const config = testConfig({ sipDomain: 'sip.test' });
const box = createSecretBox([{ kid: 'k1', key: Buffer.alloc(32, 3) }]);
const silent = createLogger('silent');

interface Node {
  trunks: Trunks;
  events: RedisEvents | null;
}

const kinds: Array<{ name: string; redis: (() => RedisClient) | null; reset(): Promise<void> }> = [
  { name: 'memory', redis: null, reset: async () => {} },
  { name: 'Redis', redis: () => rb.connect(rb.server.url), reset: async () => void (await rb.admin.flushdb()) },
  { name: 'Redis Cluster (3 masters)', redis: () => rb.connectCluster(), reset: () => rb.flushCluster() },
];

const md5 = (s: string): string => createHash('md5').update(s).digest('hex');

async function until(cond: () => Promise<boolean>, ms: number): Promise<number> {
  const start = Date.now();
  for (;;) {
    if (await cond()) return Date.now() - start;
    if (Date.now() - start > ms) throw new Error(`not within ${ms} ms`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

describe.each(kinds)('trunks contract on $name', (kind) => {
  const nodes: Node[] = [];
  const node = (): Node => {
    if (!kind.redis) {
      const trunks = createTrunks({ config, redis: null, secretBox: box, store: new MemoryTrunkStore() });
      nodes.push({ trunks, events: null });
      return nodes[nodes.length - 1] as Node;
    }
    const redis = kind.redis();
    const events = new RedisEvents(redis, silent);
    const trunks = createTrunks({ config, redis, events, secretBox: box, store: new RedisTrunkStore(redis) });
    nodes.push({ trunks, events });
    return nodes[nodes.length - 1] as Node;
  };
  let a: Trunks;
  beforeEach(async () => {
    await kind.reset();
    a = node().trunks;
  });
  afterEach(async () => {
    for (const n of nodes.splice(0)) {
      await n.trunks.close();
      await n.events?.stop();
    }
  });

  it('inboundByAddress: IPv4 and IPv6 CIDRs and exact addresses; INBOUND trunks only (enabled or not); disabled entries ignored', async () => {
    const inb = await a.createTrunk('AC1', { name: 'carrier', trunkType: 'INBOUND' });
    const off = await a.createTrunk('AC2', { name: 'off', trunkType: 'INBOUND', enabled: false });
    const out = await a.createTrunk('AC1', { name: 'out', trunkType: 'OUTBOUND' });
    await a.createAcl('AC1', { trunkId: inb.trunkId, ipAddress: '192.0.2.0/24' });
    await a.createAcl('AC1', { trunkId: inb.trunkId, ipAddress: '2001:db8:aa::/48' });
    await a.createAcl('AC2', { trunkId: off.trunkId, ipAddress: '198.51.100.7' });
    await a.createAcl('AC2', { trunkId: off.trunkId, ipAddress: '2001:db8:aa:1::5' });
    await a.createAcl('AC1', { trunkId: out.trunkId, ipAddress: '203.0.113.0/24' });
    const dis = await a.createAcl('AC1', { trunkId: inb.trunkId, ipAddress: '10.9.0.0/16', enabled: false });
    expect(dis.ipAddress).toBe('10.9.0.0/16');

    const ids = async (addr: string): Promise<string[]> => (await a.inboundByAddress(addr)).map((t) => t.trunkId).sort();
    expect(await ids('192.0.2.200')).toEqual([inb.trunkId]);
    expect(await ids('::ffff:192.0.2.1')).toEqual([inb.trunkId]);
    expect(await ids('192.0.3.1')).toEqual([]);
    expect(await ids('198.51.100.7')).toEqual([off.trunkId]);
    expect(await ids('198.51.100.8')).toEqual([]);
    expect(await ids('2001:db8:aa:ffff::1')).toEqual([inb.trunkId]);
    expect(await ids('[2001:db8:aa:1:0:0:0:5]')).toEqual([inb.trunkId, off.trunkId].sort());
    expect(await ids('2001:db8:ab::1')).toEqual([]);
    expect(await ids('203.0.113.5')).toEqual([]); // an OUTBOUND trunk's ACL is no inbound match
    expect(await ids('10.9.1.1')).toEqual([]); // a disabled entry
    expect(await ids('not an address')).toEqual([]);
    const [view] = await a.inboundByAddress('198.51.100.7');
    expect(view).toEqual({ trunkId: off.trunkId, authId: 'AC2', name: 'off', trunkType: 'INBOUND', enabled: false, maxConcurrentCalls: 0, cpsLimit: 0, sipDomain: `${off.trunkId}.sip.test` });

    // Changes through the same instance are seen at once: type, ACL delete, trunk delete.
    await a.updateTrunk('AC1', out.trunkId, { trunkType: 'INBOUND' });
    expect(await ids('203.0.113.5')).toEqual([out.trunkId]);
    const acls = await a.listChildren('ipacl', 'AC1');
    const v6 = acls.find((x) => x.ipAddress === '2001:db8:aa::/48');
    await a.deleteChild('ipacl', 'AC1', v6?.id ?? '');
    expect(await ids('2001:db8:aa:ffff::1')).toEqual([]);
    await a.deleteTrunk('AC2', off.trunkId);
    expect(await ids('198.51.100.7')).toEqual([]);
    expect(await a.listChildren('ipacl', 'AC2')).toEqual([]);
  });

  it('inboundByAddress answers from the in-process index: one store read for 2000 lookups over 500 entries', async () => {
    const n = node();
    await until(async () => n.events?.complete ?? true, 5000);
    const t = await n.trunks.createTrunk('AC1', { trunkType: 'INBOUND' });
    for (let i = 0; i < 250; i++) {
      await n.trunks.createAcl('AC1', { trunkId: t.trunkId, ipAddress: `10.${i}.0.0/16` });
      await n.trunks.createAcl('AC1', { trunkId: t.trunkId, ipAddress: `2001:db8:${i.toString(16)}::/48` });
    }
    // A node hears its own notices too: let the echoes of the writes above arrive first.
    await new Promise((r) => setTimeout(r, 200));
    let reads = 0;
    const allAcls = n.trunks.store.allAcls.bind(n.trunks.store);
    n.trunks.store.allAcls = async () => {
      reads++;
      return allAcls();
    };
    const started = performance.now();
    let hits = 0;
    for (let i = 0; i < 1000; i++) {
      hits += (await n.trunks.inboundByAddress(`10.${i % 300}.1.2`)).length;
      hits += (await n.trunks.inboundByAddress(`2001:db8:${(i % 300).toString(16)}::9`)).length;
    }
    const ms = performance.now() - started;
    expect(hits).toBe(1700); // i % 300 < 250 for 850 of the 1000 i, once per family
    expect(reads).toBe(1);
    expect(ms).toBeLessThan(1500);
  });

  it('bad CIDRs and non-SIP origination URIs are refused naming the field', async () => {
    const t = await a.createTrunk('AC1', { trunkType: 'OUTBOUND' });
    for (const bad of ['192.0.2.0/33', '300.1.1.1', '2001:db8::/129', 'example.com', '10.0.0.0/8x', '']) {
      await expect(a.createAcl('AC1', { trunkId: t.trunkId, ipAddress: bad })).rejects.toMatchObject({ kind: 'invalid', field: 'ip_address' });
    }
    for (const bad of ['http://gw.example', 'gw.example.net', 'sip:gw.example;transport=sctp', 'tel:+14155550100']) {
      await expect(a.createUri('AC1', { trunkId: t.trunkId, uri: bad })).rejects.toMatchObject({ kind: 'invalid', field: 'sip_uri' });
    }
    const u = await a.createUri('AC1', { trunkId: t.trunkId, uri: 'sips:gw.example.net:5061' });
    expect(u.transport).toBe('tls');
    expect(await a.listChildren('ipacl', 'AC1')).toEqual([]);
  });

  it('credential usernames are unique across the platform (case-insensitive) and freed by deletes', async () => {
    const t1 = await a.createTrunk('AC1', { trunkType: 'OUTBOUND' });
    const t2 = await a.createTrunk('AC2', { trunkType: 'INBOUND' });
    const c = await a.createCredential('AC1', { trunkId: t1.trunkId, username: 'carrierA', password: 'pw-one-111' });
    const taken = a.createCredential('AC2', { trunkId: t2.trunkId, username: 'CARRIERa', password: 'x' });
    await expect(taken).rejects.toBeInstanceOf(TrunkError);
    await expect(taken).rejects.toMatchObject({ kind: 'conflict', code: 'username_taken' });
    // Renaming to a taken name is refused too; keeping one's own name is fine.
    const other = await a.createCredential('AC2', { trunkId: t2.trunkId, username: 'carrierB', password: 'x' });
    await expect(a.updateCredential('AC2', other.id, { username: 'carriera', password: 'y' })).rejects.toMatchObject({ code: 'username_taken' });
    await a.updateCredential('AC1', c.id, { password: 'pw-two-222' });
    await a.deleteChild('credential', 'AC1', c.id);
    expect(await a.secretByUsername('carrierA')).toBe(null);
    await a.createCredential('AC2', { trunkId: t2.trunkId, username: 'carrierA', password: 'z' });
    await a.deleteTrunk('AC2', t2.trunkId);
    expect(await a.secretByUsername('carrierB')).toBe(null);
    const again = await a.createCredential('AC1', { trunkId: t1.trunkId, username: 'carrierB', password: 'z' });
    expect(again.username).toBe('carrierB');
  });

  it('secretByUsername: HA1 that verifies over username:SIP_DOMAIN:password, the password, and nothing in the clear at rest', async () => {
    const t = await a.createTrunk('AC1', { trunkType: 'INBOUND' });
    const c = await a.createCredential('AC1', { trunkId: t.trunkId, username: 'pbx7', password: 's3cret-Pass!' });
    const s = await a.secretByUsername('PBX7');
    expect(s).toEqual({
      trunkId: t.trunkId,
      authId: 'AC1',
      username: 'pbx7',
      ha1Md5: md5('pbx7:sip.test:s3cret-Pass!'),
      ha1Sha256: createHash('sha256').update('pbx7:sip.test:s3cret-Pass!').digest('hex'),
      password: 's3cret-Pass!',
    });
    // A digest response computed by a carrier with the password verifies against the HA1.
    const ha2 = md5('INVITE:sip:+14155550100@sip.test');
    expect(md5(`${s?.ha1Md5}:n1:${ha2}`)).toBe(md5(`${md5('pbx7:sip.test:s3cret-Pass!')}:n1:${ha2}`));
    const raw = await a.store.getChild('credential', c.id);
    expect(JSON.stringify(raw)).not.toContain('s3cret-Pass!');
    expect(raw?.sealedPassword).toMatch(/^enc:v1:k1:/);
    // The trunk links its first credential: secretOf answers it; disabled → none.
    expect((await a.getTrunk('AC1', t.trunkId)).credentialUuid).toBe(c.id);
    expect((await a.secretOf(t.trunkId))?.password).toBe('s3cret-Pass!');
    await a.updateCredential('AC1', c.id, { enabled: false });
    expect(await a.secretByUsername('pbx7')).toBe(null);
    expect(await a.secretOf(t.trunkId)).toBe(null);
    expect(await a.secretByUsername('nobody')).toBe(null);
  });

  it('outboundOf: the enabled OUTBOUND trunk created first; gatewaysOf by priority; trunk(); children only on own trunks', async () => {
    const disabled = await a.createTrunk('AC1', { name: 'old', trunkType: 'OUTBOUND', enabled: false });
    await a.createTrunk('AC1', { name: 'in', trunkType: 'INBOUND' });
    const first = await a.createTrunk('AC1', { name: 'first', trunkType: 'OUTBOUND', maxConcurrentCalls: 5, cpsLimit: 2 });
    await a.createTrunk('AC1', { name: 'second', trunkType: 'OUTBOUND' });
    await a.createTrunk('AC2', { name: 'theirs', trunkType: 'OUTBOUND' });
    expect(await a.outboundOf('AC1')).toEqual({ trunkId: first.trunkId, authId: 'AC1', name: 'first', trunkType: 'OUTBOUND', enabled: true, maxConcurrentCalls: 5, cpsLimit: 2, sipDomain: `${first.trunkId}.sip.test` });
    expect(await a.outboundOf('AC9')).toBe(null);
    await a.updateTrunk('AC1', disabled.trunkId, { enabled: true });
    expect((await a.outboundOf('AC1'))?.trunkId).toBe(disabled.trunkId);
    expect((await a.listTrunks('AC1')).map((t) => t.name)).toEqual(['old', 'in', 'first', 'second']);

    const g2 = await a.createUri('AC1', { trunkId: first.trunkId, uri: 'sip:127.0.0.8;transport=tcp', priority: 2 });
    const g1a = await a.createUri('AC1', { trunkId: first.trunkId, uri: 'sip:127.0.0.7:5060', priority: 1, weight: 3 });
    const g1b = await a.createUri('AC1', { trunkId: first.trunkId, uri: 'sip:127.0.0.9', priority: 1, weight: 1, enabled: false });
    expect(await a.gatewaysOf(first.trunkId)).toEqual([
      { id: g1a.id, uri: 'sip:127.0.0.7:5060', priority: 1, weight: 3, enabled: true },
      { id: g1b.id, uri: 'sip:127.0.0.9', priority: 1, weight: 1, enabled: false },
      { id: g2.id, uri: 'sip:127.0.0.8;transport=tcp', priority: 2, weight: 1, enabled: true },
    ]);
    expect(g2.transport).toBe('tcp');
    expect((await a.trunk(first.trunkId))?.name).toBe('first');
    expect(await a.trunk('no-such-trunk')).toBe(null);

    // Another account's trunk is not found, for children and links alike.
    await expect(a.createUri('AC2', { trunkId: first.trunkId, uri: 'sip:x.example' })).rejects.toMatchObject({ kind: 'not_found' });
    await expect(a.getTrunk('AC2', first.trunkId)).rejects.toMatchObject({ kind: 'not_found' });
    await expect(a.getChild('uri', 'AC2', g2.id)).rejects.toMatchObject({ kind: 'not_found' });
    await expect(a.deleteChild('uri', 'AC2', g2.id)).rejects.toMatchObject({ kind: 'not_found' });
    // Links must name a child of this trunk.
    const other = await a.createTrunk('AC1', { trunkType: 'OUTBOUND' });
    const foreign = await a.createUri('AC1', { trunkId: other.trunkId, uri: 'sip:y.example' });
    await expect(a.updateTrunk('AC1', first.trunkId, { fallbackUriUuid: foreign.id })).rejects.toMatchObject({ kind: 'invalid', field: 'fallback_uri_uuid' });
    const linked = await a.updateTrunk('AC1', first.trunkId, { fallbackUriUuid: g2.id });
    expect(linked.fallbackUriUuid).toBe(g2.id);
    expect(linked.primaryUriUuid).toBe(g2.id); // the first URI created is linked as primary
    await a.deleteChild('uri', 'AC1', g2.id);
    const after = await a.getTrunk('AC1', first.trunkId);
    expect([after.primaryUriUuid, after.fallbackUriUuid]).toEqual([null, null]);
    expect((await a.gatewaysOf(first.trunkId)).map((g) => g.id)).toEqual([g1a.id, g1b.id]);
  });

  it('delete is refused while calls are up or numbers route to the trunk, and then deletes every child', async () => {
    let calls = 1;
    let numbers = ['+919800000001'];
    const store = a.store;
    const b = createTrunks({ config, redis: null, secretBox: box, store, activeCalls: async () => calls, numbersUsing: async () => numbers });
    const t = await b.createTrunk('AC1', { trunkType: 'INBOUND' });
    await b.createCredential('AC1', { trunkId: t.trunkId, username: 'del-me', password: 'p' });
    await b.createAcl('AC1', { trunkId: t.trunkId, ipAddress: '192.0.2.9' });
    await b.createUri('AC1', { trunkId: t.trunkId, uri: 'sip:gw.example' });
    await expect(b.deleteTrunk('AC1', t.trunkId)).rejects.toMatchObject({ kind: 'conflict', code: 'trunk_in_use' });
    calls = 0;
    await expect(b.deleteTrunk('AC1', t.trunkId)).rejects.toMatchObject({ kind: 'conflict', code: 'trunk_has_numbers', extra: { numbers: ['+919800000001'] } });
    numbers = [];
    await b.deleteTrunk('AC1', t.trunkId);
    expect(await b.listTrunks('AC1')).toEqual([]);
    for (const k of ['credential', 'ipacl', 'uri'] as const) expect(await b.listChildren(k, 'AC1')).toEqual([]);
    expect(await b.store.credentialByUsername('del-me')).toBe(null);
    expect(await b.store.allAcls()).toEqual([]);
  });
});

describe.each(kinds.filter((k) => k.redis !== null))('trunks across nodes on $name', (kind) => {
  const nodes: Array<{ trunks: Trunks; events: RedisEvents }> = [];
  const node = (): { trunks: Trunks; events: RedisEvents } => {
    const redis = (kind.redis as () => RedisClient)();
    const events = new RedisEvents(redis, silent);
    const n = { trunks: createTrunks({ config, redis, events, secretBox: box }), events };
    nodes.push(n);
    return n;
  };
  beforeEach(() => kind.reset());
  afterEach(async () => {
    for (const n of nodes.splice(0)) {
      await n.trunks.close();
      await n.events.stop();
    }
  });

  it('a change made through one node is seen by another node within 1 s (ACL add, type change, delete)', async () => {
    const [n1n, n2n] = [node(), node()];
    const [n1, n2] = [n1n.trunks, n2n.trunks];
    await until(async () => n1n.events.complete && n2n.events.complete, 5000);
    const t = await n1.createTrunk('AC1', { trunkType: 'INBOUND' });
    // Node 2 builds its index now (nothing matches), so what follows tests invalidation.
    expect(await n2.inboundByAddress('192.0.2.77')).toEqual([]);
    await n1.createAcl('AC1', { trunkId: t.trunkId, ipAddress: '192.0.2.64/26' });
    const ms1 = await until(async () => (await n2.inboundByAddress('192.0.2.77')).length === 1, 1000);
    await n1.updateTrunk('AC1', t.trunkId, { trunkType: 'OUTBOUND' });
    const ms2 = await until(async () => (await n2.inboundByAddress('192.0.2.77')).length === 0, 1000);
    await n1.updateTrunk('AC1', t.trunkId, { trunkType: 'INBOUND' });
    await until(async () => (await n2.inboundByAddress('192.0.2.77')).length === 1, 1000);
    await n1.deleteTrunk('AC1', t.trunkId);
    const ms3 = await until(async () => (await n2.inboundByAddress('192.0.2.77')).length === 0, 1000);
    expect(Math.max(ms1, ms2, ms3)).toBeLessThan(1000);
  });
});
