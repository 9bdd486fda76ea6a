/**
 * The way out through a trunk (docs/trunks.md "Outbound"): which origination URIs a call
 * tries, in which order, and which of them are alive.
 *
 * Order: enabled URIs by priority (lower first); within one priority a weighted random
 * order (weight 3 beside weight 1 goes first three times in four), drawn per call — the
 * Kamailio dispatcher's algorithm 9 (weight-based) under a priority ladder, as the vendor's
 * trunk model has it.
 *
 * Health: each node sends SIP OPTIONS to the gateways its calls used, every
 * `TRUNK_PING_INTERVAL` seconds. A gateway that answers below 500 is up; one that answers
 * 5xx, or not at all within the ping timeout, is down and skipped by calls until a ping is
 * answered again. A call's own branch that times out or fails to be sent marks its gateway
 * down too (the next call does not wait for the next ping). Every node keeps its own view
 * (as every Kamailio keeps its own dispatcher state); `sip_trunk_gateway_up{trunk,uri}`
 * shows it.
 */
import { randomUUID } from 'node:crypto';
import { isIP } from 'node:net';
import { lookup } from 'node:dns/promises';
import { Gauge, type Registry } from 'prom-client';
import type { ClientTransactionUser } from '../core/client-transaction.js';
import type { Destination } from '../core/destination.js';
import { unrefTimer } from '../core/timers.js';
import type { TransactionLayer } from '../core/transaction-layer.js';
import type { Logger } from '../logger.js';
import type { SipRequest, SipUri } from '../sip/message.js';
import { parseUri } from '../sip/uri.js';
import type { SipTransportName } from '../sip/transport-name.js';
import type { GatewayView } from './lookup.js';

/** The enabled gateways in the order one call tries them: by priority, weighted random within one. */
export function orderGateways(gateways: readonly GatewayView[], random: () => number = Math.random): GatewayView[] {
  const byPriority = new Map<number, GatewayView[]>();
  for (const g of gateways) {
    if (!g.enabled) continue;
    const list = byPriority.get(g.priority) ?? [];
    list.push(g);
    byPriority.set(g.priority, list);
  }
  const out: GatewayView[] = [];
  for (const p of [...byPriority.keys()].sort((a, b) => a - b)) {
    const pool = [...(byPriority.get(p) as GatewayView[])];
    while (pool.length > 0) {
      const total = pool.reduce((s, g) => s + Math.max(1, g.weight), 0);
      let r = random() * total;
      let i = 0;
      for (; i < pool.length - 1; i++) {
        r -= Math.max(1, pool[i].weight);
        if (r < 0) break;
      }
      out.push(pool.splice(i, 1)[0]);
    }
  }
  return out;
}

/** The transport a gateway URI asks for: `;transport=`, else TLS for `sips:`, else UDP. */
export function gatewayTransport(u: SipUri): SipTransportName {
  const t = u.params.get('transport')?.toLowerCase();
  if (t === 'tcp' || t === 'tls' || t === 'udp') return t;
  return u.scheme === 'sips' ? 'tls' : 'udp';
}

/** Where a gateway URI's requests go: its transport, its host (resolved) and port (5060, 5061 for TLS). */
export async function gatewayDestination(u: SipUri): Promise<Destination> {
  const transport = gatewayTransport(u);
  const host = u.host.startsWith('[') ? u.host.slice(1, -1) : u.host;
  const address = isIP(host) ? host : (await lookup(host)).address;
  return { transport, address, port: u.port ?? (transport === 'tls' ? 5061 : 5060), connId: null };
}

export interface GatewayHealthOptions {
  layer: TransactionLayer;
  /** Seconds between pings (TRUNK_PING_INTERVAL); 0 = no pings (every gateway counts as up). */
  intervalS: number;
  /** Host of the From of the pings (SIP_DOMAIN). */
  fromHost: string;
  log: Logger;
  registry?: Registry;
  /** Whether a gateway is still configured and enabled (its trunk too): one that is not is no longer pinged. */
  wanted?: (trunkId: string, uri: string) => Promise<boolean>;
  /** Opens a connection to a TCP/TLS gateway (the stream transports' dial). */
  dial?: (d: Destination, servername: string) => Promise<Destination>;
}

interface Watched {
  trunkId: string;
  uri: string;
  up: boolean;
  lastUsed: number;
  pinging: boolean;
}

/** A gateway no call has used for this long (or no longer configured, see `wanted`) is no longer pinged. */
const FORGET_AFTER_MS = 3_600_000;
/** A ping unanswered for this long (or the interval, when shorter) counts as failed. */
const PING_TIMEOUT_MS = 4_000;

