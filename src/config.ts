import type { RedisTarget } from './store/redis/client.js';
import { readFileSync, existsSync } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { availableParallelism } from 'node:os';
import { BlockList, isIP } from 'node:net';
import { createSecureContext } from 'node:tls';
import { ConfigError } from './errors.js';
import { parseAllowedNetworks } from './events/network-guard.js';
import { deriveDataKey, parseDataKeys, randomDataKey } from './security/secret-box.js';
import { normalizeCurrency } from './billing/currency.js';

/** A listener port: a number (0 = pick a free port) or null when switched `off`. */
export type PortSetting = number | null;

/** One rtpengine's NG control address (RTPENGINE_NG `host:port[=weight]`; docs/media.md). */
export interface MediaEngineAddress {
  host: string;
  port: number;
  /** Share of new calls; 0 = draining (only calls already on it). @default 1 */
  weight: number;
}

/**
 * Which calls go through rtpengine (docs/media.md): `bridge` those whose two legs
 * differ (WebRTC on one side, plain RTP on the other), `always` every call,
 * `never` none (SDP passed through untouched).
 */
export type MediaRelayMode = 'bridge' | 'always' | 'never';
/** How UDP datagrams are received and sent (docs/udp-engine.md). */
export type UdpEngineSetting = 'native' | 'dgram' | 'auto';

export interface PartnerConfig {
  id: string;
  authId: string;
  /** Plaintext token from the operator's configuration; hashed at load, never logged. */
  authToken: string;
  name: string;
  email: string;
  /** Password for the interactive JWT login (POST /api/v1/partner/login); optional. */
  password: string | null;
  company: string;
  canCreateAccounts: boolean;
  canTransferBalance: boolean;
  /** Currency of the partner's balance and of its customers' (ISO 4217). @default DEFAULT_CURRENCY */
  currency?: string;
  /** Made at start-up because none was configured (development only); main prints its token once. */
  generated?: boolean;
}

