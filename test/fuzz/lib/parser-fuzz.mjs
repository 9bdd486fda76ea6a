/**
 * Mutation fuzzing of the message layer in process (the built `dist/`): every
 * message goes through parseMessage, every header parser the server applies to a
 * request, the response builder, and the stream framer with random chunking.
 * Nothing may throw; no message may take longer than a few milliseconds.
 */
import { performance } from 'node:perf_hooks';
import { pathToFileURL } from 'node:url';
import { messages, prng } from './mutate.mjs';

/**
 * @param {{ root: string, corpus: {data: Buffer}[], seed: number, count: number, onProgress?: (n: number) => void }} o
 */
export async function fuzzParser(o) {
  const dist = (p) => import(pathToFileURL(`${o.root}dist/${p}`).href);
  const { parseMessage } = await dist('sip/parser.js');
  const h = await dist('sip/headers.js');
  const { parseUri } = await dist('sip/uri.js');
  const { buildResponse } = await dist('sip/response.js');
  const { StreamFramer } = await dist('transport/framer.js');

  const rand = prng(o.seed ^ 0x5bd1e995);
  const gen = messages(o.seed, o.corpus);
  const result = { messages: 0, accepted: 0, rejected: 0, thrown: 0, thrownSamples: [], slowestMs: 0, seconds: 0 };
  const started = performance.now();
  let framer = new StreamFramer({ maxMessageSize: 65535 });

  const run = (m) => {
    const r = parseMessage(m);
    if (r.ok) exercise(h, parseUri, buildResponse, r.msg);
    else if (r.request) buildResponse(r.request, 400, 'Bad Request', { toTag: 'x' });
    return r;
  };
  for (let i = 0; i < o.count; i++) {
    const m = gen.next().value;
    const t0 = performance.now();
    try {
      const r = run(m);
      if (r.ok) result.accepted++;
      else result.rejected++;
      // The framer sees the same bytes as one long TCP stream, cut at random points;
      // after a framing error a real connection is closed, so a fresh stream starts.
      let at = 0;
      while (at < m.length) {
        const n = 1 + Math.floor(rand() * Math.min(m.length - at, 4096));
        const failed = framer.push(m.subarray(at, at + n)).some((ev) => ev.type === 'error');
        at += n;
        if (failed) {
          framer = new StreamFramer({ maxMessageSize: 65535 });
          break;
        }
      }
    } catch (err) {
      result.thrown++;
      if (result.thrownSamples.length < 5) result.thrownSamples.push({ error: String(err?.stack ?? err).slice(0, 500), message: m.toString('latin1').slice(0, 300) });
    }
    let dt = performance.now() - t0;
    if (dt > 5) {
      // Wall time includes GC and the OS scheduling other work; the parser's own cost
      // is the fastest of three more runs of the same message.
      for (let k = 0; k < 3; k++) {
        const t = performance.now();
        try {
          run(m);
        } catch {
          // counted above
        }
        dt = Math.min(dt, performance.now() - t);
      }
    }
    if (dt > result.slowestMs) result.slowestMs = dt;
    result.messages++;
    if (o.onProgress && (i + 1) % 200_000 === 0) o.onProgress(i + 1);
  }
  result.seconds = (performance.now() - started) / 1000;
  result.slowestMs = +result.slowestMs.toFixed(2);
  return result;
}

/** What the router and registrar read from a request, in the same way. */
function exercise(h, parseUri, buildResponse, msg) {
  const vias = h.getListValues(msg, 'via');
  for (const v of vias) {
    const via = h.parseVia(v);
    if (via) h.formatVia(via);
  }
  h.parseCSeq(h.getHeader(msg, 'cseq') ?? '');
  h.parseNameAddr(h.getHeader(msg, 'to') ?? '');
  h.parseNameAddr(h.getHeader(msg, 'from') ?? '');
  const exp = h.getHeader(msg, 'expires');
  if (exp !== undefined) h.parseExpires(exp);
  for (const a of h.getHeaders(msg, 'authorization')) h.parseDigestCredentials(a);
  for (const a of h.getHeaders(msg, 'proxy-authorization')) h.parseDigestCredentials(a);
  h.getListValues(msg, 'require');
  h.getListValues(msg, 'supported');
  h.getListValues(msg, 'path');
  if (msg.kind === 'request') {
    parseUri(msg.uri ?? '');
    if (h.getHeader(msg, 'contact') !== undefined) h.parseContacts(msg);
    if (vias.length > 0) buildResponse(msg, 200, 'OK', { toTag: 'fz', headers: [['Server', 'fuzz']] });
  }
}
