import { randomBytes } from 'node:crypto';
import { redisTarget, type Config } from './config.js';
import { parseMessage } from './sip/parser.js';
import { buildResponse } from './sip/response.js';
import { createRedisClient, type RedisClient } from './store/redis/client.js';
import type { Logger } from './logger.js';
import { NonceManager } from './auth/nonce.js';
import { DigestAuthenticator } from './auth/authenticator.js';
import { Registrar } from './registrar/registrar.js';
import { FleetRegistry } from './fleet/registry.js';
import { Gruus } from './registrar/gruu.js';
import { SipRouter, type RequestHandler } from './core/router.js';
import { CachedCredentialStore } from './store/credentials/cache.js';
import { RedisEvents } from './store/redis/notices.js';
import { TransactionLayer } from './core/transaction-layer.js';
import { SipProxy } from './proxy/proxy.js';
import { FlowTokens } from './proxy/flow-token.js';
import { MemoryCallLimiter, TRUNK_LIMIT_KEY, type CallLimiter } from './proxy/call-limiter.js';
import { RedisCallLimiter } from './proxy/redis-call-limiter.js';
import type { LocationStore } from './store/location/location.js';
import type { CredentialStore } from './store/credentials/credentials.js';
import { MemoryCredentialStore } from './store/credentials/memory.js';
import { MemoryLocationStore } from './store/location/memory.js';
import { REDIS_STORE_CLIENT_OPTIONS } from './store/redis/client.js';
import { RedisCredentialStore } from './store/credentials/redis.js';
import { RedisLocationStore } from './store/location/redis.js';
import type { BoundAddress, Flow, SipTransportName, Transport } from './transport/types.js';
import { createUdpTransport } from './transport/udp.js';
import { StreamTransport } from './transport/stream.js';
import { WsTransport } from './transport/ws.js';
import { loadTlsCredentials } from './transport/tls-credentials.js';
import { Hardening } from './security/hardening.js';
import { Metrics, countStoreErrors } from './metrics.js';
import type { Directory } from './store/directory/directory.js';
import { MemoryDirectory } from './store/directory/memory.js';
import { RedisDirectory } from './store/directory/redis.js';
import { buildApiServer } from './api/server.js';
import { RegistrationEventHub } from './api/registration-events.js';
import { CallbackDispatcher } from './events/dispatcher.js';
import { sealSigningSecrets } from './events/signing-secrets.js';
import { createSecretBox } from './security/secret-box.js';
import { CallbackNetworkGuard } from './events/network-guard.js';
import { nextAttemptDelay } from './events/retry.js';
import { deliverCallback } from './events/webhook.js';
import { CallTracker } from './proxy/call-tracker.js';
import type { CallStore } from './store/calls/calls.js';
import { MemoryCallStore } from './store/calls/memory.js';
import { RedisCallStore } from './store/calls/redis.js';
import { MemoryMediaSessionStore } from './store/media/memory.js';
import { RedisMediaSessionStore } from './store/media/redis.js';
import type { FastifyInstance } from 'fastify';
import { RtpengineClient } from './media/rtpengine.js';
import { MediaRelay } from './proxy/media-relay.js';
import { createBilling, type Billing } from './billing/index.js';
import { createTrunks, type Trunks } from './trunks/index.js';
import { createNumbers, type Numbers } from './numbers/index.js';
import { createKyc } from './kyc/index.js';
import { createRouting } from './routing/index.js';
import { createPush } from './push/index.js';
import { pushOf } from './push/params.js';
import { createCalls, type Calls } from './calls/index.js';
import { isInternalFlow } from './core/destination.js';
import { FLEET_DEAD_AFTER_MS } from './fleet/registry.js';
import { createMessaging } from './messaging/index.js';
import { createMessagingCatalog } from './messaging/catalog/index.js';

export const SERVER_NAME = 'sip-edge/0.1';