export interface Config {
  /** Address the SIP listeners bind to. `::` binds IPv4 and IPv6. @default '0.0.0.0' */
  sipHost: string;
  /** Address written into our own Via/Record-Route/Contact when it must be routable. @default derived from sipHost */
  sipAdvertisedHost: string | null;
  /** @default 5060 */ udpPort: PortSetting;
  /**
   * SIP_UDP_ENGINE (docs/udp-engine.md): `native` = the batched recvmmsg/sendmmsg addon
   * (start-up fails when it is not built), `dgram` = node:dgram, `auto` = native when it
   * loads, else node:dgram with one log line. @default 'auto'
   */
  udpEngine: UdpEngineSetting;
  /**
   * SIP_UDP_SHED_AGE_MS (docs/udp-engine.md "Overload"): the native engine drops, unparsed,
   * a datagram that waited longer than this in the socket's receive queue; 0 = never
   * (node:dgram cannot tell a datagram's age). @default 0 (300 is measured to keep an
   * overloaded edge on Redis answering: docs/udp-engine.md "Overload")
   */
  udpShedAgeMs: number;
  /** @default 5060 */ tcpPort: PortSetting;
  /** @default 5061 */ tlsPort: PortSetting;
  /** @default 5066 */ wsPort: PortSetting;
  /** @default 7443 */ wssPort: PortSetting;
  /** @default '0.0.0.0' */ httpHost: string;
  /** @default 8080 */ httpPort: PortSetting;
  /** Parent domain of every account's SIP domain: `<auth_id>.<sipDomain>`. @default 'sip.localhost' */
  sipDomain: string;
  /** Shortest Expires accepted, seconds (RFC 3261 §10.3 step 7). @default 60 */
  minExpires: number;
  /** Longest Expires granted; longer requests are clamped. @default 7200 */
  maxExpires: number;
  /** Expires used when the REGISTER gives none. @default 3600 */
  defaultExpires: number;
  /** Answer a too-short Expires by raising it to minExpires instead of 423 (some phones mishandle 423). @default false */
  clampMinExpires: boolean;
  /** Most bindings one endpoint may hold. @default 10 */
  maxContacts: number;
  /**
   * The address other nodes of a fleet reach this one on, when SIP_HOST is a
   * wildcard (0.0.0.0, ::); unset = SIP_HOST when it is concrete (docs/fleet.md).
   */
  nodeAddress: string | null;
  /** Unset (and no cluster or sentinels) → the embedded in-memory store. */
  redisUrl: string | null;
  /** Seed nodes of a Redis Cluster, instead of REDIS_URL (`redis://h:p,redis://h:p,…`). */
  redisClusterNodes: string[] | null;
  /** Sentinels watching the master, instead of REDIS_URL (`h:p,h:p,…`); needs redisSentinelName. */
  redisSentinels: Array<{ host: string; port: number }> | null;
  /** The master name the sentinels know (`REDIS_SENTINEL_NAME`). */
  redisSentinelName: string | null;
  /** A Redis on a Unix socket (`REDIS_SOCKET`, an absolute path), instead of REDIS_URL. */
  redisSocket: string | null;
  /**
   * Processes sharing the listeners (node:cluster). Without a Redis, more than 1
   * makes the node start its own store process (docs/workers.md "One store process").
   * `auto` = one per CPU. @default 1
   */
  workers: number;
  /**
   * SIP_WORKERS > 1 and no Redis configured: the primary runs a node-private
   * `redis-server` on a Unix socket as the store of its workers (derived, not set).
   */
  storeProcess: boolean;
  /** The redis-server binary of the store process (`REDIS_SERVER_BIN`). @default 'redis-server' */
  redisServerBin: string;
  tlsCertFile: string | null;
  tlsKeyFile: string | null;
  /** HMAC key for digest nonces; random per process when unset (nonces then do not survive a restart). */
  nonceSecret: string | null;
  /** Seconds a nonce stays fresh; older well-signed nonces get stale=true. @default 300 */
  nonceTtl: number;
  /** Digest algorithms offered, in order (RFC 8760: strongest first). @default ['SHA-256', 'MD5'] */
  digestAlgorithms: Array<'SHA-256' | 'MD5'>;
  /**
   * User-Agent substrings (case-insensitive) of clients that read only the first
   * challenge and speak only MD5; they get an MD5 challenge alone. @default ['sipp', 'baresip']
   */
  digestMd5OnlyUserAgents: string[];
  /** @default 'info' */ logLevel: string;
  /** Origins accepted on WS/WSS upgrades; empty = any. @default [] */
  wsAllowedOrigins: string[];
  /** Largest SIP message accepted, bytes. @default 65535 */
  maxMessageSize: number;
  /** Most header lines in one message. @default 128 */
  maxHeaders: number;
  /** Longest single header line, bytes. @default 8192 */
  maxLineLength: number;
  /**
   * Seconds a stream connection that carries no live binding may stay silent
   * before it is closed. A connection with a live binding is never closed for
   * being quiet: see {@link Config.pingInterval}. @default 300
   */
  idleTimeout: number;
  /**
   * Flow liveness (README "Flows", docs/flows.md): seconds of silence after which a
   * WS/WSS connection carrying a live binding is sent a WebSocket ping (RFC 6455
   * §5.5.2), unanswered by 2 × this it is closed and its bindings removed; TCP/TLS
   * connections get kernel keep-alive probes after this long (dead after this + 10 s).
   * Also the Flow-Timer of REGISTER 200 OKs to outbound clients (RFC 5626 §5.4). @default 30
   */
  pingInterval: number;
  /** Most concurrent stream (TCP/TLS/WS) connections. @default 50000 */
  maxConnections: number;
  /** Identifies this process in flow-owned bindings. @default random */
  nodeId: string;
  /** Keep registration events (docs/events.md); off saves a stream write per REGISTER. @default true */
  eventLog: boolean;
  /** HTTP API requests per minute per Auth ID. @default 1000 */
  apiRateLimit: number;
  /**
   * SIP messages one source address may send per {@link Config.rateWindow} before it
   * is banned (kamailio pike's reqs_density_per_unit); 0 = no limit. @default 100
   */
  rateLimit: number;
  /** Seconds of one rate-limit sampling window (pike sampling_time_unit). @default 2 */
  rateWindow: number;
  /** Seconds a source over the rate stays banned: its packets are dropped unread. @default 300 */
  banTime: number;
  /**
   * Addresses and CIDR blocks exempt from the rate limit, bans, the per-address
   * connection cap and per-source auth-failure counting (local proxies, monitors,
   * load generators). @default ['127.0.0.0/8', '::1']
   */
  trustedAddresses: string[];
  /** Seconds over which failed digest attempts are counted. @default 300 */
  authFailureWindow: number;
  /** Failed digest attempts from one source address within the window before it is refused. @default 20 */
  authMaxFailuresPerSource: number;
  /**
   * Failed digest attempts against one endpoint (known or not) within the window
   * before it is refused to every source that has not authenticated as it lately. @default 10
   */
  authMaxFailuresPerEndpoint: number;
  /** Seconds a refused source or endpoint stays refused, its passwords unchecked. @default 900 */
  authCooloff: number;
  /** Most concurrent stream connections from one address (trusted addresses exempt). @default 200 */
  maxConnectionsPerAddress: number;
  /**
   * Seconds a stream connection may take to deliver a started message (and its first
   * one), a TLS handshake or a WebSocket upgrade request; slow senders are cut. @default 10
   */
  headerTimeout: number;
  /** Requests being processed at once; more get 503 + Retry-After. @default 5000 */
  maxPendingRequests: number;
  /**
   * Server transactions remembered for retransmissions (RFC 3261 §17.2.2, UDP); at
   * the cap new requests are dropped unread until entries expire. @default 200000
   */
  maxTransactions: number;
  /** OpenSSL cipher list for TLS/WSS (TLS 1.3 suites may be named too); null = Node's default. @default null */
  tlsCiphers: string | null;
  /** Oldest TLS version accepted. @default 'TLSv1.2' */
  tlsMinVersion: 'TLSv1.2' | 'TLSv1.3';
  /**
   * Where calls and messages to telephone numbers go: a `sip:` URI reached over
   * UDP (`sip:gw.example.net:5060`); the number becomes its user part. Unset →
   * such requests get 503. @default null
   */
  outboundGatewayUri: string | null;
  /**
   * Where calls and messages to an account's applications go: a `sip:` URI
   * reached over UDP; the app_id becomes its user part. Unset → 503. @default null
   */
  appServerUri: string | null;
  /** Seconds an out-of-dialog INVITE may ring unanswered before the caller gets 408 and the callees CANCEL. @default 120 */
  noAnswerTimeout: number;
  /** Seconds between OPTIONS pings to trunk gateways (docs/trunks.md "Gateway health"); 0 = no pings. */
  trunkPingInterval: number;
  /** PEM file of the CAs a TLS trunk gateway's certificate must chain to; null = the system's. @default null */
  trunkTlsCaFile: string | null;
  /** Seconds after which a call whose end was never seen stops counting against concurrent_calls_limit. @default 14400 */
  maxCallDuration: number;
  /**
   * CIDR blocks callbacks may reach although they are loopback, private, link-local
   * or otherwise not public (docs/callbacks.md "Which addresses a callback may reach"). @default []
   */
  callbackAllowedNetworks: string[];
  /** Seconds one callback attempt may take (DNS, connect, TLS, request, response). @default 3 */
  callbackTimeout: number;
  /** Seconds between a failed callback attempt and the next, one per retry (docs/callbacks.md). @default [2, 4, 8] */
  callbackRetryDelays: number[];
  /** Seconds a process holds a claimed callback before another may attempt it (a node that died mid-attempt). @default 15 */
  callbackLease: number;
  /** rtpengine NG control addresses; null = no media relay, SDP untouched (docs/media.md). @default null */
  rtpengineNg: MediaEngineAddress[] | null;
  /** Which calls are relayed. @default 'bridge' when RTPENGINE_NG is set, else 'never' */
  mediaRelay: MediaRelayMode;
  /**
   * DATA_ENCRYPTION_KEY (README "Secrets at rest"): the key ring sealing secrets kept in the
   * store (AES-256-GCM), `kid` + base64 of 32 bytes each; the first seals, all open.
   * Required in production. Unset in development: derived from NONCE_SECRET when that
   * is set (kid `dev`), else random for this process (kid `run-<hex>`); see dataKeySource.
   */
  dataEncryptionKeys: ReadonlyArray<{ kid: string; key: string }>;
  /** Where the key ring came from: the setting, NONCE_SECRET (development), or random for this run (development). */
  dataKeySource: 'configured' | 'nonce-secret' | 'random';
  /**
   * Secret of the operator routes under /api/v1/admin/ (header X-Admin-Token; docs/billing.md
   * "Funding"). null: those routes answer 404. Development makes one (shown once by main).
   * @default null
   */
  adminAuthToken: string | null;
  /** Made at start-up because none was configured (development only); main prints it once. */
  adminTokenGenerated?: boolean;
  /** Currency of partners that name none (ISO 4217). @default 'USD' */
  defaultCurrency: string;
  /** The rate deck CSV (docs/billing.md "Rates"); development loads a sample when unset. @default null */
  rateDeckFile: string | null;
  /** APNs provider API base URL (docs/push.md). @default 'https://api.push.apple.com' */
  apnsUrl: string;
  /** The APNs auth key (.p8); push through APNs is off when unset. @default null */
  apnsKeyFile: string | null;
  /** Its key id (the JWT's `kid`). @default null */
  apnsKeyId: string | null;
  /** The Apple developer team id (the JWT's `iss`). @default null */
  apnsTeamId: string | null;
  /** FCM HTTP v1 base URL. @default 'https://fcm.googleapis.com' */
  fcmUrl: string;
  /** The Google service account JSON; push through FCM is off when unset. @default null */
  fcmServiceAccountFile: string | null;
  /** How long a request waits for a pushed device to register again, seconds. @default 10 */
  pushWait: number;
  /**
   * CALLS_DTMF_LISTEN (docs/calls.md "Digits"): `host:port` where rtpengine's DTMF log
   * (`--dtmf-log-dest`) arrives; null = Gather hears digits sent by SIP INFO only.
   */
  callsDtmfListen: { host: string; port: number } | null;
  /** TTS_ENGINE: the text-to-speech program of Speak (`flite` or `espeak-ng`, Debian packages). @default 'flite' */
  ttsEngine: 'flite' | 'espeak-ng';
  /** CALLS_MEDIA_DIR: where rendered speech and downloaded audio are cached (rtpengine reads them). @default <tmpdir>/sip-edge-media */
  callsMediaDir: string | null;
  /** CALLS_RECORDING_DIR: rtpengine's `--recording-dir` (`--recording-method=pcap`), where the edge reads call recordings from. @default null (recording off: the Record API answers 503) */
  callsRecordingDir: string | null;
  /** CALLS_RING_TIMEOUT: seconds a placed call rings when the API gives no ring_timeout. @default 60 */
  callsRingTimeout: number;
  /**
   * The numbers for sale, CSV (docs/numbers.md "Inventory"); upserted at start and on
   * SIGHUP. Development loads a few sample numbers when unset. @default null
   */
  numberInventoryFile: string | null;
  /**
   * The KYC verification provider (docs/kyc.md "Providers"): its base URL, http(s).
   * Unset: real-mode KYC verifications answer 503; test mode works. @default null
   */
  kycProviderUrl: string | null;
  /** The secret sent to the KYC provider (Authorization: Bearer); required with KYC_PROVIDER_URL. @default null */
  kycProviderSecret: string | null;
  /**
   * The WhatsApp Cloud API (docs/messaging.md "Providers"): Meta's Graph API with its
   * version; tests point it at a local stub. @default 'https://graph.facebook.com/v21.0'
   */
  whatsappApiBaseUrl: string;
  /**
   * The Meta app secret: `X-Hub-Signature-256` of the WhatsApp webhook is checked with it.
   * Unset: the webhook's POSTs answer 503 (nothing can be verified). @default null
   */
  whatsappAppSecret: string | null;
  /** The token Meta's webhook verification handshake must present (`hub.verify_token`); unset: 403. @default null */
  whatsappVerifyToken: string | null;
  /**
   * Seconds between two runs of the number rental sweep (docs/numbers.md "Rental"); every
   * node runs it, a lease per number and period lets one of them charge. 0 = never.
   * @default 300
   */
  numberRentalSweepInterval: number;
  partners: PartnerConfig[];
  /** 'production' refuses built-in development credentials. */
  production: boolean;
}

