/**
 * Phone numbers as the edge keeps them: E.164 with its `+`, parsed and checked by
 * libphonenumber-js (its metadata decides what a valid number of a country is), never
 * by a regular expression of our own.
 */
import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js';

/** The longest text looked at (an E.164 number has at most 15 digits; formatting adds some). */
const MAX_INPUT = 32;

/**
 * `text` as a normalised E.164 number (`+918012345678`), or null when it is not a valid
 * number. The `+` may be missing (a path segment such as `918012345678`); spaces, dots,
 * dashes and brackets of a formatted number are accepted; national forms without a
 * country code are not (there is no country to read them in).
 */
export function normalizeE164(text: unknown): string | null {
  if (typeof text !== 'string') return null;
  const t = text.trim();
  if (t === '' || t.length > MAX_INPUT) return null;
  const withPlus = t.startsWith('+') ? t : `+${t}`;
  const n = parsePhoneNumberFromString(withPlus);
  if (!n || !n.isValid()) return null;
  return n.number;
}

/**
 * A number as dialled or sent by a carrier (`+91 80 1234 5678`, `08012345678` from an account
 * in India, `918012345678`) as E.164, national digits read in `country` (the account's); null
 * when it cannot be a telephone number there. "Possible" (length, country code) is enough
 * for routing: numbering plans change faster than metadata, and the carrier judges whether a
 * number exists. The inventory and the API use the stricter {@link normalizeE164}.
 */
export function dialledE164(text: string, country?: string | null): string | null {
  const t = text.trim();
  if (t === '' || t.length > MAX_INPUT + 8) return null;
  const cc = country && /^[A-Z]{2}$/.test(country) ? (country as CountryCode) : undefined;
  const n = parsePhoneNumberFromString(t, cc);
  if (n && n.isPossible()) return n.number;
  // Digits with their country code but no `+` (some carriers send them so).
  const intl = /^\d{8,15}$/.test(t) ? parsePhoneNumberFromString(`+${t}`) : undefined;
  return intl && intl.isPossible() ? intl.number : null;
}

/** The ISO 3166-1 alpha-2 country of a normalised number, when its metadata tells one. */
export function countryOf(e164: string): string | null {
  return parsePhoneNumberFromString(e164)?.country ?? null;
}

/** What a 400 says of a field that should hold an E.164 number. */
export const E164_PROBLEM = 'must be a valid E.164 phone number such as +918012345678';
