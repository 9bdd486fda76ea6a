#!/usr/bin/env node
// Where the edge's CPU goes per UDP registration, per engine (issue 27 "where the remaining
// microseconds go"): the embedded edge (one process) under `node --cpu-prof` at a fixed rate,
// once per engine, self time by function and by module over the measured step, and CPU µs
// per registration. `--strace` adds `strace -c -f` of the same step (syscalls per
// registration; strace slows the process, so its CPU figure is not comparable).
//
// `--store=redis` profiles the same single process on a local redis-server (the code a
// SIP_WORKERS worker runs), and adds Redis's CPU and commands per registration.
//
//   node bench/udp-profile.mjs [--rate=2000] [--step=10] [--engines=dgram,native] [--top=25] [--strace] [--store=memory|redis]
import { execSync, spawn } from 'node:child_process';
import { mkdirSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { startEdge, createAccount, createEndpoints, benchUsers } from './lib/edge.mjs';
import { buildFineClock, writeInjection, runStep } from './lib/sipp.mjs';
import { summariseProfile } from './lib/profile.mjs';
import { sleep } from './lib/proc.mjs';
import { startRedis } from './lib/redis.mjs';

const ROOT = dirname(dirname(fileURLToPath(import.meta.url)));
const option = (name, def) => process.argv.slice(2).find((a) => a === `--${name}` || a.startsWith(`--${name}=`))?.split('=')[1] ?? (process.argv.includes(`--${name}`) ? '1' : def);
const rate = Number(option('rate', '2000'));
const stepS = Number(option('step', '10'));
const engines = option('engines', 'dgram,native').split(',');
const top = Number(option('top', '25'));
const withStrace = option('strace', '0') === '1';
const lts = join(ROOT, 'test/.tmp/node-lts/bin/node');
const tmp = join(ROOT, 'bench/.tmp', `udp-profile-${Date.now()}`);
mkdirSync(tmp, { recursive: true });
if (option('build', '1') === '1') execSync('npm run build --silent', { cwd: ROOT, stdio: ['ignore', 'ignore', 'inherit'] });
const preload = buildFineClock(ROOT, tmp);
const users = benchUsers(Number(option('users', '10000')));
const store = option('store', 'memory');
const redis = store === 'redis' ? await startRedis(tmp) : null;

for (const engine of engines) {
  const profDir = join(tmp, 'prof');
  const name = `edge-${engine}.cpuprofile`;
  const edge = await startEdge({ root: ROOT, tmp, name: `edge-${engine}`, store, redisUrl: redis?.url(0), listeners: ['udp'], node: lts, env: { SIP_UDP_ENGINE: engine }, nodeArgs: ['--cpu-prof', '--cpu-prof-dir', profDir, '--cpu-prof-name', name] });
  const account = await createAccount(edge, engine);
  await createEndpoints(edge, account, users, 16);
  const files = writeInjection(join(tmp, 'inj'), engine, users, account.domain);
  const target = { pid: edge.pid, ports: edge.ports, cpuTree: true };
  await runStep({ root: ROOT, dir: join(tmp, `${engine}-warm`), target, transport: 'udp', rate: 2000, seconds: 4, files, preload, sippTransport: 'u1' });
  let strace = null;
  if (withStrace) {
    strace = spawn('strace', ['-c', '-f', '-p', String(edge.pid), '-o', join(tmp, `${engine}.strace`)], { stdio: 'ignore' });
    await sleep(500);
  }
  if (redis) await redis.cmd('CONFIG', 'RESETSTAT');
  const t0 = Date.now();
  const s = await runStep({ root: ROOT, dir: join(tmp, `${engine}-step`), target, transport: 'udp', rate, seconds: stepS, files, preload, sippTransport: 'u1', extraPids: redis ? [redis.pid] : [] });
  const commands = redis ? String(await redis.cmd('INFO', 'commandstats')) : '';
  const t1 = Date.now();
  if (strace) {
    strace.kill('SIGINT');
    await new Promise((r) => strace.once('exit', r));
  }
  await edge.stop(15000);
  const tEnd = Date.now(); // about when the profile ends (written at exit)
  const us = (s.serverCpu * 1e4) / s.achieved;
  console.log(`\n## ${engine}: ${rate}/s, achieved ${s.achieved.toFixed(0)}/s, ok ${s.ok}/${s.planned}, p99 ${s.p99.toFixed(2)} ms, server ${s.serverCpu.toFixed(0)} % → ${us.toFixed(0)} µs CPU per registration${withStrace ? ' (under strace)' : ''}`);
  const p = summariseProfile(join(profDir, name), { root: ROOT, top, window: [tEnd - t0, tEnd - t1] }); // ms before the end
  console.log(`profile: ${(p.totalMs ?? 0).toFixed(0)} ms sampled in the step`);
  if (redis) {
    console.log(`redis-server: ${s.otherCpu[0].toFixed(0)} % → ${((s.otherCpu[0] * 1e4) / s.achieved).toFixed(0)} µs CPU per registration; commands per registration (Lua's own included):`);
    console.log('| command | per registration | µs each |\n|---|---|---|');
    for (const m of commands.matchAll(/cmdstat_(\S+):calls=(\d+),usec=(\d+)/g)) {
      if (Number(m[2]) / s.ok >= 0.05) console.log(`| ${m[1]} | ${(Number(m[2]) / s.ok).toFixed(2)} | ${(Number(m[3]) / Number(m[2])).toFixed(1)} |`);
    }
  }
  console.log('| module | self % |\n|---|---|');
  for (const m of p.modules.slice(0, 12)) console.log(`| ${m.module} | ${m.pct.toFixed(1)} |`);
  console.log('\n| function | where | self % |\n|---|---|---|');
  for (const f of p.functions.slice(0, top)) console.log(`| ${f.name} | ${f.where} | ${f.pct.toFixed(1)} |`);
  if (strace) {
    const text = readFileSync(join(tmp, `${engine}.strace`), 'utf8');
    const rows = text.split('\n').filter((l) => /^\s*\d/.test(l)).map((l) => l.trim().split(/\s+/));
    const regs = s.ok;
    console.log(`\nsyscalls per registration (strace -c -f over the step, ${regs} registrations):`);
    console.log('| syscall | calls | per registration |\n|---|---|---|');
    for (const r of rows.slice(0, 12)) {
      const calls = Number(r[3]);
      const sys = r[r.length - 1];
      console.log(`| ${sys} | ${calls} | ${(calls / regs).toFixed(2)} |`);
    }
  }
}
rmSync(join(tmp, 'inj'), { recursive: true, force: true });
await redis?.stop();
