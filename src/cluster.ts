import cluster, { type Worker } from 'node:cluster';
import { randomBytes } from 'node:crypto';
import type { Config } from './config.js';
import type { Logger } from './logger.js';

/** What a worker tells the primary once its listeners are bound. */
export interface WorkerListening {
  type: 'listening';
  ports: Record<'udp' | 'tcp' | 'tls' | 'ws' | 'wss' | 'http', number | null>;
}

/** The listening ports, as main logs them. */
export type PortsLine = WorkerListening['ports'];

const RESTART_DELAY_MS = 500;
const SHUTDOWN_DEADLINE_MS = 4800;

/**
 * The primary of a multi-process edge (SIP_WORKERS > 1, Redis store only): forks
 * the workers, which share every listening socket (node:cluster hands one UDP
 * socket to all of them and spreads TCP/TLS/WS connections), logs the one
 * `listening` line when all are up, restarts a worker that dies, and forwards
 * SIGTERM/SIGINT/SIGHUP.
 *
 * State that must agree across workers is passed down: the nonce secret (a nonce
 * issued by one worker is checked by another) and a development partner token.
 * Each worker gets its own NODE_ID, so flow-owned bindings name their process.
 */
export function runPrimary(config: Readonly<Config>, log: Logger, onListening: (ports: PortsLine, workers: number) => void): void {
  const env: Record<string, string> = {
    NONCE_SECRET: config.nonceSecret ?? randomBytes(32).toString('base64url'),
    SIP_EDGE_WORKER: '1',
  };
  const dev = config.partners.find((p) => p.generated);
  if (dev) {
    env.PARTNER_AUTH_ID = dev.authId;
    env.PARTNER_AUTH_TOKEN = dev.authToken;
  }

  let stopping = false;
  let announced = false;
  const ready = new Map<number, PortsLine>();
  const slots = new Map<number, number>(); // worker id → slot index

  const fork = (slot: number): void => {
    const w = cluster.fork({ ...env, NODE_ID: `${config.nodeId}-${slot}` });
    slots.set(w.id, slot);
    w.on('message', (m: unknown) => {
      if (!isListening(m)) return;
      ready.set(slot, m.ports);
      if (!announced && ready.size === config.workers) {
        announced = true;
        onListening(m.ports, config.workers);
      }
    });
  };
  for (let i = 0; i < config.workers; i++) fork(i);

  cluster.on('exit', (w: Worker, code, signal) => {
    const slot = slots.get(w.id);
    slots.delete(w.id);
    if (stopping || slot === undefined) return;
    log.error({ pid: w.process.pid, code, signal, slot }, 'worker died; starting another');
    setTimeout(() => fork(slot), RESTART_DELAY_MS).unref();
  });

  const shutdown = (signal: NodeJS.Signals): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal, workers: slots.size }, 'shutting down workers');
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

function isListening(m: unknown): m is WorkerListening {
  return typeof m === 'object' && m !== null && (m as { type?: unknown }).type === 'listening';
}
