/**
 * The routing capability's builder: the phone network's routing (carriers in, trunks out,
 * gateway health) over the numbers and trunks lookups — the one call the composition root
 * (src/app.ts) makes for it.
 */
import { readFileSync } from 'node:fs';
import type { Registry } from 'prom-client';
import { DigestAuthenticator, type AuthAttemptGuard } from '../auth/authenticator.js';
import type { DigestAlgorithm } from '../auth/digest.js';
import type { NonceManager } from '../auth/nonce.js';
import type { Destination } from '../core/destination.js';
import type { TransactionLayer } from '../core/transaction-layer.js';
import type { Logger } from '../logger.js';
import type { NumberLookup } from '../numbers/lookup.js';
import { GatewayHealth } from '../trunks/gateways.js';
import type { TrunkLookup } from '../trunks/lookup.js';
import { PstnRouting, trunkCredentialStore } from './pstn.js';

export { PstnRouting } from './pstn.js';

/** What opens a client connection: the stream transports' `dial`. */
export interface Dialer {
  dial(address: string, port: number, servername: string, ca?: Buffer): Promise<string>;
}

export interface RoutingDeps {
  numbers: NumberLookup;
  trunks: TrunkLookup;
  layer: TransactionLayer;
  nonces: NonceManager;
  algorithms: readonly DigestAlgorithm[];
  md5OnlyUserAgents?: readonly string[];
  guard?: AuthAttemptGuard;
  sipDomain: string;
  /** TRUNK_PING_INTERVAL, seconds. */
  pingIntervalS: number;
  /** PEM CAs a TLS gateway's certificate must chain to (TRUNK_TLS_CA_FILE); the system's when null. */
  tlsCaFile?: string | null;
  /** The TCP and TLS listeners (they open connections to gateways too: StreamTransport.dial). */
  streams: () => { tcp?: Dialer; tls?: Dialer };
  registry?: Registry;
  log: Logger;
}

export interface Routing {
  pstn: PstnRouting;
  health: GatewayHealth;
  stop(): void;
}

export function createRouting(d: RoutingDeps): Routing {
  const ca = d.tlsCaFile ? readFileSync(d.tlsCaFile) : undefined;
  const dial = async (dest: Destination, servername: string): Promise<Destination> => {
    const t = dest.transport === 'tcp' ? d.streams().tcp : dest.transport === 'tls' ? d.streams().tls : undefined;
    if (!t) throw new Error(`the ${dest.transport} listener is off: no connections to gateways over it`);
    const connId = await t.dial(dest.address, dest.port, servername, ca);
    return { ...dest, connId };
  };
  const wanted = async (trunkId: string, uri: string): Promise<boolean> => {
    const t = await d.trunks.trunk(trunkId);
    return t !== null && t.enabled && (await d.trunks.gatewaysOf(trunkId)).some((g) => g.uri === uri && g.enabled);
  };
  const health = new GatewayHealth({ layer: d.layer, intervalS: d.pingIntervalS, fromHost: d.sipDomain, log: d.log, registry: d.registry, dial, wanted });
  const carrierAuth = new DigestAuthenticator({
    credentials: trunkCredentialStore(d.trunks),
    nonces: d.nonces,
    algorithms: d.algorithms,
    md5OnlyUserAgents: d.md5OnlyUserAgents,
    guard: d.guard,
    sipDomain: d.sipDomain,
    isOwnUri: (u) => d.layer.isOwnUri(u),
  });
  const pstn = new PstnRouting({ numbers: d.numbers, trunks: d.trunks, health, carrierAuth, sipDomain: d.sipDomain, dial });
  return { pstn, health, stop: () => health.stop() };
}
