import type { ChildProcess } from 'node:child_process';

/** The repository root, with a trailing slash. */
export const ROOT: string;
/** `${ROOT}dist/main.js`: the built server. */
export const MAIN: string;
/** The rate deck of every test server: calls cost nothing (test/fixtures/rates/free.csv). */
export const FREE_DECK: string;

/** The environment every launch starts from: loopback, every port 0, info logs. */
export function baseEnv(): {
  PATH: string;
  HOME: string;
  SIP_HOST: string;
  HTTP_HOST: string;
  SIP_UDP_PORT: string;
  SIP_TCP_PORT: string;
  SIP_TLS_PORT: string;
  SIP_WS_PORT: string;
  SIP_WSS_PORT: string;
  HTTP_PORT: string;
  LOG_LEVEL: string;
};

/** The bound port of every listener, from the `listening` log line (null: switched off). */
export interface Ports {
  udp: number | null;
  tcp: number | null;
  tls: number | null;
  ws: number | null;
  wss: number | null;
  http: number | null;
}

export interface EdgeProcess {
  child: ChildProcess;
  pid: number;
  ports: Ports;
  /** Every JSON log line so far (up to `keepLogs`). */
  logs: Array<Record<string, unknown>>;
  /** The text so far (stdout and stderr; the last `keepText` characters). */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** Send `signal` (SIGTERM), SIGKILL after `graceMs` (8000); resolves to the exit code. */
  stop(signal?: NodeJS.Signals, graceMs?: number): Promise<number | null>;
}

export interface SpawnEdgeOptions {
  /** Settings over {@link baseEnv}. */
  env?: Record<string, string>;
  /** The runtime binary (default: the one running this). */
  node?: string;
  /** Flags for node itself (--cpu-prof, --trace-gc …). */
  nodeArgs?: string[];
  /** Also write everything it prints to this file. */
  logFile?: string;
  /** How long to wait for `listening` (default 15 s). */
  timeoutMs?: number;
  /** Every JSON log line, as it comes. */
  onLog?: (line: Record<string, unknown>) => void;
  /** How many log lines to keep in `logs` (default all). */
  keepLogs?: number;
  /** How much text to keep for `output()` (default all). */
  keepText?: number;
}

/** Start the server and wait for its `listening` line. */
export function spawnEdge(o?: SpawnEdgeOptions): Promise<EdgeProcess>;
