import { describe, expect, it } from 'vitest';
import { gatewayDestination, gatewayTransport, orderGateways } from '../../../src/trunks/gateways.js';
import type { GatewayView } from '../../../src/trunks/lookup.js';
import { parseUri } from '../../../src/sip/uri.js';
import type { SipUri } from '../../../src/sip/message.js';

const gw = (id: string, priority: number, weight: number, enabled = true): GatewayView => ({ id, uri: `sip:${id}.example`, priority, weight, enabled });

/** A deterministic random source (a linear congruential generator). */
function lcg(seed: number): () => number {
  let x = seed;
  return () => {
    x = (x * 1103515245 + 12345) % 2 ** 31;
    return x / 2 ** 31;
  };
}

describe('orderGateways', () => {
  it('tries lower priorities first and leaves disabled gateways out', () => {
    const order = orderGateways([gw('c', 3, 1), gw('a', 1, 1), gw('off', 0, 5, false), gw('b', 2, 1)]);
    expect(order.map((g) => g.id)).toEqual(['a', 'b', 'c']);
  });

  it('puts a weight-3 gateway first three times in four within one priority', () => {
    const random = lcg(42);
    let first = 0;
    const n = 20_000;
    for (let i = 0; i < n; i++) if (orderGateways([gw('heavy', 1, 3), gw('light', 1, 1)], random)[0].id === 'heavy') first++;
    expect(first / n).toBeGreaterThan(0.73);
    expect(first / n).toBeLessThan(0.77);
  });

  it('keeps every gateway of a priority in the order (the rest follow the first)', () => {
    const order = orderGateways([gw('x', 1, 1), gw('y', 1, 2), gw('z', 1, 7), gw('w', 2, 1)], lcg(7));
    expect(order.slice(0, 3).map((g) => g.id).sort()).toEqual(['x', 'y', 'z']);
    expect(order[3].id).toBe('w');
  });
});

describe('gateway transports', () => {
  const u = (s: string): SipUri => parseUri(s) as SipUri;
  it('reads ;transport=, sips: and the default ports', async () => {
    expect(gatewayTransport(u('sip:1.2.3.4'))).toBe('udp');
    expect(gatewayTransport(u('sip:1.2.3.4;transport=TCP'))).toBe('tcp');
    expect(gatewayTransport(u('sips:1.2.3.4'))).toBe('tls');
    expect(await gatewayDestination(u('sips:127.0.0.7'))).toMatchObject({ transport: 'tls', address: '127.0.0.7', port: 5061, connId: null });
    expect(await gatewayDestination(u('sip:127.0.0.8:5080;transport=tcp'))).toMatchObject({ transport: 'tcp', address: '127.0.0.8', port: 5080 });
    expect(await gatewayDestination(u('sip:[::1]:5070'))).toMatchObject({ transport: 'udp', address: '::1', port: 5070 });
  });
});
