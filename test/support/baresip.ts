/**
 * baresip (Debian `baresip`), headless, as a test peer: a configuration directory of its
 * own (one module, no audio or video devices, an accounts file) for one account
 * (test/e2e/softphone.test.ts, test/integration/frozen-flows.test.ts).
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import type { Endpoint } from './edge.js';

export const BARESIP = '/usr/bin/baresip';
const MODULE_PATH = '/usr/lib/baresip/modules';

export type Transport = 'udp' | 'tcp' | 'tls';

export interface Baresip {
  pid: number;
  /** stdout + stderr so far. */
  output(): string;
  /** Resolves with the first match of `re` in the output; rejects after timeoutMs or if baresip exits. */
  waitFor(re: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** SIGTERM (baresip unregisters and quits), wait for exit; SIGKILL after 5 s. Resolves with the exit code. */
  stop(): Promise<number | null>;
}

export const running = new Set<ChildProcess>();

/** Starts baresip with a config directory of its own for one account. */
export function startBaresip(o: { endpoint: Endpoint; transport: Transport; serverPort: number; caFile?: string }): Baresip {
  const dir = mkdtempSync(join(tmpdir(), 'sip-edge-baresip-'));
  writeFileSync(
    join(dir, 'config'),
    [
      'poll_method\t\tepoll',
      'sip_listen\t\t127.0.0.1:0',
      ...(o.caFile ? [`sip_cafile\t\t${o.caFile}`] : []),
      `module_path\t\t${MODULE_PATH}`,
      'module\t\t\taccount.so',
      '',
    ].join('\n'),
  );
  const { username, password, account } = o.endpoint;
  const outbound = `sip:127.0.0.1:${o.serverPort};transport=${o.transport}`;
  writeFileSync(
    join(dir, 'accounts'),
    `<sip:${username}@${account.sipDomain};transport=${o.transport}>;auth_pass=${password};outbound="${outbound}";regint=600\n`,
  );
  const child = spawn(BARESIP, ['-f', dir], { stdio: ['ignore', 'pipe', 'pipe'] });
  running.add(child);
  let text = '';
  const waiters = new Set<() => void>();
  const onData = (d: Buffer): void => {
    text += d.toString();
    for (const w of waiters) w();
  };
  child.stdout.on('data', onData);
  child.stderr.on('data', onData);
  const exited = new Promise<number | null>((resolve) =>
    child.on('exit', (code) => {
      running.delete(child);
      rmSync(dir, { recursive: true, force: true });
      for (const w of waiters) w();
      resolve(code);
    }),
  );
  return {
    pid: child.pid as number,
    output: () => text,
    waitFor(re, timeoutMs = 10_000) {
      return new Promise((resolve, reject) => {
        const check = (): void => {
          const m = re.exec(text);
          if (m) {
            done();
            resolve(m);
          } else if (child.exitCode !== null || child.signalCode !== null) {
            done();
            reject(new Error(`baresip exited before printing ${re}:\n${text}`));
          }
        };
        const timer = setTimeout(() => {
          done();
          reject(new Error(`baresip did not print ${re} within ${timeoutMs} ms:\n${text}`));
        }, timeoutMs);
        const done = (): void => {
          clearTimeout(timer);
          waiters.delete(check);
        };
        waiters.add(check);
        check();
      });
    },
    async stop() {
      if (child.exitCode !== null || child.signalCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const t = setTimeout(() => child.kill('SIGKILL'), 5000);
      const code = await exited;
      clearTimeout(t);
      return code;
    },
  };
}

/** "baresip v1.0.0" — the installed binary's own banner. */
export function baresipRelease(): string {
  const r = spawnSync(BARESIP, ['-h'], { encoding: 'utf8' });
  const m = /baresip v\d+\.\d+\.\d+/.exec(`${r.stdout}${r.stderr}`);
  if (!m) throw new Error(`cannot read the baresip version:\n${r.stdout}${r.stderr}`);
  return m[0];
}

