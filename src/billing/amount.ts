/**
 * Money amounts (docs/billing.md "Amounts"): integers of minor units of
 * 1/100000 of the currency unit, never floats. Text in and out has at most five
 * decimals: "23906.83000" is 2_390_683_000 minor units.
 */

/** Minor units per currency unit. */
export const MINOR_PER_UNIT = 100_000;
/** Decimals shown and accepted. */
export const AMOUNT_DECIMALS = 5;
/**
 * The largest amount one request may move: 10^9 units (10^14 minor units), far
 * inside the exact integer range of a double (2^53 minor units ≈ 9.0 × 10^10
 * units), which Lua in Redis computes with. Balances are held inside that range
 * by the stores (a credit that would leave it is refused).
 */
export const MAX_AMOUNT_MINOR = 100_000_000_000_000;

/** Why an amount was refused (the 400's `details` message). */
export type AmountProblem = string;

const DECIMAL_RE = /^(\d{1,15})(?:\.(\d{1,5}))?$/;

/**
 * Parse a positive amount as given by a client: a decimal string ("10", "10.5",
 * "0.00001") or a JSON number (what the vendor's SDK sends). A number is taken as
 * the shortest decimal text that reads back as it (ECMAScript Number::toString), so
 * 10.1 is "10.1" exactly; never computed with.
 *
 * @returns minor units, or the problem (negative, zero, not numeric, more than five decimals, too large).
 */
export function parseAmount(v: unknown): { ok: true; minor: number } | { ok: false; problem: AmountProblem } {
  let text: string;
  if (typeof v === 'number') {
    if (!Number.isFinite(v)) return { ok: false, problem: 'must be a positive decimal amount' };
    text = String(v);
    // 1e-7, 1e+21: exponent forms are either too precise or too large.
    if (/e/i.test(text)) return { ok: false, problem: v < 1 ? `must have at most ${AMOUNT_DECIMALS} decimals` : 'is too large' };
  } else if (typeof v === 'string') {
    text = v.trim();
  } else {
    return { ok: false, problem: 'must be a positive decimal amount (string such as "10.50")' };
  }
  if (text.startsWith('-')) return { ok: false, problem: 'must be positive' };
  if (text.startsWith('+')) text = text.slice(1);
  if (/^\d+\.\d{6,}$/.test(text)) return { ok: false, problem: `must have at most ${AMOUNT_DECIMALS} decimals` };
  const m = DECIMAL_RE.exec(text);
  if (!m) return { ok: false, problem: 'must be a positive decimal amount (string such as "10.50")' };
  const whole = BigInt(m[1] ?? '0');
  const frac = BigInt((m[2] ?? '').padEnd(AMOUNT_DECIMALS, '0'));
  const minor = whole * BigInt(MINOR_PER_UNIT) + frac;
  if (minor === 0n) return { ok: false, problem: 'must be greater than zero' };
  if (minor > BigInt(MAX_AMOUNT_MINOR)) return { ok: false, problem: `must not exceed ${formatAmount(MAX_AMOUNT_MINOR)}` };
  return { ok: true, minor: Number(minor) };
}

/** A non-negative decimal text of a file (the rate deck): minor units, or null when it is not one. */
export function parseDecimalText(text: string): number | null {
  const m = DECIMAL_RE.exec(text.trim());
  if (!m) return null;
  const minor = BigInt(m[1] ?? '0') * BigInt(MINOR_PER_UNIT) + BigInt((m[2] ?? '').padEnd(AMOUNT_DECIMALS, '0'));
  return minor > BigInt(MAX_AMOUNT_MINOR) ? null : Number(minor);
}

/** Minor units as decimal text with five decimals: 2390683000 → "23906.83000", -150000 → "-1.50000". */
export function formatAmount(minor: number): string {
  if (!Number.isSafeInteger(minor)) throw new RangeError(`not an amount in minor units: ${minor}`);
  const neg = minor < 0;
  const abs = BigInt(Math.abs(minor));
  const unit = BigInt(MINOR_PER_UNIT);
  const text = `${abs / unit}.${(abs % unit).toString().padStart(AMOUNT_DECIMALS, '0')}`;
  return neg ? `-${text}` : text;
}

/**
 * Minor units as a JSON number, for the few fields the spec types as numbers
 * (PartnerProfile `balance`, PartnerAnalytics costs). Display only: the exact value
 * is the decimal text of {@link formatAmount}.
 */
export function amountNumber(minor: number): number {
  return Number(formatAmount(minor));
}
