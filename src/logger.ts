import { pino, type Logger, type DestinationStream } from 'pino';

export type { Logger };

/**
 * Paths pino removes from every log object: credentials never reach the logs
 * (docs/design.md "Credentials never appear in logs").
 */
export const REDACT_PATHS = [
  'password',
  '*.password',
  'auth_token',
  '*.auth_token',
  'authToken',
  '*.authToken',
  'req.headers["x-auth-token"]',
  'req.headers["x-admin-token"]',
  'headers["x-admin-token"]',
  'adminAuthToken',
  '*.adminAuthToken',
  'req.headers.authorization',
  'headers["x-auth-token"]',
  'headers.authorization',
  'authorization',
  '*.authorization',
  'proxyAuthorization',
  'ha1',
  '*.ha1Md5',
  '*.ha1Sha256',
];

/** The root logger: JSON lines on stdout, secrets redacted. */
export function createLogger(level: string, destination?: DestinationStream): Logger {
  return pino(
    {
      level,
      base: { service: 'sip-edge' },
      timestamp: pino.stdTimeFunctions.isoTime,
      redact: { paths: REDACT_PATHS, censor: '[redacted]' },
      formatters: { level: (label) => ({ level: label }) },
    },
    destination,
  );
}
