/**
 * IPv4 and IPv6 networks (CIDR) and a prefix index over them: what an INVITE's source
 * address is matched against (docs/trunks.md "IP ACLs"). No regexes on addresses:
 * node:net decides what an address is; the bits are compared as bigints.
 */
import { isIPv4, isIPv6 } from 'node:net';

export interface Cidr {
  family: 4 | 6;
  /** The network's bits (host bits zero). */
  network: bigint;
  prefix: number;
  /** Normalised text: `192.0.2.0/24`, `2001:db8::/32`. */
  text: string;
}

const width = (f: 4 | 6): number => (f === 4 ? 32 : 128);

function v4Bits(a: string): bigint {
  return a.split('.').reduce((n, o) => (n << 8n) | BigInt(Number(o)), 0n);
}

function v6Bits(a: string): bigint {
  let s = a;
  // An embedded IPv4 tail (::ffff:192.0.2.1) becomes two groups.
  const dot = s.lastIndexOf('.');
  if (dot >= 0) {
    const colon = s.lastIndexOf(':');
    const v4 = v4Bits(s.slice(colon + 1));
    s = `${s.slice(0, colon + 1)}${(v4 >> 16n).toString(16)}:${(v4 & 0xffffn).toString(16)}`;
  }
  const [head = '', tail] = s.split('::') as [string, string | undefined];
  const h = head === '' ? [] : head.split(':');
  const t = tail === undefined || tail === '' ? [] : tail.split(':');
  const groups = tail === undefined ? h : [...h, ...Array<string>(8 - h.length - t.length).fill('0'), ...t];
  return groups.reduce((n, g) => (n << 16n) | BigInt(parseInt(g, 16)), 0n);
}

function v4Text(n: bigint): string {
  return [24n, 16n, 8n, 0n].map((s) => String((n >> s) & 0xffn)).join('.');
}

function v6Text(n: bigint): string {
  const g = [112n, 96n, 80n, 64n, 48n, 32n, 16n, 0n].map((s) => Number((n >> s) & 0xffffn));
  // RFC 5952: the longest run (≥ 2) of zero groups becomes '::'.
  let best = -1;
  let bestLen = 1;
  for (let i = 0; i < 8; ) {
    if (g[i] !== 0) {
      i++;
      continue;
    }
    let j = i;
    while (j < 8 && g[j] === 0) j++;
    if (j - i > bestLen) {
      best = i;
      bestLen = j - i;
    }
    i = j;
  }
  const hex = g.map((x) => x.toString(16));
  if (best < 0) return hex.join(':');
  return `${hex.slice(0, best).join(':')}::${hex.slice(best + bestLen).join(':')}`;
}

/**
 * An address as received (`192.0.2.1`, `2001:db8::1`, `[2001:db8::1]`, `fe80::1%eth0`,
 * `::ffff:192.0.2.1` → IPv4), or null when it is none.
 */
export function parseAddress(text: string): { family: 4 | 6; bits: bigint } | null {
  let a = text.trim();
  if (a.startsWith('[') && a.endsWith(']')) a = a.slice(1, -1);
  const pct = a.indexOf('%');
  if (pct >= 0) a = a.slice(0, pct);
  if (isIPv4(a)) return { family: 4, bits: v4Bits(a) };
  if (!isIPv6(a)) return null;
  const bits = v6Bits(a);
  // IPv4-mapped (::ffff:0:0/96): the IPv4 address it carries.
  if (bits >> 32n === 0xffffn) return { family: 4, bits: bits & 0xffffffffn };
  return { family: 6, bits };
}

/**
 * A network in CIDR notation, or a plain address (a /32 or /128), or null when it is
 * neither. Host bits below the prefix are cleared (`192.0.2.7/24` → `192.0.2.0/24`).
 */
export function parseCidr(text: string): Cidr | null {
  if (typeof text !== 'string' || text.length > 64) return null;
  const slash = text.indexOf('/');
  const addrText = slash < 0 ? text : text.slice(0, slash);
  const a = addrText;
  const family = isIPv4(a) ? 4 : isIPv6(a) ? 6 : null;
  if (family === null) return null;
  const w = width(family);
  let prefix = w;
  if (slash >= 0) {
    const p = text.slice(slash + 1);
    if (!/^\d{1,3}$/.test(p)) return null;
    prefix = Number(p);
    if (prefix > w) return null;
  }
  const bits = family === 4 ? v4Bits(a) : v6Bits(a);
  const network = prefix === 0 ? 0n : (bits >> BigInt(w - prefix)) << BigInt(w - prefix);
  return { family, network, prefix, text: `${family === 4 ? v4Text(network) : v6Text(network)}/${prefix}` };
}

/**
 * Values filed under networks; `match(address)` gives every value whose network
 * contains it. One map lookup per distinct prefix length in use.
 */
export class PrefixIndex<V> {
  readonly #byFamily = new Map<4 | 6, Map<number, Map<bigint, V[]>>>();
  #lengths = new Map<4 | 6, number[]>();

  add(c: Cidr, value: V): void {
    let fam = this.#byFamily.get(c.family);
    if (!fam) this.#byFamily.set(c.family, (fam = new Map()));
    let byNet = fam.get(c.prefix);
    if (!byNet) fam.set(c.prefix, (byNet = new Map()));
    const key = c.network >> BigInt(width(c.family) - c.prefix);
    const list = byNet.get(key);
    if (list) list.push(value);
    else byNet.set(key, [value]);
    this.#lengths.set(c.family, [...fam.keys()].sort((x, y) => y - x));
  }

  match(address: string): V[] {
    const a = parseAddress(address);
    if (!a) return [];
    const fam = this.#byFamily.get(a.family);
    if (!fam) return [];
    const w = width(a.family);
    const out: V[] = [];
    for (const p of this.#lengths.get(a.family) ?? []) {
      const hit = fam.get(p)?.get(a.bits >> BigInt(w - p));
      if (hit) out.push(...hit);
    }
    return out;
  }
}
