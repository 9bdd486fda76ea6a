/**
 * A protocol refusal: the router turns it into a SIP response with this status.
 * `code` is stable and machine-readable (kamailio rerrno / undici error codes).
 */
export class SipError extends Error {
  constructor(
    readonly status: number,
    readonly reason: string,
    readonly code: string,
    readonly headers: Array<[string, string]> = [],
  ) {
    super(`${status} ${reason} (${code})`);
    this.name = 'SipError';
  }
}

/** A bad configuration value; main prints the message as one line and exits 2. */
export class ConfigError extends Error {
  readonly code = 'CONFIG_INVALID';
  constructor(message: string) {
    super(message);
    this.name = 'ConfigError';
  }
}

/** The location or credential store could not be reached; REGISTER answers 503. */
export class StoreUnavailableError extends Error {
  readonly code = 'STORE_UNAVAILABLE';
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'StoreUnavailableError';
  }
}
