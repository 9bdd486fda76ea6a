/**
 * Runs test/support/sipjs-phone.mjs (SIP.js in Node on library defaults) as a
 * process of its own, registering endpoint `e` over `server` (ws://…), and collects
 * the events it reports. The caller stops it by its PID (`child.kill`).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { ROOT } from './server-process.js';
import type { Endpoint } from './edge.js';

const PHONE = fileURLToPath(new URL('./sipjs-phone.mjs', import.meta.url));

export interface PhoneEvent {
  event: 'state' | 'message' | 'ping' | 'disconnect' | 'gruu' | 'invite' | 'sent';
  status?: number;
  state?: string;
  body?: string;
  uri?: string;
  pub?: string;
  temp?: string | null;
}

export interface PhoneProcess {
  child: ChildProcess;
  /** Every event so far, in order. */
  events: PhoneEvent[];
  /** How many events of one kind so far. */
  count(kind: PhoneEvent['event']): number;
}

export function startPhoneProcess(server: string, e: Endpoint, opts: { gruu?: boolean; messageTo?: string; messageCount?: number } = {}): PhoneProcess {
  const child = spawn(process.execPath, [PHONE], {
    cwd: ROOT,
    env: { PATH: process.env.PATH, SERVER: server, USERNAME: e.username, DOMAIN: e.account.sipDomain, PASSWORD: e.password, GRUU: opts.gruu ? '1' : '0', MESSAGE_TO: opts.messageTo ?? '', MESSAGE_COUNT: String(opts.messageCount ?? 0) },
    stdio: ['ignore', 'pipe', 'inherit'],
  });
  const events: PhoneEvent[] = [];
  createInterface({ input: child.stdout! }).on('line', (l) => events.push(JSON.parse(l) as PhoneEvent));
  return { child, events, count: (kind) => events.filter((x) => x.event === kind).length };
}
