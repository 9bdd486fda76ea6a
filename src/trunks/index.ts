/**
 * The trunks capability (docs/trunks.md): an account's SIP trunks with their
 * credentials, IP ACLs and origination URIs on the trunks store, and the lookups
 * routing makes of them ({@link TrunkLookup}) — built by {@link createTrunks}, the one
 * builder the composition root (src/app.ts) calls.
 *
 * `inboundByAddress` runs for every INVITE: it answers from an in-process prefix index
 * of every IP ACL entry, rebuilt from the store after a change. Every write here
 * publishes a notice (RedisEvents) before it returns, and every process marks its
 * index stale when it hears one; while notices are not flowing (no subscription yet,
 * a lost connection) an index is trusted for at most one second. So a change made on
 * one node is seen by every node within about a second at worst, at once normally.
 */
import { createHash, randomUUID } from 'node:crypto';
import type { Config } from '../config.js';
import { createLogger, type Logger } from '../logger.js';
import type { RedisClient } from '../store/redis/client.js';
import type { RedisEvents } from '../store/redis/notices.js';
import type { SecretBox } from '../security/secret-box.js';
import { parseUri } from '../sip/uri.js';
import { MemoryTrunkStore } from '../store/trunks/memory.js';
import { RedisTrunkStore } from '../store/trunks/redis.js';
import type {
  ChildKind,
  ChildRecords,
  IpAclRecord,
  OriginationUriRecord,
  TrunkCredentialRecord,
  TrunkRecord,
  TrunkStore,
  TrunkTransport,
} from '../store/trunks/trunks.js';
import { parseCidr, PrefixIndex } from './cidr.js';
import type { GatewayView, TrunkLookup, TrunkSecret, TrunkType, TrunkView } from './lookup.js';

export type { TrunkLookup, TrunkView, GatewayView, TrunkSecret, TrunkType } from './lookup.js';
export type { TrunkRecord, TrunkCredentialRecord, IpAclRecord, OriginationUriRecord, ChildKind, TrunkTransport } from '../store/trunks/trunks.js';
export { parseCidr, parseAddress } from './cidr.js';

/** Notice topic: the ACL index of every process is stale. */
const ACL_TOPIC = 'trunks-acl';

/** Why a trunks operation was refused; the API maps `kind` to 404 / 409 / 400. */
export class TrunkError extends Error {
  constructor(
    readonly kind: 'not_found' | 'conflict' | 'invalid',
    message: string,
    /** The field at fault (kind `invalid`). */
    readonly field?: string,
    /** Extra body fields (the numbers that block a delete). */
    readonly extra: Record<string, unknown> = {},
    /** Stable error code (kind `conflict`). */
    readonly code: string = kind,
  ) {
    super(message);
    this.name = 'TrunkError';
  }
}

/** The settable fields of a trunk (absent = unchanged on update, default on create). */
export interface TrunkInput {
  name?: string;
  trunkType?: TrunkType;
  enabled?: boolean;
  maxConcurrentCalls?: number;
  cpsLimit?: number;
  description?: string;
  transport?: TrunkTransport;
  secure?: boolean;
  inboundDestination?: string | null;
  credentialUuid?: string | null;
  ipaclUuid?: string | null;
  primaryUriUuid?: string | null;
  fallbackUriUuid?: string | null;
  vendor?: Record<string, string | boolean>;
}

export interface CredentialInput {
  trunkId?: string;
  username?: string;
  password?: string;
  enabled?: boolean;
}

export interface AclInput {
  trunkId?: string;
  name?: string;
  ipAddress?: string;
  description?: string;
  enabled?: boolean;
}

export interface UriInput {
  trunkId?: string;
  name?: string;
  uri?: string;
  priority?: number;
  weight?: number;
  enabled?: boolean;
  description?: string;
}

