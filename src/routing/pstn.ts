/**
 * The phone network as routing sees it (docs/trunks.md): which trunk a carrier's request
 * comes from, where a dialled number of the platform goes, and how a call to a number
 * leaves through an account's OUTBOUND trunk. Pure decisions over the numbers and trunks
 * lookups; the proxy turns them into branches.
 */
import type { AuthOutcome, RequestAuthenticator } from '../auth/authenticator.js';
import { answerChallenge } from '../auth/digest.js';
import type { Destination } from '../core/destination.js';
import { SipError } from '../errors.js';
import type { NumberLookup, NumberRoute } from '../numbers/lookup.js';
import { getHeaders, parseDigestCredentials, parseNameAddr } from '../sip/headers.js';
import type { SipRequest, SipResponse, SipUri } from '../sip/message.js';
import { formatUri, parseUri } from '../sip/uri.js';
import type { CredentialStore, EndpointCredential } from '../store/credentials/credentials.js';
import type { AccountRecord } from '../store/directory/directory.js';
import { gatewayDestination, orderGateways, type GatewayHealth } from '../trunks/gateways.js';
import type { TrunkLookup, TrunkView } from '../trunks/lookup.js';
import { dialledE164 as toE164 } from '../numbers/e164.js';
import { accountOfDomain, phoneNumber, telNumber } from './targets.js';

const WARN = 'sip-edge';
/** The `endpointId` a trunk credential carries through the digest check. */
const TRUNK_PREFIX = 'trunk:';

/** A request from a carrier: the trunk it belongs to and how it was recognised. */
export interface CarrierSource {
  trunk: TrunkView;
  how: 'acl' | 'digest';
  /** The source address (CDRs). */
  address: string;
}

/** One origination URI of a call's way out, ready to send to. */
export interface GatewayLeg {
  trunkId: string;
  /** The origination URI as configured (health is kept per URI). */
  gateway: string;
  /** The Request-URI: the gateway's URI with the dialled number as its user. */
  uri: string;
  dest: Destination;
}

/**
 * A trunk's credentials as a credential store of realm SIP_DOMAIN, so that carriers are
 * challenged and checked by the same digest code as phones (nonces, replay, guessing guard).
 */
export function trunkCredentialStore(trunks: TrunkLookup): CredentialStore {
  return {
    async get(_domain: string, user: string): Promise<EndpointCredential | null> {
      const s = await trunks.secretByUsername(user);
      return s ? { endpointId: TRUNK_PREFIX + s.trunkId, ha1Md5: s.ha1Md5, ha1Sha256: s.ha1Sha256 } : null;
    },
    async put(): Promise<void> {
      throw new Error('trunk credentials are written through the trunks API');
    },
    async delete(): Promise<void> {
      throw new Error('trunk credentials are written through the trunks API');
    },
    async close(): Promise<void> {},
  };
}

export interface PstnRoutingOptions {
  numbers: NumberLookup;
  trunks: TrunkLookup;
  health: GatewayHealth;
  /** Digest over trunk credentials in realm `sipDomain` ({@link trunkCredentialStore}). */
  carrierAuth: RequestAuthenticator;
  sipDomain: string;
  /** Opens a connection to a TCP/TLS gateway; absent = such gateways fail like a transport error. */
  dial?: (d: Destination, servername: string) => Promise<Destination>;
}

export class PstnRouting {
  constructor(private readonly o: PstnRoutingOptions) {}

  get sipDomain(): string {
    return this.o.sipDomain;
  }

