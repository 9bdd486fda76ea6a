import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { ROOT } from './server-process.js';
import { freePort } from './ports.mjs';
import { injection } from './sipp-injection.mjs';

export { injection };

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
  /**
   * SIPp's error log without the notes of a busy machine (its own watchdog;
   * a retransmission reaching it after its call ended well): not protocol faults.
   */
  errors: string;
  /** Every message sent and received, with `traceMessages`; else ''. */
  messages: string;
}

export interface SippOptions {
  scenario: string;
  /** The edge's address (a fleet test has several nodes). @default '127.0.0.1' */
  host?: string;
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
  /** `-cid_str`: Call-ID pattern (caller and callee share it: SIPp maps an INVITE to a call by Call-ID). */
  cidStr?: string;
  /** Record every message SIPp sends and receives (-trace_msg) into {@link SippRun.messages}. */
  traceMessages?: boolean;
  /** `-recv_timeout` for receives without their own, ms; null = none (calls held open). @default 10000 */
  recvTimeoutMs?: number | null;
  localPort?: number;
  /** `-i`: the address SIPp listens and sends from (a carrier on 127.0.0.7). @default '127.0.0.1' */
  localIp?: string;
  /**
   * When this settles, SIPp is stopped: SIGUSR1 by default (it quits once its calls end, final
   * statistics written — which a SIPp that auto-answered OPTIONS, `-aa`, only does 30 s
   * later), or SIGKILL (no final statistics; {@link SippRun.messages} is complete, SIPp writes
   * each message as it goes).
   */
  stop?: Promise<unknown>;
  stopSignal?: 'SIGUSR1' | 'SIGKILL';
  /** More SIPp options, e.g. `-rtp_echo` with `-mp <port>`. */
  extraArgs?: string[];
}


/**
 * The one SIPp runner of the tests (Debian `sip-tester`): users from an injection
 * file, in the foreground (so the exit status is SIPp's own), killed by PID after
 * timeoutMs; counts from its final statistics (-trace_stat).
 */
export async function runSipp(o: SippOptions): Promise<SippRun> {
  const dir = mkdtempSync(join(tmpdir(), 'sipp-'));
  const inf = join(dir, 'users.csv');
  writeFileSync(inf, injection(o.users));
  const timeoutMs = o.timeoutMs ?? 60_000;
  const recvTimeoutMs = o.recvTimeoutMs === undefined ? 10_000 : o.recvTimeoutMs;
  const args = [
    `${o.host ?? '127.0.0.1'}:${o.port}`,
    '-sf', join(ROOT, 'sipp-scenarios', o.scenario),
    '-inf', inf,
    '-t', o.transport === 'udp' ? 'u1' : 't1',
    '-i', o.localIp ?? '127.0.0.1',
    '-p', String(o.localPort ?? (await freePort())),
    '-m', String(o.calls ?? o.users.length),
    '-r', String(o.rate ?? 200),
    '-l', String(o.limit ?? 100),
    '-d', String(o.pauseMs ?? 0),
    '-nostdin',
    '-trace_err', '-error_file', join(dir, 'errors.log'),
    '-trace_stat', '-stf', join(dir, 'stat.csv'),
    '-timeout', String(Math.ceil(timeoutMs / 1000)),
    '-timeout_error',
    '-max_recv_loops', '1000',
  ];
  if (recvTimeoutMs !== null) args.push('-recv_timeout', String(recvTimeoutMs));
  if (o.cidStr) args.push('-cid_str', o.cidStr);
  if (o.extraArgs) args.push(...o.extraArgs);
  if (o.traceMessages) args.push('-trace_msg', '-message_file', join(dir, 'messages.log'));
  for (const [k, v] of Object.entries({ expires: 3600, ...o.keys })) args.push('-key', k, String(v));
  return new Promise((resolve, reject) => {
    const child = spawn('sipp', args, { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d: Buffer) => (stdout += d.toString()));
    child.stderr.on('data', (d: Buffer) => (stderr += d.toString()));
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs + 10_000);
    void o.stop?.finally(() => {
      if (child.exitCode === null) child.kill(o.stopSignal ?? 'SIGUSR1');
    });
    child.on('error', (e) => {
      clearTimeout(timer);
      reject(e);
    });
    child.on('exit', (code) => {
      clearTimeout(timer);
      const read = (f: string): string => (readdirSync(dir).includes(f) ? readFileSync(join(dir, f), 'utf8') : '');
      const stat = readStat(read('stat.csv'));
      // One entry per timestamped line and what follows it (a quoted message spans lines,
      // and SIPp may cut it short without its closing quote).
      const errors = read('errors.log')
        .replace(/^The following events occurred:\n?/, '')
        .split(/\n(?=\d{4}-\d\d-\d\d\t)/)
        .filter((entry) => !/^\S+\t\S+\t\S+: (Overload warning: the (minor|major) watchdog timer|Dead call \S+ \(successful\), received)/.test(entry))
        .join('\n')
        .trim();
      const messages = read('messages.log');
      rmSync(dir, { recursive: true, force: true });
      resolve({ code, stdout, stderr, successful: stat.successful, failed: stat.failed, errors, messages });
    });
  });
}

/** Successful / failed call counts of the last line of SIPp's statistics file; -1 when it wrote none. */
function readStat(text: string): { successful: number; failed: number } {
  const lines = text.trim().split('\n');
  if (lines.length < 2) return { successful: -1, failed: -1 };
  const head = (lines[0] as string).split(';');
  const last = (lines[lines.length - 1] as string).split(';');
  const col = (name: string): number => Number(last[head.indexOf(name)]);
  return { successful: col('SuccessfulCall(C)'), failed: col('FailedCall(C)') };
}
