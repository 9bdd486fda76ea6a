/**
 * The inventory file (`NUMBER_INVENTORY_FILE`, docs/numbers.md "Inventory"): the numbers
 * the operator sells, one CSV line each with the header
 * `e164,country,region,number_type,setup_fee,monthly_fee,currency,provider`; fees are
 * decimal amounts of the currency unit (at most five decimals), kept as minor units.
 * Loaded (upserted) at start and on SIGHUP; a sold number is never touched.
 */
import { readFileSync } from 'node:fs';
import { parse } from 'csv-parse/sync';
import { ConfigError } from '../errors.js';
import { parseDecimalText } from '../billing/amount.js';
import { normalizeCurrency } from '../billing/currency.js';
import type { NumberInfo, NumbersStore, UpsertResult } from '../store/numbers/numbers.js';
import { countryOf, normalizeE164 } from './e164.js';

export const INVENTORY_COLUMNS = ['e164', 'country', 'region', 'number_type', 'setup_fee', 'monthly_fee', 'currency', 'provider'] as const;

/** The kinds of number the spec names (PhoneNumber.number_type). */
export const NUMBER_TYPES = ['mobile', 'landline', 'toll_free'] as const;

const COUNTRY_RE = /^[A-Z]{2}$/;

/**
 * Parse inventory text. Throws ConfigError naming `source` and the line of the first
 * problem (a malformed number, an unknown country, type or currency, a fee that is not a
 * decimal amount, a number listed twice).
 */
export function parseInventory(text: string, source: string): NumberInfo[] {
  let records: Array<{ record: Record<string, string>; info: { lines: number } }>;
  try {
    records = parse(text, { columns: true, info: true, skip_empty_lines: true, trim: true, bom: true, comment: '#' });
  } catch (e) {
    // csv-parse names the line itself ("Invalid Record Length: … on line 4").
    throw new ConfigError(`NUMBER_INVENTORY_FILE ${source}: ${(e as Error).message}`);
  }
  const header = records[0] ? Object.keys(records[0].record) : INVENTORY_COLUMNS.slice();
  const missing = INVENTORY_COLUMNS.filter((c) => !header.includes(c));
  if (missing.length > 0) throw new ConfigError(`NUMBER_INVENTORY_FILE ${source}: line 1: the header lacks ${missing.join(', ')} (expected ${INVENTORY_COLUMNS.join(',')})`);
  const out: NumberInfo[] = [];
  const seen = new Map<string, number>();
  for (const { record: r, info } of records) {
    const line = info.lines;
    const bad = (what: string): never => {
      throw new ConfigError(`NUMBER_INVENTORY_FILE ${source}: line ${line}: ${what}`);
    };
    const e164 = normalizeE164(r.e164);
    if (e164 === null) bad(`e164 "${r.e164 ?? ''}" is not a valid E.164 number`);
    const country = (r.country ?? '').toUpperCase();
    if (!COUNTRY_RE.test(country)) bad(`country "${r.country ?? ''}" is not an ISO 3166-1 alpha-2 code`);
    const numberCountry = countryOf(e164 as string);
    if (numberCountry !== null && numberCountry !== country) bad(`country ${country} does not match the number ${e164 as string} (${numberCountry})`);
    const numberType = (r.number_type ?? '').toLowerCase();
    if (!(NUMBER_TYPES as readonly string[]).includes(numberType)) bad(`number_type "${r.number_type ?? ''}" is not one of ${NUMBER_TYPES.join(', ')}`);
    const setupFee = parseDecimalText(r.setup_fee ?? '');
    if (setupFee === null) bad(`setup_fee "${r.setup_fee ?? ''}" is not a decimal amount (at most five decimals)`);
    const monthlyFee = parseDecimalText(r.monthly_fee ?? '');
    if (monthlyFee === null) bad(`monthly_fee "${r.monthly_fee ?? ''}" is not a decimal amount (at most five decimals)`);
    const currency = normalizeCurrency(r.currency);
    if (currency === null) bad(`currency "${r.currency ?? ''}" is not a known ISO 4217 code`);
    const prior = seen.get(e164 as string);
    if (prior !== undefined) bad(`${e164 as string} is already on line ${prior}`);
    seen.set(e164 as string, line);
    out.push({
      e164: e164 as string,
      country,
      region: r.region ?? '',
      numberType,
      setupFee: setupFee as number,
      monthlyFee: monthlyFee as number,
      currency: currency as string,
      provider: r.provider ?? '',
    });
  }
  return out;
}

/** Read and parse an inventory file (ConfigError naming the file or the line). */
export function loadInventoryFile(file: string): NumberInfo[] {
  let text: string;
  try {
    text = readFileSync(file, 'utf8');
  } catch (e) {
    throw new ConfigError(`NUMBER_INVENTORY_FILE ${file}: ${(e as Error).message}`);
  }
  return parseInventory(text, file);
}

/**
 * The numbers development loads when NUMBER_INVENTORY_FILE is unset (never in
 * production), priced in `currency` (DEFAULT_CURRENCY) so a development account can buy
 * them: Indian numbers (+9180…) and US ones (+1415…).
 */
export function sampleInventory(currency: string): string {
  const lines = [
    '+918040001001,IN,Karnataka,landline,1.00,2.50',
    '+918040001002,IN,Karnataka,landline,1.00,2.50',
    '+918040001003,IN,Karnataka,landline,1.00,2.50',
    '+919820001001,IN,Maharashtra,mobile,2.00,4.00',
    '+14155550101,US,California,landline,0.50,1.15',
    '+14155550102,US,California,landline,0.50,1.15',
    '+18005550100,US,,toll_free,5.00,10.00',
  ];
  return [INVENTORY_COLUMNS.join(','), ...lines.map((l) => `${l},${currency},sample`)].join('\n');
}

/** The inventory source of a running edge: loads it into the store at start and on reload. */
export class Inventory {
  constructor(
    private readonly store: NumbersStore,
    private readonly file: string | null,
    private readonly sampleCurrency: string | null,
    private readonly now: () => number = Date.now,
  ) {}

  /** The numbers the source holds (parsed; throws ConfigError for a bad file). */
  read(): { rows: NumberInfo[]; source: string } {
    if (this.file !== null) return { rows: loadInventoryFile(this.file), source: this.file };
    if (this.sampleCurrency !== null) return { rows: parseInventory(sampleInventory(this.sampleCurrency), 'sample inventory'), source: 'sample inventory' };
    return { rows: [], source: 'none' };
  }

  /**
   * Read the source and upsert it (start, SIGHUP). A bad file throws before anything is
   * written, so the inventory in the store stays as it was.
   */
  async load(): Promise<UpsertResult & { source: string; size: number }> {
    return this.upsert(this.read());
  }

  /** Upsert numbers already read ({@link read}). */
  async upsert(got: { rows: NumberInfo[]; source: string }): Promise<UpsertResult & { source: string; size: number }> {
    const r = await this.store.upsertInventory(got.rows, new Date(this.now()).toISOString());
    return { ...r, source: got.source, size: got.rows.length };
  }
}
