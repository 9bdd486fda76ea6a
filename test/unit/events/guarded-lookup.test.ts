/** The DNS lookup of callback connections keeps only allowed addresses (docs/callbacks.md). */
import type { LookupAddress } from 'node:dns';
import { describe, expect, it } from 'vitest';
import { CallbackNetworkGuard } from '../../../src/events/network-guard.js';
import { guardedLookup } from '../../../src/events/webhook.js';

type Result = { err: NodeJS.ErrnoException | null; address: string | LookupAddress[]; family?: number };

function look(guard: CallbackNetworkGuard, host: string, all: boolean): Promise<Result> {
  return new Promise((resolve) => guardedLookup(guard)(host, { all }, (err, address, family) => resolve({ err, address, family })));
}

describe('guardedLookup', () => {
  it('fails a name whose every address is refused, naming the address and why', async () => {
    for (const all of [true, false]) {
      const r = await look(new CallbackNetworkGuard(), 'localhost', all);
      expect(r.err?.code).toBe('ERR_CALLBACK_ADDRESS_REFUSED');
      expect(r.err?.message).toMatch(/^callback address (127\.0\.0\.1|::1) refused \(loopback\); CALLBACK_ALLOWED_NETWORKS does not list it$/);
    }
  });

  it('keeps only the allowed addresses, in both answer shapes Node asks for', async () => {
    const v4only = new CallbackNetworkGuard(['127.0.0.0/8']);
    const many = await look(v4only, 'localhost', true);
    expect(many.err).toBeNull();
    expect(many.address).toEqual([{ address: '127.0.0.1', family: 4 }]);
    const one = await look(v4only, 'localhost', false);
    expect(one).toEqual({ err: null, address: '127.0.0.1', family: 4 });
  });

  it('passes DNS failures through unchanged', async () => {
    const r = await look(new CallbackNetworkGuard(['0.0.0.0/0', '::/0']), 'no-such-host.invalid', true);
    expect(r.err?.code).toMatch(/ENOTFOUND|EAI_AGAIN/);
  });
});
