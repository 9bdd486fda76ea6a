#!/usr/bin/env node
// The npm registry mirror this project is built against serves only the linux-x64/arm64-gnu
// builds of rollup's native binary, so `npm install` leaves the other platforms out of
// package-lock.json and `npm ci` then refuses the lock as out of sync. This adds the missing
// optional platform entries (with their os/cpu, so npm skips them without fetching).
// Run it after any `npm install` that rewrites the lock: node .ci/lock-platforms.mjs
import { readFileSync, writeFileSync } from 'node:fs';

const file = new URL('../package-lock.json', import.meta.url);
const lock = JSON.parse(readFileSync(file, 'utf8'));
const pkgs = lock.packages;
let added = 0;
for (const [path, meta] of Object.entries(pkgs)) {
  if (!path.endsWith('node_modules/rollup') || !meta.optionalDependencies) continue;
  for (const [name, version] of Object.entries(meta.optionalDependencies)) {
    const m = /^@rollup\/rollup-([a-z0-9]+)-([a-z0-9]+)(?:-([a-z0-9]+))?$/.exec(name);
    const key = `node_modules/${name}`;
    if (!m || pkgs[key]) continue;
    const cpu = m[2] === 'arm' ? 'arm' : m[2];
    const entry = { version, cpu: [cpu], dev: true, license: 'MIT', optional: true, os: [m[1]] };
    if (m[3] && m[1] === 'linux' && /gnu|musl/.test(m[3])) entry.libc = [m[3].startsWith('musl') ? 'musl' : 'glibc'];
    pkgs[key] = entry;
    added++;
  }
}
writeFileSync(file, JSON.stringify(lock, null, 2) + '\n');
console.log(`lock-platforms: added ${added} optional platform entries`);
