#!/usr/bin/env node
/**
 * The long fuzz run (README "Hardening"): mutation-based fuzzing seeded from the
 * repository's corpus, against the parser in process and against the real server
 * over UDP, TCP and WS.
 *
 *   npm run build && node test/fuzz/run.mjs --messages 1000000 [--seed 1] [--parser 1000000]
 *       [--transports udp,tcp,ws] [--redis redis://…] [--json out.json] [--priority=-5]
 *
 * --priority renices the server process (root may raise it), so that on a busy
 * machine the raw event-loop figure measures the server rather than the scheduler.
 *
 * Verdict (exit 0 only if all hold): the server never exits, answers a probe on
 * every transport after every batch, logs no error-level line, counts no
 * unhandled rejection, its event loop never stalls over 50 ms of its own CPU
 * work, its RSS stays under --max-rss-mb (default 400) and does not keep
 * growing; the parser never throws and stays under 50 ms per message.
 */
import { setPriority } from 'node:os';
import { parseArgs } from 'node:util';
import { writeFileSync } from 'node:fs';
import { loadCorpus } from './lib/corpus.mjs';
import { messages } from './lib/mutate.mjs';
import { FUZZ_PARTNER, startFuzzServer, scrape, ROOT } from './lib/server.mjs';
import { provisionEndpoint } from './lib/registrar-fuzz.mjs';
import { fuzzServer } from './lib/server-fuzz.mjs';
import { fuzzParser } from './lib/parser-fuzz.mjs';

const { values } = parseArgs({
  options: {
    messages: { type: 'string', default: '1000000' },
    parser: { type: 'string' },
    seed: { type: 'string', default: '1' },
    transports: { type: 'string', default: 'udp,tcp,ws' },
    redis: { type: 'string' },
    json: { type: 'string' },
    'max-rss-mb': { type: 'string', default: '400' },
    'max-stall-ms': { type: 'string', default: '50' },
    quiet: { type: 'boolean', default: false },
    priority: { type: 'string' },
  },
});

const count = Number(values.messages);
const parserCount = Number(values.parser ?? values.messages);
const seed = Number(values.seed);
const maxRss = Number(values['max-rss-mb']) * 1024 * 1024;
const maxStall = Number(values['max-stall-ms']) / 1000;
const log = (...a) => {
  if (!values.quiet) console.error(...a);
};

const corpus = loadCorpus();
log(`corpus: ${corpus.length} messages; seed ${seed}`);

const started = Date.now();
const parser = await fuzzParser({ root: ROOT, corpus, seed, count: parserCount, onProgress: (n) => log(`parser: ${n}`) });
log(`parser: ${parser.messages} messages in ${parser.seconds.toFixed(1)} s, ${parser.accepted} accepted, ${parser.thrown} thrown, slowest ${parser.slowestMs.toFixed(2)} ms`);

const server = await startFuzzServer(values.redis ? { REDIS_URL: values.redis } : {});
if (values.priority !== undefined) setPriority(server.child.pid, Number(values.priority));
let stats;
let failure = null;
try {
  const authenticated = await provisionEndpoint(server.ports.http, FUZZ_PARTNER);
  stats = await fuzzServer({
    ports: server.ports,
    authenticated,
    messages: messages(seed + 1, corpus),
    count,
    transports: values.transports.split(','),
    alive: () => server.child.exitCode === null && server.child.signalCode === null,
    onSample: (s) =>
      log(
        `server: ${s.sent} sent, rss ${(s.rssBytes / 1048576).toFixed(0)} MB, heap ${(s.heapBytes / 1048576).toFixed(0)} MB, ` +
          `loop max ${(s.loopDelayMaxSeconds * 1000).toFixed(1)} ms (own work ${(s.loopBusyStallMaxSeconds * 1000).toFixed(1)} ms), transactions ${s.transactions}`,
      ),
  });
} catch (err) {
  failure = err instanceof Error ? err.message : String(err);
}
const alive = server.child.exitCode === null && server.child.signalCode === null;
const metrics = alive ? await scrape(server.ports.http).catch(() => null) : null;
const exit = await server.stop();

const samples = stats?.samples ?? [];
const rss = samples.map((s) => s.rssBytes);
const half = Math.floor(rss.length / 2);
const firstHalfMax = Math.max(0, ...rss.slice(0, Math.max(1, half)));
const secondHalfMax = Math.max(0, ...rss.slice(half));
const summary = {
  seed,
  corpus: corpus.length,
  parser,
  server: {
    messages: stats ? stats.sent.udp + stats.sent.tcp + stats.sent.ws : null,
    byTransport: stats?.sent ?? null,
    megabytes: stats ? +(stats.bytes / 1048576).toFixed(1) : null,
    reconnects: stats?.reconnects ?? null,
    probeRounds: stats?.probeRounds ?? null,
    authenticatedRegisters: stats?.authenticated ?? null,
    registerOutcomes: Object.fromEntries(
      Object.entries(metrics ?? {})
        .filter(([k]) => k.startsWith('sip_register_outcomes_total{'))
        .map(([k, v]) => [k.slice(k.indexOf('{')), v]),
    ),
    slowestProbeMs: stats ? +stats.maxProbeMs.toFixed(1) : null,
    crashed: !alive,
    exit,
    errorLogLines: server.problems.length,
    errorSamples: server.problems.slice(0, 5).map((p) => ({ msg: p.msg, err: p.err?.message ?? p.err })),
    unhandledRejections: metrics?.process_unhandled_rejections_total ?? null,
    loopDelayMaxMs: metrics ? +(metrics.sip_event_loop_delay_max_seconds * 1000).toFixed(1) : null,
    loopOwnStallMaxMs: metrics ? +(metrics.sip_event_loop_busy_stall_max_seconds * 1000).toFixed(1) : null,
    rssMaxMb: rss.length ? +(Math.max(...rss) / 1048576).toFixed(0) : null,
    rssFirstHalfMaxMb: +(firstHalfMax / 1048576).toFixed(0),
    rssSecondHalfMaxMb: +(secondHalfMax / 1048576).toFixed(0),
    failure,
  },
  seconds: +((Date.now() - started) / 1000).toFixed(1),
};

const problems = [];
if (parser.thrown > 0) problems.push(`parser threw ${parser.thrown} times`);
if (parser.slowestMs > 50) problems.push(`parser took ${parser.slowestMs.toFixed(1)} ms on one message`);
if (failure) problems.push(`server run: ${failure}`);
if (!alive) problems.push('server process exited');
if (server.problems.length > 0) problems.push(`${server.problems.length} error-level log lines`);
if (summary.server.unhandledRejections !== 0) problems.push('unhandled rejections');
if (metrics && metrics.sip_event_loop_busy_stall_max_seconds > maxStall) problems.push(`event loop stalled ${summary.server.loopOwnStallMaxMs} ms`);
if (rss.length && Math.max(...rss) > maxRss) problems.push(`RSS reached ${summary.server.rssMaxMb} MB`);
if (rss.length >= 4 && secondHalfMax > firstHalfMax * 1.5 + 64 * 1048576) problems.push('RSS kept growing');
summary.verdict = problems.length === 0 ? 'pass' : 'fail';
summary.problems = problems;

const text = JSON.stringify(summary, null, 2);
if (values.json) writeFileSync(values.json, text + '\n');
console.log(text);
process.exitCode = problems.length === 0 ? 0 : 1;
