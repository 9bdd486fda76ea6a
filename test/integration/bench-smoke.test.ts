/**
 * The benchmarks still run (issue: a hot-path microbenchmark in CI's time budget as a
 * smoke run). Not a timed test: tiny runs whose figures are only checked to be there
 * and to be numbers; every registration must still succeed (the scripts exit non-zero
 * on a failed one). The real runs are `npm run bench`, bench/cpu.mjs, bench/hotpath.mjs.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

const ROOT = fileURLToPath(new URL('../..', import.meta.url));

function run(args: string[], timeoutMs: number): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { cwd: ROOT, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d: Buffer) => (out += d.toString()));
    child.stderr.on('data', (d: Buffer) => (out += d.toString()));
    const t = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`${args.join(' ')} did not finish within ${timeoutMs} ms:\n${out.slice(-2000)}`));
    }, timeoutMs);
    child.on('exit', (code) => {
      clearTimeout(t);
      resolve({ code, out });
    });
  });
}

describe('benchmark smoke runs', () => {
  it.each(['memory', 'redis'])('bench/hotpath.mjs --store=%s prints its figures', async (store) => {
    const r = await run(['bench/hotpath.mjs', `--store=${store}`, '--n=3000', '--users=500', '--concurrency=16'], 90_000);
    expect(r.code, r.out).toBe(0);
    const m = new RegExp(`hotpath ${store}: 3000 registrations in [\\d.]+ s \\(\\d+/s\\), process CPU ([\\d.]+) µs/registration, of which client ≈[\\d.]+ µs → edge ≈(-?[\\d.]+) µs`).exec(r.out);
    expect(m, r.out).not.toBeNull();
    expect(Number(m?.[1])).toBeGreaterThan(0);
    if (store === 'redis') expect(r.out).toMatch(/redis evalsha: \d+ calls, [\d.]+ µs per call/);
  }, 120_000);

  it('bench/cpu.mjs measures the edge with SIPp and prints the event log on/off row', async () => {
    const r = await run(['bench/cpu.mjs', '--systems=edge-memory,edge-memory:events-off', '--rate=300', '--seconds=2', '--users=300'], 150_000);
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/edge-memory\/udp @300\/s: achieved \d+\/s ok \d+ failed 0 /);
    expect(r.out).toMatch(/\| edge-memory:events-off \| udp \| \d+ \| \d+ \|/);
    expect(r.out).toMatch(/edge-memory\/udp event log on vs off: \d+ vs \d+ µs CPU per registration \(edge\) = [\d.]+ ×/);
  }, 180_000);
});
