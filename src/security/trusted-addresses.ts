import { BlockList, isIP } from 'node:net';

/**
 * Addresses and CIDR blocks exempt from per-source limits (local proxies,
 * monitors, load generators). Built once from validated configuration.
 */
export class TrustedAddresses {
  private readonly list = new BlockList();
  private readonly empty: boolean;

  /** @param entries IP addresses or CIDR blocks, already validated by loadConfig. */
  constructor(entries: readonly string[]) {
    this.empty = entries.length === 0;
    for (const e of entries) {
      const [ip = '', bits] = e.split('/');
      const type = isIP(ip) === 6 ? 'ipv6' : 'ipv4';
      if (bits === undefined) this.list.addAddress(ip, type);
      else this.list.addSubnet(ip, Number(bits), type);
    }
  }

  /** Whether this source address is trusted. Callers cache the answer per address. */
  has(address: string): boolean {
    if (this.empty) return false;
    const family = isIP(address);
    if (family === 0) return false;
    return this.list.check(address, family === 6 ? 'ipv6' : 'ipv4');
  }
}
