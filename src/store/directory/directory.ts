/**
 * The provisioning directory: accounts, sub-accounts, applications, endpoints,
 * retired usernames and idempotency records — everything the HTTP API manages
 * apart from live registrations (LocationStore) and digest HA1 values
 * (CredentialStore). Two implementations: RedisDirectory (production) and
 * MemoryDirectory (the embedded default); both pass test/api/directory.test.ts.
 *
 * Tokens and passwords never reach the directory in plaintext: an account or
 * sub-account carries the SHA-256 of its Auth Token ({@link hashToken}); the API
 * compares with {@link tokenMatches} in constant time.
 */
import { createHash, randomBytes, timingSafeEqual } from 'node:crypto';

/** Account billing type (spec "Account"). */
export type AccountType = 'PREPAID' | 'POSTPAID';

/** A customer account, created through the partner API. */
export interface AccountRecord {
  /** The Auth ID: `MA` + 18 upper-case letters/digits. */
  authId: string;
  /** Lower-case hex SHA-256 of the Auth Token. */
  tokenHash: string;
  /** scrypt hash of the console password given at creation (never used to call the API). */
  passwordHash: string | null;
  name: string;
  email: string;
  /** ISO 3166-1 alpha-2, upper-case. */
  country: string;
  accountType: AccountType;
  enabled: boolean;
  cpsLimit: number;
  concurrentCallsLimit: number;
  /** `<auth_id lower-cased>.<config.sipDomain>`: digest realm and host of every sip_uri. */
  sipDomain: string;
  /** Partner that created the account, or null (operator-provisioned). */
  partnerId: string | null;
  createdAt: string;
  updatedAt: string;
}

export type KycMode = 'personal_use' | 'customer_use';

/** A sub-account of an account: its own credentials, its own endpoints and applications. */
export interface SubAccountRecord {
  /** `SA` + 18 upper-case letters/digits. */
  authId: string;
  parentAuthId: string;
  tokenHash: string;
  name: string;
  enabled: boolean;
  kycMode: KycMode;
  businessType: string;
  kycCallsBlocked: boolean;
  createdAt: string;
  updatedAt: string;
}

export type CallbackMethod = 'GET' | 'POST';

/** The settable fields of an application, under the resource's own (snake_case) names. */
export interface ApplicationSettings {
  app_name: string;
  application_type: string;
  answer_url: string;
  answer_method: CallbackMethod;
  hangup_url: string;
  hangup_method: CallbackMethod;
  fallback_answer_url: string;
  fallback_method: CallbackMethod;
  message_url: string;
  message_method: CallbackMethod;
  sip_transfer_url: string;
  sip_transfer_method: CallbackMethod;
  default_number_app: boolean;
  default_app: boolean;
  enabled: boolean;
  log_incoming_message: boolean;
  public_uri: boolean;
}

/** A voice application of an account (or of one of its sub-accounts). */
export interface ApplicationRecord {
  /** Decimal digits; a JSON-safe integer. */
  appId: string;
  accountAuthId: string;
  /** Owning sub-account, or null for the main account. Fixed at creation. */
  subAccount: string | null;
  settings: ApplicationSettings;
  /**
   * True when this is the default endpoint application of its owner (the main
   * account, or its sub-account). At most one per owner: setting it on one
   * application clears it on the previous holder atomically.
   */
  defaultEndpointApp: boolean;
  createdAt: string;
  updatedAt: string;
}

/** A SIP endpoint: `sip:<username>@<account sip domain>`. */
export interface EndpointRecord {
  /** Decimal digits. */
  endpointId: string;
  accountAuthId: string;
  /** As provisioned (alphanumeric). Unique per account ignoring case, including sub-accounts. */
  username: string;
  alias: string;
  /** Attached application, or null. */
  appId: string | null;
  /** Owning sub-account, or null for the main account. */
  subAccount: string | null;
  allowVoice: boolean;
  allowMessage: boolean;
  allowVideo: boolean;
  allowSameDomain: boolean;
  allowOtherDomains: boolean;
  allowPhones: boolean;
  allowApps: boolean;
  createdAt: string;
  updatedAt: string;
}

/** Fields an endpoint update may change (spec: password is handled by the credential store). */
export interface EndpointPatch {
  alias?: string;
  /** null detaches the application. */
  appId?: string | null;
  allowVoice?: boolean;
  allowMessage?: boolean;
  allowVideo?: boolean;
  /** Set by every accepted update. */
  updatedAt: string;
}

export interface SubAccountPatch {
  name?: string;
  enabled?: boolean;
  kycMode?: KycMode;
  businessType?: string;
  kycCallsBlocked?: boolean;
  updatedAt: string;
}

export interface ApplicationPatch {
  settings?: Partial<ApplicationSettings>;
  defaultEndpointApp?: boolean;
  updatedAt: string;
}

/**
 * Endpoint list filters (spec "List endpoints"). String matches are
 * case-sensitive. All given filters must hold.
 */