/** Gateway liveness as this node sees it (see the module comment). */
export class GatewayHealth {
  private readonly watched = new Map<string, Watched>();
  private readonly gauge: Gauge;
  private timer: NodeJS.Timeout | null = null;

  constructor(private readonly o: GatewayHealthOptions) {
    this.gauge = new Gauge({
      name: 'sip_trunk_gateway_up',
      help: 'Whether an origination URI of a trunk answers this node (1) or is skipped (0); docs/trunks.md',
      labelNames: ['trunk', 'uri'],
      registers: o.registry ? [o.registry] : [],
    });
    if (o.intervalS > 0) this.timer = setInterval(() => this.pingAll(), o.intervalS * 1000).unref();
  }

  private key(trunkId: string, uri: string): string {
    return `${trunkId}\u0000${uri}`;
  }

  /** Whether calls should try this gateway (true until a ping or a call says otherwise). */
  isUp(trunkId: string, uri: string): boolean {
    return this.watched.get(this.key(trunkId, uri))?.up ?? true;
  }

  /** A call is about to use this gateway: it is pinged from now on. */
  used(trunkId: string, uri: string): void {
    const k = this.key(trunkId, uri);
    const w = this.watched.get(k);
    if (w) {
      w.lastUsed = Date.now();
      return;
    }
    this.watched.set(k, { trunkId, uri, up: true, lastUsed: Date.now(), pinging: false });
    this.gauge.set({ trunk: trunkId, uri }, 1);
  }

  /** A call's branch to this gateway timed out or could not be sent. */
  failed(trunkId: string, uri: string): void {
    if (this.o.intervalS <= 0) return; // no pings would ever bring it back
    this.set(trunkId, uri, false);
  }

  private set(trunkId: string, uri: string, up: boolean): void {
    const w = this.watched.get(this.key(trunkId, uri));
    if (!w) return;
    if (w.up !== up) this.o.log.info({ trunk: trunkId, uri, up }, up ? 'gateway answers again' : 'gateway down: skipped until it answers a ping');
    w.up = up;
    this.gauge.set({ trunk: trunkId, uri }, up ? 1 : 0);
  }

  private pingAll(): void {
    const now = Date.now();
    for (const [k, w] of this.watched) {
      if (now - w.lastUsed > FORGET_AFTER_MS) {
        this.watched.delete(k);
        this.gauge.remove({ trunk: w.trunkId, uri: w.uri });
        continue;
      }
      if (!w.pinging) void this.pingIfWanted(k, w);
    }
  }

  private async pingIfWanted(k: string, w: Watched): Promise<void> {
    const wanted = this.o.wanted ? await this.o.wanted(w.trunkId, w.uri).catch(() => true) : true;
    if (!wanted) {
      this.watched.delete(k);
      this.gauge.remove({ trunk: w.trunkId, uri: w.uri });
      return;
    }
    await this.ping(w);
  }

  /** One OPTIONS to the gateway; up on any answer below 500. */
  private async ping(w: Watched): Promise<void> {
    const u = parseUri(w.uri);
    if (!u) return;
    w.pinging = true;
    try {
      let dest = await gatewayDestination(u);
      if (dest.transport !== 'udp' && this.o.dial) dest = await this.o.dial(dest, u.host);
      const up = await new Promise<boolean>((resolve) => {
        const timer = unrefTimer(() => resolve(false), Math.min(PING_TIMEOUT_MS, this.o.intervalS * 1000));
        const user: ClientTransactionUser = {
          onResponse: (res) => {
            if (res.status < 200) return;
            clearTimeout(timer);
            resolve(res.status < 500);
          },
          onFailure: () => {
            clearTimeout(timer);
            resolve(false);
          },
        };
        const tag = randomUUID().slice(0, 8);
        const req: SipRequest = {
          kind: 'request',
          method: 'OPTIONS',
          uri: w.uri,
          headers: [
            { name: 'max-forwards', value: '70' },
            { name: 'from', value: `<sip:ping@${this.o.fromHost}>;tag=${tag}` },
            { name: 'to', value: `<${w.uri}>` },
            { name: 'call-id', value: randomUUID() },
            { name: 'cseq', value: '1 OPTIONS' },
            { name: 'user-agent', value: this.o.layer.serverHeader },
          ],
          body: Buffer.alloc(0),
        };
        this.o.layer.request(req, dest, user);
      });
      this.set(w.trunkId, w.uri, up);
    } catch (err) {
      this.o.log.debug({ uri: w.uri, err: err instanceof Error ? err.message : String(err) }, 'gateway ping not sent');
      this.set(w.trunkId, w.uri, false);
    } finally {
      w.pinging = false;
    }
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}
