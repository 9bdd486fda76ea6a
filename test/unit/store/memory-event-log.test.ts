/**
 * The embedded store's registration event log is bounded like the Redis stream
 * (`MAXLEN ~`): about EVENT_LOG_MAX events per account, cut in batches, the newest
 * always kept, and nothing older than the retention.
 */
import { describe, expect, it } from 'vitest';
import { EVENT_LOG_MAX, EVENT_LOG_RETENTION_MS, type Aor, type RegisterOp } from '../../../src/store/location/location.js';
import { EVENT_LOG_TRIM_SLACK, MemoryLocationStore } from '../../../src/store/location/memory.js';

const DOMAIN = 'acme.sip.localhost';

function refresh(store: MemoryLocationStore, user: string, now: number, cseq: number): Promise<unknown> {
  const aor: Aor = { domain: DOMAIN, user };
  const op: RegisterOp = {
    callId: `c-${user}`,
    cseq,
    now,
    removeAll: false,
    removes: [],
    maxContacts: 10,
    writes: [
      {
        key: `k-${user}`,
        uri: `sip:${user}@192.0.2.10:5062`,
        contact: `<sip:${user}@192.0.2.10:5062>`,
        expiresAt: now + 3_600_000,
        callId: `c-${user}`,
        cseq,
        userAgent: 'ua',
        received: 'sip:198.51.100.7:5062',
        transport: 'udp',
        path: null,
        q: null,
        instanceId: null,
        regId: null,
        nodeId: 'n',
        connId: null,
      },
    ],
  };
  return store.register(aor, op);
}

async function all(store: MemoryLocationStore): Promise<string[]> {
  const ids: string[] = [];
  let after: string | null = null;
  for (;;) {
    const page = await store.registrationEvents(DOMAIN, after, 5000);
    if (page.length === 0) return ids;
    for (const e of page) ids.push(e.id);
    after = page.at(-1)?.id ?? null;
  }
}

describe('embedded store: registration event log bounds', () => {
  it('keeps between EVENT_LOG_MAX and EVENT_LOG_MAX + slack events, the newest ones, in order', async () => {
    const store = new MemoryLocationStore({ sweepIntervalMs: 0 });
    const t0 = Date.now();
    const total = EVENT_LOG_MAX + 2 * EVENT_LOG_TRIM_SLACK + 17;
    let newest = '';
    for (let i = 0; i < total; i++) await refresh(store, `u${i % 500}`, t0 + i, 1 + Math.floor(i / 500));
    newest = (await store.newestRegistrationEventId(DOMAIN)) as string;
    const ids = await all(store);
    expect(ids.length).toBeGreaterThanOrEqual(EVENT_LOG_MAX);
    expect(ids.length).toBeLessThanOrEqual(EVENT_LOG_MAX + EVENT_LOG_TRIM_SLACK);
    expect(ids.at(-1)).toBe(newest);
    // Ids are `<ms>-<seq>`, strictly increasing: nothing reordered or lost inside the window.
    const ms = ids.map((id) => Number(id.split('-')[0]));
    for (let i = 1; i < ms.length; i++) expect(ms[i]).toBe((ms[i - 1] as number) + 1);
    await store.close?.();
  });

  it('drops events older than the retention at the next write or read', async () => {
    const store = new MemoryLocationStore({ sweepIntervalMs: 0 });
    const t0 = Date.now() - EVENT_LOG_RETENTION_MS - 10_000;
    for (let i = 0; i < 5; i++) await refresh(store, `old${i}`, t0 + i, 1);
    await refresh(store, 'fresh', Date.now(), 1);
    const events = await store.registrationEvents(DOMAIN, null, 100);
    expect(events.map((e) => e.aor.user)).toEqual(['fresh']);
    await store.close?.();
  });
});
