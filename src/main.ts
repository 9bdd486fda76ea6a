import { loadConfig, redisTarget } from './config.js';
import { ConfigError } from './errors.js';
import { createLogger } from './logger.js';
import { createApp } from './app.js';
import type { Config } from './config.js';
import type { Logger } from './logger.js';
import { isWorker, reportListening, runPrimary, type PortsLine } from './cluster.js';
import { startStoreProcess } from './store/redis/store-process.js';
import { loadPushKeys } from './push/index.js';

/**
 * DATA_ENCRYPTION_KEY unset (development only; production refuses to start): say once
 * which key seals secrets at rest and what that means after a restart.
 */
function warnDevDataKey(config: Readonly<Config>, log: Logger): void {
  if (config.dataKeySource === 'nonce-secret') {
    log.warn(
      { kid: 'dev' },
      'DATA_ENCRYPTION_KEY not set: secrets at rest are sealed with a development key derived from NONCE_SECRET; set DATA_ENCRYPTION_KEY before production (it refuses to start without it)',
    );
  } else if (config.dataKeySource === 'random') {
    const kept = redisTarget(config) !== null;
    log.warn(
      { kid: config.dataEncryptionKeys[0]?.kid },
      'DATA_ENCRYPTION_KEY and NONCE_SECRET not set: secrets at rest are sealed with a random key of this run, and what it seals cannot be read after a restart' +
        (kept
          ? ': callback signing secrets kept in Redis become unreadable (their callbacks are dead-lettered until POST …/SigningSecret/ makes new ones). Set DATA_ENCRYPTION_KEY or NONCE_SECRET'
          : ''),
    );
  }
}

/** Hard limit on graceful shutdown; the issue asks for an exit within 5 s of SIGTERM. */
const SHUTDOWN_DEADLINE_MS = 4500;

