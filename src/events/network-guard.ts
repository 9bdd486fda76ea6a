/**
 * SSRF protection of callbacks (docs/callbacks.md "Which addresses a callback may
 * reach"): a callback is a request the edge makes to a URL its customers choose, so
 * it must not reach the edge's own host, its private network or cloud metadata
 * services. An address is refused when it is not a public unicast address (the IANA
 * IPv4 and IPv6 Special-Purpose Address Registries, RFC 6890) unless the operator
 * lists it in CALLBACK_ALLOWED_NETWORKS.
 */
import { BlockList, isIP } from 'node:net';
import { ConfigError } from '../errors.js';

/** Why an address is refused. */
export type RefusalReason =
  | 'unspecified'
  | 'loopback'
  | 'private'
  | 'link-local'
  | 'shared'
  | 'multicast'
  | 'broadcast'
  | 'documentation'
  | 'reserved'
  | 'not-an-ip';

export type AddressVerdict = { allowed: true } | { allowed: false; reason: RefusalReason };

type Family = 'ipv4' | 'ipv6';

/** Special-purpose IPv4 blocks, most specific first (RFC 6890, RFC 5735, RFC 6598). */
const V4_REFUSED: ReadonlyArray<readonly [string, number, RefusalReason]> = [
  ['255.255.255.255', 32, 'broadcast'], // limited broadcast (RFC 919)
  ['0.0.0.0', 8, 'unspecified'], // "this network", 0.0.0.0 itself (RFC 1122 §3.2.1.3)
  ['127.0.0.0', 8, 'loopback'],
  ['10.0.0.0', 8, 'private'], // RFC 1918
  ['172.16.0.0', 12, 'private'],
  ['192.168.0.0', 16, 'private'],
  ['100.64.0.0', 10, 'shared'], // carrier-grade NAT (RFC 6598)
  ['169.254.0.0', 16, 'link-local'], // RFC 3927; cloud metadata at 169.254.169.254
  ['192.0.0.0', 24, 'reserved'], // IETF protocol assignments (RFC 6890)
  ['192.0.2.0', 24, 'documentation'], // TEST-NET-1 (RFC 5737)
  ['198.51.100.0', 24, 'documentation'], // TEST-NET-2
  ['203.0.113.0', 24, 'documentation'], // TEST-NET-3
  ['192.88.99.0', 24, 'reserved'], // 6to4 relay anycast (RFC 7526)
  ['198.18.0.0', 15, 'reserved'], // benchmarking (RFC 2544)
  ['224.0.0.0', 4, 'multicast'],
  ['240.0.0.0', 4, 'reserved'], // RFC 1112 §4
];

/**
 * Special-purpose blocks inside IPv6 global unicast 2000::/3; everything outside
 * 2000::/3 is refused too (see classifyV6), except IPv4-mapped and NAT64 addresses,
 * which are judged by the IPv4 address they carry.
 */
const V6_REFUSED: ReadonlyArray<readonly [string, number, RefusalReason]> = [
  ['2001:db8::', 32, 'documentation'], // RFC 3849
  ['3fff::', 20, 'documentation'], // RFC 9637
  ['2001::', 23, 'reserved'], // IETF protocol assignments, Teredo 2001::/32 (RFC 2928, RFC 4380)
];

function blockLists(table: ReadonlyArray<readonly [string, number, RefusalReason]>, family: Family): Array<[BlockList, RefusalReason]> {
  return table.map(([net, bits, reason]) => {
    const b = new BlockList();
    b.addSubnet(net, bits, family);
    return [b, reason];
  });
}
const V4_LISTS = blockLists(V4_REFUSED, 'ipv4');
const V6_LISTS = blockLists(V6_REFUSED, 'ipv6');

/** The eight 16-bit groups of an IPv6 address (zone id dropped); null when it is not one. */
export function ipv6Groups(address: string): number[] | null {
  const a = address.replace(/%.*$/, '');
  if (isIP(a) !== 6) return null;
  let text = a;
  // A dotted IPv4 tail (::ffff:1.2.3.4) becomes two groups.
  const dotted = /(\d+)\.(\d+)\.(\d+)\.(\d+)$/.exec(text);
  if (dotted) {
    const [b0, b1, b2, b3] = dotted.slice(1).map(Number) as [number, number, number, number];
    text = `${text.slice(0, dotted.index)}${((b0 << 8) | b1).toString(16)}:${((b2 << 8) | b3).toString(16)}`;
  }
  const [head = '', tail] = text.split('::');
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const fill = tail === undefined ? 0 : 8 - h.length - t.length;
  return [...h, ...Array<string>(fill).fill('0'), ...t].map((g) => parseInt(g, 16));
}

