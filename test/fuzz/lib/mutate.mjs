/**
 * Mutation-based fuzzing of SIP messages, seeded and reproducible: byte-level
 * mutations (flips, syntax-significant bytes, truncation, splices) and
 * structure-aware ones (header lines duplicated, dropped, swapped, folded;
 * values replaced with hostile tokens; Content-Length lies; thousands of
 * headers or parameters; compact names; LF-only line ends).
 */

/** mulberry32: small, fast, seedable. */
export function prng(seed) {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

const SPECIAL = [0x0d, 0x0a, 0x20, 0x09, 0x3a, 0x3b, 0x2c, 0x22, 0x3c, 0x3e, 0x5c, 0x25, 0x3d, 0x40, 0x5b, 0x5d, 0x3f, 0x2f, 0x00, 0x7f, 0x80, 0xc3, 0xff, 0x30, 0x39, 0x2a, 0x23];

/** Hostile or edge-case tokens for header values and parameters. */
const TOKENS = [
  '', ' ', '*', '0', '-1', '4294967295', '4294967296', '18446744073709551616', '99999999999999999999', '1e9', '0x10', '3600.5',
  '"', '""', '"unterminated', '\\', '\\"', '<', '>', '<>', '<sip:>', '<sip:@>', 'sip:', 'sips:', 'tel:+1', 'mailto:x@y', 'sip:[::1]', 'sip:[::1', 'sip:a@[2001:db8::1]:5060',
  ';', ';;;', ';a', ';a=', ';=b', ';expires=', ';expires=-1', ';expires=abc', ';q=2.0', ';q=0.', ';q=.5', ';reg-id=', ';reg-id=99999999999', ';+sip.instance="<urn:uuid:x>"', ';lr', ';maddr=0.0.0.0', ';transport=ws',
  ',', ',,,', ', *', '*, <sip:a@b>', '%', '%0', '%00', '%zz', '%%', '%C3%28', '\u0000', '\u00ff', '\u00c3\u0028',
  'Digest', 'Digest ', 'Digest username', 'Digest username=', 'Digest username="', 'Digest realm="a",realm="b"', 'Digest nc=ffffffffff', 'Digest algorithm=SHA-512-256', 'Digest qop=auth-int', 'Basic YWxhZGRpbjpvcGVuc2VzYW1l',
  'SIP/2.0', 'SIP/3.0', 'SIP/2.0/UDP', 'SIP/2.0/SCTP host', 'SIP/2.0/UDP [::1]:0', 'SIP/2.0/UDP 1.2.3.4:99999', 'SIP/2.0/UDP h;branch=', 'SIP/2.0/UDP h;branch=z9hG4bK', 'SIP/2.0/UDP h;rport=abc;received=',
  'REGISTER', 'INVITE', 'ACK', 'CANCEL', 'BYE', 'OPTIONS', 'register', 'REGISTER REGISTER', '1 REGISTER', '2147483648 REGISTER', 'REGISTER 1',
];

const METHODS = ['REGISTER', 'OPTIONS', 'INVITE', 'ACK', 'CANCEL', 'BYE', 'MESSAGE', 'SUBSCRIBE', 'NOTIFY', 'PUBLISH', 'INFO', 'PRACK', 'UPDATE', 'REFER', 'FOO', 'register', 'R', 'REGISTER\u0000', 'X'.repeat(300), 'REGI STER', ''];

const HEADER_NAMES = [
  'Via', 'v', 'From', 'f', 'To', 't', 'Call-ID', 'i', 'CSeq', 'Contact', 'm', 'Expires', 'Content-Length', 'l', 'Content-Type', 'c', 'Authorization', 'Proxy-Authorization',
  'Max-Forwards', 'Require', 'Supported', 'k', 'Path', 'Route', 'Record-Route', 'User-Agent', 'Min-Expires', 'Allow', 'X-Custom', 'VIA', 'cseq', 'CALL-ID', 'content-length',
];

/** Apply 1-4 random mutations to `src`; `others` are splice partners. */
export function mutate(rand, src, others) {
  const pick = (n) => Math.floor(rand() * n);
  const token = () => TOKENS[pick(TOKENS.length)];
  let b = Buffer.from(src);
  // Mostly one mutation, so a good share still parses and reaches the deeper code.
  const steps = rand() < 0.6 ? 1 : 2 + pick(3);
  for (let s = 0; s < steps; s++) {
    const at = pick(b.length + 1);
    switch (pick(22)) {
      case 0: // truncate
        b = b.subarray(0, at);
        break;
      case 1: // random byte
        if (b.length > 0) b[pick(b.length)] = pick(256);
        break;
      case 2: // bit flip
        if (b.length > 0) b[pick(b.length)] ^= 1 << pick(8);
        break;
      case 3: // syntax-significant byte
        if (b.length > 0) b[pick(b.length)] = SPECIAL[pick(SPECIAL.length)];
        break;
      case 4: // insert syntax-significant bytes
        b = Buffer.concat([b.subarray(0, at), Buffer.from(Array.from({ length: 1 + pick(8) }, () => SPECIAL[pick(SPECIAL.length)])), b.subarray(at)]);
        break;
      case 5: // delete a range
        b = Buffer.concat([b.subarray(0, at), b.subarray(Math.min(b.length, at + 1 + pick(64)))]);
        break;
      case 6: // insert a hostile token
        b = Buffer.concat([b.subarray(0, at), Buffer.from(token(), 'latin1'), b.subarray(at)]);
        break;
      case 7: // repeat a slice many times (size and loop bounds)
        {
          const len = 1 + pick(24);
          const piece = b.subarray(at, at + len);
          const times = 2 + pick(rand() < 0.1 ? 4000 : 40);
          b = Buffer.concat([b.subarray(0, at), Buffer.alloc(piece.length * times, piece.length ? piece : Buffer.from('a')), b.subarray(at)]);
        }
        break;
      case 8: // splice with another corpus message
        if (others.length > 0) {
          const o = others[pick(others.length)];
          const from = pick(o.length + 1);
          b = Buffer.concat([b.subarray(0, at), o.subarray(from, from + pick(400))]);
        }
        break;
      default:
        b = mutateLines(rand, pick, token, b);
    }
  }
  return b;
}

function mutateLines(rand, pick, token, b) {
  const text = b.toString('latin1');
  const split = text.indexOf('\r\n\r\n');
  const head = split >= 0 ? text.slice(0, split) : text;
  const body = split >= 0 ? text.slice(split + 4) : '';
  const lines = head.split('\r\n');
  const i = pick(lines.length);
  const headerIdx = lines.length > 1 ? 1 + pick(lines.length - 1) : 0;
  switch (pick(14)) {
    case 0: // duplicate a line
      lines.splice(i, 0, lines[i]);
      break;
    case 1: // drop a line
      if (lines.length > 1) lines.splice(headerIdx, 1);
      break;
    case 2: // swap two lines (the start line may move)
      {
        const j = pick(lines.length);
        [lines[i], lines[j]] = [lines[j], lines[i]];
      }
      break;
    case 3: // replace a header value
      {
        const l = lines[headerIdx] ?? '';
        const c = l.indexOf(':');
        lines[headerIdx] = c >= 0 ? `${l.slice(0, c + 1)} ${token()}${rand() < 0.5 ? token() : ''}` : token();
      }
      break;
    case 4: // append a parameter soup to a header
      lines[headerIdx] = `${lines[headerIdx] ?? ''}${Array.from({ length: 1 + pick(rand() < 0.05 ? 2000 : 6) }, () => `;${token() || 'p'}=${token()}`).join('')}`;
      break;
    case 5: // new header with a hostile value
      lines.splice(headerIdx, 0, `${HEADER_NAMES[pick(HEADER_NAMES.length)]}:${rand() < 0.5 ? ' ' : ''}${token()}${token()}`);
      break;
    case 6: // folding (continuation line)
      lines.splice(headerIdx + 1, 0, `${rand() < 0.5 ? ' ' : '\t'}${token()}`);
      break;
    case 7: // Content-Length lies
      {
        const cl = ['Content-Length: 0', `Content-Length: ${body.length + 1 + pick(100)}`, `Content-Length: ${Math.max(0, body.length - 1)}`, 'Content-Length: 99999999', 'Content-Length: -5', 'Content-Length: 1e3', 'l: 4294967296', 'Content-Length:'];
        const k = lines.findIndex((l) => /^(content-length|l)\s*:/i.test(l));
        if (k >= 0) lines[k] = cl[pick(cl.length)];
        else lines.push(cl[pick(cl.length)]);
      }
      break;
    case 8: // method change (start line and CSeq stay inconsistent on purpose)
      {
        const parts = (lines[0] ?? '').split(' ');
        parts[0] = METHODS[pick(METHODS.length)];
        lines[0] = parts.join(' ');
      }
      break;
    case 9: // many headers
      for (let n = 1 + pick(rand() < 0.1 ? 400 : 20); n > 0; n--) lines.splice(headerIdx, 0, `${HEADER_NAMES[pick(HEADER_NAMES.length)]}: ${token()}`);
      break;
    case 10: // a very long header value
      lines[headerIdx] = `${lines[headerIdx] ?? 'X'}${'a'.repeat(pick(12_000))}`;
      break;
    case 11: // LF-only or CR-only line ends
      return Buffer.from(lines.join(rand() < 0.5 ? '\n' : '\r') + (rand() < 0.5 ? '\n\n' : '\r\n\r\n') + body, 'latin1');
    case 12: // request line version / URI
      {
        const parts = (lines[0] ?? '').split(' ');
        parts[pick(parts.length)] = token();
        lines[0] = parts.join(rand() < 0.9 ? ' ' : '  ');
      }
      break;
    default: // shuffle header order
      {
        const hdrs = lines.slice(1);
        for (let k = hdrs.length - 1; k > 0; k--) {
          const j = pick(k + 1);
          [hdrs[k], hdrs[j]] = [hdrs[j], hdrs[k]];
        }
        lines.splice(1, hdrs.length, ...hdrs);
      }
  }
  return Buffer.from(`${lines.join('\r\n')}\r\n\r\n${body}`, 'latin1');
}

/**
 * An endless, reproducible stream of fuzz messages: mostly mutations of corpus
 * messages (0-4 mutations each), some corpus messages as they are, some raw noise.
 */
export function* messages(seed, corpus, maxSize = 65_000) {
  const rand = prng(seed);
  const pick = (n) => Math.floor(rand() * n);
  const seeds = corpus.map((c) => c.data);
  for (;;) {
    const r = rand();
    let m;
    if (r < 0.05) m = seeds[pick(seeds.length)];
    else if (r < 0.08) m = Buffer.from(Array.from({ length: pick(600) }, () => pick(256)));
    else {
      m = seeds[pick(seeds.length)];
      // Stack mutations now and then: deeper damage from the same seed.
      for (let k = rand() < 0.2 ? 1 + pick(4) : 1; k > 0; k--) m = mutate(rand, m, seeds);
    }
    yield m.length > maxSize ? m.subarray(0, maxSize) : m;
  }
}
