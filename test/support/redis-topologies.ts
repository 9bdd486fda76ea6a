/**
 * Real Redis topologies for the tests, on free loopback ports, each process
 * stopped by its PID and its directory removed:
 * - a 3-master Redis Cluster (`redis-server --cluster-enabled yes` ×3 +
 *   `redis-cli --cluster create … --cluster-replicas 0`);
 * - Sentinel: 1 master, 1 replica, 3 sentinels (`redis-server <conf> --sentinel`).
 */
import { spawn, execFile, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { freePort } from './ports.mjs';

const REDIS_SERVER = process.env.REDIS_SERVER_BIN ?? '/usr/bin/redis-server';
const REDIS_CLI = process.env.REDIS_CLI_BIN ?? '/usr/bin/redis-cli';
const run = promisify(execFile);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

const running = new Set<ChildProcess>();
process.on('exit', () => {
  for (const c of running) c.kill('SIGKILL');
});

interface Proc {
  port: number;
  child: ChildProcess | null;
  args: string[];
}

async function spawnRedis(args: string[], port: number): Promise<ChildProcess> {
  const child = spawn(REDIS_SERVER, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  child.on('exit', () => running.delete(child));
  let out = '';
  child.stdout?.on('data', (d: Buffer) => (out += d.toString()));
  child.stderr?.on('data', (d: Buffer) => (out += d.toString()));
  const deadline = Date.now() + 10_000;
  for (;;) {
    try {
      const r = await run(REDIS_CLI, ['-p', String(port), 'ping']);
      if (r.stdout.trim() === 'PONG') return child;
    } catch {
      // not up yet
    }
    if (child.exitCode !== null || Date.now() > deadline) throw new Error(`redis on ${port} did not start:\n${out}`);
    await sleep(50);
  }
}

async function stopProc(p: Proc, signal: NodeJS.Signals = 'SIGTERM'): Promise<void> {
  const c = p.child;
  if (!c || c.exitCode !== null) return;
  const exited = new Promise<void>((r) => c.once('exit', () => r()));
  c.kill(signal);
  await Promise.race([exited, sleep(5000).then(() => c.kill('SIGKILL'))]);
  p.child = null;
}

export async function cli(port: number, ...args: string[]): Promise<string> {
  return (await run(REDIS_CLI, ['-p', String(port), ...args])).stdout.trim();
}

export interface RedisClusterHandle {
  /** `redis://127.0.0.1:<port>` of each master. */
  urls: string[];
  ports: number[];
  /** `REDIS_CLUSTER_NODES` for the server. */
  env: string;
  stop(): Promise<void>;
}

/** A real 3-master Redis Cluster (no replicas), ready (cluster_state:ok) when this resolves. */
export async function startRedisCluster(): Promise<RedisClusterHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'sip-edge-cluster-'));
  const procs: Proc[] = [];
  try {
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      // The cluster bus port is named too: its default (port + 10000) may be taken by another test.
      const busPort = await freePort();
      const args = [
        '--port', String(port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no',
        '--cluster-enabled', 'yes', '--cluster-port', String(busPort), '--cluster-config-file', join(dir, `nodes-${port}.conf`), '--cluster-node-timeout', '2000',
        '--dir', dir, '--protected-mode', 'no',
      ];
      procs.push({ port, args, child: await spawnRedis(args, port) });
    }
    await run(REDIS_CLI, ['--cluster', 'create', ...procs.map((p) => `127.0.0.1:${p.port}`), '--cluster-replicas', '0', '--cluster-yes']);
    const deadline = Date.now() + 15_000;
    for (;;) {
      const states = await Promise.all(procs.map((p) => cli(p.port, 'cluster', 'info')));
      if (states.every((s) => s.includes('cluster_state:ok'))) break;
      if (Date.now() > deadline) throw new Error(`cluster not ok:\n${states.join('\n')}`);
      await sleep(100);
    }
  } catch (e) {
    for (const p of procs) await stopProc(p, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const urls = procs.map((p) => `redis://127.0.0.1:${p.port}`);
  return {
    urls,
    ports: procs.map((p) => p.port),
    env: urls.join(','),
    async stop() {
      for (const p of procs) await stopProc(p);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

export interface RedisSentinelHandle {
  name: string;
  masterPort: number;
  replicaPort: number;
  sentinelPorts: number[];
  /** `REDIS_SENTINELS` for the server. */
  env: string;
  /** The port the sentinels name as master now. */
  currentMaster(): Promise<number>;
  /** SIGKILL the server that is master now (a crash: the sentinels fail over). */
  killMaster(): Promise<number>;
  stop(): Promise<void>;
}

/** 1 master, 1 replica, 3 sentinels (quorum 2, down-after 1 s, failover timeout 5 s). */
export async function startRedisSentinel(name = 'sipedge'): Promise<RedisSentinelHandle> {
  const dir = mkdtempSync(join(tmpdir(), 'sip-edge-sentinel-'));
  const data: Proc[] = [];
  const sentinels: Proc[] = [];
  const all = (): Proc[] => [...data, ...sentinels];
  try {
    const masterPort = await freePort();
    const base = ['--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', dir, '--protected-mode', 'no'];
    const mArgs = ['--port', String(masterPort), ...base];
    data.push({ port: masterPort, args: mArgs, child: await spawnRedis(mArgs, masterPort) });
    const replicaPort = await freePort();
    const rArgs = ['--port', String(replicaPort), ...base, '--replicaof', '127.0.0.1', String(masterPort)];
    data.push({ port: replicaPort, args: rArgs, child: await spawnRedis(rArgs, replicaPort) });
    for (let i = 0; i < 3; i++) {
      const port = await freePort();
      const conf = join(dir, `sentinel-${port}.conf`);
      writeFileSync(
        conf,
        [
          `port ${port}`,
          'bind 127.0.0.1',
          `dir ${dir}`,
          `sentinel monitor ${name} 127.0.0.1 ${masterPort} 2`,
          `sentinel down-after-milliseconds ${name} 1000`,
          `sentinel failover-timeout ${name} 5000`,
          `sentinel parallel-syncs ${name} 1`,
          '',
        ].join('\n'),
      );
      const args = [conf, '--sentinel'];
      sentinels.push({ port, args, child: await spawnRedis(args, port) });
    }
    // The replica has synced, every sentinel has found it, and every sentinel has found the
    // other two (hello messages every 2 s): a sentinel that knows no peer can never reach
    // the quorum, and a master killed before that is never failed over.
    const deadline = Date.now() + 15_000;
    for (;;) {
      const link = await cli(replicaPort, 'info', 'replication');
      const seen = await Promise.all(sentinels.map((s) => cli(s.port, 'sentinel', 'replicas', name).catch(() => '')));
      const peers = await Promise.all(sentinels.map((s) => cli(s.port, 'sentinel', 'sentinels', name).catch(() => '')));
      const allPeers = peers.every((text, i) => sentinels.every((o, j) => j === i || text.includes(String(o.port))));
      if (link.includes('master_link_status:up') && seen.every((s) => s.includes(String(replicaPort))) && allPeers) break;
      if (Date.now() > deadline) throw new Error('sentinel set did not settle');
      await sleep(100);
    }
  } catch (e) {
    for (const p of all()) await stopProc(p, 'SIGKILL');
    rmSync(dir, { recursive: true, force: true });
    throw e;
  }
  const currentMaster = async (): Promise<number> => {
    const r = await cli(sentinels[0]!.port, 'sentinel', 'get-master-addr-by-name', name);
    return Number(r.split('\n')[1]);
  };
  return {
    name,
    masterPort: data[0]!.port,
    replicaPort: data[1]!.port,
    sentinelPorts: sentinels.map((s) => s.port),
    env: sentinels.map((s) => `127.0.0.1:${s.port}`).join(','),
    currentMaster,
    async killMaster() {
      const port = await currentMaster();
      const p = data.find((d) => d.port === port);
      if (p) await stopProc(p, 'SIGKILL');
      return port;
    },
    async stop() {
      for (const p of all()) await stopProc(p);
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