/** Every default in one place (ioredis DEFAULT_REDIS_OPTIONS, kamailio config.c). */
export const DEFAULTS: Readonly<Omit<Config, 'nodeId' | 'partners' | 'production' | 'dataEncryptionKeys' | 'dataKeySource'>> = Object.freeze({
  sipHost: '0.0.0.0',
  sipAdvertisedHost: null,
  udpPort: 5060,
  udpEngine: 'auto' as UdpEngineSetting,
  udpShedAgeMs: 0,
  tcpPort: 5060,
  tlsPort: 5061,
  wsPort: 5066,
  wssPort: 7443,
  httpHost: '0.0.0.0',
  httpPort: 8080,
  sipDomain: 'sip.localhost',
  minExpires: 60,
  maxExpires: 7200,
  defaultExpires: 3600,
  clampMinExpires: false,
  maxContacts: 10,
  nodeAddress: null,
  redisUrl: null,
  redisClusterNodes: null,
  redisSentinels: null,
  redisSentinelName: null,
  redisSocket: null,
  storeProcess: false,
  redisServerBin: 'redis-server',
  workers: 1,
  tlsCertFile: null,
  tlsKeyFile: null,
  nonceSecret: null,
  nonceTtl: 300,
  digestAlgorithms: ['SHA-256', 'MD5'] as Array<'SHA-256' | 'MD5'>,
  digestMd5OnlyUserAgents: ['sipp', 'baresip'],
  logLevel: 'info',
  wsAllowedOrigins: [],
  maxMessageSize: 65535,
  maxHeaders: 128,
  maxLineLength: 8192,
  idleTimeout: 300,
  pingInterval: 30,
  eventLog: true,
  maxConnections: 50000,
  apiRateLimit: 1000,
  rateLimit: 100,
  rateWindow: 2,
  banTime: 300,
  trustedAddresses: ['127.0.0.0/8', '::1'],
  authFailureWindow: 300,
  authMaxFailuresPerSource: 20,
  authMaxFailuresPerEndpoint: 10,
  authCooloff: 900,
  maxConnectionsPerAddress: 200,
  headerTimeout: 10,
  maxPendingRequests: 5000,
  maxTransactions: 200_000,
  tlsCiphers: null,
  tlsMinVersion: 'TLSv1.2' as 'TLSv1.2' | 'TLSv1.3',
  outboundGatewayUri: null,
  appServerUri: null,
  noAnswerTimeout: 120,
  trunkPingInterval: 30,
  trunkTlsCaFile: null,
  maxCallDuration: 14400,
  callbackAllowedNetworks: [],
  callbackTimeout: 3,
  callbackRetryDelays: [2, 4, 8] as number[],
  callbackLease: 15,
  rtpengineNg: null,
  /** Becomes 'bridge' when RTPENGINE_NG is set and MEDIA_RELAY is not (loadConfig). */
  mediaRelay: 'never' as MediaRelayMode,
  adminAuthToken: null,
  defaultCurrency: 'USD',
  rateDeckFile: null,
  apnsUrl: 'https://api.push.apple.com',
  apnsKeyFile: null,
  apnsKeyId: null,
  apnsTeamId: null,
  fcmUrl: 'https://fcm.googleapis.com',
  fcmServiceAccountFile: null,
  pushWait: 10,
  callsDtmfListen: null,
  ttsEngine: 'flite' as const,
  callsMediaDir: null,
  callsRecordingDir: null,
  callsRingTimeout: 60,
  numberInventoryFile: null,
  kycProviderUrl: null,
  kycProviderSecret: null,
  whatsappApiBaseUrl: 'https://graph.facebook.com/v21.0',
  whatsappAppSecret: null,
  whatsappVerifyToken: null,
  numberRentalSweepInterval: 300,
});