/** What the API and routing use of trunks. */
export interface Trunks extends TrunkLookup {
  readonly store: TrunkStore;
  /** The realm trunk credentials are hashed in (SIP_DOMAIN). */
  readonly realm: string;
  createTrunk(authId: string, input: TrunkInput): Promise<TrunkRecord>;
  listTrunks(authId: string): Promise<TrunkRecord[]>;
  /** The account's trunk; TrunkError not_found otherwise. */
  getTrunk(authId: string, trunkId: string): Promise<TrunkRecord>;
  updateTrunk(authId: string, trunkId: string, input: TrunkInput): Promise<TrunkRecord>;
  /** Refused (conflict) while calls are up on it or numbers route to it; deletes its children. */
  deleteTrunk(authId: string, trunkId: string): Promise<void>;
  createCredential(authId: string, input: CredentialInput): Promise<TrunkCredentialRecord>;
  updateCredential(authId: string, id: string, input: CredentialInput): Promise<TrunkCredentialRecord>;
  createAcl(authId: string, input: AclInput): Promise<IpAclRecord>;
  updateAcl(authId: string, id: string, input: AclInput): Promise<IpAclRecord>;
  createUri(authId: string, input: UriInput): Promise<OriginationUriRecord>;
  updateUri(authId: string, id: string, input: UriInput): Promise<OriginationUriRecord>;
  /** The account's child; TrunkError not_found otherwise. */
  getChild<K extends ChildKind>(kind: K, authId: string, id: string): Promise<ChildRecords[K]>;
  listChildren<K extends ChildKind>(kind: K, authId: string): Promise<Array<ChildRecords[K]>>;
  deleteChild(kind: ChildKind, authId: string, id: string): Promise<void>;
  close(): Promise<void>;
}

export interface TrunksDeps {
  config: Readonly<Config>;
  /** The shared Redis client; the embedded store when null. */
  redis: RedisClient | null;
  /** Change notices between the processes sharing `redis` (absent: this process only). */
  events?: RedisEvents | null;
  /** Seals credential passwords at rest (DATA_ENCRYPTION_KEY). */
  secretBox: SecretBox;
  /** A store in place of the one `redis` selects (tests). */
  store?: TrunkStore;
  /** Calls up on a trunk now (wired by the call layer); a delete is refused while > 0. */
  activeCalls?: (trunkId: string) => Promise<number>;
  /** The numbers (E.164) of the account routed to a trunk (wired by numbers); a delete is refused while any. */
  numbersUsing?: (authId: string, trunkId: string) => Promise<string[]>;
  log?: Logger;
  now?: () => number;
}

export const TRANSPORTS: readonly TrunkTransport[] = ['udp', 'tcp', 'tls'];

/** What a password is sealed to: it opens for this credential only. */
export function trunkPasswordContext(credentialId: string): string {
  return `trunk_credential:${credentialId}`;
}

const hex = (alg: 'md5' | 'sha256', s: string): string => createHash(alg).update(s, 'utf8').digest('hex');

/** The SIP URI checks of an origination URI: its normalised text and transport, or a reason. */
export function checkSipUri(text: string): { uri: string; transport: TrunkTransport } | { error: string } {
  const u = typeof text === 'string' && text.length <= 512 ? parseUri(text.trim()) : null;
  if (!u || (u.scheme !== 'sip' && u.scheme !== 'sips') || u.host === '') return { error: 'must be a SIP URI (sip: or sips:, e.g. sip:gw.example.net:5060;transport=udp)' };
  let transport: TrunkTransport = u.scheme === 'sips' ? 'tls' : 'udp';
  if (u.params.has('transport')) {
    const t = (u.params.get('transport') ?? '').toLowerCase();
    if (!(TRANSPORTS as readonly string[]).includes(t)) return { error: 'has a transport other than udp, tcp or tls' };
    transport = t as TrunkTransport;
  }
  return { uri: u.raw, transport };
}

export function trunkView(t: TrunkRecord, sipDomain: string): TrunkView {
  return {
    trunkId: t.trunkId,
    authId: t.authId,
    name: t.name,
    trunkType: t.trunkType,
    enabled: t.enabled,
    maxConcurrentCalls: t.maxConcurrentCalls,
    cpsLimit: t.cpsLimit,
    sipDomain: `${t.trunkId}.${sipDomain}`.toLowerCase(),
  };
}

