/**
 * One contract, two stores: MemoryLocationStore and RedisLocationStore (on a real
 * redis-server) must behave identically on every rule of RFC 3261 §10.3 steps 6-8
 * as the LocationStore interface states them. Redis-only properties (key layout,
 * TTL and index refresh, one round trip per REGISTER, failure → rejection) follow.
 */
import { Cluster, Redis, type RedisOptions } from 'ioredis';
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { StoreUnavailableError } from '../../src/errors.js';
import {
  aorKey,
  RETRANSMISSION_WINDOW_MS,
  type Aor,
  type Binding,
  type BindingWrite,
  type LocationStore,
  type RegisterOp,
} from '../../src/store/location/location.js';
import { MemoryLocationStore } from '../../src/store/location/memory.js';
import { REDIS_STORE_CLIENT_OPTIONS } from '../../src/store/redis/client.js';
import { RedisLocationStore, redisLocationKeys } from '../../src/store/location/redis.js';
import { startRedis } from '../support/redis-server.mjs';
import { redisBackends } from '../support/redis-backends.js';

const ALICE: Aor = { domain: 'acme.sip.localhost', user: 'alice' };
const BOB: Aor = { domain: 'acme.sip.localhost', user: 'bob' };
const CAROL: Aor = { domain: 'other.sip.localhost', user: 'carol' };
const MIN = 60_000;
const HOUR = 3_600_000;

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/** A write with every field set to a distinct, non-default value. */
function write(key: string, expiresAt: number, over: Partial<BindingWrite> = {}): BindingWrite {
  return {
    key,
    uri: `sip:${key}@192.0.2.10:5062;transport=tcp`,
    contact: `"Desk" <sip:${key}@192.0.2.10:5062;transport=tcp>;+sip.instance="<urn:uuid:${key}>";reg-id=1`,
    expiresAt,
    callId: 'call-1@192.0.2.10',
    cseq: 1,
    userAgent: 'Yealink SIP-T46S 66.86.0.15',
    received: 'sip:198.51.100.7:40312;transport=tcp',
    transport: 'tcp',
    path: '<sip:edge1.example.net;lr>,<sip:edge2.example.net;lr>',
    q: 0.7,
    instanceId: `<urn:uuid:${key}>`,
    regId: 1,
    nodeId: 'node-a',
    connId: 'conn-42',
    ...over,
  };
}

function op(now: number, cseq: number, o: Partial<RegisterOp> = {}): RegisterOp {
  return {
    callId: 'call-1@192.0.2.10',
    cseq,
    now,
    removeAll: false,
    writes: [],
    removes: [],
    maxContacts: 10,
    ...o,
  };
}

const keys = (bs: Binding[]): string[] => bs.map((b) => b.key);

// ---------------------------------------------------------------------------
// One redis-server for the whole file; every client gets an 'error' listener so a
// connection error is recorded, never an unhandled event.

const rb = redisBackends();

interface Kind {
  name: string;
  create(): LocationStore;
  reset(): Promise<void>;
}

const kinds: Kind[] = [
  { name: 'MemoryLocationStore', create: () => new MemoryLocationStore(), reset: async () => {} },
  {
    name: 'RedisLocationStore',
    create: () => new RedisLocationStore(rb.connect(rb.server.url), { closeConnection: true }),
    reset: async () => {
      await rb.admin.flushdb();
    },
  },
  {
    name: 'RedisLocationStore on a 3-master Redis Cluster',
    create: () => new RedisLocationStore(rb.connectCluster(), { closeConnection: true }),
    reset: async () => {
      await rb.flushCluster();
    },
  },
];