export interface EndpointQuery {
  usernameContains?: string;
  usernameExact?: string;
  usernameStartswith?: string;
  aliasContains?: string;
  aliasExact?: string;
  appIdExact?: string;
  /** true: only endpoints without an application; false: only with one. */
  appIdIsNull?: boolean;
  /** Only endpoints of this sub-account. */
  subAccount?: string;
}

export interface PageRequest {
  limit: number;
  offset: number;
}

export interface Page<T> {
  total: number;
  items: T[];
}

/** What a principal's Auth ID names. */
export type PrincipalRecord =
  | { kind: 'account'; account: AccountRecord }
  | { kind: 'subaccount'; account: AccountRecord; subAccount: SubAccountRecord };

export type CreateEndpointResult =
  | 'ok'
  | 'username_taken'
  | 'username_retired'
  | 'id_taken'
  | 'no_application'
  | 'no_subaccount';

export type UpdateEndpointResult = { ok: true; endpoint: EndpointRecord } | { ok: false; reason: 'not_found' | 'no_application' };

export type CreateApplicationResult = 'ok' | 'id_taken' | 'no_subaccount';

export type DeleteSubAccountResult = 'ok' | 'not_found' | 'not_empty';

/** A stored idempotency record: first a reservation, then the first response. */
export interface IdempotencyRecord {
  state: 'pending' | 'done';
  /** Keyed digest of the request body; a different body under the same key is refused. */
  fingerprint: string;
  /** Response status and encrypted body (state 'done'). */
  status: number;
  body: string;
  createdAt: number;
}

/** Every method may reject with StoreUnavailableError when the backend is down. */
export interface Directory {
  // --- accounts -----------------------------------------------------------
  /** Store a new account; false when the Auth ID is taken. */
  createAccount(account: AccountRecord): Promise<boolean>;
  getAccount(authId: string): Promise<AccountRecord | null>;
  /** The account or sub-account an Auth ID names (authentication). */
  findPrincipal(authId: string): Promise<PrincipalRecord | null>;

  // --- sub-accounts -------------------------------------------------------
  /** Store a new sub-account; false when the Auth ID is taken. */
  createSubAccount(sub: SubAccountRecord): Promise<boolean>;
  getSubAccount(accountAuthId: string, subAuthId: string): Promise<SubAccountRecord | null>;
  listSubAccounts(accountAuthId: string, page: PageRequest): Promise<Page<SubAccountRecord>>;
  updateSubAccount(accountAuthId: string, subAuthId: string, patch: SubAccountPatch): Promise<SubAccountRecord | null>;
  /** Remove a sub-account that owns no endpoints and no applications; its Auth ID stops working at once. */
  deleteSubAccount(accountAuthId: string, subAuthId: string): Promise<DeleteSubAccountResult>;

  // --- applications -------------------------------------------------------
  createApplication(app: ApplicationRecord): Promise<CreateApplicationResult>;
  getApplication(accountAuthId: string, appId: string): Promise<ApplicationRecord | null>;
  /** Many applications of one account in one round trip (list views). */
  getApplications(accountAuthId: string, appIds: string[]): Promise<Map<string, ApplicationRecord>>;
  listApplications(accountAuthId: string, q: { subAccount?: string }, page: PageRequest): Promise<Page<ApplicationRecord>>;
  updateApplication(accountAuthId: string, appId: string, patch: ApplicationPatch): Promise<ApplicationRecord | null>;
  /** Delete an application and detach it from every endpoint that uses it. */
  deleteApplication(accountAuthId: string, appId: string): Promise<boolean>;
  /** The default endpoint application of the main account (null) or of a sub-account. */
  getDefaultEndpointApp(accountAuthId: string, subAccount: string | null): Promise<ApplicationRecord | null>;

  // --- endpoints ----------------------------------------------------------
  /**
   * Store a new endpoint atomically with its checks: the username (ignoring case)
   * is neither in use nor retired on the account, the sub-account and the
   * application (when given) exist.
   */
  createEndpoint(endpoint: EndpointRecord): Promise<CreateEndpointResult>;
  getEndpoint(accountAuthId: string, endpointId: string): Promise<EndpointRecord | null>;
  /** Endpoints in creation order (then endpoint_id), filtered, one page, with the filtered total. */
  listEndpoints(accountAuthId: string, q: EndpointQuery, page: PageRequest): Promise<Page<EndpointRecord>>;
  updateEndpoint(accountAuthId: string, endpointId: string, patch: EndpointPatch): Promise<UpdateEndpointResult>;
  /**
   * Delete an endpoint. With `retire` its username can never be used on the
   * account again (spec: the SIP URI becomes permanently unavailable); without, the
   * username is freed (undoing a create whose credential write failed).
   */
  deleteEndpoint(accountAuthId: string, endpointId: string, opts: { retire: boolean }): Promise<EndpointRecord | null>;

