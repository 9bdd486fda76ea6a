/**
 * CIDR parsing and the prefix index behind inboundByAddress (src/trunks/cidr.ts):
 * normalised text, host bits cleared, IPv4-mapped sources, and every network that
 * contains an address found (nested prefixes, /0, exact /32 and /128).
 */
import { describe, expect, it } from 'vitest';
import { parseAddress, parseCidr, PrefixIndex } from '../../../src/trunks/cidr.js';
import { checkSipUri } from '../../../src/trunks/index.js';

describe('parseCidr', () => {
  it('normalises networks and plain addresses, IPv4 and IPv6', () => {
    expect(parseCidr('192.0.2.17/28')?.text).toBe('192.0.2.16/28');
    expect(parseCidr('192.0.2.17')?.text).toBe('192.0.2.17/32');
    expect(parseCidr('0.0.0.0/0')?.text).toBe('0.0.0.0/0');
    expect(parseCidr('2001:DB8:0:0:0:0:0:1')?.text).toBe('2001:db8::1/128');
    expect(parseCidr('2001:db8:aa:bb::1/48')?.text).toBe('2001:db8:aa::/48');
    expect(parseCidr('2001:0:0:1:0:0:0:1/128')?.text).toBe('2001:0:0:1::1/128');
    expect(parseCidr('::/0')?.text).toBe('::/0');
    expect(parseCidr('::ffff:192.0.2.1/128')?.text).toBe('::ffff:c000:201/128');
  });

  it('refuses what is not a network', () => {
    for (const bad of ['', 'example.com', '192.0.2.0/33', '192.0.2.0/', '192.0.2.0/-1', '192.0.2.0/2x', '2001:db8::/129', '256.0.0.1', '1.2.3', '::1/1/2', ' 10.0.0.1/8', 'x'.repeat(100)]) {
      expect(parseCidr(bad), bad).toBe(null);
    }
  });
});

describe('parseAddress', () => {
  it('reads sources as received: brackets, zone ids, IPv4-mapped IPv6', () => {
    expect(parseAddress('192.0.2.1')).toEqual({ family: 4, bits: 0xc0000201n });
    expect(parseAddress('::ffff:192.0.2.1')).toEqual({ family: 4, bits: 0xc0000201n });
    expect(parseAddress('[2001:db8::1]')).toEqual({ family: 6, bits: (0x20010db8n << 96n) | 1n });
    expect(parseAddress('fe80::1%eth0')?.family).toBe(6);
    expect(parseAddress('gw.example')).toBe(null);
  });
});

describe('PrefixIndex', () => {
  it('finds every network containing an address, most specific first', () => {
    const idx = new PrefixIndex<string>();
    const add = (c: string, v: string): void => idx.add(parseCidr(c) ?? (() => { throw new Error(c); })(), v);
    add('10.0.0.0/8', 'wide');
    add('10.1.0.0/16', 'mid');
    add('10.1.2.3', 'exact');
    add('0.0.0.0/0', 'any4');
    add('2001:db8::/32', 'v6');
    add('2001:db8::5', 'v6exact');
    expect(idx.match('10.1.2.3')).toEqual(['exact', 'mid', 'wide', 'any4']);
    expect(idx.match('10.2.0.1')).toEqual(['wide', 'any4']);
    expect(idx.match('11.0.0.1')).toEqual(['any4']);
    expect(idx.match('2001:db8::5')).toEqual(['v6exact', 'v6']);
    expect(idx.match('2001:db9::5')).toEqual([]);
    expect(idx.match('::ffff:10.1.2.3')).toEqual(['exact', 'mid', 'wide', 'any4']);
    expect(idx.match('garbage')).toEqual([]);
  });
});

describe('checkSipUri', () => {
  it('takes sip:/sips: URIs with udp/tcp/tls and derives the transport', () => {
    expect(checkSipUri('sip:gw.example.net')).toEqual({ uri: 'sip:gw.example.net', transport: 'udp' });
    expect(checkSipUri('sips:gw.example.net:5061')).toEqual({ uri: 'sips:gw.example.net:5061', transport: 'tls' });
    expect(checkSipUri('sip:+14155550100@[2001:db8::1]:5060;transport=TCP')).toMatchObject({ transport: 'tcp' });
    for (const bad of ['gw.example.net', 'tel:+14155550100', 'http://gw', 'sip:gw;transport=sctp', 'sip:', '']) {
      expect(checkSipUri(bad), bad).toHaveProperty('error');
    }
  });
});
