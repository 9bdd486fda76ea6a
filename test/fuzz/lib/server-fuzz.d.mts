import type { FuzzEndpoint } from './registrar-fuzz.mjs';

/** One /metrics sample taken during a run (a metric /metrics lacks is undefined). */
export interface FuzzSample {
  /** Messages sent so far. */
  sent: number;
  rssBytes: number | undefined;
  heapBytes: number | undefined;
  loopDelayMaxSeconds: number | undefined;
  loopBusyStallMaxSeconds: number | undefined;
  transactions: number | undefined;
  unhandledRejections: number | undefined;
}

export interface FuzzServerOptions {
  /** The server's listeners; only those of the fuzzed `transports` are used, `http` always. */
  ports: { udp: number; tcp: number; ws: number; http: number };
  /** Fuzz messages (an endless stream, as `messages()` of mutate.mjs gives). */
  messages: Iterator<Buffer, never>;
  /** How many messages to send in total. */
  count: number;
  /** Subset of udp, tcp, ws (default all three). */
  transports?: Array<'udp' | 'tcp' | 'ws'>;
  /** Messages between two probe rounds (default 300). */
  batch?: number;
  /** Probe rounds between two /metrics samples (default 50). */
  sampleEvery?: number;
  /** How long a probe may take before the run fails (default 5000 ms). */
  probeTimeoutMs?: number;
  /** False once the server process is gone. */
  alive?: () => boolean;
  onSample?: (s: FuzzSample) => void;
  /** An endpoint: a share of the messages are REGISTERs that pass digest authentication with hostile headers. */
  authenticated?: FuzzEndpoint;
  /** That share, 0..1 (default 0.2). */
  authenticatedShare?: number;
}

export interface FuzzServerStats {
  sent: { udp: number; tcp: number; ws: number };
  bytes: number;
  reconnects: { tcp: number; ws: number };
  connectFailures: number;
  probeRounds: number;
  maxProbeMs: number;
  samples: FuzzSample[];
  /** Authenticated REGISTERs sent. */
  authenticated: number;
  /** The sample taken after the last probe round. */
  final: FuzzSample;
}

/**
 * Drive fuzz messages into a running server over UDP, TCP and WS, checking
 * after every batch that it still answers a well-formed OPTIONS on each
 * transport; rejects when a probe goes unanswered or the server is gone.
 */
export function fuzzServer(o: FuzzServerOptions): Promise<FuzzServerStats>;
