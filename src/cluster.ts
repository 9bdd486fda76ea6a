import cluster, { type Worker } from 'node:cluster';
import { randomBytes } from 'node:crypto';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import { aggregateWorkerMetrics, primaryRegistry, type MetricsText, type WorkerMetrics } from './metrics.js';
import { udpWorkerMode } from './transport/udp.js';

/** What a worker tells the primary once its listeners are bound. */
export interface WorkerListening {
  type: 'listening';
  ports: Record<'udp' | 'tcp' | 'tls' | 'ws' | 'wss' | 'http', number | null>;
}

/** The listening ports, as main logs them. */
export type PortsLine = WorkerListening['ports'];

/** One worker's readiness (its stores answer, it is not shutting down). */
export interface WorkerReadiness {
  ready: boolean;
  /** Why not, when not ready. */
  message?: string;
}

/** The node's readiness: every configured worker is up and ready. */
export interface NodeReadiness extends WorkerReadiness {
  workers: { ready: number; configured: number };
}

/** First restart of a worker that died, ms; doubled for each further quick death of that slot. */
const RESTART_DELAY_MS = 500;
/** Longest wait before restarting a worker that keeps dying. */
const RESTART_MAX_DELAY_MS = 30_000;
/** A worker that ran this long before dying restarts at once again (its streak is over). */
const STABLE_AFTER_MS = 10_000;
const SHUTDOWN_DEADLINE_MS = 4800;
/** Workers that die before the node first listened: this many and the primary exits (code 1). */
const MAX_FAILED_STARTS = 3;
/** How long the primary waits for each worker's part of a node-wide answer. */
const WORKER_ANSWER_MS = 1500;
/** How long a worker waits for the primary's node-wide answer. */
const NODE_ANSWER_MS = 3000;

/** Listener → its Config field and environment variable. */
const PORT_ENV = [
  ['udp', 'udpPort'],
  ['tcp', 'tcpPort'],
  ['tls', 'tlsPort'],
  ['ws', 'wsPort'],
  ['wss', 'wssPort'],
  ['http', 'httpPort'],
] as const;
const ENV_NAME: Record<keyof PortsLine, string> = {
  udp: 'SIP_UDP_PORT',
  tcp: 'SIP_TCP_PORT',
  tls: 'SIP_TLS_PORT',
  ws: 'SIP_WS_PORT',
  wss: 'SIP_WSS_PORT',
  http: 'HTTP_PORT',
};

/** IPC between a worker and the primary for node-wide /metrics and /readyz (docs/workers.md). */
type QueryKind = 'metrics' | 'ready';
interface NodeQuery { type: 'sip-edge:node-query'; id: number; kind: QueryKind }
interface NodeAnswer { type: 'sip-edge:node-answer'; id: number; value: MetricsText | NodeReadiness | null }
interface WorkerQuery { type: 'sip-edge:worker-query'; id: number; kind: QueryKind }
interface WorkerAnswer { type: 'sip-edge:worker-answer'; id: number; value: WorkerMetrics | WorkerReadiness | null }

interface Slot {
  worker: Worker | null;
  listening: boolean;
  forkedAt: number;
  /** Consecutive deaths within STABLE_AFTER_MS of their start. */
  streak: number;
  restart: NodeJS.Timeout | null;
}

/**
 * The primary of a multi-process edge (SIP_WORKERS > 1, Redis store only): forks
 * the workers, logs the one `listening` line when all are up, restarts a worker
 * that dies (with backoff; the pending restart holds the primary's event loop, so
 * the node survives all its workers dying at once), answers the workers'
 * node-wide /metrics and /readyz questions, and forwards SIGTERM/SIGINT/SIGHUP.
 *
 * Sockets: TCP/TLS/WS/WSS/HTTP listeners are shared through node:cluster; UDP is
 * one SO_REUSEPORT socket per worker where the runtime has dgram `reusePort`,
 * else node:cluster's shared socket (src/transport/udp.ts, docs/workers.md).
 *
 * State that must agree across workers is passed down: the nonce secret (a nonce
 * issued by one worker is checked by another) and a development partner token.
 * Each worker gets its own NODE_ID, so flow-owned bindings name their process.
 */