  /**
   * The trunk an out-of-dialog request comes from, or null when it is an endpoint's (its
   * From names an account domain and its source is in no INBOUND trunk's ACL). A source in
   * an ACL is a carrier whatever its From says; any other request whose From is not an
   * account domain must prove a trunk credential (407 in realm SIP_DOMAIN until it does):
   * the same challenge whatever number it dials, so nothing can be learnt without credentials.
   */
  async carrierOf(req: SipRequest, from: string | undefined, source: string): Promise<CarrierSource | null> {
    const byAcl = await this.o.trunks.inboundByAddress(source);
    if (byAcl.length > 0) return { trunk: byAcl.find((t) => t.enabled) ?? byAcl[0], how: 'acl', address: source };
    const f = parseNameAddr(from ?? '');
    if (f && (f.uri.scheme === 'sip' || f.uri.scheme === 'sips') && f.uri.user && accountOfDomain(f.uri.host, this.o.sipDomain)) return null;
    const offered = getHeaders(req, 'proxy-authorization')
      .map((v) => parseDigestCredentials(v))
      .find((c) => c?.params.get('realm')?.toLowerCase() === this.o.sipDomain);
    const out: AuthOutcome = await this.o.carrierAuth.authenticate(req, this.o.sipDomain, offered?.params.get('username') ?? '', true, source);
    if (!out.ok) {
      if (out.kind === 'bad-request') throw new SipError(400, 'Bad Request', 'AUTH_URI_MISMATCH', [['Warning', `399 ${WARN} "digest uri does not name the Request-URI"`]]);
      if (out.kind === 'forbidden') throw new SipError(403, 'Forbidden', out.reason === 'cooling-off' ? 'AUTH_COOLING_OFF' : 'AUTH_USER_MISMATCH');
      throw new SipError(407, 'Proxy Authentication Required', 'AUTH_CHALLENGE', out.headers);
    }
    const trunkId = out.credential.endpointId.slice(TRUNK_PREFIX.length);
    const trunk = await this.o.trunks.trunk(trunkId);
    if (!trunk || trunk.trunkType !== 'INBOUND') throw new SipError(403, 'Forbidden', 'TRUNK_NOT_INBOUND', [['Warning', `399 ${WARN} "the credential's trunk takes no inbound calls"`]]);
    return { trunk, how: 'digest', address: source };
  }

  /**
   * The number a carrier's INVITE dials (its Request-URI user, else its To user) and its
   * route: 404 for a number the trunk's account does not own (unknown and someone else's
   * look the same), 403 for a disabled trunk, 480 for an inactive number or one without a
   * route — each with a Warning saying which.
   */
  async inboundNumber(carrier: CarrierSource, account: AccountRecord, requestUri: string, to: string | undefined): Promise<NumberRoute> {
    const { trunk } = carrier;
    if (!trunk.enabled) throw new SipError(403, 'Forbidden', 'TRUNK_DISABLED', [['Warning', `399 ${WARN} "trunk ${trunk.trunkId} is disabled"`]]);
    const dialled = dialledOf(parseUri(requestUri)) ?? dialledOf(parseNameAddr(to ?? '')?.uri ?? null);
    const e164 = dialled ? toE164(dialled, account.country) : null;
    const route = e164 ? await this.o.numbers.route(e164) : null;
    if (!e164 || !route || route.authId !== trunk.authId) throw new SipError(404, 'Not Found', 'ROUTE_UNKNOWN_NUMBER');
    if (route.status !== 'active') throw new SipError(480, 'Temporarily Unavailable', 'ROUTE_NUMBER_INACTIVE', [['Warning', `399 ${WARN} "number ${e164} is inactive"`]]);
    if (!route.endpointId && !route.applicationId && !route.trunkGroupId) throw new SipError(480, 'Temporarily Unavailable', 'ROUTE_NUMBER_UNROUTED', [['Warning', `399 ${WARN} "number ${e164} has no route"`]]);
    return route;
  }

  /** The account's OUTBOUND trunk, or null (then the operator's gateway, when one is set). */
  outboundTrunk(authId: string): Promise<TrunkView | null> {
    return this.o.trunks.outboundOf(authId);
  }

  /** A trunk of the account by id (a number's forwarding route). */
  async trunkOf(authId: string, trunkId: string): Promise<TrunkView | null> {
    const t = await this.o.trunks.trunk(trunkId);
    return t && t.authId === authId ? t : null;
  }

  /** `dialled` as E.164 in the account's country; 484 when it cannot be a telephone number. */
  number(dialled: string, account: AccountRecord): string {
    const n = toE164(dialled, account.country);
    if (!n) throw new SipError(484, 'Address Incomplete', 'ROUTE_BAD_NUMBER', [['Warning', `399 ${WARN} "not a telephone number"`]]);
    return n;
  }

