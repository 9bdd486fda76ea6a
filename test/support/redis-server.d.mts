/** A running throwaway redis-server (see redis-server.mjs). */
export interface RedisServerHandle {
  /** `redis://127.0.0.1:<port>` */
  readonly url: string;
  readonly port: number;
  /** PID of the running server, or null while stopped. */
  readonly pid: number | null;
  /** Start again on the same port after stop()/kill9(); rejects if it is already running. */
  start(): Promise<void>;
  /** SIGTERM, wait for exit, remove its working dir; idempotent. */
  stop(): Promise<void>;
  /** SIGKILL (a crash: no goodbye to clients), wait for exit; idempotent. */
  kill9(): Promise<void>;
  /** Stop if running, then start again on the same port (empty: nothing is persisted). */
  restart(): Promise<void>;
}

/** Start a fresh redis-server on a free port; resolves once it answers PING. */
export function startRedis(): Promise<RedisServerHandle>;
