/**
 * Prometheus metrics of one server process (prom-client), served at `GET /metrics`
 * on the HTTP port. One registry per App, so tests can run several in a process.
 * With SIP_WORKERS > 1 a scrape answers for the whole node: the worker that takes
 * it asks the primary, which sums every worker's registry (aggregateWorkerMetrics;
 * docs/workers.md). Each metric's `aggregator` says how (sum unless stated).
 *
 * Hot paths (every packet: rate limiter, connection caps) keep plain numbers that
 * the registry reads at scrape time; only per-request events (responses,
 * REGISTER outcomes) touch prom-client objects directly.
 */
import { monitorEventLoopDelay, type IntervalHistogram } from 'node:perf_hooks';
import { AggregatorRegistry, Counter, Gauge, Histogram, Registry, collectDefaultMetrics, type Aggregator } from 'prom-client';
import { StoreUnavailableError } from './errors.js';
import type { NgEngineStatus, NgRequestEvent } from './media/rtpengine.js';
import type { SipTransportName, Transport } from './transport/types.js';

const TRANSPORTS: readonly SipTransportName[] = ['udp', 'tcp', 'tls', 'ws', 'wss'];

/** Methods kept as label values; any other (wire input!) is `other`, so labels stay bounded. */
const METHODS = new Set(['REGISTER', 'OPTIONS', 'INVITE', 'ACK', 'BYE', 'CANCEL', 'SUBSCRIBE', 'NOTIFY', 'MESSAGE', 'INFO', 'PRACK', 'UPDATE', 'REFER', 'PUBLISH']);

/** Timer resolution of the event-loop monitor, ms; subtracted from what it reports. */
const ELD_RESOLUTION_MS = 10;

/** How long a count of active bindings (a store-wide SCAN) is reused between scrapes. */
const BINDINGS_CACHE_MS = 5_000;

/** What the registry reads at scrape time. */
export interface MetricSources {
  transports: ReadonlyMap<SipTransportName, Transport>;
  /** Live bindings by transport across the store (LocationStore.countLive). */
  countBindings: () => Promise<Record<SipTransportName, number>>;
  /** Server transactions remembered (router). */
  transactions: () => number;
  /** Requests being processed (request gate). */
  pendingRequests: () => number;
  /** 1 when the store answers (Redis connection ready, or the embedded store). */
  storeUp: () => boolean;
  /** Plain counters kept by the security layer. */
  security: {
    dropped: () => Record<string, number>;
    bans: () => number;
    banned: () => number;
    connectionsRefused: () => Record<string, number>;
    authFailures: () => number;
    authBlocks: () => Record<'source' | 'endpoint', number>;
    authRefused: () => Record<'source' | 'endpoint', number>;
    requestsRefused: () => Record<string, number>;
    storeErrors: () => number;
    /** Requests refused with 400 because the digest `uri` named another resource. */
    authUriMismatches: () => number;
  };
}

export class Metrics {
  readonly registry = new Registry();
  private readonly reaped: Counter;
  private readonly callbacks: Counter<'event' | 'outcome'>;
  private readonly callbacksDead: Counter<'event'>;
  private readonly registerOutcomes: Counter<'outcome' | 'transport'>;
  private readonly responses: Counter<'method' | 'status' | 'transport'>;
  private readonly sipDuration: Histogram<'method' | 'transport'>;
  private readonly httpDuration: Histogram<'method' | 'route' | 'status'>;
  private readonly storeErrors: Counter<'store' | 'op'>;
  private readonly unhandled: Counter;
  private readonly mediaRequests: Counter<'engine' | 'command' | 'outcome'>;
  private readonly mediaDuration: Histogram<'engine' | 'command'>;
  private readonly mediaCalls: Counter<'outcome'>;
  private readonly eld: IntervalHistogram;
  private readonly busy = new LoopStallMonitor();
  /** Bounded: methods, statuses (100–699) and transports are finite sets. */
  private readonly responseChildren = new Map<string, { count: { inc(): void }; duration: { observe(v: number): void } }>();
  private readonly outcomeChildren = new Map<string, { inc(): void }>();
  private eldStarted = false;

