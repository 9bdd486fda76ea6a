/** Which addresses callbacks may reach (docs/callbacks.md "Which addresses a callback may reach"). */
import { describe, expect, it } from 'vitest';
import { ConfigError } from '../../../src/errors.js';
import { CallbackNetworkGuard, classifyAddress, ipv6Groups, parseAllowedNetworks } from '../../../src/events/network-guard.js';

describe('classifyAddress', () => {
  it.each([
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', 'unspecified'],
    ['127.0.0.1', 'loopback'],
    ['127.255.255.254', 'loopback'],
    ['10.0.0.0', 'private'],
    ['10.255.255.255', 'private'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.168.1.1', 'private'],
    ['100.64.0.0', 'shared'],
    ['100.127.255.255', 'shared'],
    ['169.254.169.254', 'link-local'],
    ['192.0.0.8', 'reserved'],
    ['192.0.2.10', 'documentation'],
    ['198.51.100.1', 'documentation'],
    ['203.0.113.99', 'documentation'],
    ['198.18.0.1', 'reserved'],
    ['198.19.255.255', 'reserved'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved'],
    ['255.255.255.255', 'broadcast'],
  ])('refuses IPv4 %s as %s', (ip, reason) => {
    expect(classifyAddress(ip)).toBe(reason);
  });

  it.each(['1.1.1.1', '8.8.8.8', '9.255.255.255', '11.0.0.0', '172.15.255.255', '172.32.0.0', '192.167.255.255', '192.169.0.0',
    '100.63.255.255', '100.128.0.0', '169.253.255.255', '169.255.0.0', '198.17.255.255', '198.20.0.0', '223.255.255.255', '126.255.255.255', '128.0.0.0'])(
    'lets public IPv4 %s through (block edges included)',
    (ip) => expect(classifyAddress(ip)).toBeNull(),
  );

  it.each([
    ['::', 'unspecified'],
    ['0:0:0:0:0:0:0:0', 'unspecified'],
    ['::1', 'loopback'],
    ['0:0:0:0:0:0:0:1', 'loopback'],
    ['fc00::1', 'private'],
    ['fd12:3456:789a::1', 'private'],
    ['fdff:ffff:ffff:ffff:ffff:ffff:ffff:ffff', 'private'],
    ['fe80::1', 'link-local'],
    ['fe80::1%eth0', 'link-local'],
    ['FE80::ABCD', 'link-local'],
    ['febf:ffff::1', 'link-local'],
    ['fec0::1', 'private'],
    ['ff02::1', 'multicast'],
    ['ff05::1:3', 'multicast'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation'],
    ['2001::1', 'reserved'],
    ['2001:0:4136:e378::1', 'reserved'],
    ['100::1', 'reserved'],
    ['::2', 'reserved'],
    ['::127.0.0.1', 'reserved'],
    ['1000::1', 'reserved'],
    ['4000::1', 'reserved'],
  ])('refuses IPv6 %s as %s', (ip, reason) => {
    expect(classifyAddress(ip)).toBe(reason);
  });

  it.each(['2606:4700:4700::1111', '2a00:1450:4001:80b::200e', '2001:4860:4860::8888', '2000::', '3fff:1000::1', '3ffe:ffff::1', '2001:200::1'])(
    'lets public IPv6 %s through',
    (ip) => expect(classifyAddress(ip)).toBeNull(),
  );

  it.each([
    ['::ffff:127.0.0.1', 'loopback'],
    ['::ffff:7f00:1', 'loopback'],
    ['0:0:0:0:0:ffff:7f00:0001', 'loopback'],
    ['::FFFF:10.1.2.3', 'private'],
    ['::ffff:a9fe:a9fe', 'link-local'],
    ['::ffff:0.0.0.0', 'unspecified'],
    ['::ffff:255.255.255.255', 'broadcast'],
    ['64:ff9b::127.0.0.1', 'loopback'],
    ['64:ff9b::a00:1', 'private'],
    ['2002:7f00:1::', 'loopback'],
    ['2002:c0a8:0101::1', 'private'],
    ['2002:a9fe:a9fe::', 'link-local'],
  ])('judges IPv4 carried in IPv6 %s as %s', (ip, reason) => {
    expect(classifyAddress(ip)).toBe(reason);
  });

  it.each(['::ffff:8.8.8.8', '::ffff:808:808', '64:ff9b::8.8.8.8', '2002:0808:0808::1'])('lets IPv6 carrying a public IPv4 %s through', (ip) => {
    expect(classifyAddress(ip)).toBeNull();
  });

  it.each(['', 'localhost', '1.2.3', '1.2.3.4.5', '256.1.1.1', ':::1', 'fe80::1::2', '[::1]'])('reports %j as not an IP', (ip) => {
    expect(classifyAddress(ip)).toBe('not-an-ip');
  });
});

describe('ipv6Groups', () => {
  it('expands compressed, full and dotted-tail forms', () => {
    expect(ipv6Groups('::1')).toEqual([0, 0, 0, 0, 0, 0, 0, 1]);
    expect(ipv6Groups('1::')).toEqual([1, 0, 0, 0, 0, 0, 0, 0]);
    expect(ipv6Groups('2001:db8:1:2:3:4:5:6')).toEqual([0x2001, 0xdb8, 1, 2, 3, 4, 5, 6]);
    expect(ipv6Groups('::ffff:192.168.1.2')).toEqual([0, 0, 0, 0, 0, 0xffff, 0xc0a8, 0x0102]);
    expect(ipv6Groups('fe80::1%lo')).toEqual([0xfe80, 0, 0, 0, 0, 0, 0, 1]);
    expect(ipv6Groups('1.2.3.4')).toBeNull();
  });
});

describe('CallbackNetworkGuard', () => {
  it('refuses every non-public address by default and allows public ones', () => {
    const g = new CallbackNetworkGuard();
    expect(g.check('127.0.0.1')).toEqual({ allowed: false, reason: 'loopback' });
    expect(g.check('::1')).toEqual({ allowed: false, reason: 'loopback' });
    expect(g.check('169.254.169.254')).toEqual({ allowed: false, reason: 'link-local' });
    expect(g.check('8.8.8.8')).toEqual({ allowed: true });
    expect(g.check('2606:4700:4700::1111')).toEqual({ allowed: true });
    expect(g.check('example.com')).toEqual({ allowed: false, reason: 'not-an-ip' });
  });

  it('allows what CALLBACK_ALLOWED_NETWORKS lists, to the edge of each block', () => {
    const g = new CallbackNetworkGuard(['127.0.0.0/8', '10.1.0.0/16', 'fd00:1::/32', '192.168.5.5']);
    expect(g.check('127.0.0.1').allowed).toBe(true);
    expect(g.check('127.255.255.255').allowed).toBe(true);
    expect(g.check('10.1.0.0').allowed).toBe(true);
    expect(g.check('10.1.255.255').allowed).toBe(true);
    expect(g.check('10.2.0.0')).toEqual({ allowed: false, reason: 'private' });
    expect(g.check('10.0.255.255')).toEqual({ allowed: false, reason: 'private' });
    expect(g.check('192.168.5.5').allowed).toBe(true);
    expect(g.check('192.168.5.6')).toEqual({ allowed: false, reason: 'private' });
    expect(g.check('fd00:1:ffff::1').allowed).toBe(true);
    expect(g.check('fd00:2::1')).toEqual({ allowed: false, reason: 'private' });
    // Listing 127.0.0.0/8 does not open ::1: another address family, another listing.
    expect(g.check('::1')).toEqual({ allowed: false, reason: 'loopback' });
  });

  it('treats an IPv4-mapped IPv6 address as the IPv4 address it maps, both ways', () => {
    const v4 = new CallbackNetworkGuard(['127.0.0.0/8']);
    expect(v4.check('::ffff:127.0.0.1').allowed).toBe(true);
    expect(v4.check('::ffff:7f00:2').allowed).toBe(true);
    expect(v4.check('::ffff:10.0.0.1')).toEqual({ allowed: false, reason: 'private' });
    const v6 = new CallbackNetworkGuard(['::ffff:10.0.0.0/104']);
    expect(v6.check('10.9.9.9').allowed).toBe(true);
    expect(v6.check('11.0.0.1').allowed).toBe(true); // public anyway
    expect(v6.check('172.16.0.1')).toEqual({ allowed: false, reason: 'private' });
  });

  it('does not open NAT64 or 6to4 addresses because the IPv4 address they carry is listed', () => {
    const g = new CallbackNetworkGuard(['127.0.0.0/8']);
    expect(g.check('64:ff9b::127.0.0.1')).toEqual({ allowed: false, reason: 'loopback' });
    expect(g.check('2002:7f00:1::')).toEqual({ allowed: false, reason: 'loopback' });
  });

  it('can open everything (0.0.0.0/0 and ::/0) for an operator who wants no guard', () => {
    const g = new CallbackNetworkGuard(['0.0.0.0/0', '::/0']);
    for (const ip of ['127.0.0.1', '10.0.0.1', '::1', 'fe80::1', 'ff02::1', '255.255.255.255']) expect(g.check(ip).allowed, ip).toBe(true);
  });

  it.each(['10.0.0.0/33', '::/129', 'host.example', '10.0.0.0/', '10.0.0.0/-1', '1.2.3.4/8/8', ''])('refuses the entry %j with a ConfigError', (entry) => {
    expect(() => new CallbackNetworkGuard([entry])).toThrowError(ConfigError);
    expect(() => parseAllowedNetworks([entry])).toThrowError(/CALLBACK_ALLOWED_NETWORKS must list CIDR blocks/);
  });

  it('reads entries with their prefix, a bare address as a single host', () => {
    expect(parseAllowedNetworks(['10.0.0.0/8', '::1', ' 192.0.2.1 '])).toEqual([
      { network: '10.0.0.0', prefix: 8, family: 'ipv4' },
      { network: '::1', prefix: 128, family: 'ipv6' },
      { network: '192.0.2.1', prefix: 32, family: 'ipv4' },
    ]);
  });
});
