/**
 * README "Layout" names every folder of src/ (issue 28 item 9): a folder added without a
 * line there fails this test. Each folder must appear at the start of a line of the
 * Layout block, indented two spaces per level below src/ (`  api/`, `    calls/` under
 * `  store/`), after the line of its parent folder.
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

function folders(dir: string, prefix = ''): string[] {
  const out: string[] = [];
  for (const name of readdirSync(dir).sort()) {
    const p = join(dir, name);
    if (!statSync(p).isDirectory()) continue;
    out.push(prefix + name, ...folders(p, `${prefix}${name}/`));
  }
  return out;
}

/** The fenced block under "## Layout", line by line. */
function layoutBlock(): string[] {
  const readme = readFileSync(join(ROOT, 'README.md'), 'utf8');
  const section = readme.slice(readme.indexOf('\n## Layout'));
  const m = /```\n([\s\S]*?)```/.exec(section);
  if (!m) throw new Error('README "Layout" has no fenced block');
  return (m[1] as string).split('\n');
}

describe('README Layout', () => {
  const lines = layoutBlock();
  const all = folders(join(ROOT, 'src'));

  it('finds the folders of src/ and the Layout block (the check below is not vacuous)', () => {
    expect(all.length).toBeGreaterThan(10);
    expect(lines[0]).toBe('src/');
  });

  it.each(all)('names src/%s/ on a line of its own, under its parent', (folder) => {
    const parts = folder.split('/');
    let from = 0;
    for (const [depth, part] of parts.entries()) {
      const indent = ' '.repeat(2 * (depth + 1));
      const at = lines.findIndex((l, i) => i >= from && l.startsWith(`${indent}${part}/`) && !l.startsWith(`${indent} `));
      expect(at, `README Layout has no line "${indent}${part}/" for src/${parts.slice(0, depth + 1).join('/')}/`).toBeGreaterThanOrEqual(0);
      from = at + 1;
    }
  });
});