  constructor() {
    const registers = [this.registry];
    collectDefaultMetrics({ register: this.registry });
    this.registerOutcomes = new Counter({
      name: 'sip_register_outcomes_total',
      help: 'REGISTER requests by outcome (registered, unregistered, queried, challenged, rejected, error) and transport',
      labelNames: ['outcome', 'transport'],
      registers,
    });
    this.responses = new Counter({
      name: 'sip_responses_total',
      help: 'Final responses sent, by request method, status code and transport',
      labelNames: ['method', 'status', 'transport'],
      registers,
    });
    this.sipDuration = new Histogram({
      name: 'sip_request_duration_seconds',
      help: 'Time from receiving a SIP request to sending its final response',
      labelNames: ['method', 'transport'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
    this.httpDuration = new Histogram({
      name: 'http_request_duration_seconds',
      help: 'HTTP API request latency by method, route pattern and status',
      labelNames: ['method', 'route', 'status'],
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
      registers,
    });
    this.storeErrors = new Counter({
      name: 'sip_store_errors_total',
      help: 'Store operations that failed because the store did not answer, by store and operation',
      labelNames: ['store', 'op'],
      registers,
    });
    this.mediaRequests = new Counter({
      name: 'sip_media_engine_requests_total',
      help: 'rtpengine NG requests by engine, command and outcome (ok, rejected, timeout, bad_reply, send_error); docs/media.md',
      labelNames: ['engine', 'command', 'outcome'],
      registers,
    });
    this.mediaDuration = new Histogram({
      name: 'sip_media_engine_request_duration_seconds',
      help: 'Time from the first transmission of an rtpengine NG request to its reply or failure (retransmissions included)',
      labelNames: ['engine', 'command'],
      buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
      registers,
    });
    this.mediaCalls = new Counter({
      name: 'sip_media_calls_total',
      help: 'Calls the media relay took (relayed), could not take but did not need (unrelayed), and refused for lack of an engine (failed, 503) or because the engine refused the SDP (refused, 488); docs/media.md',
      labelNames: ['outcome'],
      registers,
    });
    this.unhandled = new Counter({ name: 'process_unhandled_rejections_total', help: 'Promise rejections nobody handled (should stay 0)', registers });
    this.reaped = new Counter({
      name: 'sip_bindings_reaped_total',
      help: 'Flow bindings of dead processes removed by this one (docs/fleet.md)',
      registers,
    });
    this.callbacks = new Counter({
      name: 'sip_callbacks_total',
      help: 'Callback delivery attempts by event (Ring, StartApp, Hangup, Message) and outcome (ok, http_<status>, error) (docs/callbacks.md)',
      labelNames: ['event', 'outcome'],
      registers,
    });
    this.callbacksDead = new Counter({
      name: 'sip_callbacks_dead_total',
      help: 'Callbacks given up on after every attempt failed (dead letters, docs/callbacks.md)',
      labelNames: ['event'],
      registers,
    });
    this.eld = monitorEventLoopDelay({ resolution: ELD_RESOLUTION_MS });
    const eld = this.eld;
    new Gauge({
      name: 'sip_event_loop_delay_max_seconds',
      help: `Longest event-loop stall since the server started serving (a ${ELD_RESOLUTION_MS} ms timer's lateness)`,
      registers,
      aggregator: 'max',
      collect() {
        this.set(eld.count === 0 ? 0 : Math.max(0, eld.max / 1e9 - ELD_RESOLUTION_MS / 1000));
      },
    });
    const busy = this.busy;
    new Gauge({
      name: 'sip_event_loop_busy_stall_max_seconds',
      help:
        'Longest event-loop stall since the server started serving during which this process was on the CPU ' +
        '(stalls from the OS not scheduling it, e.g. a loaded machine, are left out)',
      registers,
      aggregator: 'max',
      collect() {
        this.set(busy.max / 1000);
      },
    });
    new Gauge({
      name: 'sip_event_loop_delay_p99_seconds',
      help: '99th percentile of event-loop lateness since the server started serving',
      registers,
      aggregator: 'max',
      collect() {
        this.set(eld.count === 0 ? 0 : Math.max(0, eld.percentile(99) / 1e9 - ELD_RESOLUTION_MS / 1000));
      },
    });
  }

  /** Register the gauges and counters read from the running server. */
  attach(src: MetricSources): void {
    const registers = [this.registry];
    let cached: { at: number; counts: Record<SipTransportName, number> } | null = null;
    let refreshing: Promise<void> | null = null;
    const refresh = async (): Promise<void> => {
      try {
        cached = { at: Date.now(), counts: await src.countBindings() };
      } catch (err) {
        if (err instanceof StoreUnavailableError) return; // counted by the store wrapper
        this.storeError('location', 'countLive');
      }
    };
    new Gauge({
      name: 'sip_bindings_active',
      help: 'Live bindings in the location store, by transport (store-wide, refreshed at most every 5 s)',
      labelNames: ['transport'],
      registers,
      // Every worker counts the same store: the node reports it once.
      aggregator: 'max',
      async collect() {
        if (cached === null || Date.now() - cached.at > BINDINGS_CACHE_MS) {
          refreshing ??= refresh().finally(() => (refreshing = null));
          await refreshing;
        }
        const c = cached as { counts: Record<SipTransportName, number> } | null;
        for (const t of TRANSPORTS) this.set({ transport: t }, c?.counts[t] ?? 0);
      },
    });
    new Gauge({
      name: 'sip_connections_open',
      help: 'Open stream connections (TCP, TLS, WS, WSS), by transport',
      labelNames: ['transport'],
      registers,
      collect() {
        for (const [name, t] of src.transports) if (name !== 'udp') this.set({ transport: name }, t.connectionCount());
      },
    });
    const sumOf = (k: 'probesSent' | 'unansweredCuts'): number => {
      let n = 0;
      for (const t of src.transports.values()) n += t[k] ?? 0;
      return n;
    };
    counter(this.registry, 'sip_flow_probes_total', 'OPTIONS probes sent over quiet TCP/TLS flows that hold bindings', () => sumOf('probesSent'));
    counter(this.registry, 'sip_flows_cut_unanswered_total', 'TCP/TLS flows cut because a request or probe sent over them got no byte back within 2 x SIP_PING_INTERVAL', () => sumOf('unansweredCuts'));
    gauge(this.registry, 'sip_server_transactions', 'Server transactions remembered for retransmissions (RFC 3261 §17.2.2)', src.transactions);
    gauge(this.registry, 'sip_pending_requests', 'SIP requests being processed now', src.pendingRequests);
    gauge(this.registry, 'sip_store_up', '1 when the location store is connected (every worker\'s connection, with SIP_WORKERS > 1)', () => (src.storeUp() ? 1 : 0), 'min');
    gauge(this.registry, 'sip_banned_sources', 'Source addresses banned by the rate limiter now', src.security.banned);
    counter(this.registry, 'sip_bans_total', 'Source addresses banned for exceeding the message rate', src.security.bans);
    labelledCounter(this.registry, 'sip_dropped_messages_total', 'Messages dropped before parsing, by reason (banned, rate, overload, draining)', 'reason', src.security.dropped);
    labelledCounter(this.registry, 'sip_connections_refused_total', 'Stream connections refused at accept, by reason (banned, per_address, total)', 'reason', src.security.connectionsRefused);
    counter(this.registry, 'sip_auth_failures_total', 'Digest responses checked and found wrong (wrong password or unknown user)', src.security.authFailures);
    labelledCounter(this.registry, 'sip_auth_blocks_total', 'Cooling-off periods started after repeated failures, by scope (source, endpoint)', 'scope', src.security.authBlocks);
    labelledCounter(this.registry, 'sip_auth_refused_total', 'Digest attempts refused unchecked during a cooling-off, by scope (source, endpoint)', 'scope', src.security.authRefused);
    labelledCounter(this.registry, 'sip_requests_refused_total', 'Requests answered 503 at once, by reason (overload, store)', 'reason', src.security.requestsRefused);
    counter(this.registry, 'sip_auth_uri_mismatch_total', 'Requests refused (400) because the digest uri named another resource than the Request-URI', src.security.authUriMismatches);
    counter(this.registry, 'sip_auth_counter_errors_total', 'Auth-failure counter operations that failed (failing open)', src.security.storeErrors);
  }

  /** Start measuring event-loop stalls (once serving: start-up work is not a stall). */
  startEventLoopMonitor(): void {
    if (this.eldStarted) return;
    this.eldStarted = true;
    this.eld.enable();
    this.busy.start();
  }

  registerOutcome(outcome: string, transport: string): void {
    const k = `${outcome} ${transport}`;
    let c = this.outcomeChildren.get(k);
    if (c === undefined) this.outcomeChildren.set(k, (c = this.registerOutcomes.labels({ outcome, transport })));
    c.inc();
  }

  /** RouterOptions.onResponse. */
  sipResponse(method: string, status: number, transport: SipTransportName, startedAt: bigint): void {
    const m = METHODS.has(method) ? method : 'other';
    // Label children are looked up once per label set: prom-client hashes the label
    // object on every inc/observe otherwise (≈3 % of CPU per registration).
    const k = `${m} ${status} ${transport}`;
    let c = this.responseChildren.get(k);
    if (c === undefined) {
      c = {
        count: this.responses.labels({ method: m, status: String(status), transport }),
        duration: this.sipDuration.labels({ method: m, transport }),
      };
      this.responseChildren.set(k, c);
    }
    c.count.inc();
    c.duration.observe(Number(process.hrtime.bigint() - startedAt) / 1e9);
  }

  httpResponse(method: string, route: string, status: number, seconds: number): void {
    this.httpDuration.observe({ method, route, status: String(status) }, seconds);
  }

  /** Count a failed store operation (only StoreUnavailableError-like failures). */
  storeError(store: string, op: string): void {
    this.storeErrors.inc({ store, op });
  }

  /** Bindings of a dead process removed (the fleet reaper). */
  bindingsReaped(n: number): void {
    this.reaped.inc(n);
  }

  /** One callback delivery attempt. */
  callbackAttempt(event: string, outcome: string): void {
    this.callbacks.inc({ event, outcome });
  }

  callbackDead(event: string): void {
    this.callbacksDead.inc({ event });
  }

  /** RtpengineClientOptions.onRequest: one finished NG request (labels: configured engines, commands of our code). */
  mediaRequest(e: NgRequestEvent): void {
    this.mediaRequests.inc({ engine: e.engine, command: e.command, outcome: e.outcome });
    this.mediaDuration.observe({ engine: e.engine, command: e.command }, e.ms / 1000);
  }

  /** MediaRelay's onCall: what became of one call that wanted the relay. */
  mediaCall(outcome: 'relayed' | 'unrelayed' | 'failed' | 'refused'): void {
    this.mediaCalls.inc({ outcome });
  }

  /** `sip_media_engine_up{engine}`: 1 while the client counts the engine up (RtpengineClient.engines). */
  attachMediaEngines(read: () => NgEngineStatus[]): void {
    new Gauge({
      name: 'sip_media_engine_up',
      help: 'rtpengine engines: 1 up, 0 taken out after not answering (docs/media.md)',
      labelNames: ['engine'],
      registers: [this.registry],
      // With SIP_WORKERS > 1 each worker has its own view: down in any worker reads down.
      aggregator: 'min',
      collect() {
        for (const e of read()) this.set({ engine: e.id }, e.up ? 1 : 0);
      },
    });
  }

  unhandledRejection(): void {
    this.unhandled.inc();
  }

  stop(): void {
    this.eld.disable();
    this.busy.stop();
  }
}

/**
 * Event-loop stalls caused by this process's own work: a 10 ms timer's lateness,
 * counted only as far as the process used CPU time meanwhile. On a shared machine
 * the raw lateness (sip_event_loop_delay_max_seconds) also includes time the OS
 * did not run the process; this one does not, so it measures what the code does.
 */
class LoopStallMonitor {
  /** Longest stall seen, ms. */
  max = 0;
  private timer: NodeJS.Timeout | null = null;

  start(): void {
    if (this.timer) return;
    const period = ELD_RESOLUTION_MS;
    let last = process.hrtime.bigint();
    let cpu = process.cpuUsage();
    this.timer = setInterval(() => {
      const now = process.hrtime.bigint();
      const used = process.cpuUsage(cpu);
      const late = Number(now - last) / 1e6 - period;
      last = now;
      cpu = process.cpuUsage();
      if (late <= 0) return;
      const stall = Math.min(late, (used.user + used.system) / 1000);
      if (stall > this.max) this.max = stall;
    }, period);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }
}

/**
 * The same store, counting every operation that fails with StoreUnavailableError
 * in `sip_store_errors_total{store,op}`. Methods run on the real object, so
 * private fields keep working.
 */
export function countStoreErrors<T extends object>(store: T, name: string, metrics: Metrics): T {
  const wrapped = new Map<PropertyKey, unknown>();
  return new Proxy(store, {
    get(target, prop) {
      const v: unknown = Reflect.get(target, prop, target);
      if (typeof v !== 'function' || prop === 'constructor') return v;
      let w = wrapped.get(prop);
      if (w === undefined) {
        const fn = v as (...args: unknown[]) => unknown;
        w = (...args: unknown[]): unknown => {
          const r = fn.apply(target, args);
          if (r instanceof Promise) {
            return r.catch((err: unknown) => {
              if (err instanceof StoreUnavailableError) metrics.storeError(name, String(prop));
              throw err;
            });
          }
          return r;
        };
        wrapped.set(prop, w);
      }
      return w;
    },
  });
}

function gauge(registry: Registry, name: string, help: string, read: () => number, aggregator: Aggregator = 'sum'): void {
  new Gauge({
    name,
    help,
    registers: [registry],
    aggregator,
    collect() {
      this.set(read());
    },
  });
}

/** A counter mirroring a monotonic number kept elsewhere. */
function counter(registry: Registry, name: string, help: string, read: () => number): void {
  let last = 0;
  new Counter({
    name,
    help,
    registers: [registry],
    collect() {
      const v = read();
      if (v > last) this.inc(v - last);
      last = v;
    },
  });
}

function labelledCounter(registry: Registry, name: string, help: string, label: string, read: () => Record<string, number>): void {
  const last = new Map<string, number>();
  new Counter({
    name,
    help,
    labelNames: [label],
    registers: [registry],
    collect() {
      for (const [k, v] of Object.entries(read())) {
        const before = last.get(k) ?? 0;
        // Zero-valued series are exported too, so dashboards see every reason.
        this.inc({ [label]: k }, Math.max(0, v - before));
        last.set(k, v);
      }
    },
  });
}

/** One worker's registry, as `Registry.getMetricsAsJSON()` gives it (sent to the primary over IPC). */
export type WorkerMetrics = Awaited<ReturnType<Registry['getMetricsAsJSON']>>;

/** A scrape's body and content type. */
export interface MetricsText {
  contentType: string;
  body: string;
}

/** What the primary of a multi-process node knows about its workers. */
export interface PrimarySources {
  configured: () => number;
  listening: () => number;
  restarts: () => number;
}

/** The primary's own series (SIP_WORKERS > 1), added to the workers' sums. */
export function primaryRegistry(src: PrimarySources): Registry {
  const registry = new Registry();
  gauge(registry, 'sip_workers_configured', 'Worker processes this node runs (SIP_WORKERS)', src.configured);
  gauge(registry, 'sip_workers_listening', 'Worker processes up and listening now', src.listening);
  counter(registry, 'sip_worker_restarts_total', 'Workers started again after one died', src.restarts);
  return registry;
}

/**
 * The node's metrics: every worker's registry aggregated series by series (each
 * metric's `aggregator`: sum unless it says max, min or first), plus the
 * primary's own. A worker that restarted starts its counters from 0 again, which
 * Prometheus treats as a counter reset.
 */
export async function aggregateWorkerMetrics(workers: WorkerMetrics[], primary: Registry): Promise<MetricsText> {
  const summed = AggregatorRegistry.aggregate<typeof primary.contentType>(workers);
  const merged = Registry.merge([summed, primary]);
  return { contentType: merged.contentType, body: await merged.metrics() };
}