const LINKS = [
  ['credentialUuid', 'credential', 'credential_uuid'],
  ['ipaclUuid', 'ipacl', 'ipacl_uuid'],
  ['primaryUriUuid', 'uri', 'primary_uri_uuid'],
  ['fallbackUriUuid', 'uri', 'fallback_uri_uuid'],
] as const;

/** The in-process index of every IP ACL entry → its trunk. */
class InboundIndex {
  #index: PrefixIndex<TrunkView> | null = null;
  #builtAt = 0;
  #stale = true;
  #generation = 0;
  #building: Promise<PrefixIndex<TrunkView>> | null = null;

  constructor(
    private readonly store: TrunkStore,
    private readonly events: RedisEvents | null,
    private readonly shared: boolean,
    private readonly sipDomain: string,
    private readonly now: () => number,
  ) {
    events?.on(ACL_TOPIC, () => this.invalidate(), () => this.invalidate());
  }

  invalidate(): void {
    this.#generation++;
    this.#stale = true;
  }

  /** How long a built index is trusted without a notice. */
  #trustMs(): number {
    if (this.events) return this.events.complete ? 60_000 : 1_000;
    return this.shared ? 1_000 : 60_000;
  }

  async match(address: string): Promise<TrunkView[]> {
    let idx = this.#index;
    if (!idx || this.#stale || this.now() - this.#builtAt >= this.#trustMs()) idx = await this.#rebuild();
    const seen = new Set<string>();
    const out: TrunkView[] = [];
    for (const t of idx.match(address)) {
      if (seen.has(t.trunkId)) continue;
      seen.add(t.trunkId);
      out.push({ ...t });
    }
    return out;
  }

  #rebuild(): Promise<PrefixIndex<TrunkView>> {
    this.#building ??= (async () => {
      const generation = this.#generation;
      const at = this.now();
      try {
        const idx = new PrefixIndex<TrunkView>();
        for (const { acl, trunk } of await this.store.allAcls()) {
          if (trunk.trunkType !== 'INBOUND' || !acl.enabled) continue;
          const c = parseCidr(acl.ipAddress);
          if (c) idx.add(c, trunkView(trunk, this.sipDomain));
        }
        this.#index = idx;
        this.#builtAt = at;
        // A notice heard while reading: this index may miss it; rebuild next time.
        if (generation === this.#generation) this.#stale = false;
        return idx;
      } finally {
        this.#building = null;
      }
    })();
    return this.#building;
  }
}

