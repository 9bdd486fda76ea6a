/**
 * Currencies a balance may be kept in (ISO 4217 codes). A short list of the
 * currencies in use by the platform's markets; an unknown code is a 400.
 */
export const CURRENCIES: ReadonlySet<string> = new Set([
  'USD', 'EUR', 'GBP', 'INR', 'AUD', 'CAD', 'CHF', 'JPY', 'CNY', 'SGD', 'HKD', 'NZD', 'SEK', 'NOK', 'DKK', 'PLN',
  'CZK', 'HUF', 'RON', 'BGN', 'TRY', 'ZAR', 'BRL', 'MXN', 'ARS', 'CLP', 'COP', 'PEN', 'AED', 'SAR', 'QAR', 'KWD',
  'BHD', 'OMR', 'ILS', 'EGP', 'NGN', 'KES', 'GHS', 'PKR', 'BDT', 'LKR', 'NPR', 'IDR', 'MYR', 'PHP', 'THB', 'VND',
  'KRW', 'TWD', 'UAH',
]);

/** The currency code as stored (upper case), or null when it is not one of {@link CURRENCIES}. */
export function normalizeCurrency(v: unknown): string | null {
  if (typeof v !== 'string' || !/^[A-Za-z]{3}$/.test(v)) return null;
  const c = v.toUpperCase();
  return CURRENCIES.has(c) ? c : null;
}