/** The IPv4 address an IPv6 address stands for: IPv4-mapped ::ffff:0:0/96, NAT64 64:ff9b::/96 (RFC 6052), 6to4 2002::/16 (RFC 3056). */
function embeddedV4(g: number[]): string | null {
  const v4 = (hi: number, lo: number): string => `${hi >> 8}.${hi & 0xff}.${lo >> 8}.${lo & 0xff}`;
  const zero = (from: number, to: number): boolean => g.slice(from, to).every((x) => x === 0);
  if (zero(0, 5) && g[5] === 0xffff) return v4(g[6] as number, g[7] as number);
  if (g[0] === 0x64 && g[1] === 0xff9b && zero(2, 6)) return v4(g[6] as number, g[7] as number);
  if (g[0] === 0x2002) return v4(g[1] as number, g[2] as number);
  return null;
}

function classifyV4(address: string): RefusalReason | null {
  for (const [list, reason] of V4_LISTS) if (list.check(address, 'ipv4')) return reason;
  return null;
}

function classifyV6(address: string, g: number[]): RefusalReason | null {
  if (g.every((x) => x === 0)) return 'unspecified';
  if (g.slice(0, 7).every((x) => x === 0) && g[7] === 1) return 'loopback';
  const v4 = embeddedV4(g);
  if (v4 !== null) return classifyV4(v4);
  const first = g[0] as number;
  if ((first & 0xfe00) === 0xfc00) return 'private'; // unique local fc00::/7 (RFC 4193)
  if ((first & 0xffc0) === 0xfe80) return 'link-local'; // fe80::/10
  if ((first & 0xffc0) === 0xfec0) return 'private'; // site-local fec0::/10 (deprecated, RFC 3879)
  if ((first & 0xff00) === 0xff00) return 'multicast'; // ff00::/8
  if ((first & 0xe000) !== 0x2000) return 'reserved'; // outside global unicast 2000::/3
  for (const [list, reason] of V6_LISTS) if (list.check(address.replace(/%.*$/, ''), 'ipv6')) return reason;
  return null;
}

/** Why an IP address is not a public unicast address, or null when it is one. */
export function classifyAddress(address: string): RefusalReason | null {
  const family = isIP(address.replace(/%.*$/, ''));
  if (family === 4) return classifyV4(address);
  if (family === 6) return classifyV6(address, ipv6Groups(address) as number[]);
  return 'not-an-ip';
}

/**
 * Reads CALLBACK_ALLOWED_NETWORKS entries (`10.1.0.0/16`, `fd00::/8`, a bare
 * address = a single host). A bad entry is a configuration error naming it.
 */
export function parseAllowedNetworks(entries: readonly string[], name = 'CALLBACK_ALLOWED_NETWORKS'): Array<{ network: string; prefix: number; family: Family }> {
  return entries.map((entry) => {
    const [ip = '', bits, extra] = entry.trim().split('/');
    const fam = isIP(ip);
    const max = fam === 4 ? 32 : 128;
    const prefix = bits === undefined ? max : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
    if (fam === 0 || extra !== undefined || !(prefix >= 0 && prefix <= max)) {
      throw new ConfigError(`${name} must list CIDR blocks such as 10.0.0.0/8 or fd00::/8, got "${entry}"`);
    }
    return { network: ip, prefix, family: fam === 4 ? 'ipv4' : 'ipv6' };
  });
}

/**
 * Decides which addresses a callback may connect to. Built once from the
 * configuration; `check` is called for every address a callback would use.
 */
export class CallbackNetworkGuard {
  private readonly allowed = new BlockList();
  readonly allowedNetworks: readonly string[];

  /** @param allowedNetworks CIDR blocks that may be reached although not public (CALLBACK_ALLOWED_NETWORKS). */
  constructor(allowedNetworks: readonly string[] = []) {
    this.allowedNetworks = [...allowedNetworks];
    for (const n of parseAllowedNetworks(allowedNetworks)) this.allowed.addSubnet(n.network, n.prefix, n.family);
  }

  /** Whether a callback may connect to this IP address, and if not why. */
  check(address: string): AddressVerdict {
    const bare = address.replace(/%.*$/, '');
    const family = isIP(bare);
    if (family === 0) return { allowed: false, reason: 'not-an-ip' };
    const reason = classifyAddress(bare);
    if (reason === null) return { allowed: true };
    // BlockList matches IPv4 rules against IPv4-mapped IPv6 addresses and back (the
    // same destination); NAT64 and 6to4 addresses are other hosts and must be listed.
    if (this.allowed.check(bare, family === 4 ? 'ipv4' : 'ipv6')) return { allowed: true };
    return { allowed: false, reason };
  }
}