/** Entry point: loadConfig → createLogger → createApp → start; SIGTERM/SIGINT → stop. */
async function main(): Promise<void> {
  let config;
  try {
    config = loadConfig(process.env);
    // Push key files (docs/push.md): checked before any worker starts, so a bad one stops the
    // node with exit 2 whatever SIP_WORKERS is.
    if (!isWorker()) loadPushKeys(config);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`sip-edge: configuration error: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  const log = createLogger(config.logLevel);
  if (!isWorker()) warnDevDataKey(config, log);
  if (config.workers > 1 && !isWorker()) {
    // No Redis configured: the node's own store process, shared by its workers (docs/workers.md).
    let storeEnv: Record<string, string> = {};
    if (config.storeProcess) {
      try {
        const store = await startStoreProcess({ bin: config.redisServerBin, log });
        storeEnv = { REDIS_SOCKET: store.socket };
      } catch (e) {
        if (e instanceof ConfigError) {
          process.stderr.write(`sip-edge: configuration error: ${e.message}\n`);
          process.exit(2);
        }
        throw e;
      }
    }
    runPrimary(
      config,
      log,
      (ports, workers) => {
        logListening(config, log, ports, workers);
        showDevPartner(config, ports.http);
        showDevAdmin(config, ports.http);
      },
      storeEnv,
    );
    return;
  }
  let app;
  try {
    app = createApp(config, log);
  } catch (e) {
    if (e instanceof ConfigError) {
      process.stderr.write(`sip-edge: configuration error: ${e.message}\n`);
      process.exit(2);
    }
    throw e;
  }
  if (!redisTarget(config)) log.warn('REDIS_URL not set: embedded in-memory store (one process; bindings and endpoints are lost at exit)');

  const listening = await app.start();
  const ports: PortsLine = {
    udp: listening.udp?.port ?? null,
    tcp: listening.tcp?.port ?? null,
    tls: listening.tls?.port ?? null,
    ws: listening.ws?.port ?? null,
    wss: listening.wss?.port ?? null,
    http: listening.http?.port ?? null,
  };
  if (isWorker()) {
    log.info({ ...ports, nodeId: config.nodeId, pid: process.pid }, 'worker listening');
    reportListening(ports);
  } else {
    logListening(config, log, ports, 1);
    showDevPartner(config, ports.http);
    showDevAdmin(config, ports.http);
  }

  let stopping = false;
  // Graceful shutdown (README "Operating it"): stop accepting, drop new messages, let
  // in-flight transactions answer (≤ 2 s), close WebSockets with 1001 and the stores.
  // Whatever still runs after SHUTDOWN_DEADLINE_MS is cut, so the process is gone within 5 s.
  const shutdown = (signal: string): void => {
    if (stopping) return;
    stopping = true;
    log.info({ signal }, 'shutting down');
    const force = setTimeout(() => {
      log.error({ deadlineMs: SHUTDOWN_DEADLINE_MS }, 'shutdown did not finish in time; exiting');
      log.flush?.();
      process.exit(1);
    }, SHUTDOWN_DEADLINE_MS);
    force.unref();
    app.stop().then(
      () => {
        log.info('stopped');
        log.flush?.();
        process.exit(0);
      },
      (err: unknown) => {
        log.error({ err }, 'error during shutdown');
        process.exit(1);
      },
    );
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGHUP', () => {
    try {
      app.reloadTls();
    } catch (err) {
      log.error({ err }, 'tls reload failed; keeping the old certificate');
    }
    try {
      const deck = app.billing.rates.reload();
      log.info({ rates: deck.size, source: deck.source }, 'rate deck reloaded');
    } catch (err) {
      log.error({ err: err instanceof Error ? err.message : String(err) }, 'rate deck reload failed; keeping the deck in use');
    }
    // The number inventory (docs/numbers.md "Inventory"): sold numbers are never touched.
    app.numbers.reload().then(
      (r) => log.info(r, 'number inventory reloaded'),
      (err: unknown) => log.error({ err: err instanceof Error ? err.message : String(err) }, 'number inventory reload failed; keeping the inventory in use'),
    );
  });
  // The network must never take the process down; log loudly and count instead
  // (process_unhandled_rejections_total; the fuzz harness requires it to stay 0).
  process.on('unhandledRejection', (err) => {
    app.metrics.unhandledRejection();
    log.error({ err }, 'unhandled rejection');
  });
  // An exception nobody caught still ends the process (its state is unknown), but not silently.
  process.on('uncaughtExceptionMonitor', (err, origin) => {
    log.fatal({ err, origin }, 'uncaught exception');
    log.flush?.();
  });
}

/** The one start-up line scripts and tests read ports from (docs/design.md "Operator interface"). */
function logListening(config: Readonly<Config>, log: Logger, ports: PortsLine, workers: number): void {
  log.info(
    {
      host: config.sipHost,
      ...ports,
      store: redisTarget(config)?.kind === 'cluster' ? 'redis-cluster' : redisTarget(config)?.kind === 'sentinel' ? 'redis-sentinel' : redisTarget(config) ? 'redis' : 'memory',
      workers,
      nodeId: config.nodeId,
      pid: process.pid,
    },
    'listening',
  );
}

/** A generated development operator token (ADMIN_AUTH_TOKEN unset): shown once, on the terminal (stderr), never in the JSON log. */
function showDevAdmin(config: Readonly<Config>, httpPort: number | null): void {
  if (!config.adminTokenGenerated || config.adminAuthToken === null) return;
  process.stderr.write(
    `\nsip-edge development operator token (ADMIN_AUTH_TOKEN is not set; NODE_ENV is not production):\n` +
      `  X-Admin-Token: ${config.adminAuthToken}\n` +
      `  credit a partner: curl -s -X POST http://127.0.0.1:${httpPort ?? 8080}/api/v1/admin/partners/${config.partners.find((p) => p.generated)?.id ?? '<partner id>'}/credit \\\n` +
      `    -H 'X-Admin-Token: <token above>' -H 'Content-Type: application/json' -d '{"amount":"100.00","currency":"USD"}'\n\n`,
  );
}

/** A generated development partner's token: shown once, on the terminal (stderr), never in the JSON log. */
function showDevPartner(config: Readonly<Config>, httpPort: number | null): void {
  for (const p of config.partners) {
    if (!p.generated) continue;
    process.stderr.write(
      `\nsip-edge development partner (no partner configured; NODE_ENV is not production):\n` +
        `  X-Auth-ID:    ${p.authId}\n  X-Auth-Token: ${p.authToken}\n` +
        `  create an account: curl -s -X POST http://127.0.0.1:${httpPort ?? 8080}/api/v1/partner/accounts \\\n` +
        `    -H 'X-Auth-ID: ${p.authId}' -H 'X-Auth-Token: <token above>' -H 'Content-Type: application/json' \\\n` +
        `    -d '{"name":"Acme","email":"ops@acme.test","password":"a-long-password","country":"IN"}'\n\n`,
    );
  }
}

main().catch((err: unknown) => {
  process.stderr.write(`sip-edge: fatal: ${err instanceof Error ? err.stack ?? err.message : String(err)}\n`);
  process.exit(1);
});