export function runPrimary(
  config: Readonly<Config>,
  log: Logger,
  onListening: (ports: PortsLine, workers: number) => void,
  /** More environment for every worker (REDIS_SOCKET of the node's store process). */
  extraEnv: Record<string, string> = {},
): void {
  const env: Record<string, string> = {
    NONCE_SECRET: config.nonceSecret ?? randomBytes(32).toString('base64url'),
    SIP_EDGE_WORKER: '1',
    ...extraEnv,
  };
  // The development partner the primary made: the same one (id, token, rights) in every worker.
  const dev = config.partners.find((p) => p.generated);
  if (dev) env.SIP_EDGE_DEV_PARTNER_TOKEN = dev.authToken;
  // The generated operator token (docs/billing.md "Funding"): one for every worker.
  if (config.adminTokenGenerated && config.adminAuthToken) env.ADMIN_AUTH_TOKEN = config.adminAuthToken;
  const udpMode = udpWorkerMode(config.udpEngine);
  if (config.udpPort !== null) {
    log.info(
      { udpMode, node: process.versions.node, workers: config.workers },
      udpMode === 'reuseport'
        ? 'udp: each worker binds its own SO_REUSEPORT socket; the kernel keeps each source on one worker'
        : 'udp: the workers share one socket (this Node has no dgram reusePort): every datagram wakes every worker and a retransmission may reach another worker',
    );
  }
  // SO_REUSEPORT sockets are the workers' own: with SIP_UDP_PORT=0 the first worker
  // picks the port and every later one (restarts too) binds that same port.
  const pickUdpPortFirst = udpMode === 'reuseport' && config.udpPort === 0;

  let stopping = false;
  let announced = false;
  let restarts = 0;
  let failedStarts = 0;
  const slots: Slot[] = [];
  const bySlot = new Map<number, number>(); // worker id → slot index
  const registry = primaryRegistry({
    configured: () => config.workers,
    listening: () => slots.filter((s) => s.listening).length,
    restarts: () => restarts,
  });

  // Ports configured as 0 (tests): the workers share node:cluster's handle for
  // "port 0" while any of them lives; when every worker is dead that handle is gone,
  // so the next ones are given the ports actually bound, and the node keeps its ports.
  const learned: Record<string, string> = {};
  let portEnv: Record<string, string> = {};
  const fork = (slot: number): void => {
    if (!slots.some((x) => x.worker !== null)) portEnv = { ...learned };
    const w = cluster.fork({ ...env, ...portEnv, NODE_ID: `${config.nodeId}-${slot}` });
    const s = slots[slot];
    s.worker = w;
    s.listening = false;
    s.forkedAt = Date.now();
    s.restart = null;
    bySlot.set(w.id, slot);
    w.on('message', (m: unknown) => {
      if (isNodeQuery(m)) {
        void answerNode(m.kind).then((value) => {
          const a: NodeAnswer = { type: 'sip-edge:node-answer', id: m.id, value };
          if (w.isConnected()) w.send(a);
        });
        return;
      }
      if (!isListening(m)) return;
      s.listening = true;
      for (const [name, key] of PORT_ENV) if (config[key] === 0 && m.ports[name] !== null) learned[ENV_NAME[name]] = String(m.ports[name]);
      if (pickUdpPortFirst && env.SIP_UDP_PORT === undefined && m.ports.udp !== null) {
        env.SIP_UDP_PORT = String(m.ports.udp);
        for (let i = 1; i < config.workers; i++) fork(i);
      }
      if (!announced && slots.every((x) => x.listening)) {
        announced = true;
        onListening(m.ports, config.workers);
      }
    });
  };
  for (let i = 0; i < config.workers; i++) slots.push({ worker: null, listening: false, forkedAt: 0, streak: 0, restart: null });
  if (pickUdpPortFirst) fork(0);
  else for (let i = 0; i < config.workers; i++) fork(i);

  cluster.on('exit', (w: Worker, code, signal) => {
    const slot = bySlot.get(w.id);
    bySlot.delete(w.id);
    if (slot === undefined) return;
    const s = slots[slot];
    const wasListening = s.listening;
    s.worker = null;
    s.listening = false;
    if (stopping) return;
    // A node that never came up (a port taken, the store unreachable at start) does not
    // retry for ever: the operator sees the primary exit. Once it has served, it stays.
    if (!announced && !wasListening && ++failedStarts >= MAX_FAILED_STARTS) {
      log.fatal({ pid: w.process.pid, code, signal, slot, failedStarts }, 'workers fail to start; exiting');
      stopping = true;
      for (const x of slots) if (x.restart) clearTimeout(x.restart);
      for (const x of Object.values(cluster.workers ?? {})) x?.process.kill('SIGKILL');
      log.flush?.();
      process.exit(1);
    }
    s.streak = Date.now() - s.forkedAt < STABLE_AFTER_MS ? s.streak + 1 : 0;
    const delayMs = Math.min(RESTART_DELAY_MS * 2 ** Math.max(0, s.streak - 1), RESTART_MAX_DELAY_MS);
    log.error({ pid: w.process.pid, code, signal, slot, delayMs }, 'worker died; starting another');
    // Not unref()ed: when every worker is dead, this timer is what keeps the primary alive.
    s.restart = setTimeout(() => {
      restarts++;
      fork(slot);
    }, delayMs);
  });

  /** Ask every listening worker; a worker that does not answer in time is left out. */
  const askWorkers = async (kind: QueryKind): Promise<Array<WorkerAnswer['value']>> => {
    const live = slots.map((s) => (s.listening ? s.worker : null)).filter((w): w is Worker => w !== null && w.isConnected());
    return Promise.all(live.map((w) => askWorker(w, kind)));
  };
  let nextQuery = 0;
  const askWorker = (w: Worker, kind: QueryKind): Promise<WorkerAnswer['value']> =>
    new Promise((resolve) => {
      const id = ++nextQuery;
      const onMessage = (m: unknown): void => {
        if (!isWorkerAnswer(m) || m.id !== id) return;
        done(m.value);
      };
      const timer = setTimeout(() => done(null), WORKER_ANSWER_MS);
      const done = (v: WorkerAnswer['value']): void => {
        clearTimeout(timer);
        w.off('message', onMessage);
        w.off('exit', gone);
        resolve(v);
      };
      const gone = (): void => done(null);
      w.on('message', onMessage);
      w.once('exit', gone);
      const q: WorkerQuery = { type: 'sip-edge:worker-query', id, kind };
      try {
        w.send(q);
      } catch {
        done(null);
      }
    });

  const answerNode = async (kind: QueryKind): Promise<NodeAnswer['value']> => {
    try {
      const answers = await askWorkers(kind);
      if (kind === 'metrics') {
        const lists = answers.filter((a): a is WorkerMetrics => Array.isArray(a));
        return await aggregateWorkerMetrics(lists, registry);
      }
      const states = answers.filter((a): a is WorkerReadiness => a !== null && !Array.isArray(a));
      const ready = states.filter((r) => r.ready).length;
      const workers = { ready, configured: config.workers };
      if (ready === config.workers) return { ready: true, workers };
      const reasons = [...new Set(states.filter((r) => !r.ready).map((r) => r.message).filter(Boolean))];
      const missing = config.workers - states.length;
      if (missing > 0) reasons.unshift(`${missing} worker${missing === 1 ? ' is' : 's are'} starting or not answering`);
      return { ready: false, workers, message: `${ready} of ${config.workers} workers ready: ${reasons.join('; ')}` };
    } catch (err) {
      log.error({ err, kind }, 'node-wide query failed');
      return null;
    }
  };

  const shutdown = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    for (const s of slots) if (s.restart) clearTimeout(s.restart);
    log.info({ signal, workers: bySlot.size }, 'shutting down workers');
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGTERM');
    const force = setTimeout(() => {
      log.error('workers did not stop in time; exiting');
      for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGKILL');
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    force.unref();
    const check = (): void => {
      if (Object.keys(cluster.workers ?? {}).length === 0) {
        log.info('stopped');
        log.flush?.();
        process.exit(0);
      }
    };
    cluster.on('exit', check);
    check();
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGHUP', () => {
    for (const w of Object.values(cluster.workers ?? {})) w?.process.kill('SIGHUP');
  });
}