type Env = Record<string, string | undefined>;

/** Maps environment variables to config keys and how to read them. */
const ENV_KEYS: Array<[string, keyof Config, (v: string, name: string) => unknown]> = [
  ['SIP_HOST', 'sipHost', str],
  ['SIP_ADVERTISED_HOST', 'sipAdvertisedHost', str],
  ['SIP_UDP_PORT', 'udpPort', port],
  ['SIP_UDP_ENGINE', 'udpEngine', udpEngine],
  ['SIP_UDP_SHED_AGE_MS', 'udpShedAgeMs', int(0, 60_000)],
  ['SIP_TCP_PORT', 'tcpPort', port],
  ['SIP_TLS_PORT', 'tlsPort', port],
  ['SIP_WS_PORT', 'wsPort', port],
  ['SIP_WSS_PORT', 'wssPort', port],
  ['HTTP_HOST', 'httpHost', str],
  ['HTTP_PORT', 'httpPort', port],
  ['SIP_DOMAIN', 'sipDomain', domain],
  ['SIP_MIN_EXPIRES', 'minExpires', int(1, 86400 * 7)],
  ['SIP_MAX_EXPIRES', 'maxExpires', int(1, 86400 * 7)],
  ['SIP_DEFAULT_EXPIRES', 'defaultExpires', int(1, 86400 * 7)],
  ['SIP_CLAMP_MIN_EXPIRES', 'clampMinExpires', bool],
  ['SIP_MAX_CONTACTS', 'maxContacts', int(1, 1000)],
  ['SIP_NODE_ADDRESS', 'nodeAddress', optStr],
  ['REDIS_URL', 'redisUrl', redisUrl],
  ['REDIS_CLUSTER_NODES', 'redisClusterNodes', redisUrlList],
  ['REDIS_SENTINELS', 'redisSentinels', hostPortList],
  ['REDIS_SENTINEL_NAME', 'redisSentinelName', optStr],
  ['REDIS_SOCKET', 'redisSocket', socketPath],
  ['REDIS_SERVER_BIN', 'redisServerBin', str],
  ['SIP_WORKERS', 'workers', workerCount],
  ['TLS_CERT_FILE', 'tlsCertFile', file],
  ['TLS_KEY_FILE', 'tlsKeyFile', file],
  ['NONCE_SECRET', 'nonceSecret', secret(16)],
  ['NONCE_TTL', 'nonceTtl', int(5, 3600)],
  ['DIGEST_ALGORITHMS', 'digestAlgorithms', algorithms],
  ['DIGEST_MD5_ONLY_USER_AGENTS', 'digestMd5OnlyUserAgents', lowerList],
  ['LOG_LEVEL', 'logLevel', level],
  ['WS_ALLOWED_ORIGINS', 'wsAllowedOrigins', list],
  ['SIP_MAX_MESSAGE_SIZE', 'maxMessageSize', int(1024, 1 << 20)],
  ['SIP_MAX_HEADERS', 'maxHeaders', int(16, 1024)],
  ['SIP_IDLE_TIMEOUT', 'idleTimeout', int(5, 86400)],
  ['SIP_PING_INTERVAL', 'pingInterval', int(1, 3600)],
  ['SIP_MAX_CONNECTIONS', 'maxConnections', int(1, 1_000_000)],
  ['NODE_ID', 'nodeId', str],
  ['EVENT_LOG', 'eventLog', bool],
  ['API_RATE_LIMIT', 'apiRateLimit', int(1, 10_000_000)],
  ['SIP_RATE_LIMIT', 'rateLimit', intOrOff(1, 10_000_000)],
  ['SIP_RATE_WINDOW', 'rateWindow', int(1, 3600)],
  ['SIP_BAN_TIME', 'banTime', int(1, 86400 * 7)],
  ['SIP_TRUSTED_ADDRESSES', 'trustedAddresses', addresses],
  ['SIP_AUTH_FAILURE_WINDOW', 'authFailureWindow', int(1, 86400)],
  ['SIP_AUTH_MAX_FAILURES_SOURCE', 'authMaxFailuresPerSource', int(1, 1_000_000)],
  ['SIP_AUTH_MAX_FAILURES_ENDPOINT', 'authMaxFailuresPerEndpoint', int(1, 1_000_000)],
  ['SIP_AUTH_COOLOFF', 'authCooloff', int(1, 86400 * 7)],
  ['SIP_MAX_CONNECTIONS_PER_ADDRESS', 'maxConnectionsPerAddress', int(1, 1_000_000)],
  ['SIP_HEADER_TIMEOUT', 'headerTimeout', int(1, 600)],
  ['SIP_MAX_PENDING', 'maxPendingRequests', int(1, 1_000_000)],
  ['SIP_MAX_TRANSACTIONS', 'maxTransactions', int(1000, 10_000_000)],
  ['TLS_CIPHERS', 'tlsCiphers', ciphers],
  ['TLS_MIN_VERSION', 'tlsMinVersion', tlsVersion],
  ['OUTBOUND_GATEWAY_URI', 'outboundGatewayUri', udpSipUri],
  ['APP_SERVER_URI', 'appServerUri', udpSipUri],
  ['SIP_NO_ANSWER_TIMEOUT', 'noAnswerTimeout', int(1, 3600)],
  ['TRUNK_PING_INTERVAL', 'trunkPingInterval', int(0, 3600)],
  ['TRUNK_TLS_CA_FILE', 'trunkTlsCaFile', file],
  ['SIP_MAX_CALL_DURATION', 'maxCallDuration', int(60, 86400 * 7)],
  ['CALLBACK_ALLOWED_NETWORKS', 'callbackAllowedNetworks', networks],
  ['CALLBACK_TIMEOUT', 'callbackTimeout', seconds(0.1, 60)],
  ['CALLBACK_RETRY_DELAYS', 'callbackRetryDelays', secondsList(0.1, 86400, 10)],
  ['CALLBACK_LEASE', 'callbackLease', seconds(1, 3600)],
  ['RTPENGINE_NG', 'rtpengineNg', engineList],
  ['MEDIA_RELAY', 'mediaRelay', mediaRelay],
  ['DATA_ENCRYPTION_KEY', 'dataEncryptionKeys', dataKeys],
  ['ADMIN_AUTH_TOKEN', 'adminAuthToken', adminToken],
  ['DEFAULT_CURRENCY', 'defaultCurrency', currency],
  ['RATE_DECK_FILE', 'rateDeckFile', optStr],
  ['APNS_URL', 'apnsUrl', httpsUrl],
  ['APNS_KEY_FILE', 'apnsKeyFile', optStr],
  ['APNS_KEY_ID', 'apnsKeyId', optStr],
  ['APNS_TEAM_ID', 'apnsTeamId', optStr],
  ['FCM_URL', 'fcmUrl', httpsUrl],
  ['FCM_SERVICE_ACCOUNT_FILE', 'fcmServiceAccountFile', optStr],
  ['PUSH_WAIT', 'pushWait', int(1, 120)],
  ['CALLS_DTMF_LISTEN', 'callsDtmfListen', hostPort],
  ['TTS_ENGINE', 'ttsEngine', ttsEngine],
  ['CALLS_MEDIA_DIR', 'callsMediaDir', optStr],
  ['CALLS_RECORDING_DIR', 'callsRecordingDir', optStr],
  ['CALLS_RING_TIMEOUT', 'callsRingTimeout', int(1, 300)],
  ['NUMBER_INVENTORY_FILE', 'numberInventoryFile', optStr],
  ['KYC_PROVIDER_URL', 'kycProviderUrl', httpBaseUrl],
  ['KYC_PROVIDER_SECRET', 'kycProviderSecret', secret(16)],
  ['WHATSAPP_API_BASE_URL', 'whatsappApiBaseUrl', requiredHttpBaseUrl],
  ['WHATSAPP_APP_SECRET', 'whatsappAppSecret', secret(16)],
  ['WHATSAPP_VERIFY_TOKEN', 'whatsappVerifyToken', secret(8)],
  ['NUMBER_RENTAL_SWEEP_INTERVAL', 'numberRentalSweepInterval', secondsOrOff(1, 86400)],
];

