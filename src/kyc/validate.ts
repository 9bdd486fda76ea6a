/**
 * The formats of the numbers KYC checks (docs/kyc.md "Inputs"): PAN, GSTIN (with its
 * check character), CIN. Each returns null when the value is well formed, or what is
 * wrong with it — never the value itself (it must not reach a log or an error body).
 */

/** PAN: 5 letters, 4 digits, 1 letter; the 4th letter is the holder's category. */
export const PAN_PATTERN = /^[A-Z]{3}[ABCFGHJLPT][A-Z][0-9]{4}[A-Z]$/;

/** GSTIN: state code, the holder's PAN, entity number, Z, check character. */
export const GSTIN_PATTERN = /^[0-9]{2}[A-Z]{3}[ABCFGHJLPT][A-Z][0-9]{4}[A-Z][1-9A-Z]Z[0-9A-Z]$/;

/** CIN: listing, industry code, state, year, ownership, registration number. */
export const CIN_PATTERN = /^[LU][0-9]{5}[A-Z]{2}[0-9]{4}[A-Z]{3}[0-9]{6}$/;

const B36 = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZ';

/** The check character of the first 14 characters of a GSTIN (weights 1,2 alternating, base 36). */
export function gstinCheckChar(first14: string): string {
  let sum = 0;
  for (let i = 0; i < 14; i++) {
    const v = B36.indexOf(first14[i] ?? '');
    const p = v * (i % 2 === 0 ? 1 : 2);
    sum += Math.floor(p / 36) + (p % 36);
  }
  return B36[(36 - (sum % 36)) % 36] as string;
}

export function panProblem(pan: string): string | null {
  if (pan.length !== 10) return 'must be exactly 10 characters';
  if (!PAN_PATTERN.test(pan)) return 'must be a PAN: 5 letters (the 4th one of ABCFGHJLPT), 4 digits, 1 letter, upper case';
  return null;
}

export function gstinProblem(gstin: string): string | null {
  if (gstin.length !== 15) return 'must be exactly 15 characters';
  if (!GSTIN_PATTERN.test(gstin)) return 'must be a GSTIN: 2-digit state code, a PAN, entity number, Z, check character (upper case)';
  if (gstinCheckChar(gstin.slice(0, 14)) !== gstin[14]) return 'the GSTIN check character does not match';
  return null;
}

export function cinProblem(cin: string): string | null {
  if (cin.length !== 21) return 'must be exactly 21 characters';
  if (!CIN_PATTERN.test(cin)) return 'must be a CIN: L or U, 5 digits, state, year, 3 letters, 6 digits (upper case)';
  return null;
}
