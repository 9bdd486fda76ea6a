/**
 * The layering of src/ (README "Layout"), checked on the source tree: every
 * relative import of every file under src/ against the rules below. A lower
 * layer never imports a higher one, so each can be read, tested and replaced on
 * its own. Base files (src/*.ts: errors, logger, config, metrics …) are shared;
 * sip/ may use only errors.ts of them.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const SRC = resolve(dirname(fileURLToPath(import.meta.url)), '../../src');

/** Folder of src/ → folders (or base files) it must not import. */
const FORBIDDEN: Record<string, readonly string[]> = {
  transport: ['store', 'core', 'registrar', 'proxy', 'api', 'auth', 'security', 'fleet'],
  core: ['registrar', 'proxy', 'api', 'store', 'security', 'fleet'],
  store: ['core', 'transport', 'registrar', 'proxy', 'api', 'security', 'auth', 'fleet', 'billing'],
  billing: ['transport', 'core', 'registrar', 'proxy', 'api', 'security', 'auth', 'fleet', 'media'],
  api: ['transport', 'core', 'proxy', 'registrar'],
  media: ['transport', 'core', 'store', 'registrar', 'proxy', 'api', 'auth', 'security', 'fleet', 'provisioning'],
  // The phone network (DESIGN "The platform around the edge"): routing stands on numbers/,
  // trunks/ and billing/; proxy/ (and later calls/) stand on routing/, never the reverse.
  routing: ['transport', 'registrar', 'proxy', 'api', 'fleet'],
  numbers: ['transport', 'core', 'registrar', 'proxy', 'api', 'routing', 'fleet'],
  trunks: ['transport', 'registrar', 'proxy', 'api', 'routing', 'fleet'],
  kyc: ['transport', 'core', 'registrar', 'proxy', 'api', 'routing', 'fleet'],
  // Push (RFC 8599, docs/push.md): the registrar, proxy and API use it; it sends through its own clients.
  push: ['transport', 'core', 'registrar', 'proxy', 'api', 'routing', 'fleet'],
  // Messaging (docs/messaging-catalog.md): beside the phone network, never in its signalling path.
  messaging: ['transport', 'core', 'registrar', 'proxy', 'api', 'routing', 'fleet', 'calls'],
};
/** sip/ is the vocabulary: itself, and of the base files only these. */
const SIP_BASE_ALLOWED = new Set(['errors.ts']);

function sources(dir: string): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir)) {
    const p = join(dir, name);
    if (statSync(p).isDirectory()) out.push(...sources(p));
    else if (name.endsWith('.ts')) out.push(p);
  }
  return out;
}

/** Every relative import/export-from of a file, resolved to a path under src/. */
function importsOf(file: string): string[] {
  const text = readFileSync(file, 'utf8');
  const out: string[] = [];
  for (const m of text.matchAll(/(?:import|export)\s+(?:type\s+)?(?:[^'";]*?\sfrom\s+)?'(\.{1,2}\/[^']+)'/g)) {
    out.push(relative(SRC, resolve(dirname(file), (m[1] as string).replace(/\.js$/, '.ts'))));
  }
  return out;
}

/** The violations of the rules, as `file → import` lines. */
function violations(): string[] {
  const bad: string[] = [];
  for (const file of sources(SRC)) {
    const from = relative(SRC, file);
    const layer = from.includes('/') ? (from.split('/')[0] as string) : null;
    for (const target of importsOf(file)) {
      const to = target.includes('/') ? (target.split('/')[0] as string) : null;
      if (layer === 'sip' && to !== 'sip' && !(to === null && SIP_BASE_ALLOWED.has(target))) bad.push(`${from} → ${target}`);
      if (layer && to && FORBIDDEN[layer]?.includes(to)) bad.push(`${from} → ${target}`);
    }
  }
  return bad;
}

describe('layering of src/', () => {
  it('finds the imports it checks (the walk is not empty)', () => {
    const all = sources(SRC).flatMap(importsOf);
    expect(all.length).toBeGreaterThan(100);
    expect(all).toContain('transport/types.ts');
  });

  it('no import runs from a lower layer to a higher one', () => {
    expect(violations()).toEqual([]);
  });
});