function httpBaseUrl(v: string, name: string): string | null {
  const t = v.trim();
  if (t === '') return null;
  let u: URL;
  try {
    u = new URL(t);
  } catch {
    throw new ConfigError(`${name} must be an http(s) URL, got "${v}"`);
  }
  if (u.protocol !== 'http:' && u.protocol !== 'https:') throw new ConfigError(`${name} must be an http(s) URL, got "${v}"`);
  return t;
}
function requiredHttpBaseUrl(v: string, name: string): string {
  const u = httpBaseUrl(v, name);
  if (u === null) throw new ConfigError(`${name} must be an http(s) URL, got an empty value`);
  return u.replace(/\/+$/, '');
}
function adminToken(v: string, name: string): string {
  const t = v.trim();
  // The value itself is never part of an error: it is a secret.
  if (t.length < 16) throw new ConfigError(`${name} must be at least 16 characters`);
  return t;
}
function currency(v: string, name: string): string {
  const c = normalizeCurrency(v.trim());
  if (c === null) throw new ConfigError(`${name} must be an ISO 4217 currency code such as USD, got "${v}"`);
  return c;
}

function str(v: string): string {
  return v.trim();
}
function port(v: string, name: string): PortSetting {
  const t = v.trim().toLowerCase();
  if (t === 'off') return null;
  if (!/^\d+$/.test(t) || Number(t) > 65535) throw new ConfigError(`${name} must be a port 0-65535 or "off", got "${v}"`);
  return Number(t);
}
function int(min: number, max: number) {
  return (v: string, name: string): number => {
    const t = v.trim();
    if (!/^\d+$/.test(t) || Number(t) < min || Number(t) > max) {
      throw new ConfigError(`${name} must be an integer ${min}-${max}, got "${v}"`);
    }
    return Number(t);
  };
}
/** Seconds in [min, max], or 0 (off). */
function secondsOrOff(min: number, max: number) {
  const one = seconds(min, max);
  return (v: string, name: string): number => (v.trim() === '0' ? 0 : one(v, name));
}
/** Seconds, decimals allowed (`0.5`). */
function seconds(min: number, max: number) {
  return (v: string, name: string): number => {
    const t = v.trim();
    if (!/^\d+(\.\d{1,3})?$/.test(t) || Number(t) < min || Number(t) > max) {
      throw new ConfigError(`${name} must be a number of seconds ${min}-${max}, got "${v}"`);
    }
    return Number(t);
  };
}
/** Comma-separated seconds (at most `most` of them; `none` = empty). */
function secondsList(min: number, max: number, most: number) {
  const one = seconds(min, max);
  return (v: string, name: string): number[] => {
    if (v.trim().toLowerCase() === 'none') return [];
    const out = list(v).map((x) => one(x, name));
    if (out.length > most) throw new ConfigError(`${name} takes at most ${most} delays, got ${out.length}`);
    return out;
  };
}
/** A positive integer, or `off`/`0` for "no limit" (read as 0). */
function intOrOff(min: number, max: number) {
  const read = int(min, max);
  return (v: string, name: string): number => {
    const t = v.trim().toLowerCase();
    if (t === 'off' || t === '0') return 0;
    try {
      return read(v, name);
    } catch {
      throw new ConfigError(`${name} must be an integer ${min}-${max} or "off", got "${v}"`);
    }
  };
}
/** Comma-separated IP addresses and CIDR blocks (`none` = empty), each checked. */
function addresses(v: string, name: string): string[] {
  if (v.trim().toLowerCase() === 'none') return [];
  const out = list(v);
  const probe = new BlockList();
  for (const a of out) {
    const [ip = '', bits, extra] = a.split('/');
    const family = isIP(ip);
    const prefix = bits === undefined ? null : /^\d{1,3}$/.test(bits) ? Number(bits) : NaN;
    if (family === 0 || extra !== undefined || (prefix !== null && !(prefix <= (family === 4 ? 32 : 128)))) {
      throw new ConfigError(`${name} must list IP addresses or CIDR blocks (or "none"), got "${a}"`);
    }
    if (prefix === null) probe.addAddress(ip, family === 4 ? 'ipv4' : 'ipv6');
    else probe.addSubnet(ip, prefix, family === 4 ? 'ipv4' : 'ipv6');
  }
  return out;
}
/** Comma-separated CIDR blocks (`none` = empty), each checked (src/events/network-guard.ts). */
function networks(v: string, name: string): string[] {
  if (v.trim().toLowerCase() === 'none') return [];
  const out = list(v);
  parseAllowedNetworks(out, name);
  return out;
}
function ciphers(v: string, name: string): string | null {
  const t = v.trim();
  if (t === '') return null;
  try {
    createSecureContext({ ciphers: t });
  } catch (e) {
    throw new ConfigError(`${name} is not a usable OpenSSL cipher list: ${(e as Error).message}`);
  }
  return t;
}
function tlsVersion(v: string, name: string): 'TLSv1.2' | 'TLSv1.3' {
  const t = v.trim().toLowerCase().replace(/^tlsv?/, '');
  if (t === '1.2') return 'TLSv1.2';
  if (t === '1.3') return 'TLSv1.3';
  throw new ConfigError(`${name} must be TLSv1.2 or TLSv1.3 (older versions are refused), got "${v}"`);
}
function bool(v: string, name: string): boolean {
  const t = v.trim().toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(t)) return true;
  if (['0', 'false', 'no', 'off'].includes(t)) return false;
  throw new ConfigError(`${name} must be true or false, got "${v}"`);
}
function domain(v: string, name: string): string {
  const t = v.trim().toLowerCase();
  if (!/^[a-z0-9]([a-z0-9-]*[a-z0-9])?(\.[a-z0-9]([a-z0-9-]*[a-z0-9])?)*$/.test(t)) {
    throw new ConfigError(`${name} must be a DNS domain name, got "${v}"`);
  }
  return t;
}
function workerCount(v: string, name: string): number {
  if (v.trim().toLowerCase() === 'auto') return availableParallelism();
  return int(1, 64)(v, name);
}
function redisUrl(v: string, name: string): string | null {
  const t = v.trim();
  if (t === '') return null;
  if (!/^rediss?:\/\//.test(t)) throw new ConfigError(`${name} must start with redis:// or rediss://`);
  return t;
}
function socketPath(v: string, name: string): string | null {
  const t = v.trim();
  if (t === '') return null;
  if (!t.startsWith('/')) throw new ConfigError(`${name} must be an absolute path to a Unix socket, got "${t}"`);
  return t;
}
function redisUrlList(v: string, name: string): string[] | null {
  const parts = v.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (parts.length === 0) return null;
  for (const p of parts) {
    if (!/^rediss?:\/\/[^/]+:\d+\/?$/.test(p)) throw new ConfigError(`${name}: each node must be redis://host:port (got "${p.replace(/\/\/[^@]*@/, '//…@')}")`);
  }
  return parts;
}
function hostPortList(v: string, name: string): Array<{ host: string; port: number }> | null {
  const parts = v.split(',').map((s) => s.trim()).filter((s) => s !== '');
  if (parts.length === 0) return null;
  return parts.map((p) => {
    const m = /^\[?([^\]]+?)\]?:(\d{1,5})$/.exec(p);
    if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) throw new ConfigError(`${name}: each sentinel must be host:port (got "${p}")`);
    return { host: m[1] as string, port: Number(m[2]) };
  });
}
/** `host:port[=weight][,…]`: rtpengine NG addresses, IPv6 hosts in brackets, weight 0-1000. */
function engineList(v: string, name: string): MediaEngineAddress[] | null {
  const parts = list(v);
  if (parts.length === 0) return null;
  const seen = new Set<string>();
  const out = parts.map((p) => {
    const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})(?:=(\d{1,4}))?$/.exec(p);
    if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535 || (m[3] !== undefined && Number(m[3]) > 1000)) {
      throw new ConfigError(`${name}: each engine must be host:port or host:port=weight (weight 0-1000), got "${p}"`);
    }
    const host = (m[1] as string).replace(/^\[(.*)\]$/, '$1');
    if ((m[1] as string).startsWith('[') && isIP(host) !== 6) throw new ConfigError(`${name}: "${m[1]}" is not an IPv6 address`);
    const key = `${host.toLowerCase()}:${m[2]}`;
    if (seen.has(key)) throw new ConfigError(`${name}: ${p} is listed twice`);
    seen.add(key);
    return { host, port: Number(m[2]), weight: m[3] === undefined ? 1 : Number(m[3]) };
  });
  if (out.every((e) => e.weight === 0)) throw new ConfigError(`${name}: every engine has weight 0, so no call could be relayed`);
  return out;
}
function udpEngine(v: string, name: string): UdpEngineSetting {
  const t = v.trim().toLowerCase();
  if (t === 'native' || t === 'dgram' || t === 'auto') return t;
  throw new ConfigError(`${name} must be native, dgram or auto, got "${v}"`);
}
function mediaRelay(v: string, name: string): MediaRelayMode {
  const t = v.trim().toLowerCase();
  if (t === 'bridge' || t === 'always' || t === 'never') return t;
  throw new ConfigError(`${name} must be bridge, always or never, got "${v}"`);
}
/** `kid:base64key[,…]` of 32-byte keys; errors name the entry's kid, never the key. */
function dataKeys(v: string, name: string): Array<{ kid: string; key: string }> {
  try {
    return parseDataKeys(v).map((k) => ({ kid: k.kid, key: k.key.toString('base64') }));
  } catch (e) {
    throw new ConfigError(`${name}: ${(e as Error).message}`);
  }
}
function httpsUrl(v: string, name: string): string {
  const t = v.trim().replace(/\/+$/, '');
  if (!/^https:\/\/[^/\s]+$/.test(t)) throw new ConfigError(`${name} must be an https:// URL (scheme, host and port only), got "${v}"`);
  return t;
}
/** `host:port` (IPv6 in brackets), or empty for none. */
function hostPort(v: string, name: string): { host: string; port: number } | null {
  const t = v.trim();
  if (t === '') return null;
  const m = /^(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+):(\d{1,5})$/.exec(t);
  if (!m || Number(m[2]) < 1 || Number(m[2]) > 65535) throw new ConfigError(`${name} must be host:port, got "${v}"`);
  return { host: (m[1] as string).replace(/^\[(.*)\]$/, '$1'), port: Number(m[2]) };
}
function ttsEngine(v: string, name: string): 'flite' | 'espeak-ng' {
  const t = v.trim();
  if (t !== 'flite' && t !== 'espeak-ng') throw new ConfigError(`${name} must be flite or espeak-ng, got "${v}"`);
  return t;
}
function optStr(v: string): string | null {
  const t = v.trim();
  return t === '' ? null : t;
}
function file(v: string, name: string): string {
  if (!existsSync(v)) throw new ConfigError(`${name}: file not found: ${v}`);
  return v;
}
function secret(minLen: number) {
  return (v: string, name: string): string => {
    if (v.length < minLen) throw new ConfigError(`${name} must be at least ${minLen} characters`);
    return v;
  };
}
function algorithms(v: string, name: string): Array<'SHA-256' | 'MD5'> {
  const out = v.split(',').map((s) => s.trim().toUpperCase()).filter(Boolean);
  if (out.length === 0 || out.some((a) => a !== 'SHA-256' && a !== 'MD5')) {
    throw new ConfigError(`${name} must list SHA-256 and/or MD5, got "${v}"`);
  }
  return out as Array<'SHA-256' | 'MD5'>;
}
const LEVELS = ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'];
function level(v: string, name: string): string {
  const t = v.trim().toLowerCase();
  if (!LEVELS.includes(t)) throw new ConfigError(`${name} must be one of ${LEVELS.join(', ')}, got "${v}"`);
  return t;
}
function lowerList(v: string): string[] {
  return v.trim().toLowerCase() === 'none' ? [] : list(v.toLowerCase());
}
/** A `sip:host[:port]` URI the edge can reach itself (UDP: the edge opens no outbound connections). */
function udpSipUri(v: string, name: string): string | null {
  const t = v.trim();
  if (t === '') return null;
  const m = /^sip:(?:[^@;?]+@)?(\[[0-9a-fA-F:.]+\]|[A-Za-z0-9.-]+)(?::(\d{1,5}))?((?:;[^;?=]+(?:=[^;?]*)?)*)$/.exec(t);
  if (!m || (m[2] !== undefined && Number(m[2]) > 65535)) throw new ConfigError(`${name} must be a sip: URI such as sip:gw.example.net:5060, got "${v}"`);
  const transport = /;transport=([^;]*)/i.exec(m[3])?.[1]?.toLowerCase();
  if (transport !== undefined && transport !== 'udp') throw new ConfigError(`${name}: only UDP is supported (the edge opens no outbound connections), got transport=${transport}`);
  return t;
}
function list(v: string): string[] {
  return v.split(',').map((s) => s.trim()).filter(Boolean);
}

