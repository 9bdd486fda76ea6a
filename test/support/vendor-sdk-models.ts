/**
 * The vendor Python SDK's response models (test/fixtures/vendor-sdk/models.json,
 * written by generate.py from the SDK's source) as a checker: what its pydantic
 * models would refuse. They forbid unknown fields, need every field without a
 * default, and refuse null where the type is not Optional. Types are checked a
 * little more strictly than pydantic's lax mode (no "5" for an int).
 */
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

interface Field {
  type: string;
  required: boolean;
  nullable: boolean;
}
type Model = Record<string, Field> | { $literal: string };

const FILE = fileURLToPath(new URL('../fixtures/vendor-sdk/models.json', import.meta.url));
export const SDK_MODELS = (JSON.parse(readFileSync(FILE, 'utf8')) as { models: Record<string, Model> }).models;

/** The field names of a model (aliases as on the wire). */
export function modelFields(name: string): string[] {
  const m = SDK_MODELS[name];
  if (!m || '$literal' in m) throw new Error(`no model ${name}`);
  return Object.keys(m).sort();
}

function checkType(type: string, v: unknown, at: string, out: string[]): void {
  const list = /^List\[(.*)\]$/.exec(type);
  if (list) {
    if (!Array.isArray(v)) return void out.push(`${at}: not a list`);
    v.forEach((x, i) => checkType(list[1] ?? 'Any', x, `${at}[${i}]`, out));
    return;
  }
  switch (type) {
    case 'Any':
      return;
    case 'str':
      if (typeof v !== 'string') out.push(`${at}: not a str (${JSON.stringify(v)})`);
      return;
    case 'int':
      if (!Number.isInteger(v)) out.push(`${at}: not an int (${JSON.stringify(v)})`);
      return;
    case 'float':
      if (typeof v !== 'number') out.push(`${at}: not a float (${JSON.stringify(v)})`);
      return;
    case 'bool':
      if (typeof v !== 'boolean') out.push(`${at}: not a bool (${JSON.stringify(v)})`);
      return;
    case 'dt.datetime':
    case 'dt.date':
      if (typeof v !== 'string' || Number.isNaN(Date.parse(v))) out.push(`${at}: not a ${type} (${JSON.stringify(v)})`);
      return;
  }
  if (/^Dict\[/.test(type)) {
    if (typeof v !== 'object' || v === null || Array.isArray(v)) out.push(`${at}: not a dict`);
    return;
  }
  const m = SDK_MODELS[type];
  if (!m) throw new Error(`unknown SDK type ${type} at ${at}`);
  if ('$literal' in m) {
    // Union[Literal[...], Any]: any value parses; a plain Literal must be one of them.
    const lit = m.$literal as string;
    // Union[Literal[...], Any] or Union[Optional[Any], …]: any value parses.
    if (/\bAny\b/.test(lit)) return;
    if (!lit.includes(JSON.stringify(v).replaceAll('"', "'"))) out.push(`${at}: ${JSON.stringify(v)} not in ${lit}`);
    return;
  }
  out.push(...modelProblems(type, v, at));
}

/** Why the SDK's model `name` would refuse `value` (empty: it parses). */
export function modelProblems(name: string, value: unknown, at = name): string[] {
  const m = SDK_MODELS[name];
  if (!m || '$literal' in m) throw new Error(`no model ${name}`);
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return [`${at}: not an object`];
  const obj = value as Record<string, unknown>;
  const out: string[] = [];
  for (const k of Object.keys(obj)) if (!(k in m)) out.push(`${at}.${k}: unknown field (extra="forbid")`);
  for (const [k, f] of Object.entries(m)) {
    if (!(k in obj)) {
      if (f.required) out.push(`${at}.${k}: missing`);
      continue;
    }
    const v = obj[k];
    if (v === null) {
      const alias = SDK_MODELS[f.type];
      const aliasTakesNull = alias !== undefined && '$literal' in alias && /Optional\[|\bAny\b/.test(alias.$literal as string);
      if (!f.nullable && f.type !== 'Any' && !aliasTakesNull) out.push(`${at}.${k}: null`);
      continue;
    }
    checkType(f.type, v, `${at}.${k}`, out);
  }
  return out;
}