describe.each(kinds)('$name (LocationStore contract)', (kind) => {
  let store: LocationStore;
  let t0: number;

  beforeEach(async () => {
    await kind.reset();
    store = kind.create();
    t0 = Date.now();
  });
  afterEach(async () => {
    await store.close();
  });

  describe('#register() and #lookup()', () => {
    it('stores every field as given, stamps updatedAt = now, and reads it back', async () => {
      const w = write('k1', t0 + HOUR);
      const r = await store.register(ALICE, op(t0, 1, { writes: [w] }));
      const expected: Binding = { ...w, updatedAt: t0 };
      expect(r).toEqual({ ok: true, bindings: [expected] });
      expect(await store.lookup(ALICE)).toEqual([expected]);
      expect(await store.lookup(ALICE, t0)).toEqual([expected]);
    });

    it('round-trips null optional fields of a UDP binding', async () => {
      const w = write('sip:bob@192.0.2.20:5060', t0 + HOUR, {
        transport: 'udp',
        userAgent: null,
        path: null,
        q: null,
        instanceId: null,
        regId: null,
        nodeId: null,
        connId: null,
        received: 'sip:198.51.100.8:5060;transport=udp',
      });
      await store.register(BOB, op(t0, 1, { writes: [w] }));
      expect(await store.lookup(BOB)).toEqual([{ ...w, updatedAt: t0 }]);
    });

    it('keeps stray properties of the caller object out of the store', async () => {
      const w = { ...write('k1', t0 + HOUR), password: 'secret' };
      const r = await store.register(ALICE, op(t0, 1, { writes: [w] }));
      expect(r.bindings[0]).not.toHaveProperty('password');
      expect((await store.lookup(ALICE))[0]).not.toHaveProperty('password');
    });

    it('returns copies: mutating a result does not change the store', async () => {
      const r = await store.register(ALICE, op(t0, 1, { writes: [write('k1', t0 + HOUR)] }));
      r.bindings[0]!.contact = 'changed';
      const l = await store.lookup(ALICE);
      l[0]!.expiresAt = 0;
      expect((await store.lookup(ALICE))[0]).toMatchObject({ contact: write('k1', 0).contact, expiresAt: t0 + HOUR });
    });

    it('a refresh of the same key keeps one binding with the new expiry, CSeq and updatedAt', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('k1', t0 + MIN)] }));
      const r = await store.register(ALICE, op(t0 + 1000, 2, { writes: [write('k1', t0 + HOUR, { cseq: 2 })] }));
      expect(r.ok).toBe(true);
      expect(r.bindings).toHaveLength(1);
      expect(r.bindings[0]).toMatchObject({ key: 'k1', expiresAt: t0 + HOUR, cseq: 2, updatedAt: t0 + 1000 });
      expect(await store.lookup(ALICE)).toEqual(r.bindings);
    });

    it('holds several contacts, most recently updated first, then by key', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('k2', t0 + HOUR)] }));
      const r = await store.register(
        ALICE,
        op(t0 + 5, 2, { writes: [write('k3', t0 + HOUR, { cseq: 2 }), write('k1', t0 + HOUR, { cseq: 2 })] }),
      );
      expect(keys(r.bindings)).toEqual(['k1', 'k3', 'k2']);
      expect(keys(await store.lookup(ALICE))).toEqual(['k1', 'k3', 'k2']);
    });

    it('keeps AORs apart: same user in another domain, other user in the same domain', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('k1', t0 + HOUR)] }));
      expect(await store.lookup(BOB)).toEqual([]);
      expect(await store.lookup({ domain: 'other.sip.localhost', user: 'alice' })).toEqual([]);
    });

    it('an unknown AOR has no bindings', async () => {
      expect(await store.lookup({ domain: 'nobody.sip.localhost', user: 'x' })).toEqual([]);
    });

    it('removes a binding listed with expires 0 and keeps the others', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('k1', t0 + HOUR), write('k2', t0 + HOUR)] }));
      const r = await store.register(ALICE, op(t0 + 1, 2, { removes: ['k1', 'unknown-key'] }));
      expect(r).toMatchObject({ ok: true });
      expect(keys(r.bindings)).toEqual(['k2']);
      expect(keys(await store.lookup(ALICE))).toEqual(['k2']);
    });

    it('applies removes before writes: a key both removed and written is written', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('k1', t0 + MIN)] }));
      const r = await store.register(
        ALICE,
        op(t0 + 1, 2, { removes: ['k1'], writes: [write('k1', t0 + HOUR, { cseq: 2 })] }),
      );
      expect(r.bindings).toMatchObject([{ key: 'k1', expiresAt: t0 + HOUR }]);
    });

    it('removeAll (Contact: *) removes every binding', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('k1', t0 + HOUR), write('k2', t0 + HOUR)] }));
      const r = await store.register(ALICE, op(t0 + 1, 2, { removeAll: true }));
      expect(r).toEqual({ ok: true, bindings: [] });
      expect(await store.lookup(ALICE)).toEqual([]);
    });

    it('a register with neither writes nor removes changes nothing and lists the bindings', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('k1', t0 + HOUR)] }));
      const r = await store.register(ALICE, op(t0 + 1, 2));
      expect(r).toEqual({ ok: true, bindings: [{ ...write('k1', t0 + HOUR), updatedAt: t0 }] });
    });
  });

  describe('expiry (a binding whose expiresAt <= now is absent)', () => {
    it('lookup honours the clock passed in: live before expiresAt, absent at and after it', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('k1', t0 + MIN)] }));
      expect(keys(await store.lookup(ALICE, t0 + MIN - 1))).toEqual(['k1']);
      expect(await store.lookup(ALICE, t0 + MIN)).toEqual([]);
      expect(await store.lookup(ALICE, t0 + HOUR)).toEqual([]);
    });

    it('a binding written with expires 2 s reads as absent 3 s later with no write in between (real time)', async () => {
      const now = Date.now();
      await store.register(ALICE, op(now, 1, { writes: [write('k1', now + 2000)] }));
      expect(keys(await store.lookup(ALICE))).toEqual(['k1']);
      await sleep(3000);
      expect(await store.lookup(ALICE)).toEqual([]);
      expect((await store.lookupMany([ALICE])).get(aorKey(ALICE))).toEqual([]);
      expect((await store.countLive()).tcp).toBe(0);
    });

    it('expired bindings are not returned by register and do not count toward maxContacts', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('old', t0 + MIN)] }));
      const r = await store.register(
        ALICE,
        op(t0 + MIN, 1, { callId: 'call-2', maxContacts: 1, writes: [write('new', t0 + HOUR, { callId: 'call-2' })] }),
      );
      expect(r.ok).toBe(true);
      expect(keys(r.bindings)).toEqual(['new']);
    });

    it('an expired binding with the same Call-ID and a higher CSeq does not make the request out of order', async () => {
      await store.register(ALICE, op(t0, 9, { writes: [write('k1', t0 + MIN, { cseq: 9 })] }));
      const r = await store.register(ALICE, op(t0 + MIN, 2, { writes: [write('k1', t0 + HOUR, { cseq: 2 })] }));
      expect(r).toMatchObject({ ok: true, bindings: [{ key: 'k1', cseq: 2 }] });
    });

    it('a write that is already expired acts as a removal', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('k1', t0 + HOUR), write('k2', t0 + HOUR)] }));
      const r = await store.register(ALICE, op(t0 + 10, 2, { writes: [write('k1', t0 + 10, { cseq: 2 })] }));
      expect(r).toMatchObject({ ok: true });
      expect(keys(r.bindings)).toEqual(['k2']);
    });
  });

  describe('Call-ID / CSeq ordering (RFC 3261 §10.3 step 7)', () => {
    beforeEach(async () => {
      await store.register(ALICE, op(t0, 5, { writes: [write('k1', t0 + HOUR, { cseq: 5 })] }));
    });
    const unchanged = async (): Promise<void> => {
      expect(await store.lookup(ALICE)).toEqual([{ ...write('k1', t0 + HOUR, { cseq: 5 }), updatedAt: t0 }]);
    };

    it('rejects a write with the same Call-ID and a lower CSeq, changing nothing', async () => {
      const r = await store.register(ALICE, op(t0 + 1, 4, { writes: [write('k1', t0 + 2 * HOUR, { cseq: 4 })] }));
      expect(r).toEqual({ ok: false, code: 'OUT_OF_ORDER', bindings: [{ ...write('k1', t0 + HOUR, { cseq: 5 }), updatedAt: t0 }] });
      await unchanged();
    });

    it('treats the same Call-ID and an equal CSeq within Timer J as a retransmission: success, nothing changes', async () => {
      const r = await store.register(ALICE, op(t0 + RETRANSMISSION_WINDOW_MS, 5, { writes: [write('k1', t0 + 2 * HOUR, { cseq: 5 }), write('k9', t0 + HOUR, { cseq: 5 })] }));
      expect(r).toEqual({ ok: true, bindings: [{ ...write('k1', t0 + HOUR, { cseq: 5 }), updatedAt: t0 }] });
      await unchanged();
    });

    it('does not take another contact with the same Call-ID and CSeq for a retransmission', async () => {
      const r = await store.register(ALICE, op(t0 + 1, 5, { writes: [write('k2', t0 + HOUR, { cseq: 5 })] }));
      expect(r).toMatchObject({ ok: true });
      expect(keys(await store.lookup(ALICE)).sort()).toEqual(['k1', 'k2']);
    });

    it('rejects a write with the same Call-ID and an equal CSeq after Timer J (a replay)', async () => {
      const r = await store.register(ALICE, op(t0 + RETRANSMISSION_WINDOW_MS + 1, 5, { writes: [write('k1', t0 + 2 * HOUR, { cseq: 5 })] }));
      expect(r).toMatchObject({ ok: false, code: 'OUT_OF_ORDER' });
      await unchanged();
    });

    it('rejects a remove with the same Call-ID and a lower CSeq', async () => {
      const r = await store.register(ALICE, op(t0 + 1, 3, { removes: ['k1'] }));
      expect(r).toMatchObject({ ok: false, code: 'OUT_OF_ORDER' });
      await unchanged();
    });

    it('rejects removeAll when a binding has the same Call-ID and an equal CSeq from before Timer J', async () => {
      const r = await store.register(ALICE, op(t0 + RETRANSMISSION_WINDOW_MS + 1, 5, { removeAll: true }));
      expect(r).toMatchObject({ ok: false, code: 'OUT_OF_ORDER', bindings: [{ key: 'k1' }] });
      await unchanged();
    });

    it('is atomic: one out-of-order key aborts the writes and removes of the other keys too', async () => {
      await store.register(ALICE, op(t0, 1, { callId: 'other', writes: [write('k2', t0 + HOUR, { callId: 'other' })] }));
      const r = await store.register(
        ALICE,
        op(t0 + 1, 4, { removes: ['k2'], writes: [write('k3', t0 + HOUR, { cseq: 4 }), write('k1', t0 + HOUR, { cseq: 4 })] }),
      );
      expect(r).toMatchObject({ ok: false, code: 'OUT_OF_ORDER' });
      expect(keys(await store.lookup(ALICE)).sort()).toEqual(['k1', 'k2']);
    });

    it('accepts the same Call-ID with a higher CSeq', async () => {
      const r = await store.register(ALICE, op(t0 + 1, 6, { writes: [write('k1', t0 + 2 * HOUR, { cseq: 6 })] }));
      expect(r).toMatchObject({ ok: true, bindings: [{ key: 'k1', cseq: 6, expiresAt: t0 + 2 * HOUR }] });
    });

    it('accepts a different Call-ID even with a lower CSeq (a rebooted phone)', async () => {
      const r = await store.register(
        ALICE,
        op(t0 + 1, 1, { callId: 'after-reboot', writes: [write('k1', t0 + 2 * HOUR, { callId: 'after-reboot', cseq: 1 })] }),
      );
      expect(r).toMatchObject({ ok: true, bindings: [{ key: 'k1', callId: 'after-reboot', cseq: 1 }] });
    });

    it('accepts removeAll from a different Call-ID with a lower CSeq', async () => {
      const r = await store.register(ALICE, op(t0 + 1, 1, { callId: 'after-reboot', removeAll: true }));
      expect(r).toEqual({ ok: true, bindings: [] });
      expect(await store.lookup(ALICE)).toEqual([]);
    });

    it('ignores the CSeq of bindings the request does not touch', async () => {
      const r = await store.register(ALICE, op(t0 + 1, 1, { writes: [write('k2', t0 + HOUR, { cseq: 1 })] }));
      expect(r).toMatchObject({ ok: true });
      expect(keys(r.bindings)).toEqual(['k2', 'k1']);
    });
  });

  describe('maxContacts', () => {
    beforeEach(async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('k1', t0 + HOUR), write('k2', t0 + HOUR)] }));
    });

    it('answers TOO_MANY when the result would exceed maxContacts, changing nothing', async () => {
      const r = await store.register(ALICE, op(t0 + 1, 2, { maxContacts: 2, writes: [write('k3', t0 + HOUR, { cseq: 2 })] }));
      expect(r).toMatchObject({ ok: false, code: 'TOO_MANY' });
      expect(keys(r.bindings)).toEqual(['k1', 'k2']);
      expect(keys(await store.lookup(ALICE))).toEqual(['k1', 'k2']);
    });

    it('allows refreshing existing bindings at the limit', async () => {
      const r = await store.register(ALICE, op(t0 + 1, 2, { maxContacts: 2, writes: [write('k1', t0 + 2 * HOUR, { cseq: 2 })] }));
      expect(r).toMatchObject({ ok: true });
      expect(keys(r.bindings)).toEqual(['k1', 'k2']);
    });

    it('counts after removes: replacing one contact with another at the limit is accepted', async () => {
      const r = await store.register(
        ALICE,
        op(t0 + 1, 2, { maxContacts: 2, removes: ['k2'], writes: [write('k3', t0 + HOUR, { cseq: 2 })] }),
      );
      expect(r).toMatchObject({ ok: true });
      expect(keys(r.bindings)).toEqual(['k3', 'k1']);
    });
  });

  describe('#lookupMany()', () => {
    it('returns the live bindings of each AOR across accounts, keyed by aorKey, empty for none', async () => {
      await store.register(ALICE, op(t0, 1, { writes: [write('a1', t0 + HOUR)] }));
      await store.register(ALICE, op(t0 + 2, 2, { writes: [write('a2', t0 + HOUR, { cseq: 2 })] }));
      await store.register(CAROL, op(t0, 1, { writes: [write('c1', t0 + MIN)] }));
      const m = await store.lookupMany([ALICE, BOB, CAROL]);
      expect([...m.keys()]).toEqual([aorKey(ALICE), aorKey(BOB), aorKey(CAROL)]);
      expect(keys(m.get(aorKey(ALICE))!)).toEqual(['a2', 'a1']);
      expect(m.get(aorKey(BOB))).toEqual([]);
      expect(m.get(aorKey(CAROL))).toEqual([{ ...write('c1', t0 + MIN), updatedAt: t0 }]);
      const later = await store.lookupMany([ALICE, CAROL], t0 + MIN);
      expect(keys(later.get(aorKey(ALICE))!)).toEqual(['a2', 'a1']);
      expect(later.get(aorKey(CAROL))).toEqual([]);
    });

    it('returns an empty map for no AORs', async () => {
      expect((await store.lookupMany([])).size).toBe(0);
    });
  });

  describe('#removeKeys() and #removeAll()', () => {
    it('removeKeys removes the listed keys and returns how many live ones went', async () => {
      const now = Date.now();
      await store.register(ALICE, op(now, 1, { writes: [write('k1', now + HOUR), write('k2', now + HOUR), write('k3', now + HOUR)] }));
      expect(await store.removeKeys(ALICE, ['k1', 'k3', 'nope'])).toBe(2);
      expect(keys(await store.lookup(ALICE))).toEqual(['k2']);
      expect(await store.removeKeys(ALICE, ['k1'])).toBe(0);
      expect(await store.removeKeys(ALICE, [])).toBe(0);
      expect(await store.removeKeys(BOB, ['k2'])).toBe(0);
      expect(keys(await store.lookup(ALICE))).toEqual(['k2']);
    });

    it('removeKeys does not count bindings that had already expired', async () => {
      const now = Date.now();
      await store.register(ALICE, op(now - HOUR, 1, { writes: [write('dead', now - 1)] }));
      await store.register(ALICE, op(now, 1, { callId: 'c2', writes: [write('live', now + HOUR, { callId: 'c2' })] }));
      expect(await store.removeKeys(ALICE, ['dead', 'live'])).toBe(1);
      expect(await store.lookup(ALICE)).toEqual([]);
    });

    it('removeAll removes every binding of the AOR only, returning how many were live', async () => {
      const now = Date.now();
      await store.register(ALICE, op(now, 1, { writes: [write('k1', now + HOUR), write('k2', now + HOUR)] }));
      await store.register(BOB, op(now, 1, { writes: [write('b1', now + HOUR)] }));
      expect(await store.removeAll(ALICE)).toBe(2);
      expect(await store.lookup(ALICE)).toEqual([]);
      expect(keys(await store.lookup(BOB))).toEqual(['b1']);
      expect(await store.removeAll(ALICE)).toBe(0);
    });

    it('a removed binding can be registered again with a lower CSeq (its history is gone)', async () => {
      const now = Date.now();
      await store.register(ALICE, op(now, 7, { writes: [write('k1', now + HOUR, { cseq: 7 })] }));
      await store.removeAll(ALICE);
      const r = await store.register(ALICE, op(now + 1, 1, { writes: [write('k1', now + HOUR)] }));
      expect(r).toMatchObject({ ok: true, bindings: [{ key: 'k1', cseq: 1 }] });
    });
  });

  describe('#countLive()', () => {
    it('counts live bindings by transport with every transport present', async () => {
      expect(await store.countLive()).toEqual({ udp: 0, tcp: 0, tls: 0, ws: 0, wss: 0 });
      await store.register(ALICE, op(t0, 1, {
        writes: [write('u1', t0 + HOUR, { transport: 'udp' }), write('w1', t0 + HOUR, { transport: 'wss' })],
      }));
      await store.register(BOB, op(t0, 1, { writes: [write('u2', t0 + HOUR, { transport: 'udp' }), write('t1', t0 + MIN)] }));
      await store.register(CAROL, op(t0, 1, { writes: [write('l1', t0 + HOUR, { transport: 'tls' })] }));
      expect(await store.countLive()).toEqual({ udp: 2, tcp: 1, tls: 1, ws: 0, wss: 1 });
      expect(await store.countLive(t0 + MIN)).toEqual({ udp: 2, tcp: 0, tls: 1, ws: 0, wss: 1 });
      expect(await store.countLive(t0 + HOUR)).toEqual({ udp: 0, tcp: 0, tls: 0, ws: 0, wss: 0 });
    });
  });

  it('#ping() answers true while the backend is up', async () => {
    expect(await store.ping()).toBe(true);
  });

  describe('registration events (written with the change they report)', () => {
    const kindsOf = async (aor: Aor = ALICE): Promise<string[]> =>
      (await store.registrationEvents(aor.domain, null, 100)).filter((e) => e.aor.user === aor.user).map((e) => `${e.event}:${e.binding.key}:${e.registered}`);

    it('registered, refreshed and unregistered, each naming the endpoint and the registered state after it', async () => {
      const now = Date.now();
      await store.register(ALICE, op(now, 1, { writes: [write('k1', now + HOUR, { endpointId: 'ep-alice' })] }));
      await store.register(ALICE, op(now + 1, 2, { writes: [write('k1', now + HOUR, { cseq: 2, endpointId: 'ep-alice' }), write('k2', now + HOUR, { cseq: 2, endpointId: 'ep-alice' })] }));
      await store.register(ALICE, op(now + 2, 3, { removes: ['k1'] }));
      await store.register(ALICE, op(now + 3, 4, { removeAll: true }));
      expect(await kindsOf()).toEqual(['registered:k1:true', 'refreshed:k1:true', 'registered:k2:true', 'unregistered:k1:true', 'unregistered:k2:false']);
      const all = await store.registrationEvents(ALICE.domain, null, 100);
      expect(all[0]).toMatchObject({ event: 'registered', aor: ALICE, binding: { endpointId: 'ep-alice', transport: 'tcp', instanceId: '<urn:uuid:k1>', userAgent: 'Yealink SIP-T46S 66.86.0.15' } });
      // Ids increase; `after` resumes exactly after an id; `limit` bounds a page.
      const ids = all.map((e) => e.id);
      expect(new Set(ids).size).toBe(ids.length);
      expect((await store.registrationEvents(ALICE.domain, ids[1] as string, 2)).map((e) => e.id)).toEqual(ids.slice(2, 4));
      expect(await store.registrationEvents(ALICE.domain, ids.at(-1) as string, 10)).toEqual([]);
      expect(await store.newestRegistrationEventId(ALICE.domain)).toBe(ids.at(-1));
      // Another account's log is its own.
      expect(await store.registrationEvents(CAROL.domain, null, 10)).toEqual([]);
      expect(await store.newestRegistrationEventId(CAROL.domain)).toBe(null);
    });

    it('a rejected or retransmitted REGISTER writes no event', async () => {
      const now = Date.now();
      await store.register(ALICE, op(now, 5, { writes: [write('k1', now + HOUR, { cseq: 5 })] }));
      await store.register(ALICE, op(now + 1, 5, { writes: [write('k1', now + HOUR, { cseq: 5 })] })); // retransmission
      await store.register(ALICE, op(now + 2, 4, { writes: [write('k1', now + HOUR, { cseq: 4 })] })); // out of order
      await store.register(ALICE, op(now + 3, 6, { maxContacts: 1, writes: [write('k1', now + HOUR, { cseq: 6 }), write('k2', now + HOUR, { cseq: 6 })] }));
      expect(await kindsOf()).toEqual(['registered:k1:true']);
    });

    it('removeKeys and removeAll write removed (live) and expired (lapsed) events', async () => {
      const now = Date.now();
      await store.register(ALICE, op(now, 1, { writes: [write('k1', now + HOUR), write('k2', now + HOUR)] }));
      await store.register(BOB, op(now, 1, { writes: [write('b1', now + HOUR)] }));
      await store.removeKeys(ALICE, ['k1']);
      await store.removeAll(ALICE);
      await store.removeAll(BOB);
      expect(await kindsOf(ALICE)).toEqual(['registered:k1:true', 'registered:k2:true', 'removed:k1:true', 'removed:k2:false']);
      expect(await kindsOf(BOB)).toEqual(['registered:b1:true', 'removed:b1:false']);
    });

    it('the expiry sweep removes lapsed bindings with an expired event, no request needed', async () => {
      const now = Date.now();
      await store.register(ALICE, op(now, 1, { writes: [write('short', now + 300), write('long', now + HOUR)] }));
      await store.register(BOB, op(now, 1, { writes: [write('b1', now + 300)] }));
      await store.register(CAROL, op(now, 1, { writes: [write('c1', now + HOUR)] }));
      // Past the expiries and the batching of the sweep's due hints (100 ms).
      await sleep(500);
      expect(await store.sweepExpired()).toBe(2);
      expect(await kindsOf(ALICE)).toEqual(['registered:short:true', 'registered:long:true', 'expired:short:true']);
      expect(await kindsOf(BOB)).toEqual(['registered:b1:true', 'expired:b1:false']);
      expect(await kindsOf(CAROL)).toEqual(['registered:c1:true']);
      expect(keys(await store.lookup(ALICE))).toEqual(['long']);
      expect(await store.countLive(now)).toEqual({ udp: 0, tcp: 2, tls: 0, ws: 0, wss: 0 });
    });

    it('a lapsed binding met by the next REGISTER is reported expired then', async () => {
      const now = Date.now();
      await store.register(ALICE, op(now - HOUR, 1, { writes: [write('old', now - 1)] }));
      await store.register(ALICE, op(now, 1, { callId: 'c2', writes: [write('new', now + HOUR, { callId: 'c2' })] }));
      expect(await kindsOf()).toEqual(['registered:old:true', 'expired:old:true', 'registered:new:true']);
    });
  });
});