function parsePartner(raw: unknown, where: string): PartnerConfig {
  if (typeof raw !== 'object' || raw === null) throw new ConfigError(`${where} must be an object`);
  const o = raw as Record<string, unknown>;
  const s = (k: string, req: boolean): string | null => {
    const val = o[k];
    if (val === undefined || val === null) {
      if (req) throw new ConfigError(`${where}.${k} is required`);
      return null;
    }
    if (typeof val !== 'string' || val === '') throw new ConfigError(`${where}.${k} must be a non-empty string`);
    return val;
  };
  const authId = s('auth_id', true) as string;
  const authToken = s('auth_token', true) as string;
  if (authToken.length < 16) throw new ConfigError(`${where}.auth_token must be at least 16 characters`);
  return {
    id: s('id', false) ?? authId,
    authId,
    authToken,
    name: s('name', false) ?? authId,
    email: s('email', false) ?? '',
    password: s('password', false),
    company: s('company', false) ?? '',
    canCreateAccounts: o.can_create_accounts !== false,
    canTransferBalance: o.can_transfer_balance === true,
    ...(o.currency !== undefined ? { currency: currency(String(o.currency), `${where}.currency`) } : {}),
  };
}

/**
 * Reads configuration: defaults, then the JSON file named by SIP_EDGE_CONFIG (or
 * config/sip-edge.json when present), then environment variables. Validates every
 * value and returns a frozen object; a bad value throws ConfigError naming it.
 */
