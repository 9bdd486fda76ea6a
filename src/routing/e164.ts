/**
 * Telephone numbers as routing keys (docs/trunks.md): whatever a phone dialled or a carrier
 * sent — `+91 80 1234 5678`, `08012345678` from an account in India, `tel:+1-415-555-0100` —
 * becomes E.164 with its `+`, by libphonenumber's metadata (never by hand-made patterns).
 */
import { parsePhoneNumberFromString, type CountryCode } from 'libphonenumber-js';

/**
 * `text` as E.164 (`+918012345678`), national digits read in `country` (ISO 3166-1 alpha-2,
 * the account's); null when it cannot be a telephone number there. "Possible" (length and
 * country code) is enough: numbering plans change faster than metadata, and the carrier
 * is the judge of whether a number exists.
 */
export function toE164(text: string, country?: string | null): string | null {
  const t = text.trim();
  if (t === '' || t.length > 40) return null;
  const cc = country && /^[A-Z]{2}$/.test(country) ? (country as CountryCode) : undefined;
  // `00` international prefix and bare digits with a country code are common from carriers.
  const n = parsePhoneNumberFromString(t, cc);
  if (n && n.isPossible()) return n.number;
  const intl = /^\d{8,15}$/.test(t) ? parsePhoneNumberFromString(`+${t}`) : undefined;
  return intl && intl.isPossible() ? intl.number : null;
}