/** Build the trunks capability. */
export function createTrunks(d: TrunksDeps): Trunks {
  const store = d.store ?? (d.redis ? new RedisTrunkStore(d.redis) : new MemoryTrunkStore());
  const realm = d.config.sipDomain;
  const log = d.log ?? createLogger('silent');
  const now = d.now ?? Date.now;
  const events = d.events ?? null;
  const index = new InboundIndex(store, events, d.redis !== null, realm, now);
  const iso = (): string => new Date(now()).toISOString();

  /** The ACL index changed: stale here at once, then on every other process (before the caller's answer). */
  const aclChanged = async (): Promise<void> => {
    index.invalidate();
    if (events) await events.publish(ACL_TOPIC, '1');
  };

  const ownTrunk = async (authId: string, trunkId: string, field?: string): Promise<TrunkRecord> => {
    const t = typeof trunkId === 'string' ? await store.getTrunk(trunkId) : null;
    if (!t || t.authId !== authId) throw new TrunkError('not_found', field ? `No trunk with this ${field} on this account.` : 'No trunk with this trunk_id on this account.', field);
    return t;
  };

  const ownChild = async <K extends ChildKind>(kind: K, authId: string, id: string): Promise<ChildRecords[K]> => {
    const c = await store.getChild(kind, id);
    if (!c || c.authId !== authId) throw new TrunkError('not_found', `No ${kindName(kind)} with this id on this account.`);
    return c;
  };

  /** Apply the link fields of `input`: each must name a child of this trunk (or be null). */
  const applyLinks = async (t: TrunkRecord, input: TrunkInput): Promise<void> => {
    for (const [key, kind, field] of LINKS) {
      const v = input[key];
      if (v === undefined) continue;
      if (v === null || v === '') {
        t[key] = null;
        continue;
      }
      const c = await store.getChild(kind, v);
      if (!c || c.trunkId !== t.trunkId || c.authId !== t.authId) throw new TrunkError('invalid', `must name a ${kindName(kind)} of this trunk`, field);
      t[key] = v;
    }
  };

  const applyTrunk = (t: TrunkRecord, input: TrunkInput): void => {
    if (input.name !== undefined) t.name = input.name;
    if (input.trunkType !== undefined) t.trunkType = input.trunkType;
    if (input.enabled !== undefined) t.enabled = input.enabled;
    if (input.maxConcurrentCalls !== undefined) t.maxConcurrentCalls = input.maxConcurrentCalls;
    if (input.cpsLimit !== undefined) t.cpsLimit = input.cpsLimit;
    if (input.description !== undefined) t.description = input.description;
    if (input.transport !== undefined) t.transport = input.transport;
    if (input.secure !== undefined) t.secure = input.secure;
    if (input.inboundDestination !== undefined) t.inboundDestination = input.inboundDestination;
    if (input.vendor !== undefined) t.vendor = { ...t.vendor, ...input.vendor };
  };

  /** Link a new child from its trunk when the trunk has none of that kind yet. */
  const autoLink = async (kind: ChildKind, c: { id: string; trunkId: string; authId: string }): Promise<void> => {
    const key = kind === 'credential' ? 'credentialUuid' : kind === 'ipacl' ? 'ipaclUuid' : 'primaryUriUuid';
    const t = await store.getTrunk(c.trunkId);
    if (!t || t[key] !== null) return;
    t[key] = c.id;
    await store.updateTrunk(t);
  };

  const putChild = async <K extends ChildKind>(kind: K, rec: ChildRecords[K], isNew: boolean): Promise<ChildRecords[K]> => {
    const r = await store.putChild(kind, rec);
    if (r === 'no_trunk') throw new TrunkError('not_found', 'No trunk with this trunk_id on this account.', 'trunk_id');
    if (r === 'username_taken') throw new TrunkError('conflict', 'This username is already in use (usernames are unique across the platform).', 'username', {}, 'username_taken');
    if (isNew) await autoLink(kind, rec);
    if (kind === 'ipacl') await aclChanged();
    return rec;
  };

  const sealCredential = (c: TrunkCredentialRecord, password: string): void => {
    c.ha1Md5 = hex('md5', `${c.username}:${realm}:${password}`);
    c.ha1Sha256 = hex('sha256', `${c.username}:${realm}:${password}`);
    c.sealedPassword = d.secretBox.encrypt(password, trunkPasswordContext(c.id));
  };

  const secretOfCredential = (c: TrunkCredentialRecord): TrunkSecret => ({
    trunkId: c.trunkId,
    authId: c.authId,
    username: c.username,
    ha1Md5: c.ha1Md5,
    ha1Sha256: c.ha1Sha256,
    password: d.secretBox.decrypt(c.sealedPassword, trunkPasswordContext(c.id)),
  });

  const checkAcl = (text: string | undefined): string => {
    const c = typeof text === 'string' ? parseCidr(text) : null;
    if (!c) throw new TrunkError('invalid', 'must be an IPv4 or IPv6 address or CIDR (e.g. 192.0.2.0/24, 2001:db8::/32)', 'ip_address');
    return c.text;
  };

  const checkUri = (text: string | undefined): { uri: string; transport: TrunkTransport } => {
    const r = checkSipUri(text ?? '');
    if ('error' in r) throw new TrunkError('invalid', r.error, 'sip_uri');
    return r;
  };

  return {
    store,
    realm,

    // ---- TrunkLookup (routing) ----
    inboundByAddress: (address) => index.match(address),

    async secretByUsername(username) {
      const c = await store.credentialByUsername(username);
      if (!c || !c.enabled) return null;
      return secretOfCredential(c);
    },

    async trunk(trunkId) {
      const t = await store.getTrunk(trunkId);
      return t ? trunkView(t, realm) : null;
    },

    async outboundOf(authId) {
      const t = (await store.listTrunks(authId)).find((x) => x.trunkType === 'OUTBOUND' && x.enabled);
      return t ? trunkView(t, realm) : null;
    },

    async gatewaysOf(trunkId) {
      const uris = await store.childrenOf('uri', trunkId);
      // Lower priority first; within one priority, creation order (a stable sort).
      return uris
        .map((u): GatewayView => ({ id: u.id, uri: u.uri, priority: u.priority, weight: u.weight, enabled: u.enabled }))
        .sort((a, b) => a.priority - b.priority);
    },

    async secretOf(trunkId) {
      const t = await store.getTrunk(trunkId);
      if (!t || t.credentialUuid === null) return null;
      const c = await store.getChild('credential', t.credentialUuid);
      if (!c || c.trunkId !== trunkId || !c.enabled) return null;
      return secretOfCredential(c);
    },

    // ---- the API's operations ----
    async createTrunk(authId, input) {
      const at = iso();
      const t: TrunkRecord = {
        trunkId: randomUUID(),
        authId,
        name: '',
        trunkType: 'OUTBOUND',
        enabled: true,
        maxConcurrentCalls: 0,
        cpsLimit: 0,
        description: '',
        transport: 'udp',
        secure: false,
        inboundDestination: null,
        credentialUuid: null,
        ipaclUuid: null,
        primaryUriUuid: null,
        fallbackUriUuid: null,
        vendor: {},
        createdAt: at,
        updatedAt: at,
      };
      applyTrunk(t, input);
      // A new trunk has no children yet: a link can name none.
      for (const [key, , field] of LINKS) {
        if (input[key]) throw new TrunkError('invalid', 'must name a child of this trunk (create the trunk first, then link)', field);
      }
      await store.createTrunk(t);
      log.info({ authId, trunkId: t.trunkId, trunkType: t.trunkType }, 'trunk created');
      return t;
    },

    listTrunks: (authId) => store.listTrunks(authId),
    getTrunk: (authId, trunkId) => ownTrunk(authId, trunkId),

    async updateTrunk(authId, trunkId, input) {
      const t = await ownTrunk(authId, trunkId);
      applyTrunk(t, input);
      await applyLinks(t, input);
      t.updatedAt = iso();
      if (!(await store.updateTrunk(t))) throw new TrunkError('not_found', 'No trunk with this trunk_id on this account.');
      // Type, enabled and name are part of what the inbound index answers.
      await aclChanged();
      return t;
    },

    async deleteTrunk(authId, trunkId) {
      await ownTrunk(authId, trunkId);
      const calls = d.activeCalls ? await d.activeCalls(trunkId) : 0;
      if (calls > 0) throw new TrunkError('conflict', `The trunk has ${calls} call(s) up; delete it when they have ended.`, undefined, { active_calls: calls }, 'trunk_in_use');
      const numbers = d.numbersUsing ? await d.numbersUsing(authId, trunkId) : [];
      if (numbers.length > 0) {
        throw new TrunkError('conflict', `Numbers are routed to this trunk (${numbers.join(', ')}); assign them elsewhere first.`, undefined, { numbers }, 'trunk_has_numbers');
      }
      if (!(await store.deleteTrunk(authId, trunkId))) throw new TrunkError('not_found', 'No trunk with this trunk_id on this account.');
      await aclChanged();
      log.info({ authId, trunkId }, 'trunk deleted');
    },

    async createCredential(authId, input) {
      await ownTrunk(authId, input.trunkId ?? '', 'trunk_id');
      const at = iso();
      const c: TrunkCredentialRecord = {
        id: randomUUID(),
        authId,
        trunkId: input.trunkId as string,
        username: input.username ?? '',
        ha1Md5: '',
        ha1Sha256: '',
        sealedPassword: '',
        enabled: input.enabled ?? true,
        createdAt: at,
        updatedAt: at,
      };
      sealCredential(c, input.password ?? '');
      return putChild('credential', c, true);
    },

    async updateCredential(authId, id, input) {
      const c = await ownChild('credential', authId, id);
      if (input.username !== undefined && input.username !== c.username && input.password === undefined) {
        // HA1 covers the username: a new one needs the password again.
        throw new TrunkError('invalid', 'is required when the username changes (the stored hash covers both)', 'password');
      }
      if (input.username !== undefined) c.username = input.username;
      if (input.enabled !== undefined) c.enabled = input.enabled;
      if (input.password !== undefined) sealCredential(c, input.password);
      c.updatedAt = iso();
      return putChild('credential', c, false);
    },

    async createAcl(authId, input) {
      const ipAddress = checkAcl(input.ipAddress);
      await ownTrunk(authId, input.trunkId ?? '', 'trunk_id');
      const at = iso();
      const a: IpAclRecord = {
        id: randomUUID(),
        authId,
        trunkId: input.trunkId as string,
        name: input.name ?? '',
        ipAddress,
        description: input.description ?? '',
        enabled: input.enabled ?? true,
        createdAt: at,
        updatedAt: at,
      };
      return putChild('ipacl', a, true);
    },

    async updateAcl(authId, id, input) {
      const a = await ownChild('ipacl', authId, id);
      if (input.ipAddress !== undefined) a.ipAddress = checkAcl(input.ipAddress);
      if (input.name !== undefined) a.name = input.name;
      if (input.description !== undefined) a.description = input.description;
      if (input.enabled !== undefined) a.enabled = input.enabled;
      a.updatedAt = iso();
      return putChild('ipacl', a, false);
    },

    async createUri(authId, input) {
      const { uri, transport } = checkUri(input.uri);
      await ownTrunk(authId, input.trunkId ?? '', 'trunk_id');
      const at = iso();
      const u: OriginationUriRecord = {
        id: randomUUID(),
        authId,
        trunkId: input.trunkId as string,
        name: input.name ?? '',
        uri,
        priority: input.priority ?? 1,
        weight: input.weight ?? 1,
        enabled: input.enabled ?? true,
        transport,
        description: input.description ?? '',
        createdAt: at,
        updatedAt: at,
      };
      return putChild('uri', u, true);
    },

    async updateUri(authId, id, input) {
      const u = await ownChild('uri', authId, id);
      if (input.uri !== undefined) Object.assign(u, checkUri(input.uri));
      if (input.name !== undefined) u.name = input.name;
      if (input.priority !== undefined) u.priority = input.priority;
      if (input.weight !== undefined) u.weight = input.weight;
      if (input.enabled !== undefined) u.enabled = input.enabled;
      if (input.description !== undefined) u.description = input.description;
      u.updatedAt = iso();
      return putChild('uri', u, false);
    },

    getChild: (kind, authId, id) => ownChild(kind, authId, id),
    listChildren: (kind, authId) => store.listChildren(kind, authId),

    async deleteChild(kind, authId, id) {
      const c = await ownChild(kind, authId, id);
      if (!(await store.deleteChild(kind, authId, id))) throw new TrunkError('not_found', `No ${kindName(kind)} with this id on this account.`);
      // Links naming it are cleared (a trunk never points at a child that is gone).
      const t = await store.getTrunk(c.trunkId);
      if (t) {
        let changed = false;
        for (const [key] of LINKS) {
          if (t[key] === id) {
            t[key] = null;
            changed = true;
          }
        }
        if (changed) await store.updateTrunk(t);
      }
      if (kind === 'ipacl') await aclChanged();
    },

    close: () => store.close(),
  };
}

function kindName(kind: ChildKind): string {
  return kind === 'credential' ? 'credential' : kind === 'ipacl' ? 'IP ACL entry' : 'origination URI';
}