/** Where a stand-in response to an undelivered relay "comes from" (it never leaves the process). */
const RELAY_FLOW = { transport: 'udp', remoteAddress: '127.0.0.1', remotePort: 0, localAddress: '', localPort: 0, connId: null } as const;

/** Every bound port; null when that listener is `off`. */
export type Listening = Record<SipTransportName | 'http', BoundAddress | null>;

export interface App {
  readonly location: LocationStore;
  readonly credentials: CredentialStore;
  readonly directory: Directory;
  readonly registrar: Registrar;
  /** Ledger and rate deck (docs/billing.md); main reloads the deck on SIGHUP. */
  readonly billing: Billing;
  /** Phone numbers (docs/numbers.md); main reloads the inventory on SIGHUP. */
  readonly numbers: Numbers;
  /** SIP trunks and the lookups routing makes of them (docs/trunks.md). */
  readonly trunks: Trunks;
  /** The calls the platform places (docs/calls.md). */
  readonly calls: Calls;
  /** Prometheus registry and hooks of this server (`GET /metrics`). */
  readonly metrics: Metrics;
  /** Where every transport delivers messages: `router.onMessage(data, flow)` feeds one in as if it had arrived. */
  readonly router: SipRouter;
  /**
   * Put a transport in place of the listener of its name (in-process benchmarks
   * and tests: bench/hotpath.mjs sends through one that collects the answers
   * instead of a socket). Call after {@link start}.
   */
  useTransport(t: Transport): void;
  start(): Promise<Listening>;
  stop(): Promise<void>;
  /** Re-read the TLS certificate and key (SIGHUP); open flows keep theirs. */
  reloadTls(): void;
}

/**
 * Composition root: builds and wires every layer (docs/design.md "Layers": layers meet through
 * small interfaces, wired only here).
 */
