/**
 * The contacts CSV import (docs/messaging-catalog.md "Contacts import"): a header row
 * naming `phone` (required), `name`, `tags` (`;`-separated) and any other columns (each
 * an attribute of that name), then one contact a row. Parsed as a stream (csv-parse);
 * every row is checked and the bad ones reported by line, and only when the whole file
 * is within the caps (rows, bytes) are the good rows written — so a refused file
 * imports nothing. Rows are upserted by phone: a phone seen before (in the store or
 * earlier in the file) updates that contact rather than adding another.
 */
import type { Readable } from 'node:stream';
import { parse } from 'csv-parse';
import { normalizeE164, E164_PROBLEM } from '../../numbers/e164.js';
import type { ContactUpsert, MessagingCatalogStore } from '../../store/messaging-catalog/catalog.js';
import { CatalogError } from './catalog-error.js';

export interface ImportReport {
  /** Contacts created. */
  imported: number;
  /** Existing contacts updated (a phone already known, or repeated in the file). */
  updated: number;
  /** Rows not imported, by line of the file (the header is line 1). */
  failed: Array<{ line: number; error: string }>;
}

export const TAG_RE = /^[\p{L}\p{N}_.:-]{1,64}$/u;
const MAX_TAGS = 50;
const MAX_ATTRIBUTES = 50;
const MAX_FIELD = 1024;
const MAX_NAME = 256;
const WRITE_BATCH = 500;

/** Tags from a `;`-separated cell: trimmed, empty ones dropped; an error names a bad one. */
export function parseTags(cell: string): { tags: string[] } | { error: string } {
  const tags = cell
    .split(';')
    .map((t) => t.trim())
    .filter((t) => t !== '');
  if (tags.length > MAX_TAGS) return { error: `tags: at most ${MAX_TAGS}` };
  const bad = tags.find((t) => !TAG_RE.test(t));
  if (bad !== undefined) return { error: `tags: "${bad.slice(0, 64)}" must be 1-64 letters, digits or _ . : -` };
  return { tags: [...new Set(tags)] };
}

/** One data row as a contact, or what is wrong with it. */
function rowToContact(rec: Record<string, string>): ContactUpsert | { error: string } {
  const rawPhone = (rec.phone ?? '').trim();
  if (rawPhone === '') return { error: 'phone is required' };
  const phone = normalizeE164(rawPhone);
  if (phone === null) return { error: `phone ${E164_PROBLEM}` };
  const out: ContactUpsert = { phone };
  const name = (rec.name ?? '').trim();
  if (name.length > MAX_NAME) return { error: `name must be at most ${MAX_NAME} characters` };
  if (name !== '') out.name = name;
  if (rec.tags !== undefined) {
    const t = parseTags(rec.tags);
    if ('error' in t) return t;
    if (t.tags.length > 0) out.tags = t.tags;
  }
  const attributes: Record<string, string> = {};
  for (const [k, v] of Object.entries(rec)) {
    if (k === 'phone' || k === 'name' || k === 'tags') continue;
    const value = v.trim();
    if (value === '') continue;
    if (value.length > MAX_FIELD) return { error: `${k} must be at most ${MAX_FIELD} characters` };
    attributes[k] = value;
  }
  if (Object.keys(attributes).length > MAX_ATTRIBUTES) return { error: `at most ${MAX_ATTRIBUTES} attributes` };
  if (Object.keys(attributes).length > 0) out.attributes = attributes;
  return out;
}

const HEADER_RE = /^[A-Za-z_][A-Za-z0-9_.-]{0,63}$/;

/**
 * Import `csv` (a byte stream; `truncated()` tells whether the upload went past the byte
 * cap) as contacts of `owner`. Throws CatalogError `too_large` (413) past a cap and
 * `invalid` (400) for a file without a usable header.
 */
export async function importContacts(
  store: MessagingCatalogStore,
  owner: string,
  csv: Readable,
  opts: { maxRows: number; maxBytes: number; truncated: () => boolean; newId: () => string; now: () => string },
): Promise<ImportReport> {
  const failed: ImportReport['failed'] = [];
  const rows: ContactUpsert[] = [];
  let headerProblem: string | null = null;
  let dataRows = 0;
  const parser = parse({
    bom: true,
    columns: (header: string[]) => {
      const names = header.map((h) => h.trim().toLowerCase());
      if (!names.includes('phone')) headerProblem = 'the header row must name a phone column';
      const bad = names.find((n) => !HEADER_RE.test(n));
      if (bad !== undefined) headerProblem ??= `column "${bad.slice(0, 64)}" must be 1-64 letters, digits or _ . - (starting with a letter)`;
      if (new Set(names).size !== names.length) headerProblem ??= 'a column is named twice';
      return names;
    },
    info: true,
    relax_column_count: true,
    skip_empty_lines: true,
    max_record_size: 64 * 1024,
    skip_records_with_error: true,
    on_skip: (err) => {
      const line = typeof err?.lines === 'number' ? err.lines : 0;
      failed.push({ line, error: `not a CSV row: ${(err?.message ?? 'malformed').slice(0, 200)}` });
      return undefined;
    },
  });
  let tooMany = false;
  csv.on('error', (e) => parser.destroy(e));
  csv.pipe(parser);
  for await (const item of parser as AsyncIterable<{ record: Record<string, string>; info: { lines: number } }>) {
    if (headerProblem !== null) break;
    dataRows++;
    if (dataRows > opts.maxRows) {
      tooMany = true;
      break;
    }
    const c = rowToContact(item.record);
    if ('error' in c) failed.push({ line: item.info.lines, error: c.error });
    else rows.push(c);
  }
  if (tooMany || headerProblem !== null) {
    csv.unpipe(parser);
    csv.resume();
  }
  if (opts.truncated()) throw new CatalogError('too_large', `The CSV file exceeds ${opts.maxBytes} bytes; nothing was imported.`, 'import_too_large');
  if (tooMany) throw new CatalogError('too_large', `The CSV file has more than ${opts.maxRows} rows; nothing was imported.`, 'import_too_large');
  if (headerProblem !== null) throw new CatalogError('invalid', headerProblem, 'invalid', 'file');
  if (dataRows === 0 && failed.length === 0) throw new CatalogError('invalid', 'the file has no header row and no data rows', 'invalid', 'file');

  let imported = 0;
  let updated = 0;
  for (let i = 0; i < rows.length; i += WRITE_BATCH) {
    const now = opts.now();
    const res = await store.upsertContacts(owner, rows.slice(i, i + WRITE_BATCH), () => opts.newId(), now);
    for (const r of res) r.created ? imported++ : updated++;
  }
  failed.sort((a, b) => a.line - b.line);
  return { imported, updated, failed };
}