  /**
   * The caller ID of an endpoint's call to the phone network: the number its From names if
   * the account owns it (and it is active), else the number routed to the endpoint; 403 when
   * neither (no spoofing: a carrier only ever sees numbers of the account).
   */
  async callerId(account: AccountRecord, endpointId: string, fromUser: string): Promise<string> {
    const asked = phoneNumber(fromUser) ? toE164(fromUser, account.country) : null;
    if (asked) {
      const r = await this.o.numbers.route(asked);
      if (r && r.authId === account.authId && r.status === 'active') return asked;
    }
    const own = await this.o.numbers.callerIdOf(account.authId, endpointId);
    if (own) return own;
    throw new SipError(403, 'Forbidden', 'ROUTE_NO_CALLER_ID', [['Warning', `399 ${WARN} "the caller has no number of its account to call out as"`]]);
  }

  /**
   * The gateways a call to `number` through `trunk` tries, in order (priority, then weight),
   * without those this node knows to be down; 503 with Retry-After when none is left.
   */
  async gatewayLegs(trunk: TrunkView, number: string): Promise<GatewayLeg[]> {
    const all = orderGateways(await this.o.trunks.gatewaysOf(trunk.trunkId));
    const legs: GatewayLeg[] = [];
    for (const g of all) {
      if (!this.o.health.isUp(trunk.trunkId, g.uri)) continue;
      const u = parseUri(g.uri);
      if (!u) continue;
      try {
        legs.push({ trunkId: trunk.trunkId, gateway: g.uri, uri: withUser(u, number), dest: await gatewayDestination(u) });
      } catch {
        this.o.health.failed(trunk.trunkId, g.uri); // a name that does not resolve
      }
    }
    for (const g of all) this.o.health.used(trunk.trunkId, g.uri);
    if (legs.length === 0) {
      throw new SipError(503, 'Service Unavailable', 'TRUNK_NO_GATEWAY', [
        ['Retry-After', '30'],
        ['Warning', `399 ${WARN} "no origination URI of trunk ${trunk.trunkId} is up"`],
      ]);
    }
    return legs;
  }

  /** A TCP/TLS gateway's connection (opened or reused); UDP as is. */
  async connect(leg: GatewayLeg): Promise<Destination> {
    if (leg.dest.transport === 'udp' || leg.dest.connId) return leg.dest;
    if (!this.o.dial) throw new Error(`no ${leg.dest.transport} client connections`);
    const u = parseUri(leg.gateway);
    return this.o.dial(leg.dest, u ? u.host : leg.dest.address);
  }

  /** The gateway failed a call (no answer in time, not reachable): skipped until it answers a ping. */
  gatewayFailed(leg: GatewayLeg): void {
    this.o.health.failed(leg.trunkId, leg.gateway);
  }

  /**
   * The header answering a carrier's 401/407 with the trunk's credential, or null when the
   * trunk has none or no challenge can be answered (another algorithm, auth-int only).
   */
  async challengeAnswer(trunkId: string, challenge: SipResponse, method: string, uri: string): Promise<[string, string] | null> {
    const secret = await this.o.trunks.secretOf(trunkId);
    if (!secret) return null;
    const proxy = challenge.status === 407;
    const name = proxy ? 'proxy-authenticate' : 'www-authenticate';
    // RFC 8760 §2.4: several challenges in order of preference; the first one we can answer.
    for (const v of getHeaders(challenge, name)) {
      const c = parseDigestCredentials(v);
      if (!c || c.scheme.toLowerCase() !== 'digest') continue;
      const value = answerChallenge({ challenge: c.params, method, uri, username: secret.username, password: secret.password });
      if (value) return [proxy ? 'proxy-authorization' : 'authorization', value];
    }
    return null;
  }
}

/** The telephone number a URI names in its user part (or a tel: URI), or null. */
function dialledOf(u: SipUri | null): string | null {
  if (!u) return null;
  if (u.scheme === 'tel') return telNumber(u);
  const user = u.user?.split(';')[0];
  return user && phoneNumber(user) ? user : null;
}

/** `base` (a gateway URI) with `user` as its user part. */
function withUser(base: SipUri, user: string): string {
  return formatUri({ ...base, user, password: null, headers: null });
}