/** In a worker: tell the primary the bound ports. */
export function reportListening(ports: PortsLine): void {
  const msg: WorkerListening = { type: 'listening', ports };
  process.send?.(msg);
}

export function isWorker(): boolean {
  return cluster.isWorker;
}

/** What a worker contributes to node-wide answers. */
export interface WorkerAnswers {
  metrics: () => Promise<WorkerMetrics>;
  ready: () => Promise<WorkerReadiness>;
}

/**
 * In a worker: answer the primary's questions for node-wide /metrics and /readyz.
 * Returns a function that stops answering.
 */
export function answerPrimary(answers: WorkerAnswers): () => void {
  const onMessage = (m: unknown): void => {
    if (!isWorkerQuery(m)) return;
    const work = m.kind === 'metrics' ? answers.metrics() : answers.ready();
    void work
      .catch(() => null)
      .then((value) => {
        const a: WorkerAnswer = { type: 'sip-edge:worker-answer', id: m.id, value };
        if (process.connected) process.send?.(a);
      });
  };
  process.on('message', onMessage);
  return () => void process.off('message', onMessage);
}

let nextAsk = 0;
/** In a worker: the node-wide answer, from the primary; null when it does not answer in time. */
export function askPrimary(kind: 'metrics'): Promise<MetricsText | null>;
export function askPrimary(kind: 'ready'): Promise<NodeReadiness | null>;
export function askPrimary(kind: QueryKind): Promise<NodeAnswer['value']> {
  return new Promise((resolve) => {
    if (!process.send || !process.connected) return resolve(null);
    const id = ++nextAsk;
    const onMessage = (m: unknown): void => {
      if (isNodeAnswer(m) && m.id === id) done(m.value);
    };
    const timer = setTimeout(() => done(null), NODE_ANSWER_MS);
    const done = (v: NodeAnswer['value']): void => {
      clearTimeout(timer);
      process.off('message', onMessage);
      resolve(v);
    };
    process.on('message', onMessage);
    const q: NodeQuery = { type: 'sip-edge:node-query', id, kind };
    process.send(q);
  });
}

function typed(m: unknown, type: string): boolean {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === type;
}
function isListening(m: unknown): m is WorkerListening {
  return typed(m, 'listening');
}
function isNodeQuery(m: unknown): m is NodeQuery {
  return typed(m, 'sip-edge:node-query');
}
function isNodeAnswer(m: unknown): m is NodeAnswer {
  return typed(m, 'sip-edge:node-answer');
}
function isWorkerQuery(m: unknown): m is WorkerQuery {
  return typed(m, 'sip-edge:worker-query');
}
function isWorkerAnswer(m: unknown): m is WorkerAnswer {
  return typed(m, 'sip-edge:worker-answer');
}
