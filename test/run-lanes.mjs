#!/usr/bin/env node
/**
 * `npm test` after the typecheck: the whole suite in three lanes at once (README "Tests"):
 * `vitest run --project load` (files that load the machine), `--project wait --project
 * platform` (files that mostly wait on protocol timers, then the API, money, numbers,
 * trunks, KYC and push suites) and `--project rest --project unit` (everything
 * else; unit files share one worker), each one
 * file at a time in a vitest process of its own (test/vitest.config.ts). The run fails
 * when any lane fails. Arguments (file filters, -t …) are passed to every lane.
 */
import { spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const vitest = fileURLToPath(new URL('../node_modules/vitest/vitest.mjs', import.meta.url));
const args = process.argv.slice(2);
const started = Date.now();

/** Runs one lane (its vitest projects); resolves with its exit code, its output lines prefixed with the lane. */
function lane(name, projects = [name]) {
  return new Promise((resolve) => {
    const t0 = Date.now();
    const child = spawn(process.execPath, [vitest, 'run', '--config', 'test/vitest.config.ts', ...projects.flatMap((p) => ['--project', p]), '--passWithNoTests', ...args], {
      cwd: root,
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, NO_COLOR: process.env.NO_COLOR ?? '1' },
    });
    const prefix = (stream, out) => {
      let rest = '';
      stream.on('data', (d) => {
        const text = rest + d.toString();
        const lines = text.split('\n');
        rest = lines.pop() ?? '';
        for (const l of lines) out.write(`[${name}] ${l}\n`);
      });
      stream.on('end', () => rest && out.write(`[${name}] ${rest}\n`));
    };
    prefix(child.stdout, process.stdout);
    prefix(child.stderr, process.stderr);
    // A signal to the runner reaches both lanes (each stops its own servers).
    for (const sig of ['SIGINT', 'SIGTERM']) process.once(sig, () => child.kill(sig));
    child.on('exit', (code, signal) => {
      const s = ((Date.now() - t0) / 1000).toFixed(0);
      process.stdout.write(`[${name}] lane finished in ${s} s with ${signal ?? `exit code ${code}`}\n`);
      resolve(code ?? 1);
    });
  });
}

// Three lanes: a fourth beside "load" starved its timing checks (fuzzing stalls, worker restarts).
const codes = await Promise.all([lane('load'), lane('wait', ['wait', 'platform']), lane('rest', ['rest', 'unit'])]);
const failed = codes.some((c) => c !== 0);
process.stdout.write(`\nall lanes: ${((Date.now() - started) / 1000).toFixed(0)} s, ${failed ? 'FAILED' : 'passed'}\n`);
process.exit(failed ? 1 : 0);
