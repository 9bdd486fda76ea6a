/**
 * Per-contact substitution in a campaign's template components: every string value
 * holding `{{field}}` gets the contact's field — `name`, `phone`, `id`, or an attribute
 * (`{{city}}` or `{{attributes.city}}`). Meta's own positional placeholders (`{{1}}`)
 * are left alone. A field the contact lacks is an error naming it (the contact is not
 * messaged with a hole in its text).
 */
import type { ContactRecord } from '../../store/messaging-catalog/catalog.js';

const PLACEHOLDER = /\{\{\s*([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}/g;

function fieldOf(c: ContactRecord, name: string): string | undefined {
  if (name === 'name') return c.name === '' ? undefined : c.name;
  if (name === 'phone') return c.phone;
  if (name === 'id') return c.id;
  const key = name.startsWith('attributes.') ? name.slice('attributes.'.length) : name;
  return Object.hasOwn(c.attributes, key) ? c.attributes[key] : undefined;
}

/** `components` with the contact's fields in; `{missing}` names the first absent field. */
export function substitute(components: readonly unknown[], c: ContactRecord): { ok: true; components: unknown[] } | { ok: false; missing: string } {
  let missing: string | null = null;
  const walk = (v: unknown): unknown => {
    if (typeof v === 'string') {
      return v.replace(PLACEHOLDER, (whole, name: string) => {
        const x = fieldOf(c, name);
        if (x === undefined) missing ??= name;
        return x ?? whole;
      });
    }
    if (Array.isArray(v)) return v.map(walk);
    if (typeof v === 'object' && v !== null) {
      const out: Record<string, unknown> = {};
      for (const [k, x] of Object.entries(v)) out[k] = walk(x);
      return out;
    }
    return v;
  };
  const out = components.map(walk);
  return missing === null ? { ok: true, components: out } : { ok: false, missing };
}
