/**
 * What routing (src/routing/) and the proxy read of the trunks capability: which trunk a
 * carrier's request comes from, a trunk's credentials, and an account's way out to the
 * phone network. The trunks capability (src/trunks/index.ts) implements it on its store
 * service (src/store/trunks/); routing never writes trunks.
 */

export type TrunkType = 'INBOUND' | 'OUTBOUND';

/** A trunk as routing sees it. */
export interface TrunkView {
  trunkId: string;
  authId: string;
  name: string;
  trunkType: TrunkType;
  enabled: boolean;
  /** 0 = no limit. */
  maxConcurrentCalls: number;
  /** Calls a second; 0 = no limit. */
  cpsLimit: number;
  /** `{trunk_id}.<SIP_DOMAIN>` (lower case). */
  sipDomain: string;
}

/** One origination URI of a trunk (where its outbound calls go). */
export interface GatewayView {
  id: string;
  /** A SIP URI (`sip:` or `sips:`; `;transport=` udp|tcp|tls). */
  uri: string;
  /** Lower first. */
  priority: number;
  /** Share within one priority (≥ 1). */
  weight: number;
  enabled: boolean;
}

/** A trunk credential as the digest check and the outbound challenge answer need it. */
export interface TrunkSecret {
  trunkId: string;
  authId: string;
  username: string;
  /** hex MD5(username:<SIP_DOMAIN>:password) — carriers are challenged in realm SIP_DOMAIN. */
  ha1Md5: string;
  /** hex SHA-256(username:<SIP_DOMAIN>:password). */
  ha1Sha256: string;
  /** The password in the clear (kept sealed at rest): answers a carrier's own challenge. */
  password: string;
}

export interface TrunkLookup {
  /** Every INBOUND trunk (enabled or not) with an IP ACL entry containing `address` (IPv4 or IPv6, as received). */
  inboundByAddress(address: string): Promise<TrunkView[]>;
  /** The trunk whose credential has this username (usernames are unique across the platform), or null. */
  secretByUsername(username: string): Promise<TrunkSecret | null>;
  /** The trunk `trunkId` of any account, or null. */
  trunk(trunkId: string): Promise<TrunkView | null>;
  /** The account's OUTBOUND trunk calls to numbers leave through: its enabled one created first, or null. */
  outboundOf(authId: string): Promise<TrunkView | null>;
  /** The origination URIs of a trunk (all of them; routing skips disabled ones). */
  gatewaysOf(trunkId: string): Promise<GatewayView[]>;
  /** The trunk's credential (its `credential_uuid`), used to answer a carrier's challenge; null when none. */
  secretOf(trunkId: string): Promise<TrunkSecret | null>;
}
