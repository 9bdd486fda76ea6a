/**
 * Callback signatures (docs/callbacks.md "Signature"): `x-sipedge-signature` is the
 * lowercase hex HMAC-SHA256, keyed with the account's signing secret, of
 * `<x-sipedge-timestamp>.<signed payload>`; the timestamp is unix seconds. The signed
 * payload is the request body of a POST and the query string (without `?`) of a GET.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** How far a timestamp may lie from the receiver's clock, either way: 5 minutes. */
export const SIGNATURE_TOLERANCE_SECONDS = 300;

/** Lowercase hex HMAC-SHA256 of `timestamp + "." + body`. */
export function signCallback(secret: string, timestamp: string | number, body: string): string {
  return createHmac('sha256', secret).update(`${timestamp}.${body}`).digest('hex');
}

/**
 * The receiver's check: true when `signature` is the signature of this timestamp and
 * body, compared in constant time, and the timestamp (unix seconds) lies within
 * 5 minutes of `now` (ms since the epoch).
 */
export function verifyCallback(
  secret: string,
  timestamp: string,
  body: string,
  signature: string,
  now: number = Date.now(),
): boolean {
  if (!/^\d{1,12}$/.test(timestamp)) return false;
  if (Math.abs(now / 1000 - Number(timestamp)) > SIGNATURE_TOLERANCE_SECONDS) return false;
  if (!/^[0-9a-f]{64}$/.test(signature)) return false;
  const want = Buffer.from(signCallback(secret, timestamp, body), 'hex');
  return timingSafeEqual(want, Buffer.from(signature, 'hex'));
}
