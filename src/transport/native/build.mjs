#!/usr/bin/env node
// Builds the batched UDP engine (src/transport/native/udp_batch.c → src/transport/native/build/udp_batch.node;
// docs/udp-engine.md). Runs at `npm ci` / `npm install` (package.json "install") and in
// `npm run build` (only when the source changed). It never fails the install: without a
// C compiler, Node-API headers or Linux, it prints one line and the server runs on
// node:dgram (SIP_UDP_ENGINE=auto). Nothing is downloaded: the headers come from a
// package already on the machine — `node-api-headers` when installed, else the running
// Node's own include/node (official builds and Debian's nodejs ship it), else
// npm_config_nodedir, else the LTS runtime test/setup.sh unpacked from the npm registry.
//
//   node src/transport/native/build.mjs [--force] [--strict] [--quiet]
//   --strict: exit 1 when it cannot build (CI of the engine itself).
//   SIP_EDGE_NATIVE=0 skips the build; CC names the compiler (default cc).
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, renameSync, rmSync, statSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const here = dirname(fileURLToPath(import.meta.url));
const root = resolve(here, '..', '..', '..');
const src = join(here, 'udp_batch.c');
const outDir = join(here, 'build');
const out = join(outDir, 'udp_batch.node');
const args = new Set(process.argv.slice(2));
const force = args.has('--force');
const strict = args.has('--strict');
const quiet = args.has('--quiet');

function say(line) {
  console.log(`sip-edge native udp engine: ${line}`);
}
function giveUp(reason) {
  say(`not built (${reason}); UDP runs on node:dgram`);
  process.exit(strict ? 1 : 0);
}

if (process.env.SIP_EDGE_NATIVE === '0') giveUp('SIP_EDGE_NATIVE=0');
if (process.platform !== 'linux') giveUp(`${process.platform}: recvmmsg/sendmmsg are Linux's`);

function fresh() {
  if (force || !existsSync(out)) return false;
  const built = statSync(out).mtimeMs;
  return built >= statSync(src).mtimeMs && built >= statSync(fileURLToPath(import.meta.url)).mtimeMs;
}
if (fresh()) {
  if (!quiet) say(`up to date (${out})`);
  process.exit(0);
}

function headerDirs() {
  const dirs = [];
  if (process.env.SIP_EDGE_NAPI_HEADERS) dirs.push(process.env.SIP_EDGE_NAPI_HEADERS);
  try {
    const req = createRequire(join(root, 'package.json'));
    const h = req('node-api-headers');
    if (h && typeof h.include_dir === 'string') dirs.push(h.include_dir);
  } catch {
    // not installed
  }
  dirs.push(resolve(dirname(process.execPath), '..', 'include', 'node'));
  if (process.env.npm_config_nodedir) dirs.push(join(process.env.npm_config_nodedir, 'include', 'node'));
  dirs.push(join(root, 'test', '.tmp', 'node-lts', 'include', 'node'));
  return dirs;
}
const include = headerDirs().find((d) => existsSync(join(d, 'node_api.h')));
if (!include) giveUp('no Node-API headers (node_api.h) found: install node-api-headers or Node with its include/');

const cc = process.env.CC || 'cc';
const probe = spawnSync(cc, ['--version'], { encoding: 'utf8' });
if (probe.error || probe.status !== 0) giveUp(`no C compiler (${cc})`);

mkdirSync(outDir, { recursive: true });
const tmp = `${out}.${process.pid}.tmp`;
const cflags = ['-O2', '-std=gnu11', '-Wall', '-Wextra', '-shared', '-fPIC', '-fvisibility=hidden', '-DNODE_GYP_MODULE_NAME=udp_batch'];
const r = spawnSync(cc, [...cflags, `-I${include}`, src, '-o', tmp], { encoding: 'utf8' });
if (r.status !== 0) {
  rmSync(tmp, { force: true });
  process.stderr.write(r.stderr ?? '');
  giveUp(`${cc} failed`);
}
// Loads it in a separate process: a broken build must not reach the server.
const check = spawnSync(process.execPath, ['-e', `const m = { exports: {} }; process.dlopen(m, ${JSON.stringify(tmp)}); if (typeof m.exports.open !== 'function') process.exit(3);`], {
  encoding: 'utf8',
});
if (check.status !== 0) {
  rmSync(tmp, { force: true });
  giveUp(`built but does not load: ${(check.stderr || '').trim().split('\n')[0]}`);
}
renameSync(tmp, out);
if (r.stderr && !quiet) process.stderr.write(r.stderr);
say(`built ${out} (headers: ${include})`);
