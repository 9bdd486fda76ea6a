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
  event: 'state' | 'message' | 'ping' | 'disconnect' | 'gruu' | 'invite' | 'sent' | 'request' | 'call-in' | 'done';
  status?: number;
  state?: string;
  body?: string;
  uri?: string;
  pub?: string;
  temp?: string | null;
  /** `request`: the method of a request read off the WebSocket; `call-in`: Established/Terminated. */
  method?: string;
  callId?: string | null;
  /** `done`: the answer to a command. */
  id?: number;
  invite?: number | null;
  bye?: number | null;
  cancelled?: boolean;
  error?: string;
}

/** A command for the phone (test/support/sipjs-phone.mjs "Commands"). */
export type PhoneCommand =
  | { cmd: 'call'; to: string; callId?: string; holdMs?: number; cancel?: boolean }
  | { cmd: 'message'; to: string; callId?: string; body?: string };

export interface PhoneProcess {
  child: ChildProcess;
  /** Every event so far, in order. */
  events: PhoneEvent[];
  /** How many events of one kind so far. */
  count(kind: PhoneEvent['event']): number;
  /** Runs a command (a call or a MESSAGE); resolves with its `done` event. */
  command(c: PhoneCommand, timeoutMs?: number): Promise<PhoneEvent>;
}

export function startPhoneProcess(
  server: string,
  e: Endpoint,
  opts: { gruu?: boolean; messageTo?: string; messageCount?: number; answer?: boolean } = {},
): PhoneProcess {
  const child = spawn(process.execPath, [PHONE], {
    cwd: ROOT,
    env: {
      PATH: process.env.PATH,
      SERVER: server,
      USERNAME: e.username,
      DOMAIN: e.account.sipDomain,
      PASSWORD: e.password,
      GRUU: opts.gruu ? '1' : '0',
      ANSWER: opts.answer ? '1' : '0',
      MESSAGE_TO: opts.messageTo ?? '',
      MESSAGE_COUNT: String(opts.messageCount ?? 0),
    },
    stdio: ['pipe', 'pipe', 'inherit'],
  });
  const events: PhoneEvent[] = [];
  const waiting = new Map<number, (ev: PhoneEvent) => void>();
  createInterface({ input: child.stdout! }).on('line', (l) => {
    const ev = JSON.parse(l) as PhoneEvent;
    events.push(ev);
    if (ev.event === 'done' && ev.id !== undefined) waiting.get(ev.id)?.(ev);
  });
  let next = 0;
  const command = (c: PhoneCommand, timeoutMs = 30_000): Promise<PhoneEvent> =>
    new Promise((resolve, reject) => {
      const id = ++next;
      const t = setTimeout(() => {
        waiting.delete(id);
        reject(new Error(`${e.username}: no answer to ${JSON.stringify(c)} within ${timeoutMs} ms`));
      }, timeoutMs);
      waiting.set(id, (ev) => {
        clearTimeout(t);
        waiting.delete(id);
        resolve(ev);
      });
      child.stdin!.write(JSON.stringify({ id, ...c }) + '\n');
    });
  return { child, events, count: (kind) => events.filter((x) => x.event === kind).length, command };
}
