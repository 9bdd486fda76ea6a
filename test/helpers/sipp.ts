import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './server-process.js';
import { freePort } from './redis-server.js';

export interface SippUser {
  user: string;
  domain: string;
  password: string;
}

export interface SippRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** Successful / failed call counts from SIPp's final statistics (-trace_stat). */
  successful: number;
  failed: number;
  /** SIPp's error log, when it wrote one. */
  errors: string;
}

export interface SippOptions {
  scenario: string;
  port: number;
  transport: 'udp' | 'tcp';
  users: SippUser[];
  /** Calls to place; default: one per user. */
  calls?: number;
  /** Calls per second; default 200. */
  rate?: number;
  /** Concurrent calls limit; default 100. */
  limit?: number;
  keys?: Record<string, string | number>;
  timeoutMs?: number;
  /** Duration of the scenarios' plain <pause/> (hold time, stale-nonce wait), ms. @default 0 */
  pauseMs?: number;
  /** Local port for SIPp; default: a free port (SIPp's own default is 5060, shared by every run). */
  localPort?: number;
}

/**
 * Runs SIPp (Debian `sip-tester`) against the server with an injection file of
 * users. Resolves when SIPp exits by itself; kills it by PID after timeoutMs.
 */
export async function runSipp(o: SippOptions): Promise<SippRun> {
  const dir = mkdtempSync(join(tmpdir(), 'sipp-'));
  const inf = join(dir, 'users.csv');
  writeFileSync(
    inf,
    'SEQUENTIAL\n' + o.users.map((u) => `${u.user};${u.domain};[authentication username=${u.user} password=${u.password}]`).join('\n') + '\n',
  );
  const keys = { expires: 3600, ...o.keys };
  const args = [
    '127.0.0.1:' + o.port,
    '-sf', join(ROOT, 'sipp-scenarios', o.scenario),
    '-inf', inf,
    '-t', o.transport === 'udp' ? 'u1' : 't1',
    '-i', '127.0.0.1',
    '-p', String(o.localPort ?? (await freePort())),
    '-m', String(o.calls ?? o.users.length),
    '-r', String(o.rate ?? 200),
    '-l', String(o.limit ?? 100),
    '-d', String(o.pauseMs ?? 0),
    '-bg', // no interactive screen
    '-nostdin',
    '-trace_err',
    '-error_file', join(dir, 'errors.log'),
    '-trace_stat', '-stf', join(dir, 'stat.csv'),
    '-timeout', String(Math.ceil((o.timeoutMs ?? 60_000) / 1000)),
    '-timeout_error',
    '-max_recv_loops', '1000',
    '-recv_timeout', '10000',
  ];
  for (const [k, v] of Object.entries(keys)) args.push('-key', k, String(v));
  // -bg forks; run in the foreground instead so the exit status is SIPp's own.
  const fg = args.filter((a) => a !== '-bg');
  return new Promise((resolve, reject) => {
    const child = spawn('sipp', fg, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), (o.timeoutMs ?? 60_000) + 10_000);
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      const stat = readStat(dir);
      let errors = '';
      for (const f of readdirSync(dir)) if (f.includes('error')) errors += readFileSync(join(dir, f), 'utf8');
      // SIPp notes when it was itself not scheduled in time ("minor watchdog") on a busy
      // machine: not a protocol event, so not an error of the server under test.
      errors = errors
        .replace(/\S+\t\S+\t\S+: Overload warning: the (minor|major) watchdog timer \d+ms has been tripped \(\d+\), \d+ trips remaining\.\n?/g, '')
        .replace(/^The following events occurred:\n?$/, '')
        .trim();
      rmSync(dir, { recursive: true, force: true });
      resolve({ code, stdout, stderr, successful: stat.successful, failed: stat.failed, errors });
    });
  });
}

function readStat(dir: string): { successful: number; failed: number } {
  const f = readdirSync(dir).find((n) => n.endsWith('.csv') && n.startsWith('stat'));
  if (!f) return { successful: -1, failed: -1 };
  const lines = readFileSync(join(dir, f), 'utf8').trim().split('\n');
  const head = lines[0].split(';');
  const last = lines[lines.length - 1].split(';');
  const col = (name: string): number => Number(last[head.indexOf(name)]);
  return { successful: col('SuccessfulCall(C)'), failed: col('FailedCall(C)') };
}
