/**
 * Property-based fuzzing (fast-check) of the message layer: for inputs drawn
 * from the SIP grammar and from raw bytes, the parser, the header parsers, the
 * response builder and the stream framer never throw, keep their bounds, and
 * agree with the generator on what well-formed input means. A failing property
 * prints its seed and shrunk counterexample; FUZZ_RUNS scales the run count.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  getHeader,
  getHeaders,
  getListValues,
  parseContacts,
  parseCSeq,
  parseDigestCredentials,
  parseExpires,
  parseNameAddr,
  parseVia,
  splitHeaderList,
} from '../../src/sip/headers.js';
import type { SipMessage } from '../../src/sip/message.js';
import { parseMessage, type ParseLimits } from '../../src/sip/parser.js';
import { buildResponse, serializeMessage } from '../../src/sip/response.js';
import { parseUri } from '../../src/sip/uri.js';
import { StreamFramer } from '../../src/transport/framer.js';

const RUNS = Number(process.env.FUZZ_RUNS ?? 1500);
/** Per-test time limit, scaled for long runs (FUZZ_RUNS=30000 and more). */
const TIMEOUT = Math.max(30_000, RUNS * 40);
const LIMITS: ParseLimits = { maxMessageSize: 65535, maxHeaders: 128, maxLineLength: 8192 };

// ---- arbitraries from the SIP grammar (RFC 3261 §25) -------------------------