// ---------------------------------------------------------------------------

describe('MemoryLocationStore (memory bound)', () => {
  it('an unref\'d periodic sweep deletes expired bindings', async () => {
    const store = new MemoryLocationStore({ sweepIntervalMs: 20 });
    try {
      const now = Date.now();
      await store.register(ALICE, op(now, 1, { writes: [write('k1', now + 50), write('k2', now + HOUR)] }));
      await sleep(200);
      // The timer already took k1: nothing left for an explicit sweep to delete.
      expect(store.sweep()).toBe(0);
      expect(keys(await store.lookup(ALICE))).toEqual(['k2']);
      expect(store.sweep(now + HOUR)).toBe(1);
    } finally {
      await store.close();
    }
  });
});

describe('RedisLocationStore on a real Redis', () => {
  let redis: Redis;
  let store: RedisLocationStore;
  const K = redisLocationKeys(ALICE);

  beforeEach(async () => {
    await rb.admin.flushdb();
    redis = rb.connect(rb.server.url);
    store = new RedisLocationStore(redis, { closeConnection: true });
  });
  afterEach(async () => {
    await store.close();
  });

  it('lays keys out with the account domain as hash tag', async () => {
    const now = Date.now();
    const w = write('k1', now + HOUR);
    await store.register(ALICE, op(now, 1, { writes: [w] }));
    expect(K).toEqual({
      bindings: 'sipedge:loc:{acme.sip.localhost}:alice',
      index: 'sipedge:locidx:{acme.sip.localhost}',
      events: 'sipedge:regev:{acme.sip.localhost}',
      lapses: 'sipedge:loclapse:{acme.sip.localhost}',
    });
    expect(await rb.admin.type(K.events)).toBe('stream');
    expect(await rb.admin.zscore(K.lapses, 'alice')).toBe(String(now + HOUR));
    const h = await rb.admin.hgetall(K.bindings);
    expect(Object.keys(h)).toEqual(['k1']);
    expect(JSON.parse(h.k1!)).toEqual({ ...w, updatedAt: now });
    expect(await rb.admin.zscore(K.index, 'alice')).toBe(String(now + HOUR));
    expect(await rb.admin.type(K.bindings)).toBe('hash');
    expect(await rb.admin.type(K.index)).toBe('zset');
  });

  it('refreshes the key TTL and the index on every accepted REGISTER, and not on a rejected one', async () => {
    const margin = 10_000;
    const now = Date.now();
    await store.register(ALICE, op(now, 1, { writes: [write('k1', now + MIN)] }));
    const near = (pttl: number, want: number): void => {
      expect(pttl).toBeLessThanOrEqual(want);
      expect(pttl).toBeGreaterThan(want - 2000);
    };
    near(await rb.admin.pttl(K.bindings), MIN + margin);
    near(await rb.admin.pttl(K.index), MIN + margin);
    expect(await rb.admin.zscore(K.index, 'alice')).toBe(String(now + MIN));

    // Longer expiry: TTL and index score grow.
    await store.register(ALICE, op(now, 2, { writes: [write('k1', now + HOUR, { cseq: 2 })] }));
    near(await rb.admin.pttl(K.bindings), HOUR + margin);
    expect(await rb.admin.zscore(K.index, 'alice')).toBe(String(now + HOUR));

    // Simulate a decayed TTL; the next accepted REGISTER must restore it even though
    // the latest expiry is unchanged (peers lost bindings by skipping this).
    await rb.admin.pexpire(K.bindings, 5000);
    await rb.admin.pexpire(K.index, 5000);
    await store.register(ALICE, op(now, 3, { writes: [write('k2', now + MIN, { cseq: 3 })] }));
    near(await rb.admin.pttl(K.bindings), HOUR + margin);
    near(await rb.admin.pttl(K.index), HOUR + margin);

    // A rejected REGISTER changes nothing, the TTL included.
    await rb.admin.pexpire(K.bindings, 5000);
    const r = await store.register(ALICE, op(now, 1, { writes: [write('k1', now + 2 * HOUR)] }));
    expect(r).toMatchObject({ ok: false, code: 'OUT_OF_ORDER' });
    expect(await rb.admin.pttl(K.bindings)).toBeLessThanOrEqual(5000);
    const tooMany = await store.register(ALICE, op(now, 9, { maxContacts: 2, writes: [write('k3', now + HOUR, { cseq: 9 })] }));
    expect(tooMany).toMatchObject({ ok: false, code: 'TOO_MANY' });
    expect(await rb.admin.pttl(K.bindings)).toBeLessThanOrEqual(5000);

    // Shorter latest expiry: TTL and score follow it down.
    await store.register(ALICE, op(now, 10, { writes: [write('k1', now + MIN, { cseq: 10 })], removes: ['k2'] }));
    near(await rb.admin.pttl(K.bindings), MIN + margin);
    expect(await rb.admin.zscore(K.index, 'alice')).toBe(String(now + MIN));
  });

  it('keeps the account index at each user\'s latest live expiry through removes', async () => {
    const now = Date.now();
    await store.register(ALICE, op(now, 1, { writes: [write('k1', now + HOUR), write('k2', now + MIN)] }));
    await store.register(BOB, op(now, 1, { writes: [write('b1', now + 2 * HOUR)] }));
    expect(await rb.admin.zrange(K.index, 0, -1, 'WITHSCORES')).toEqual(['alice', String(now + HOUR), 'bob', String(now + 2 * HOUR)]);
    await store.removeKeys(ALICE, ['k1']);
    expect(await rb.admin.zscore(K.index, 'alice')).toBe(String(now + MIN));
    await store.removeKeys(ALICE, ['k2']);
    expect(await rb.admin.zscore(K.index, 'alice')).toBeNull();
    expect(await rb.admin.exists(K.bindings)).toBe(0);
    await store.removeAll(BOB);
    expect(await rb.admin.exists(K.index, redisLocationKeys(BOB).bindings)).toBe(0);
  });

  it('drops users whose bindings all expired from the index on the next REGISTER of the account', async () => {
    const now = Date.now();
    await store.register(BOB, op(now, 1, { writes: [write('b1', now + MIN)] }));
    await store.register(ALICE, op(now + MIN, 1, { writes: [write('k1', now + 2 * MIN)] }));
    expect(await rb.admin.zrange(K.index, 0, -1)).toEqual(['alice']);
  });

  it('deletes expired bindings it meets and skips corrupt values, which read as absent', async () => {
    const now = Date.now();
    await store.register(ALICE, op(now, 1, { writes: [write('old', now + MIN)] }));
    await rb.admin.hset(K.bindings, 'junk', 'not json', 'half', JSON.stringify({ key: 'half', expiresAt: now + HOUR }));
    expect(await store.lookup(ALICE, now)).toMatchObject([{ key: 'old' }]);
    const r = await store.register(ALICE, op(now + MIN, 2, { writes: [write('new', now + HOUR, { cseq: 2 })] }));
    expect(keys(r.bindings)).toEqual(['new']);
    expect(Object.keys(await rb.admin.hgetall(K.bindings))).toEqual(['new']);
  });

  it('hides an expired binding on read before Redis has dropped the key', async () => {
    const now = Date.now();
    await store.register(ALICE, op(now, 1, { writes: [write('k1', now + 1000)] }));
    await sleep(1500);
    expect(await rb.admin.exists(K.bindings)).toBe(1); // TTL = expiry + margin: still there
    expect(await store.lookup(ALICE)).toEqual([]);
  });

  it('register is exactly one round trip: a single EVALSHA (seen by MONITOR), the TTL refresh inside it', async () => {
    const now = Date.now();
    await store.register(ALICE, op(now, 1, { writes: [write('k0', now + HOUR)] })); // script cached
    const mon = await rb.admin.monitor();
    mon.on('error', (e: Error) => rb.clientErrors.push(e));
    const events: Array<{ args: string[]; source: string }> = [];
    mon.on('monitor', (_time: string, args: string[], source: string) => events.push({ args, source }));
    const marker = rb.connect(rb.server.url);
    const waitFor = async (tag: string): Promise<void> => {
      await marker.echo(tag);
      const deadline = Date.now() + 5000;
      while (!events.some((e) => e.args[0]?.toLowerCase() === 'echo' && e.args[1] === tag)) {
        if (Date.now() > deadline) throw new Error(`MONITOR never showed ${tag}`);
        await sleep(10);
      }
    };
    try {
      await waitFor('start');
      const from = events.length;
      const r = await store.register(ALICE, op(now + 1, 2, { writes: [write('k1', now + HOUR, { cseq: 2 })], removes: ['k0'] }));
      expect(r.ok).toBe(true);
      await waitFor('end');
      const between = events.slice(from, -1);
      // The expiry sweep's due hint is gathered over 100 ms into one ZADD for many REGISTERs (docs/events.md): not part of the round trip.
      const fromClients = between.filter((e) => e.source !== 'lua' && !(e.args[0]?.toLowerCase() === 'zadd' && e.args[1]?.endsWith('{sweep}:due')));
      expect(fromClients.map((e) => e.args[0]?.toLowerCase())).toEqual(['evalsha']);
      const inScript = between.filter((e) => e.source === 'lua').map((e) => e.args[0]?.toLowerCase());
      expect(inScript).toEqual(expect.arrayContaining(['hgetall', 'hset', 'pexpire', 'zadd']));
    } finally {
      mon.disconnect();
    }
  });

  it('recovers when Redis lost its script cache (NOSCRIPT → EVAL)', async () => {
    const now = Date.now();
    await store.register(ALICE, op(now, 1, { writes: [write('k1', now + HOUR)] }));
    await rb.admin.script('FLUSH');
    const r = await store.register(ALICE, op(now, 2, { writes: [write('k2', now + HOUR, { cseq: 2 })] }));
    expect(keys(r.bindings)).toEqual(['k1', 'k2']);
    expect(await store.removeKeys(ALICE, ['k1'])).toBe(1);
    await rb.admin.script('FLUSH');
    expect(await store.removeAll(ALICE)).toBe(1);
  });

  it('keeps stores with different prefixes apart, countLive included', async () => {
    const other = new RedisLocationStore(rb.connect(rb.server.url), { prefix: 'tenant*2:', closeConnection: true });
    try {
      const now = Date.now();
      await store.register(ALICE, op(now, 1, { writes: [write('k1', now + HOUR)] }));
      await other.register(ALICE, op(now, 1, { writes: [write('x1', now + HOUR, { transport: 'ws' }), write('x2', now + HOUR, { transport: 'ws' })] }));
      expect(keys(await store.lookup(ALICE))).toEqual(['k1']);
      expect(keys(await other.lookup(ALICE))).toEqual(['x1', 'x2']);
      expect(await store.countLive()).toEqual({ udp: 0, tcp: 1, tls: 0, ws: 0, wss: 0 });
      expect(await other.countLive()).toEqual({ udp: 0, tcp: 0, tls: 0, ws: 2, wss: 0 });
      expect(await rb.admin.exists('tenant*2:loc:{acme.sip.localhost}:alice')).toBe(1);
    } finally {
      await other.close();
    }
  });

  it('countLive walks more keys than one SCAN batch', async () => {
    const now = Date.now();
    const n = 1200;
    const p = rb.admin.pipeline();
    for (let i = 0; i < n; i++) {
      const b = { ...write(`k${i}`, now + HOUR, { transport: i % 2 ? 'udp' : 'ws' }), updatedAt: now };
      p.hset(redisLocationKeys({ domain: `d${i % 7}.sip.localhost`, user: `u${i}` }).bindings, b.key, JSON.stringify(b));
    }
    await p.exec();
    expect(await store.countLive()).toEqual({ udp: n / 2, tcp: 0, tls: 0, ws: n / 2, wss: 0 });
  });

  it('rejects with StoreUnavailableError while Redis is down, never crashes, and works again after restart', async () => {
    const own = await startRedis();
    const r = rb.connect(own.url, { enableOfflineQueue: false, maxRetriesPerRequest: 0, retryStrategy: () => 50 });
    const s = new RedisLocationStore(r, { pingTimeoutMs: 300, closeConnection: true });
    try {
      await waitUntil(() => r.status === 'ready'); // no offline queue: wait for the connection
      const now = Date.now();
      expect((await s.register(ALICE, op(now, 1, { writes: [write('k1', now + HOUR)] }))).ok).toBe(true);
      await own.kill9();
      await waitUntil(() => r.status !== 'ready');
      await expect(s.register(ALICE, op(now, 2, { writes: [write('k1', now + HOUR, { cseq: 2 })] }))).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(s.lookup(ALICE)).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(s.lookupMany([ALICE, BOB])).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(s.removeAll(ALICE)).rejects.toBeInstanceOf(StoreUnavailableError);
      await expect(s.countLive()).rejects.toBeInstanceOf(StoreUnavailableError);
      expect(await s.ping()).toBe(false);
      await own.start();
      await waitUntil(() => r.status === 'ready');
      expect(await s.ping()).toBe(true);
      // The new server is empty and has no scripts: EVALSHA falls back to EVAL.
      const again = await s.register(ALICE, op(now, 3, { writes: [write('k1', now + HOUR, { cseq: 3 })] }));
      expect(again).toMatchObject({ ok: true, bindings: [{ key: 'k1', cseq: 3 }] });
    } finally {
      await s.close();
      await own.stop();
    }
  });

  it('close() leaves the connection to its owner by default', async () => {
    const owned = rb.connect(rb.server.url);
    await new RedisLocationStore(owned).close();
    expect(await owned.ping()).toBe('PONG');
  });

  it('close() with closeConnection is idempotent and safe on a connection another store already closed', async () => {
    const shared = rb.connect(rb.server.url);
    await shared.ping();
    const a = new RedisLocationStore(shared, { closeConnection: true });
    const b = new RedisLocationStore(shared, { closeConnection: true });
    await a.close();
    await b.close();
    await a.close();
    expect(['end', 'close']).toContain(shared.status);
  });

  it('refuses an ioredis client with keyPrefix, naming the option to use', () => {
    const r = rb.connect(rb.server.url, { keyPrefix: 'x:', lazyConnect: true });
    expect(() => new RedisLocationStore(r)).toThrow(/prefix/);
  });
});

async function waitUntil(cond: () => boolean, timeoutMs = 10_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!cond()) {
    if (Date.now() > deadline) throw new Error('condition not met in time');
    await sleep(20);
  }
}
