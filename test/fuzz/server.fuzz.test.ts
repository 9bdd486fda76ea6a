/**
 * The CI share of the fuzz harness (the long run is `node test/fuzz/run.mjs
 * --messages 1000000`, README "Hardening"): mutation-based fuzzing seeded from
 * the repository's corpus, against the built parser in process and the real
 * server over UDP, TCP and WS; a fifth of the server's messages are REGISTERs
 * that pass digest authentication with hostile headers (registrar-fuzz.mjs), so
 * the registrar and the store are fuzzed too. FUZZ_MESSAGES scales the server share.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadCorpus } from './lib/corpus.mjs';
import { messages } from './lib/mutate.mjs';
import { fuzzParser } from './lib/parser-fuzz.mjs';
import { fuzzServer } from './lib/server-fuzz.mjs';
import { provisionEndpoint } from './lib/registrar-fuzz.mjs';
import { FUZZ_PARTNER, ROOT, scrape, startFuzzServer } from './lib/server.mjs';
import type { Ports } from '../support/edge-process.mjs';

const SERVER_MESSAGES = Number(process.env.FUZZ_MESSAGES ?? 45_000);
const PARSER_MESSAGES = Number(process.env.FUZZ_PARSER_MESSAGES ?? 60_000);
const SEED = Number(process.env.FUZZ_SEED ?? Date.now() % 100_000);

/** The listeners the fuzzer drives: all on (startFuzzServer switches only TLS and WSS off). */
function fuzzedPorts(p: Ports): { udp: number; tcp: number; ws: number; http: number } {
  const { udp, tcp, ws, http } = p;
  if (udp === null || tcp === null || ws === null || http === null) throw new Error(`fuzz server without a UDP, TCP, WS or HTTP listener: ${JSON.stringify(p)}`);
  return { udp, tcp, ws, http };
}

describe(`mutation fuzzing from the corpus (seed ${SEED})`, () => {
  const corpus = loadCorpus();
  let server: Awaited<ReturnType<typeof startFuzzServer>>;

  beforeAll(async () => {
    server = await startFuzzServer();
  }, 30_000);
  afterAll(async () => {
    await server?.stop();
  });

  it(`drives ${PARSER_MESSAGES.toLocaleString('en')} mutated messages through the parser, header parsers, response builder and framer: none throws, none is slow`, async () => {
    const r = await fuzzParser({ root: ROOT, corpus, seed: SEED, count: PARSER_MESSAGES });
    expect(r.thrownSamples).toEqual([]);
    expect(r.thrown).toBe(0);
    expect(r.slowestMs).toBeLessThan(50);
    expect(r.accepted).toBeGreaterThan(PARSER_MESSAGES / 20); // the mutations still reach past the parser
  }, 120_000);

  it(`sends ${SERVER_MESSAGES.toLocaleString('en')} mutated messages to the server over UDP, TCP and WS: it answers every probe, never crashes, logs no error, rejects nothing unhandled, never stalls 50 ms, stays bounded in memory`, async () => {
    const alive = (): boolean => server.child.exitCode === null && server.child.signalCode === null;
    const ports = fuzzedPorts(server.ports);
    const authenticated = await provisionEndpoint(ports.http, FUZZ_PARTNER);
    const stats = await fuzzServer({ ports, messages: messages(SEED + 1, corpus), count: SERVER_MESSAGES, alive, sampleEvery: 40, authenticated });
    expect(alive()).toBe(true);
    expect(stats.sent.udp + stats.sent.tcp + stats.sent.ws).toBe(SERVER_MESSAGES);
    expect(stats.probeRounds).toBeGreaterThan(SERVER_MESSAGES / 400);
    // Error-level lines include 'request handler failed' (an unexpected exception → 500);
    // a 500 by design (RFC 3261 §10.3 step 7, out-of-order CSeq) logs nothing.
    expect(server.problems).toEqual([]);
    const m = await scrape(ports.http);
    expect(m.process_unhandled_rejections_total).toBe(0);
    // A fifth of the messages passed digest auth with hostile headers and reached the store.
    expect(stats.authenticated).toBeGreaterThan(SERVER_MESSAGES / 10);
    const registered = Object.entries(m).filter(([k]) => k.startsWith('sip_register_outcomes_total{outcome="registered"')).reduce((n, [, v]) => n + (v as number), 0);
    expect(registered).toBeGreaterThan(0);
    // Own-CPU stalls: a loaded CI machine descheduling the process is not the server's doing.
    expect(m.sip_event_loop_busy_stall_max_seconds).toBeLessThan(0.05);
    expect(m.process_resident_memory_bytes).toBeLessThan(400 * 1024 * 1024);
  }, 150_000);
});
