import type { ChildProcess } from 'node:child_process';
import type { Ports } from '../../support/edge-process.mjs';

export { ROOT } from '../../support/edge-process.mjs';

/** The partner the fuzz server is started with (provisions the authenticated fuzzer endpoint). */
export const FUZZ_PARTNER: Readonly<{ id: string; token: string }>;

export interface FuzzServer {
  child: ChildProcess;
  /** TLS and WSS are off (null) unless `env` says otherwise. */
  ports: Ports;
  /** Log lines at level error (50) or above, up to 1000. */
  problems: Array<Record<string, unknown>>;
  /** Its output so far (the last 20 000 characters). */
  output(): string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  /** SIGTERM (SIGKILL after 8 s); resolves to how it exited. */
  stop(): Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

/** Start the real server on free ports (TLS and WSS off) with the fuzz partner; `env` goes over that. */
export function startFuzzServer(env?: Record<string, string>, nodeArgs?: string[]): Promise<FuzzServer>;

/** Scrape /metrics into { 'name{labels}': value }. */
export function scrape(httpPort: number): Promise<Record<string, number>>;