export function loadConfig(env: Env, opts: { configFile?: string | null } = {}): Readonly<Config> {
  const cfg: Config = {
    ...DEFAULTS,
    digestAlgorithms: [...DEFAULTS.digestAlgorithms],
    digestMd5OnlyUserAgents: [...DEFAULTS.digestMd5OnlyUserAgents],
    wsAllowedOrigins: [],
    trustedAddresses: [...DEFAULTS.trustedAddresses],
    callbackAllowedNetworks: [],
    callbackRetryDelays: [...DEFAULTS.callbackRetryDelays],
    nodeId: Math.random().toString(36).slice(2, 10),
    dataEncryptionKeys: [],
    dataKeySource: 'configured',
    partners: [],
    production: env.NODE_ENV === 'production',
  };

  /** Keys set by the file or the environment (not defaults). */
  const explicit = new Set<keyof Config>();
  const fileName =
    opts.configFile !== undefined
      ? opts.configFile
      : env.SIP_EDGE_CONFIG ?? (existsSync('config/sip-edge.json') ? 'config/sip-edge.json' : null);
  if (fileName) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(readFileSync(fileName, 'utf8'));
    } catch (e) {
      throw new ConfigError(`config file ${fileName}: ${(e as Error).message}`);
    }
    if (typeof parsed !== 'object' || parsed === null) throw new ConfigError(`config file ${fileName} must hold a JSON object`);
    const obj = parsed as Record<string, unknown>;
    // The file uses the same names as the environment (SIP_UDP_PORT …) plus "partners".
    for (const [envName, key, read] of ENV_KEYS) {
      const v = obj[envName];
      if (v === undefined) continue;
      (cfg as unknown as Record<string, unknown>)[key] = read(String(v), `${envName} (in ${fileName})`);
      explicit.add(key);
    }
    if (obj.partners !== undefined) {
      if (!Array.isArray(obj.partners)) throw new ConfigError(`partners (in ${fileName}) must be an array`);
      cfg.partners = obj.partners.map((p, i) => parsePartner(p, `partners[${i}]`));
    }
  }

  for (const [envName, key, read] of ENV_KEYS) {
    const v = env[envName];
    if (v === undefined || v === '') continue;
    (cfg as unknown as Record<string, unknown>)[key] = read(v, envName);
    explicit.add(key);
  }

  if (env.PARTNER_AUTH_ID || env.PARTNER_AUTH_TOKEN) {
    cfg.partners.push(
      parsePartner(
        {
          auth_id: env.PARTNER_AUTH_ID,
          auth_token: env.PARTNER_AUTH_TOKEN,
          name: env.PARTNER_NAME,
          email: env.PARTNER_EMAIL,
          password: env.PARTNER_PASSWORD,
        },
        'PARTNER_AUTH_ID/PARTNER_AUTH_TOKEN',
      ),
    );
  }

  const ways = [cfg.redisUrl, cfg.redisClusterNodes, cfg.redisSentinels, cfg.redisSocket].filter((x) => x !== null).length;
  if (ways > 1) throw new ConfigError('set one of REDIS_URL, REDIS_CLUSTER_NODES, REDIS_SENTINELS and REDIS_SOCKET, not several');
  if (cfg.redisSentinels && !cfg.redisSentinelName) throw new ConfigError('REDIS_SENTINELS needs REDIS_SENTINEL_NAME (the master name the sentinels watch)');
  // Several workers and no Redis: the node's own store process (docs/workers.md "One store process").
  cfg.storeProcess = cfg.workers > 1 && ways === 0;
  if (!explicit.has('mediaRelay')) cfg.mediaRelay = cfg.rtpengineNg ? 'bridge' : 'never';
  else if (cfg.mediaRelay !== 'never' && !cfg.rtpengineNg) {
    throw new ConfigError(`MEDIA_RELAY=${cfg.mediaRelay} needs RTPENGINE_NG (the rtpengine to relay through)`);
  }
  if (cfg.minExpires > cfg.maxExpires) throw new ConfigError('SIP_MIN_EXPIRES must not exceed SIP_MAX_EXPIRES');
  if (cfg.defaultExpires < cfg.minExpires || cfg.defaultExpires > cfg.maxExpires) {
    throw new ConfigError('SIP_DEFAULT_EXPIRES must lie between SIP_MIN_EXPIRES and SIP_MAX_EXPIRES');
  }
  if (cfg.production && cfg.partners.some((p) => p.authToken === DEV_PARTNER_TOKEN)) {
    throw new ConfigError('the example partner token is refused when NODE_ENV=production');
  }
  if (!explicit.has('dataEncryptionKeys')) {
    if (cfg.production) {
      throw new ConfigError('DATA_ENCRYPTION_KEY is required when NODE_ENV=production: kid:base64key of 32 random bytes (e.g. k1:$(openssl rand -base64 32))');
    }
    // Development: a key every process given the same NONCE_SECRET agrees on (workers,
    // restarts), else one for this run only (main warns: what it seals is unreadable later).
    const k = cfg.nonceSecret ? deriveDataKey('dev', cfg.nonceSecret) : randomDataKey(`run-${randomBytes(4).toString('hex')}`);
    cfg.dataEncryptionKeys = [{ kid: k.kid, key: k.key.toString('base64') }];
    cfg.dataKeySource = cfg.nonceSecret ? 'nonce-secret' : 'random';
  }
  if ((cfg.kycProviderUrl === null) !== (cfg.kycProviderSecret === null)) {
    throw new ConfigError('KYC_PROVIDER_URL and KYC_PROVIDER_SECRET go together: set both or neither');
  }
  if (cfg.partners.length === 0 && !cfg.production) {
    // Development: a partner with a random token, shown once on the terminal by main (never logged),
    // so a fresh clone can create an account. Production gets no built-in credential.
    cfg.partners.push({
      id: 'dev-partner',
      authId: 'DEVPARTNER',
      // Workers get their primary's (src/cluster.ts), so every process accepts the one printed.
      authToken: env.SIP_EDGE_DEV_PARTNER_TOKEN || randomBytes(24).toString('base64url'),
      name: 'Development partner',
      email: 'dev@localhost',
      password: null,
      company: 'sip-edge development',
      canCreateAccounts: true,
      // So the README's money flow (credit → transfer → call) works on a fresh clone.
      canTransferBalance: true,
      generated: true,
    });
  }
  if (cfg.adminAuthToken === null && !cfg.production) {
    // Development: an operator token shown once on the terminal by main (never logged),
    // so the README's money flow can credit a partner. Production: unset = no admin routes.
    cfg.adminAuthToken = randomBytes(24).toString('base64url');
    cfg.adminTokenGenerated = true;
  }
  // A partner's currency defaults to DEFAULT_CURRENCY (read after the file and the environment).
  cfg.partners = cfg.partners.map((p) => ({ ...p, currency: p.currency ?? cfg.defaultCurrency }));
  const seen = new Set<string>();
  for (const p of cfg.partners) {
    if (seen.has(p.authId)) throw new ConfigError(`partner auth_id ${p.authId} is configured twice`);
    seen.add(p.authId);
  }
  return deepFreeze(cfg);
}

/** Token of the example partner in config/sip-edge.example.json; refused in production. */
export const DEV_PARTNER_TOKEN = 'dev-partner-token-change-me';

function deepFreeze<T>(o: T): T {
  if (o && typeof o === 'object') {
    for (const v of Object.values(o as object)) deepFreeze(v);
    Object.freeze(o);
  }
  return o;
}

/** The Redis of this configuration, or null for the embedded store. */
export function redisTarget(cfg: Readonly<Config>): RedisTarget | null {
  if (cfg.redisUrl) return { kind: 'url', url: cfg.redisUrl };
  if (cfg.redisClusterNodes) return { kind: 'cluster', nodes: cfg.redisClusterNodes };
  if (cfg.redisSentinels && cfg.redisSentinelName) return { kind: 'sentinel', sentinels: cfg.redisSentinels, name: cfg.redisSentinelName };
  if (cfg.redisSocket) return { kind: 'socket', path: cfg.redisSocket };
  return null;
}