  // --- idempotency --------------------------------------------------------
  /**
   * Reserve `id` under `scope` (an Auth ID) for `ttlMs` with a pending record, or
   * return the record already there.
   */
  beginIdempotent(scope: string, id: string, pending: IdempotencyRecord, ttlMs: number): Promise<IdempotencyRecord | null>;
  /** Replace the reservation with the first response; it lives `ttlMs` from now. */
  completeIdempotent(scope: string, id: string, done: IdempotencyRecord, ttlMs: number): Promise<void>;
  /** Drop a reservation whose request failed, so a retry may run. */
  abandonIdempotent(scope: string, id: string): Promise<void>;

  ping(): Promise<boolean>;
  close(): Promise<void>;
}

/** Lower-case hex SHA-256 of a token: what the directory keeps instead of it. */
export function hashToken(token: string): string {
  return createHash('sha256').update(token, 'utf8').digest('hex');
}

/** Constant-time check of a presented token against a stored {@link hashToken} value. */
export function tokenMatches(presented: string, storedHash: string): boolean {
  const a = createHash('sha256').update(presented, 'utf8').digest();
  const b = Buffer.from(storedHash, 'hex');
  // Both are 32 bytes unless the stored value is corrupt; compare anyway so the
  // work done does not depend on which case applies.
  return timingSafeEqual(a, b.length === a.length ? b : Buffer.alloc(a.length)) && b.length === a.length;
}

const ID_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789';
const TOKEN_ALPHABET = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789';

/** `n` characters drawn uniformly from `alphabet` (rejection sampling over random bytes). */
export function randomString(alphabet: string, n: number): string {
  const limit = 256 - (256 % alphabet.length);
  let out = '';
  while (out.length < n) {
    for (const b of randomBytes(n * 2)) {
      if (b < limit) out += alphabet[b % alphabet.length];
      if (out.length === n) break;
    }
  }
  return out;
}

/** A new Auth ID: `prefix` (MA for accounts, SA for sub-accounts) + 18 characters. */
export function newAuthId(prefix: 'MA' | 'SA'): string {
  return prefix + randomString(ID_ALPHABET, 18);
}

/** A new Auth Token: 40 characters of base62 (~238 bits). */
export function newAuthToken(): string {
  return randomString(TOKEN_ALPHABET, 40);
}

/**
 * A new numeric id (endpoint_id, app_id): 15 decimal digits, first non-zero, so
 * it is also a JSON-safe integer (the spec passes app_id as an integer).
 */
export function newNumericId(): string {
  return randomString('123456789', 1) + randomString('0123456789', 14);
}

/** The SIP domain of an account (docs/design.md "Domain model"). */
export function accountSipDomain(authId: string, sipDomain: string): string {
  return `${authId.toLowerCase()}.${sipDomain}`;
}

/** Whether an endpoint satisfies every filter of `q` (shared by both directories). */
export function endpointMatches(e: EndpointRecord, q: EndpointQuery): boolean {
  // Exact matches compare as usernames are unique: ignoring case (docs/api.md "Lists").
  if (q.usernameExact !== undefined && e.username.toLowerCase() !== q.usernameExact.toLowerCase()) return false;
  if (q.usernameContains !== undefined && !e.username.includes(q.usernameContains)) return false;
  if (q.usernameStartswith !== undefined && !e.username.startsWith(q.usernameStartswith)) return false;
  if (q.aliasExact !== undefined && e.alias.toLowerCase() !== q.aliasExact.toLowerCase()) return false;
  if (q.aliasContains !== undefined && !e.alias.includes(q.aliasContains)) return false;
  if (q.appIdExact !== undefined && e.appId !== q.appIdExact) return false;
  if (q.appIdIsNull !== undefined && (e.appId === null) !== q.appIdIsNull) return false;
  if (q.subAccount !== undefined && e.subAccount !== q.subAccount) return false;
  return true;
}

/** The list order of both directories: creation time, then id by code unit. */
export function compareByCreation(a: { createdAt: string; id: string }, b: { createdAt: string; id: string }): number {
  const ta = Date.parse(a.createdAt);
  const tb = Date.parse(b.createdAt);
  if (ta !== tb) return ta - tb;
  return a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
}

/** Apply an endpoint patch to a record (pure). */
export function applyEndpointPatch(e: EndpointRecord, p: EndpointPatch): EndpointRecord {
  return {
    ...e,
    alias: p.alias ?? e.alias,
    appId: p.appId !== undefined ? p.appId : e.appId,
    allowVoice: p.allowVoice ?? e.allowVoice,
    allowMessage: p.allowMessage ?? e.allowMessage,
    allowVideo: p.allowVideo ?? e.allowVideo,
    updatedAt: p.updatedAt,
  };
}

/** Apply a sub-account patch to a record (pure). */
export function applySubAccountPatch(s: SubAccountRecord, p: SubAccountPatch): SubAccountRecord {
  return {
    ...s,
    name: p.name ?? s.name,
    enabled: p.enabled ?? s.enabled,
    kycMode: p.kycMode ?? s.kycMode,
    businessType: p.businessType ?? s.businessType,
    kycCallsBlocked: p.kycCallsBlocked ?? s.kycCallsBlocked,
    updatedAt: p.updatedAt,
  };
}
