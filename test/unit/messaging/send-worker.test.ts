/**
 * The send worker (src/messaging/send.ts) with a scripted Cloud API client: a request
 * that cannot have reached the provider is retried and the message is sent once; an
 * attempt left in flight by a dead node is never repeated; statuses only move forward.
 */
import { describe, expect, it } from 'vitest';
import { createMessaging } from '../../../src/messaging/index.js';
import { MAX_ATTEMPTS, withStatus } from '../../../src/messaging/send.js';
import type { SendOutcome, WhatsAppClient } from '../../../src/messaging/whatsapp.js';
import { createSecretBox } from '../../../src/security/secret-box.js';
import { MemoryMessagingStore } from '../../../src/store/messaging/memory.js';
import type { MessageRecord } from '../../../src/store/messaging/messaging.js';
import { testConfig } from '../../support/api-harness.js';
import { until } from '../../support/wait.js';

const box = createSecretBox([{ kid: 'k1', key: Buffer.alloc(32, 9) }]);

function scripted(outcomes: SendOutcome[]): WhatsAppClient & { calls: Array<{ pnid: string; token: string; payload: Record<string, unknown> }> } {
  const calls: Array<{ pnid: string; token: string; payload: Record<string, unknown> }> = [];
  return {
    calls,
    close: () => undefined,
    async send(pnid, token, payload) {
      calls.push({ pnid, token, payload });
      return outcomes.shift() ?? { kind: 'ok', providerMessageId: `wamid.${calls.length}` };
    },
  };
}

async function setup(outcomes: SendOutcome[], now: () => number = Date.now) {
  const store = new MemoryMessagingStore();
  const client = scripted(outcomes);
  const m = createMessaging({ config: testConfig(), redis: null, secretBox: box, store, whatsapp: client, sendPollMs: 20, now });
  const ch = await m.channels.create('MA1', 'ma1.sip.test', { type: 'whatsapp', wabaId: '1', phoneNumberId: '77', accessToken: 'tok-secret' });
  // A template needs no open window.
  const send = () => m.send({ authId: 'MA1' }, { channelId: ch.id, to: '+14155550100', type: 'template', template: { name: 'hello', language: 'en' } });
  return { store, client, m, ch, send };
}

describe('SendWorker', () => {
  it('retries a request that never reached the provider and sends the message once', async () => {
    const { m, client, send, store } = await setup([{ kind: 'retry', detail: 'ECONNREFUSED before the request was sent' }]);
    m.start();
    try {
      const msg = await send();
      const done = await until('accepted', async () => ((await store.getMessage('MA1', msg.id))?.providerMessageId ? await store.getMessage('MA1', msg.id) : undefined), 5000);
      expect(done).toMatchObject({ status: 'pending', providerMessageId: 'wamid.2', attempts: 2, inFlight: false });
      expect(client.calls).toHaveLength(2);
      expect(client.calls[1]?.token).toBe('tok-secret');
      expect(client.calls[1]?.payload).toMatchObject({ to: '14155550100', type: 'template', biz_opaque_callback_data: msg.id });
      await new Promise((r) => setTimeout(r, 100));
      expect(client.calls).toHaveLength(2);
    } finally {
      await m.close();
    }
  });

  it('an attempt left in flight (a node died mid-request) is not repeated: failed with provider_timeout', async () => {
    const { m, client, send, store } = await setup([]);
    const msg = await send();
    // What a node that died after marking the attempt leaves behind.
    const cur = (await store.getMessage('MA1', msg.id)) as MessageRecord;
    expect(await store.replaceMessage(cur, { ...cur, inFlight: true, attempts: 1 })).toBe(true);
    m.start();
    try {
      const failed = await until('failed', async () => ((await store.getMessage('MA1', msg.id))?.status === 'failed' ? await store.getMessage('MA1', msg.id) : undefined), 5000);
      expect(failed?.error?.code).toBe('provider_timeout');
      expect(client.calls).toHaveLength(0);
    } finally {
      await m.close();
    }
  });

  it(`gives up after ${MAX_ATTEMPTS} attempts that never reached the provider (provider_unavailable)`, async () => {
    let t = Date.now();
    const retry: SendOutcome = { kind: 'retry', detail: 'HTTP 503' };
    const { m, client, send, store } = await setup(Array.from({ length: MAX_ATTEMPTS }, () => retry), () => t);
    m.start();
    try {
      const msg = await send();
      const failed = await until(
        'failed',
        async () => {
          t += 61_000; // past every retry delay
          m.wake();
          const x = await store.getMessage('MA1', msg.id);
          return x?.status === 'failed' ? x : undefined;
        },
        5000,
      );
      expect(failed?.error?.code).toBe('provider_unavailable');
      expect(client.calls).toHaveLength(MAX_ATTEMPTS);
    } finally {
      await m.close();
    }
  });
});

describe('withStatus', () => {
  const base = { status: 'pending', statuses: [], error: null } as unknown as MessageRecord;
  it('moves only forward: sent → delivered → read; read and failed are final', () => {
    const sent = withStatus(base, 'sent', 1) as MessageRecord;
    const delivered = withStatus(sent, 'delivered', 2) as MessageRecord;
    expect(withStatus(delivered, 'sent', 3)).toBe(null);
    expect(withStatus(delivered, 'delivered', 3)).toBe(null);
    const read = withStatus(delivered, 'read', 4) as MessageRecord;
    expect(read.statuses.map((s) => s.status)).toEqual(['sent', 'delivered', 'read']);
    expect(withStatus(read, 'failed', 5, { code: '1', title: 'x' })).toBe(null);
    const failed = withStatus(sent, 'failed', 5, { code: '131026', title: 'undeliverable' }) as MessageRecord;
    expect(failed.error).toEqual({ code: '131026', title: 'undeliverable' });
    expect(withStatus(failed, 'read', 6)).toBe(null);
    // Our own provider_timeout gives way to the provider's evidence.
    const timedOut = withStatus(base, 'failed', 7, { code: 'provider_timeout', title: 't' }) as MessageRecord;
    expect(withStatus(timedOut, 'sent', 8)).toMatchObject({ status: 'sent', error: null });
  });
});

describe('SendWorker polling', () => {
  it('an idle queue is read every 250 ms when no poll interval is given (not every millisecond)', async () => {
    const store = new MemoryMessagingStore();
    let claims = 0;
    const claimSends = store.claimSends.bind(store);
    store.claimSends = async (...a: Parameters<typeof store.claimSends>) => {
      claims++;
      return claimSends(...a);
    };
    const m = createMessaging({ config: testConfig(), redis: null, secretBox: box, store, whatsapp: scripted([]), now: Date.now });
    m.start();
    try {
      await new Promise((r) => setTimeout(r, 1100));
    } finally {
      await m.close();
    }
    // 4 or 5 polls in 1.1 s at 250 ms; the bug this guards against made ~1,000.
    expect(claims).toBeGreaterThanOrEqual(3);
    expect(claims).toBeLessThanOrEqual(6);
  });
});