const alnum = fc.stringMatching(/^[a-z0-9]{1,12}$/);
const token = fc.stringMatching(/^[A-Za-z0-9\-.!%*_+`'~]{1,16}$/);
const host = fc.oneof(
  fc.tuple(alnum, alnum).map(([a, b]) => `${a}.${b}`),
  fc.ipV4(),
  fc.ipV6().map((a) => `[${a}]`),
);
const port = fc.option(fc.integer({ min: 1, max: 65535 }), { nil: undefined });
const sipUri = fc.record({ scheme: fc.constantFrom('sip', 'sips'), user: fc.option(alnum, { nil: undefined }), host, port }).map(
  (u) => `${u.scheme}:${u.user ? `${u.user}@` : ''}${u.host}${u.port ? `:${u.port}` : ''}`,
);
const branch = alnum.map((b) => `z9hG4bK${b}`);
const method = fc.constantFrom('REGISTER', 'OPTIONS', 'INVITE', 'ACK', 'BYE', 'CANCEL', 'MESSAGE', 'PUBLISH');

/** Hostile header values: grammar fragments, separators, quotes, escapes, control bytes. */
const hostileValue = fc
  .array(
    fc.oneof(
      token,
      sipUri,
      fc.constantFrom(';', ',', '"', '\\', '<', '>', '=', ':', '@', '%', '%zz', '*', ' ', '\t', '\r\n ', 'expires=', 'tag=', 'branch=', 'Digest ', 'q=0.5', '+sip.instance="<urn:x>"', 'reg-id=1', '\u0000', '\u00ff'),
      fc.string({ maxLength: 8 }),
    ),
    { maxLength: 24 },
  )
  .map((parts) => parts.join(''));

const headerName = fc.constantFrom(
  'Via', 'v', 'From', 'f', 'To', 't', 'Call-ID', 'i', 'CSeq', 'Contact', 'm', 'Expires', 'Content-Length', 'l',
  'Authorization', 'Require', 'Supported', 'Path', 'User-Agent', 'Max-Forwards', 'X-Fuzz',
);

/** A message shaped like SIP with arbitrary header values (mostly parseable, often semantically wrong). */
const sipShaped = fc
  .record({
    method,
    uri: fc.oneof(sipUri, hostileValue),
    version: fc.constantFrom('SIP/2.0', 'SIP/2.0', 'SIP/2.0', 'sip/2.0', 'SIP/3.0', 'SIP/2'),
    headers: fc.array(fc.tuple(headerName, hostileValue), { maxLength: 20 }),
    body: fc.string({ maxLength: 64 }),
    eol: fc.constantFrom('\r\n', '\r\n', '\r\n', '\n'),
  })
  .map(({ method: m, uri, version, headers, body, eol }) =>
    Buffer.from(`${m} ${uri} ${version}${eol}${headers.map(([n, v]) => `${n}: ${v}`).join(eol)}${eol}${eol}${body}`, 'latin1'),
  );

/** A well-formed REGISTER and what it says. */
const wellFormedRegister = fc
  .record({
    user: alnum,
    domain: fc.tuple(alnum, alnum).map(([a, b]) => `${a}.${b}`),
    viaHost: fc.ipV4(),
    viaPort: fc.integer({ min: 1, max: 65535 }),
    branch,
    tag: alnum,
    callId: fc.tuple(alnum, alnum).map(([a, b]) => `${a}@${b}`),
    cseq: fc.integer({ min: 0, max: 2 ** 31 - 1 }),
    expires: fc.integer({ min: 0, max: 2 ** 32 - 1 }),
    contacts: fc.array(fc.tuple(alnum, fc.ipV4(), fc.option(fc.integer({ min: 0, max: 86400 }), { nil: undefined })), { minLength: 1, maxLength: 5 }),
    compact: fc.boolean(),
  })
  .map((r) => {
    const n = (long: string, short: string): string => (r.compact ? short : long);
    const contact = r.contacts.map(([u, ip, e]) => `<sip:${u}@${ip}>${e === undefined ? '' : `;expires=${e}`}`).join(', ');
    const text = [
      `REGISTER sip:${r.domain} SIP/2.0`,
      `${n('Via', 'v')}: SIP/2.0/UDP ${r.viaHost}:${r.viaPort};branch=${r.branch};rport`,
      'Max-Forwards: 70',
      `${n('From', 'f')}: <sip:${r.user}@${r.domain}>;tag=${r.tag}`,
      `${n('To', 't')}: <sip:${r.user}@${r.domain}>`,
      `${n('Call-ID', 'i')}: ${r.callId}`,
      `CSeq: ${r.cseq} REGISTER`,
      `${n('Contact', 'm')}: ${contact}`,
      `Expires: ${r.expires}`,
      `${n('Content-Length', 'l')}: 0`,
      '',
      '',
    ].join('\r\n');
    return { r, bytes: Buffer.from(text, 'latin1') };
  });

/** Everything the router and registrar read from a parsed request. */
function exercise(buf: Buffer): void {
  const p = parseMessage(buf, LIMITS);
  if (!p.ok) {
    expect(typeof p.reason).toBe('string');
    if (p.request) buildResponse(p.request, 400, 'Bad Request', { toTag: 't' });
    return;
  }
  const msg = p.msg;
  const vias = getListValues(msg, 'via');
  for (const v of vias) parseVia(v);
  parseCSeq(getHeader(msg, 'cseq') ?? '');
  parseNameAddr(getHeader(msg, 'to') ?? '');
  parseNameAddr(getHeader(msg, 'from') ?? '');
  const e = getHeader(msg, 'expires');
  if (e !== undefined) parseExpires(e);
  for (const a of getHeaders(msg, 'authorization')) parseDigestCredentials(a);
  if (msg.kind === 'request') {
    parseUri(msg.uri);
    if (getHeader(msg, 'contact') !== undefined) parseContacts(msg);
    if (vias.length > 0) buildResponse(msg, 200, 'OK', { toTag: 't', headers: [['Server', 'fuzz']] });
  }
  serializeMessage(msg);
}

describe('property-based fuzzing of the message layer (fast-check)', () => {
  it('parses any bytes without throwing', () => {
    fc.assert(fc.property(fc.uint8Array({ maxLength: 4096 }), (a) => exercise(Buffer.from(a))), { numRuns: RUNS * 2 });
  });

  it('parses any SIP-shaped message and reads every header the server reads, without throwing', () => {
    fc.assert(fc.property(sipShaped, (b) => exercise(b)), { numRuns: RUNS * 2 });
  });

  it('reads a well-formed REGISTER exactly as it was written, long or compact header names alike', () => {
    fc.assert(
      fc.property(wellFormedRegister, ({ r, bytes }) => {
        const p = parseMessage(bytes, LIMITS);
        expect(p.ok).toBe(true);
        if (!p.ok || p.msg.kind !== 'request') return;
        expect(p.msg.method).toBe('REGISTER');
        expect(getHeader(p.msg, 'call-id')).toBe(r.callId);
        expect(parseCSeq(getHeader(p.msg, 'cseq') ?? '')).toEqual({ seq: r.cseq, method: 'REGISTER' });
        expect(parseExpires(getHeader(p.msg, 'expires') ?? '')).toBe(r.expires);
        const via = parseVia(getListValues(p.msg, 'via')[0] ?? '');
        expect(via?.branch).toBe(r.branch);
        const contacts = parseContacts(p.msg);
        expect(contacts && !contacts.star ? contacts.contacts.length : -1).toBe(r.contacts.length);
        // Serialising and parsing again changes nothing the server reads.
        const again = parseMessage(serializeMessage(p.msg), LIMITS);
        const strip = (m: SipMessage): string[][] => m.headers.filter((h) => h.name !== 'content-length').map((h) => [h.name, h.value]);
        expect(again.ok).toBe(true);
        if (again.ok) expect(strip(again.msg)).toEqual(strip(p.msg));
      }),
      { numRuns: RUNS },
    );
  }, TIMEOUT);

  it('frames a stream of messages identically however it is cut into chunks', () => {
    fc.assert(
      fc.property(
        fc.array(wellFormedRegister, { minLength: 1, maxLength: 6 }),
        fc.array(fc.integer({ min: 1, max: 400 }), { minLength: 1, maxLength: 40 }),
        fc.boolean(),
        (msgs, cuts, pings) => {
          const parts = msgs.map((m) => m.bytes);
          const stream = Buffer.concat(parts.flatMap((b) => (pings ? [Buffer.from('\r\n\r\n'), b] : [b])));
          const framer = new StreamFramer({ maxMessageSize: LIMITS.maxMessageSize });
          const out: Buffer[] = [];
          let at = 0;
          let k = 0;
          while (at < stream.length) {
            const n = cuts[k++ % cuts.length] as number;
            for (const ev of framer.push(stream.subarray(at, at + n))) {
              expect(ev.type).not.toBe('error');
              if (ev.type === 'message') out.push(ev.data);
            }
            at += n;
          }
          expect(out).toEqual(parts);
          expect(framer.pending).toBe(0);
        },
      ),
      { numRuns: Math.ceil(RUNS / 3) },
    );
  }, TIMEOUT);

  it('frames a 60 KB message trickling in byte by byte in linear time (slow senders gain no CPU leverage)', () => {
    const body = 'x'.repeat(60_000);
    const bytes = Buffer.from(`MESSAGE sip:a@b SIP/2.0\r\nVia: SIP/2.0/TCP h;branch=z9hG4bK1\r\nContent-Length: ${body.length}\r\n\r\n${body}`);
    const framer = new StreamFramer({ maxMessageSize: LIMITS.maxMessageSize });
    const t0 = performance.now();
    const events = [];
    for (let i = 0; i < bytes.length; i++) events.push(...framer.push(bytes.subarray(i, i + 1)));
    expect(events).toHaveLength(1);
    // Quadratic buffering took ~700 ms here; linear takes well under 100 ms.
    expect(performance.now() - t0).toBeLessThan(300);
  });

  it('never holds more than the message size limit, whatever bytes arrive', () => {
    fc.assert(
      fc.property(fc.array(fc.oneof(fc.uint8Array({ maxLength: 2048 }), sipShaped.map((b) => new Uint8Array(b))), { maxLength: 30 }), (chunks) => {
        const framer = new StreamFramer({ maxMessageSize: 4096 });
        for (const c of chunks) {
          framer.push(Buffer.from(c));
          expect(framer.pending).toBeLessThanOrEqual(4096 + 2048);
        }
      }),
      { numRuns: RUNS },
    );
  }, TIMEOUT);

  it('header parsers take any string without throwing; Expires is null or delta-seconds within 32 bits', () => {
    fc.assert(
      fc.property(fc.oneof(hostileValue, fc.string({ maxLength: 200 }), fc.string({ unit: 'binary', maxLength: 200 })), (v) => {
        parseVia(v);
        parseNameAddr(v);
        parseCSeq(v);
        parseDigestCredentials(v);
        parseUri(v);
        splitHeaderList(v);
        const e = parseExpires(v);
        if (e !== null) {
          expect(Number.isInteger(e)).toBe(true);
          expect(e).toBeGreaterThanOrEqual(0);
          expect(e).toBeLessThanOrEqual(2 ** 32 - 1);
        }
      }),
      { numRuns: RUNS * 3 },
    );
  }, TIMEOUT);

  it('reads back the digest parameters it was given (RFC 7616 §3.4 quoting)', () => {
    const qtext = fc.stringMatching(/^[A-Za-z0-9 ./:@=,;-]{0,20}$/);
    fc.assert(
      fc.property(fc.record({ username: qtext, realm: qtext, nonce: qtext, uri: qtext, response: fc.stringMatching(/^[0-9a-f]{32}$/) }), (p) => {
        const header = `Digest username="${p.username}", realm="${p.realm}", nonce="${p.nonce}", uri="${p.uri}", response="${p.response}", algorithm=MD5, nc=00000001, qop=auth`;
        const c = parseDigestCredentials(header);
        expect(c).not.toBeNull();
        for (const [k, v] of Object.entries(p)) expect(c?.params.get(k)).toBe(v);
      }),
      { numRuns: RUNS },
    );
  }, TIMEOUT);

  it('parses a message with thousands of parameters or list items in linear time (under 50 ms)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 1000, max: 20000 }), fc.constantFrom(';a=b', ',<sip:a@b>', ';', ' ,', '%20'), (n, piece) => {
        const text = `REGISTER sip:x SIP/2.0\r\nVia: SIP/2.0/UDP h;branch=z9hG4bKx\r\nContact: <sip:a@b>${piece.repeat(n).slice(0, 8000)}\r\nCall-ID: c\r\nCSeq: 1 REGISTER\r\n\r\n`;
        let best = Infinity;
        for (let k = 0; k < 3; k++) {
          const t0 = performance.now();
          exercise(Buffer.from(text, 'latin1'));
          best = Math.min(best, performance.now() - t0);
        }
        expect(best).toBeLessThan(50);
      }),
      { numRuns: 40 },
    );
  }, TIMEOUT);
});
