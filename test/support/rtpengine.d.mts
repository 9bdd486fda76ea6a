/** A running throwaway rtpengine (see rtpengine.mjs). */
export interface RtpengineHandle {
  /** The client's engine id, `127.0.0.1:<ngPort>` (`[::1]:<ngPort>`). */
  readonly id: string;
  /** The NG address, `127.0.0.1` unless `ngHost` said `::1`. */
  readonly host: '127.0.0.1' | '::1';
  /** The NG control port (UDP). */
  readonly ngPort: number;
  /** First RTP port of its range. */
  readonly portMin: number;
  /** Last RTP port of its range. */
  readonly portMax: number;
  /** Its stderr log. */
  readonly logFile: string;
  /** PID of the running daemon, or null while stopped. */
  readonly pid: number | null;
  /** Its whole log so far. */
  log(): string;
  /** Start again on the same ports after stop(); rejects if it is already running. */
  start(): Promise<void>;
  /** SIGTERM (SIGKILL after 5 s), wait for exit; idempotent. */
  stop(): Promise<void>;
  /** Stop and remove the temp dir. */
  dispose(): Promise<void>;
}

export interface RtpengineOptions {
  /** NG port to listen on (default: a free one). */
  ngPort?: number;
  /** NG address (default 127.0.0.1; media stays on 127.0.0.1). */
  ngHost?: '127.0.0.1' | '::1';
  /** How many RTP ports its range holds (default 40: 10 two-leg calls with RTCP). */
  rtpPorts?: number;
  /** More command-line options. */
  extraArgs?: string[];
}

/** One NG `ping` to host:port (default 127.0.0.1, 300 ms); true on `pong`. */
export function ngPing(port: number, timeoutMs?: number, host?: string): Promise<boolean>;

/** Start rtpengine; resolves once it answers an NG ping. */
export function startRtpengine(opts?: RtpengineOptions): Promise<RtpengineHandle>;