export function createApp(config: Readonly<Config>, log: Logger): App {
  // This process start's identity: the bindings of its flows name it, and a restart
  // (same NODE_ID) never reuses it, so no binding of a dead predecessor can be taken
  // for one of this process's connections (docs/fleet.md).
  const processTag = randomBytes(4).toString('hex');
  const processId = `${config.nodeId}.${processTag}`;
  let redis: RedisClient | null = null;
  let location: LocationStore;
  let credentials: CredentialStore;
  let directory: Directory;
  let events: RedisEvents | null = null;
  // Registration events (docs/events.md): the stores write them; the hub wakes the
  // event streams of every process (over Redis pub/sub when there is one).
  const eventHub = new RegistrationEventHub((domains) => {
    events?.publish('regev', domains).catch(() => {
      // A lost wake-up is covered by the streams' one-second poll.
    });
  });
  const eventOptions = { events: config.eventLog, onEvents: (domain: string) => eventHub.changed(domain) };
  const target = redisTarget(config);
  if (target) {
    // One client for a single server, a Sentinel-watched master, or a Cluster (README "Storage").
    redis = createRedisClient(target, {
      ...REDIS_STORE_CLIENT_OPTIONS,
      // Fail fast while Redis is away (REGISTER answers 503) and reconnect quickly when it is back.
      enableOfflineQueue: false,
      // Commands issued in the same turn of the event loop share one socket write:
      // under load, one write per REGISTER script was 13% of CPU (profile of the UDP
      // ladder). A single server or Sentinel master gets it from coalesceWrites (a
      // corked socket, store/redis/client.ts), a Cluster from ioredis auto-pipelining.
      enableAutoPipelining: target.kind === 'cluster',
      retryStrategy: (times) => Math.min(200 + times * 100, 1000),
      connectionName: `sip-edge:${processId}`,
    });
    redis.on('error', (err: Error) => log.warn({ err: err.message }, 'redis error'));
    location = new RedisLocationStore(redis, eventOptions);
    // Credentials are read from a per-process cache kept exact by change notices
    // (one Redis command fewer per authenticated REGISTER); see store/credentials/cache.ts.
    events = new RedisEvents(redis, log);
    events.on('regev', (domains) => eventHub.remote(domains));
    credentials = new CachedCredentialStore(new RedisCredentialStore(redis), events);
    directory = new RedisDirectory(redis);
  } else {
    location = new MemoryLocationStore(eventOptions);
    credentials = new MemoryCredentialStore();
    directory = new MemoryDirectory();
  }

  // The fleet registry (docs/fleet.md): processes sharing the Redis find each other, and
  // the flow bindings of a dead one are removed by a survivor.
  // Push is on when a provider's key is set (createPush below checks the files).
  const pushOn = config.apnsKeyFile !== null || config.fcmServiceAccountFile !== null;
  const nodeAddress = config.nodeAddress ?? (config.sipHost === '0.0.0.0' || config.sipHost === '::' ? null : config.sipHost);
  const fleet: FleetRegistry | null = redis
    ? new FleetRegistry({
        redis,
        location,
        processId,
        processTag,
        node: nodeAddress,
        log: log.child({ component: 'fleet' }),
        onReaped: (n) => metrics.bindingsReaped(n),
        onDead: async (id) => {
          const n = await placed.service.reap(id);
          if (n > 0) log.info({ process: id, calls: n }, 'fleet: calls of a dead process ended');
        },
        // A dead process's phones with push parameters sleep rather than vanish (docs/push.md).
        sleeps: (b) => pushOn && pushOf(b) !== null,
        sleep: (aor, bindings) => registrar.sleep(aor, bindings),
        // Where this node's UDP requests leave from: a NATed phone answers only that (docs/fleet.md).
        udpAddress: (): string | null => {
          const l: { host: string; port: number } | null = layer.sentBy('udp');
          return l ? `${nodeAddress ?? l.host}:${l.port}` : null;
        },
        // The relay (docs/fleet.md "Relay"): bytes for a flow of this process, and responses to its branches.
        deliver: (flow, data) => (isInternalFlow(flow) ? placed.service.ua.deliver(flow, data) : (transports.get(flow.transport)?.send(flow, data) ?? false)),
        receive: (flow, data) => router.onMessage(data, flow),
        // A request relayed to a process that had just died: its branch fails with 430 Flow Failed (RFC 5626 §5.3) now.
        onUndelivered: (data) => {
          const p = parseMessage(data);
          if (!p.ok || p.msg.kind !== 'request' || p.msg.method === 'ACK') return;
          router.onMessage(buildResponse(p.msg, 430, 'Flow Failed', { headers: [['Server', SERVER_NAME]] }), RELAY_FLOW);
        },
      })
    : null;

  // Hardening and operability (README "Hardening", "Metrics"): store errors are counted
  // on every path, API included; transports reach the rate limiter through the router.
  const metrics = new Metrics();
  location = countStoreErrors(location, 'location', metrics);
  credentials = countStoreErrors(credentials, 'credentials', metrics);
  directory = countStoreErrors(directory, 'directory', metrics);
  const hardening = new Hardening(config, {
    redis,
    events,
    log,
    closeFlow: (flow) => {
      if (flow.connId) transports.get(flow.transport)?.closeFlow(flow.connId);
    },
  });

  const nonces = new NonceManager({
    secret: config.nonceSecret ? Buffer.from(config.nonceSecret) : randomBytes(32),
    ttlSeconds: config.nonceTtl,
  });
  const auth = new DigestAuthenticator({
    credentials,
    nonces,
    algorithms: config.digestAlgorithms,
    md5OnlyUserAgents: config.digestMd5OnlyUserAgents,
    guard: hardening.guard,
    sipDomain: config.sipDomain,
    // The layer exists below; a request is only authenticated once the listeners are bound.
    isOwnUri: (u) => layer.isOwnUri(u),
  });
  // GRUUs (RFC 5627) must open on every node that may receive a request for one: keyed like nonces.
  const gruus = new Gruus(config.nonceSecret ? Buffer.from(config.nonceSecret) : randomBytes(32));
  // Push to sleeping mobile devices (RFC 8599, docs/push.md): off unless a provider's key is set.
  const push = createPush(config, { location, log: log.child({ component: 'push' }), registry: metrics.registry, notices: events });
  if (push) log.info({ providers: push.providers, waitS: config.pushWait }, 'push on');
  else log.info('push off (neither APNS_KEY_FILE nor FCM_SERVICE_ACCOUNT_FILE is set)');
  const registrar = new Registrar({
    store: location,
    auth,
    policy: {
      minExpires: config.minExpires,
      maxExpires: config.maxExpires,
      defaultExpires: config.defaultExpires,
      clampMinExpires: config.clampMinExpires,
      maxContacts: config.maxContacts,
    },
    sipDomain: config.sipDomain,
    nodeId: processId,
    log: log.child({ component: 'registrar' }),
    onOutcome: (outcome, transport) => metrics.registerOutcome(outcome, transport),
    // Flow liveness (README "Flows"): a flow with live bindings is probed, not cut as idle.
    onFlowHeld: (flow, until) => {
      if (flow.connId) transports.get(flow.transport)?.holdFlow?.(flow.connId, until);
    },
    flowTimer: config.pingInterval,
    gruus,
    // An endpoint removed through the API closes the flows only it used.
    closeFlow: (transport, connId) => transports.get(transport)?.closeFlow(connId),
    onFlowAor: (aor) => fleet?.noteFlowAor(aor),
    push: push !== null,
    pushProviders: push?.providers ?? [],
    onRegistered: push ? (aor, bindings) => push.registered(aor, bindings) : undefined,
  });

  const handlers = new Map<string, RequestHandler>([
    ['REGISTER', (ctx) => registrar.handle(ctx)],
    // OPTIONS is the keep-alive and capability probe of phones and monitors (RFC 3261 §11.2).
    ['OPTIONS', async () => ({ status: 200, reason: 'OK', headers: [['Accept', 'application/sdp'], ['Supported', 'path, outbound, gruu']] })],
  ]);
  // The bound on pending requests; REGISTER needs the store and gets 503 at once while it is down.
  for (const [method, h] of handlers) handlers.set(method, hardening.gate.wrap(h, method === 'REGISTER'));
  const transports = new Map<SipTransportName, Transport>();
  const sipLog = log.child({ component: 'sip' });
  // The stateful proxy (RFC 3261 §16) for everything but REGISTER and OPTIONS to the server.
  const layer: TransactionLayer = new TransactionLayer({
    transports,
    log: sipLog,
    server: SERVER_NAME,
    advertisedHost: config.sipAdvertisedHost,
    relay: fleet?.relay ?? null,
    // The legs of calls the platform places (calls/) talk to the proxy over internal flows.
    internal: (d, data) => placed.service.ua.deliver(d, data),
  });
  // Calls, CDRs and callbacks (docs/events.md "Calls", docs/callbacks.md): recorded in the
  // store with the change that causes them, delivered by every process from a leased outbox.
  // Signing secrets are sealed at rest with DATA_ENCRYPTION_KEY (README "Secrets at rest").
  const secretBox = createSecretBox(config.dataEncryptionKeys.map((k) => ({ kid: k.kid, key: Buffer.from(k.key, 'base64') })));
  const calls: CallStore = sealSigningSecrets(countStoreErrors(redis ? new RedisCallStore(redis) : new MemoryCallStore(), 'calls', metrics), secretBox);
  const billing = createBilling({ config, redis, registry: metrics.registry, log: log.child({ component: 'billing' }) });
  const trunks = createTrunks({
    config,
    redis,
    events,
    secretBox,
    log: log.child({ component: 'trunks' }),
    // A trunk with calls up, or numbers routed to it, is not deleted (docs/trunks.md "Delete rules").
    activeCalls: (trunkId) => limiter.active(TRUNK_LIMIT_KEY + trunkId),
    numbersUsing: (authId, trunkId) => numbers.numbersUsingTrunk(authId, trunkId),
  });
  const numbers = createNumbers({ config, redis, ledger: billing.ledger, directory, trunks, log: log.child({ component: 'numbers' }) });
  // Sub-account KYC (docs/kyc.md): writes kyc_calls_blocked through the directory, which the edge's policy reads.
  const kyc = createKyc({ config, redis, directory, outbox: calls, log: log.child({ component: 'kyc' }) });
  const callbackGuard = new CallbackNetworkGuard(config.callbackAllowedNetworks);
  const retryDelaysMs = config.callbackRetryDelays.map((x) => x * 1000);
  const dispatcher = new CallbackDispatcher({
    store: calls,
    log: log.child({ component: 'callbacks' }),
    retryDelay: (n) => nextAttemptDelay(n, retryDelaysMs),
    leaseMs: config.callbackLease * 1000,
    deliver: (item, secret) =>
      deliverCallback({ url: item.url, method: item.method, params: item.params, secret, callbackId: item.id, allowed: callbackGuard, timeoutMs: config.callbackTimeout * 1000, signatureHeader: item.signatureHeader }),
    onAttempt: (event, outcome) => metrics.callbackAttempt(event, outcome),
    onDead: (event) => metrics.callbackDead(event),
  });
  // Messaging (docs/messaging.md): its events go out on the callback outbox; every node runs a send worker.
  // The sip channel's MESSAGEs leave through the B2BUA's user agent (setSipMessenger below); the
  // proxy hands MESSAGEs to `sip:channel-<id>@<domain>` to messaging.fromEndpoint (channelMessage).
  const messaging = createMessaging({
    config,
    redis,
    secretBox,
    outbox: calls,
    onQueued: () => dispatcher.wake(),
    log: log.child({ component: 'messaging' }),
  });
  // Contacts, templates, campaigns (docs/messaging-catalog.md): campaigns send through messaging,
  // templates go to the WhatsApp channel's business account with its token.
  const catalog = createMessagingCatalog({
    config,
    redis,
    log,
    settings: { whatsappApiBaseUrl: config.whatsappApiBaseUrl },
    channels: {
      whatsapp: async (owner, channelId) => {
        const c = await messaging.channels.get(owner, channelId).catch(() => null);
        if (!c || c.type !== 'whatsapp' || !c.wabaId || !c.phoneNumberId) return null;
        const token = messaging.channels.accessToken(c);
        return token ? { wabaId: c.wabaId, phoneNumberId: c.phoneNumberId, accessToken: token } : null;
      },
    },
    sender: {
      send: async (owner, req) => {
        const m = await messaging.send({ authId: owner }, { channelId: req.channelId, to: req.to, type: 'template', template: req.template as never, campaignId: req.campaignId, idempotencyKey: req.idempotencyKey });
        return { id: m.id, status: m.status };
      },
    },
  });
  const callTracker = new CallTracker({
    store: calls,
    directory,
    log: log.child({ component: 'calls' }),
    maxCallMs: config.maxCallDuration * 1000,
    onQueued: () => dispatcher.wake(),
    // The bill of a rated call, debited once (docs/billing.md "Calls").
    onEnded: (s, _cdr, bill) => {
      if (s.charge) void billing.charging.settle(s.callUuid, s.charge, s.callUuid, bill).catch((err: unknown) => log.error({ err, callUuid: s.callUuid }, 'call not settled'));
    },
  });
  const limiterOptions = { maxCallDurationMs: config.maxCallDuration * 1000 };
  const limiter: CallLimiter = redis ? new RedisCallLimiter(redis, limiterOptions) : new MemoryCallLimiter(limiterOptions);
  // Media through rtpengine (docs/media.md): only with RTPENGINE_NG and MEDIA_RELAY other than never.
  const mediaLog = log.child({ component: 'media' });
  // rtpengine relays calls between phones (MEDIA_RELAY) and is the media of the calls the platform places.
  const rtpengine =
    config.rtpengineNg
      ? new RtpengineClient({
          engines: config.rtpengineNg,
          onRequest: (e) => metrics.mediaRequest(e),
          onEngineChange: (c) => (c.up ? mediaLog.info(c, 'rtpengine back') : mediaLog.warn(c, 'rtpengine taken out')),
        })
      : null;
  if (rtpengine) metrics.attachMediaEngines(() => rtpengine.engines());
  const mediaRelay =
    rtpengine && config.mediaRelay !== 'never'
      ? new MediaRelay({
          client: rtpengine,
          mode: config.mediaRelay,
          // The call → engine mapping (docs/media.md "Calls"): in Redis, shared by the fleet.
          sessions: redis ? new RedisMediaSessionStore(redis) : new MemoryMediaSessionStore(),
          sessionTtlMs: config.maxCallDuration * 1000,
          log: mediaLog,
          onCall: (outcome) => metrics.mediaCall(outcome),
        })
      : undefined;
  // The phone network: carriers in, trunks out, gateway health (docs/trunks.md).
  const routing = createRouting({
    numbers,
    trunks,
    layer,
    nonces,
    algorithms: config.digestAlgorithms,
    md5OnlyUserAgents: config.digestMd5OnlyUserAgents,
    guard: hardening.guard,
    sipDomain: config.sipDomain,
    pingIntervalS: config.trunkPingInterval,
    tlsCaFile: config.trunkTlsCaFile,
    streams: () => ({ tcp: transports.get('tcp') as StreamTransport | undefined, tls: transports.get('tls') as StreamTransport | undefined }),
    registry: metrics.registry,
    log: log.child({ component: 'routing' }),
  });
  const proxy = new SipProxy({
    pstn: routing.pstn,
    media: mediaRelay,
    layer,
    auth,
    credentials,
    location,
    directory,
    limiter,
    // Flow tokens must verify on every node that may receive the in-dialog request: keyed like nonces.
    tokens: new FlowTokens(config.nonceSecret ? Buffer.from(`flow-token:${config.nonceSecret}`) : randomBytes(32)),
    gruus,
    sipDomain: config.sipDomain,
    nodeId: processId,
    relayFlows: fleet !== null,
    outboundGatewayUri: config.outboundGatewayUri,
    appServerUri: config.appServerUri,
    noAnswerTimeoutMs: config.noAnswerTimeout * 1000,
    maxCallDurationMs: config.maxCallDuration * 1000,
    calls: callTracker,
    ...(push ? { push } : {}),
    charging: billing.charging,
    originated: (ctx) => placed.service.originated(ctx.callId),
    // Calls to applications run here (answer_url XML on rtpengine) unless APP_SERVER_URI takes them.
    runsApplications: rtpengine !== null,
    // An endpoint's MESSAGE to a messaging channel's address becomes an inbound message (docs/messaging.md).
    channelMessage: async (m) => (await messaging.fromEndpoint(m.domain, m.from, m.to, m.body, m.contentType ?? undefined)).status,
    log: log.child({ component: 'proxy' }),
  });
  // Calls placed by the Calls API (docs/calls.md): a B2BUA whose legs go through the proxy above.
  const placed: Calls = createCalls({
    config,
    redis,
    ua: {
      inject: (data, flow) => router.inject(data, flow),
      agent: SERVER_NAME,
      get host(): string {
        return (layer.sentBy('tcp') ?? layer.sentBy('udp') ?? layer.sentBy('ws') ?? { host: '127.0.0.1' }).host;
      },
    },
    processId,
    directory,
    credentials,
    numbers,
    callStore: calls,
    rtpengine,
    notices: events,
    alive: fleet ? async () => new Set((await fleet.processes()).filter((p) => Date.now() - p.seen <= FLEET_DEAD_AFTER_MS).map((p) => p.id)) : null,
    guard: callbackGuard,
    log: log.child({ component: 'b2bua' }),
  });
  // The messaging API's sip channel sends its MESSAGEs through the proxy, as the B2BUA's user agent.
  messaging.setSipMessenger({ send: (domain, fromUri, toAor, contentType, body) => placed.service.sendMessage(domain, fromUri, toAor, contentType, body) });
  const router = new SipRouter({
    layer,
    processor: proxy,
    transports,
    handlers,
    limits: { maxMessageSize: config.maxMessageSize, maxHeaders: config.maxHeaders, maxLineLength: config.maxLineLength },
    log: sipLog,
    server: SERVER_NAME,
    admit: (flow, size): boolean => hardening.admit(flow, size, router.pendingTransactions),
    onResponse: (method, status, transport, startedAt) => metrics.sipResponse(method, status, transport, startedAt),
    onFlowClosed: (flow) => {
      if (flow.connId) hardening.settle(registrar.flowClosed(flow.connId));
    },
  });

  metrics.attach(
    hardening.metricSources({
      transports,
      location,
      transactions: () => router.pendingTransactions,
      storeUp: () => (redis ? redis.status === 'ready' : true),
      authUriMismatches: () => auth.uriMismatches,
    }),
  );

  const needTls = config.tlsPort !== null || config.wssPort !== null;
  let tlsCreds = needTls ? hardening.tls(loadTlsCredentials(config.tlsCertFile, config.tlsKeyFile, log)) : null;
  const stream = {
    host: config.sipHost,
    maxMessageSize: config.maxMessageSize,
    idleTimeout: config.idleTimeout,
    pingInterval: config.pingInterval,
    headerTimeout: config.headerTimeout,
    maxConnections: config.maxConnections,
    gate: hardening.connectionGate,
    // TCP/TLS flows that hold bindings are probed with OPTIONS once quiet (README "Flows").
    probe: (flow: Flow): Buffer | null => {
      const p = flow.connId ? registrar.flowProbe(flow.connId) : null;
      return p ? layer.optionsProbe(flow.transport, `${p.aor.user}@${p.aor.domain}`, p.uri, p.callId) : null;
    },
  };
  if (config.udpPort !== null) {
    transports.set('udp', createUdpTransport(config.sipHost, config.udpPort, router, sipLog, config.maxMessageSize, config.udpEngine, config.udpShedAgeMs));
  }
  if (config.tcpPort !== null) transports.set('tcp', new StreamTransport('tcp', { ...stream, port: config.tcpPort }, router, sipLog));
  if (config.tlsPort !== null && tlsCreds) {
    transports.set('tls', new StreamTransport('tls', { ...stream, port: config.tlsPort, tls: tlsCreds }, router, sipLog));
  }
  const ws = { ...stream, allowedOrigins: config.wsAllowedOrigins };
  if (config.wsPort !== null) transports.set('ws', new WsTransport('ws', { ...ws, port: config.wsPort }, router, sipLog));
  if (config.wssPort !== null && tlsCreds) {
    transports.set('wss', new WsTransport('wss', { ...ws, port: config.wssPort, tls: tlsCreds }, router, sipLog));
  }

  let http: FastifyInstance | null = null;
  let sweeper: NodeJS.Timeout | null = null;
  const started: Transport[] = [];
  return {
    location,
    credentials,
    directory,
    registrar,
    billing,
    numbers,
    trunks,
    calls: placed,
    metrics,
    router,
    async start() {
      if (redis && redis.status !== 'ready') {
        // Give Redis a moment so the first REGISTERs do not meet a 503; start regardless
        // (readiness reports the store) when it is down.
        const r = redis;
        await new Promise<void>((resolve) => {
          const t = setTimeout(done, 3000);
          function done(): void {
            clearTimeout(t);
            r.off('ready', done);
            resolve();
          }
          r.once('ready', done);
        });
        if (r.status !== 'ready') log.warn('redis is not reachable yet; REGISTER answers 503 until it is');
      }
      // The inventory file is loaded (a bad one is a configuration error) and the rental sweep started.
      try {
        await numbers.start();
      } catch (err) {
        log.warn({ err: err instanceof Error ? err.message : String(err) }, 'number inventory not loaded (store unavailable); SIGHUP loads it again');
      }
      // Verifications whose provider timed out are retried (docs/kyc.md "Providers").
      kyc.startRetries();
      const listening: Listening = { udp: null, tcp: null, tls: null, ws: null, wss: null, http: null };
      for (const [name, t] of transports) {
        listening[name] = await t.start();
        layer.setListening(name, listening[name] as BoundAddress);
        started.push(t);
      }
      if (config.httpPort !== null) {
        http = await buildApiServer({
          config,
          logger: log.child({ component: 'api' }),
          location,
          credentials,
          directory,
          redis,
          // Bindings removed by the API: their flows close unless another endpoint uses them (docs/design.md).
          onEndpointRemoved: (aor) => registrar.endpointRemoved(aor),
          eventHub,
          calls,
          billing,
          numbers,
          trunks,
          kyc,
          callControl: placed.service,
          messaging,
          messagingCatalog: catalog,
          ops: {
            registry: metrics.registry,
            draining: () => hardening.draining,
            onHttpResponse: (method, route, status, seconds) => metrics.httpResponse(method, route, status, seconds),
          },
        });
        await http.listen({ host: config.httpHost, port: config.httpPort });
        const a = http.server.address();
        if (a && typeof a === 'object') listening.http = { address: a.address, port: a.port };
      }
      fleet?.start();
      await placed.start();
      dispatcher.start();
      messaging.start();
      await catalog.start();
      // The expiry sweep on Redis (the embedded store runs its own): lapsed bindings are
      // reported as `expired` within about a second (docs/events.md "Expiry sweep").
      if (redis && config.eventLog) {
        sweeper = setInterval(() => {
          location.sweepExpired().catch((err: unknown) => log.debug({ err: err instanceof Error ? err.message : String(err) }, 'expiry sweep failed'));
        }, 1000);
        sweeper.unref();
      }
      metrics.startEventLoopMonitor();
      return listening;
    },
    async stop() {
      if (sweeper) clearInterval(sweeper);
      // Calls the platform placed end first (BYE to each leg, cause SERVER_SHUTDOWN).
      await placed.stop();
      await dispatcher.stop();
      await catalog.stop();
      await messaging.stop();
      billing.charging.stop();
      numbers.stop();
      kyc.stop();
      routing.stop();
      eventHub.stop();
      // Graceful (SIGTERM): drop new messages and stop accepting connections, let the
      // requests in flight answer, then close flows (WebSockets with 1001) and stores.
      hardening.draining = true;
      for (const t of started) t.stopAccepting?.();
      await hardening.gate.idle(2000);
      if (http) await http.close();
      http = null;
      for (const t of started.reverse()) await t.stop();
      started.length = 0;
      await hardening.settled(1000);
      await fleet?.stop();
      await rtpengine?.close();
      hardening.stop();
      metrics.stop();
      router.stop();
      push?.close();
      await location.close();
      await credentials.close();
      await directory.close();
      await trunks.close();
      await messaging.close();
      await events?.stop();
      if (redis) {
        try {
          await redis.quit();
        } catch {
          redis.disconnect();
        }
      }
    },
    useTransport(t: Transport) {
      transports.set(t.name, t);
    },
    reloadTls() {
      if (!needTls) return;
      tlsCreds = hardening.tls(loadTlsCredentials(config.tlsCertFile, config.tlsKeyFile, log));
      for (const t of transports.values()) {
        if (t instanceof StreamTransport || t instanceof WsTransport) t.setSecureContext(tlsCreds);
      }
      log.info('tls certificate reloaded');
    },
  };
}
