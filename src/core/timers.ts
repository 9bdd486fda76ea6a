/**
 * Transaction timer values (RFC 3261 §17.1.1.1, Table 4). Injected so that
 * unit tests can shorten them; the server uses the RFC defaults.
 */
export interface TimerSettings {
  /** RTT estimate, ms. @default 500 */
  t1: number;
  /** Longest interval between retransmissions of non-INVITE requests and INVITE responses, ms. @default 4000 */
  t2: number;
  /** Longest time a message stays in the network, ms. @default 5000 */
  t4: number;
}

export const DEFAULT_TIMERS: Readonly<TimerSettings> = Object.freeze({ t1: 500, t2: 4000, t4: 5000 });

/** A timer that never keeps the process alive (docs/design.md "Layers": background work never holds the process). */
export function unrefTimer(fn: () => void, ms: number): NodeJS.Timeout {
  const t = setTimeout(fn, ms);
  t.unref();
  return t;
}
