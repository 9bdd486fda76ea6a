import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  canonicalHeaderName,
  displayHeaderName,
  formatVia,
  getHeader,
  getHeaders,
  getListValues,
  getParam,
  knownHeaderAt,
  parseContacts,
  parseCSeq,
  parseDigestCredentials,
  parseExpires,
  parseNameAddr,
  parseVia,
  splitHeaderList,
  unquote,
} from '../../../src/sip/headers.js';
import type { NameAddr, RawHeader, SipRequest, Via } from '../../../src/sip/message.js';
import { parseMessage } from '../../../src/sip/parser.js';

function fixtureRequest(name: string): SipRequest {
  const r = parseMessage(readFileSync(new URL(`../../fixtures/sip/${name}`, import.meta.url)));
  if (!r.ok || r.msg.kind !== 'request') throw new Error(`fixture ${name} did not parse as a request`);
  return r.msg;
}

function msgWith(headers: Array<[string, string]>): SipRequest {
  const hs: RawHeader[] = headers.map(([name, value]) => ({ name, value }));
  return { kind: 'request', method: 'REGISTER', uri: 'sip:example.com', headers: hs, body: Buffer.alloc(0) };
}

function via(value: string): Via {
  const v = parseVia(value);
  if (v === null) throw new Error(`Via did not parse: ${value}`);
  return v;
}

function nameAddr(value: string): NameAddr {
  const v = parseNameAddr(value);
  if (v === null) throw new Error(`name-addr did not parse: ${value}`);
  return v;
}

describe('canonicalHeaderName', () => {
  it('expands every compact form of RFC 3261 §7.3.3 and its extensions', () => {
    const expected: Record<string, string> = {
      a: 'accept-contact', b: 'referred-by', c: 'content-type', d: 'request-disposition', e: 'content-encoding',
      f: 'from', i: 'call-id', j: 'reject-contact', k: 'supported', l: 'content-length', m: 'contact',
      n: 'identity-info', o: 'event', r: 'refer-to', s: 'subject', t: 'to', u: 'allow-events', v: 'via',
      x: 'session-expires', y: 'identity',
    };
    for (const [short, long] of Object.entries(expected)) {
      expect(canonicalHeaderName(short)).toBe(long);
      expect(canonicalHeaderName(short.toUpperCase())).toBe(long);
    }
  });

  it('lower-cases long names whatever their case', () => {
    expect(canonicalHeaderName('Call-ID')).toBe('call-id');
    expect(canonicalHeaderName('CALL-id')).toBe('call-id');
    expect(canonicalHeaderName('WWW-Authenticate')).toBe('www-authenticate');
    expect(canonicalHeaderName('X-Unknown-Thing')).toBe('x-unknown-thing');
  });

  it('leaves unassigned single letters as they are, lower-cased', () => {
    expect(canonicalHeaderName('Z')).toBe('z');
    expect(canonicalHeaderName('w')).toBe('w');
  });

  it('recognises well-known names in place, by exact spelling only', () => {
    expect(knownHeaderAt('xxVia: a', 2, 5)).toBe('via');
    expect(knownHeaderAt('v', 0, 1)).toBe('via');
    expect(knownHeaderAt('vIa', 0, 3)).toBeUndefined();
    expect(knownHeaderAt('X-Foo', 0, 5)).toBeUndefined();
  });
});

describe('displayHeaderName', () => {
  it('spells well-known names conventionally and capitalises other segments', () => {
    expect(displayHeaderName('call-id')).toBe('Call-ID');
    expect(displayHeaderName('cseq')).toBe('CSeq');
    expect(displayHeaderName('www-authenticate')).toBe('WWW-Authenticate');
    expect(displayHeaderName('x-my-header')).toBe('X-My-Header');
  });
});

describe('getHeader / getHeaders / getListValues', () => {
  const m = msgWith([
    ['contact', '<sip:a@h1>, <sip:b@h2>'],
    ['subject', 'one'],
    ['contact', '"Doe, John" <sip:c@h3>;q=0.1'],
  ]);

  it('returns the first value, or undefined when absent', () => {
    expect(getHeader(m, 'contact')).toBe('<sip:a@h1>, <sip:b@h2>');
    expect(getHeader(m, 'expires')).toBeUndefined();
  });

  it('returns every header line value in order', () => {
    expect(getHeaders(m, 'contact')).toEqual(['<sip:a@h1>, <sip:b@h2>', '"Doe, John" <sip:c@h3>;q=0.1']);
    expect(getHeaders(m, 'route')).toEqual([]);
  });

  it('comma-splits every line of a list header', () => {
    expect(getListValues(m, 'contact')).toEqual(['<sip:a@h1>', '<sip:b@h2>', '"Doe, John" <sip:c@h3>;q=0.1']);
    expect(getListValues(m, 'route')).toEqual([]);
  });
});

describe('splitHeaderList', () => {
  it('splits on commas and trims each element', () => {
    expect(splitHeaderList(' INVITE,ACK ,  BYE ')).toEqual(['INVITE', 'ACK', 'BYE']);
  });

  it('keeps commas inside quoted strings, escaped quotes included', () => {
    expect(splitHeaderList('"a, \\"b, c" <sip:x@y>, <sip:z@w>')).toEqual(['"a, \\"b, c" <sip:x@y>', '<sip:z@w>']);
  });

  it('keeps commas inside angle brackets', () => {
    expect(splitHeaderList('<sip:a,b@host;p=1>;x=2, sip:c@d')).toEqual(['<sip:a,b@host;p=1>;x=2', 'sip:c@d']);
  });

  it('drops empty elements', () => {
    expect(splitHeaderList(',a,, ,b,')).toEqual(['a', 'b']);
    expect(splitHeaderList('   ')).toEqual([]);
  });
});

describe('parseVia', () => {
  it('reads transport, host, port, branch and params', () => {
    const v = via('SIP/2.0/UDP pc33.atlanta.com:5066;branch=z9hG4bK776asdhds;rport;received=192.0.2.1');
    expect(v.transport).toBe('UDP');
    expect(v.host).toBe('pc33.atlanta.com');
    expect(v.port).toBe(5066);
    expect(v.branch).toBe('z9hG4bK776asdhds');
    expect([...v.params]).toEqual([
      ['branch', 'z9hG4bK776asdhds'],
      ['rport', null],
      ['received', '192.0.2.1'],
    ]);
  });

  it('reads an IPv6 reference with and without port', () => {
    expect(via('SIP/2.0/TCP [2001:db8::9:1]:5070;branch=z9hG4bK1')).toMatchObject({ host: '[2001:db8::9:1]', port: 5070 });
    expect(via('SIP/2.0/TLS [2001:DB8::1];branch=z9hG4bK1')).toMatchObject({ host: '[2001:db8::1]', port: null });
  });

  it('allows whitespace around slashes, colon, semicolons and equals (RFC 3261 §25.1)', () => {
    const v = via('SIP  / 2.0  / tcp     spindle.example.com : 5060  ; branch  =   z9hG4bK9ikj8 ;rport');
    expect(v).toMatchObject({ transport: 'TCP', host: 'spindle.example.com', port: 5060, branch: 'z9hG4bK9ikj8' });
    expect(v.params.get('rport')).toBeNull();
  });

  it('lower-cases host and parameter names but keeps value case', () => {
    const v = via('sip/2.0/ws DF7JAL23LS0D.invalid;BRANCH=z9hG4bKAbC;Received=192.0.2.5');
    expect(v.host).toBe('df7jal23ls0d.invalid');
    expect(v.transport).toBe('WS');
    expect(v.branch).toBe('z9hG4bKAbC');
    expect(v.params.get('received')).toBe('192.0.2.5');
  });

  it('has a null branch when the Via has none (RFC 2543 peers)', () => {
    expect(via('SIP/2.0/UDP iftgw.example.com').branch).toBeNull();
  });

  it.each([
    ['an empty parameter', 'SIP/2.0/UDP 192.0.2.15;;branch=z9hG4bK1'],
    ['a trailing semicolon', 'SIP/2.0/UDP 192.0.2.15;branch=z9hG4bK1;'],
    ['no host', 'SIP/2.0/UDP ;branch=z9hG4bK1'],
    ['no space before the host', 'SIP/2.0/UDP'],
    ['another protocol', 'HTTP/1.1/TCP host'],
    ['another version', 'SIP/7.0/UDP host'],
    ['a port above 65535', 'SIP/2.0/UDP host:70000'],
    ['an empty port', 'SIP/2.0/UDP host:;branch=z9hG4bK1'],
    ['a branch without value', 'SIP/2.0/UDP host;branch'],
    ['an unterminated IPv6 reference', 'SIP/2.0/UDP [2001:db8::1;branch=z9hG4bK1'],
    ['junk after the host', 'SIP/2.0/UDP host junk'],
  ])('refuses %s', (_label, value) => {
    expect(parseVia(value)).toBeNull();
  });
});

describe('formatVia', () => {
  it('round-trips parameters in order', () => {
    const text = 'SIP/2.0/UDP 192.0.2.20:5060;branch=z9hG4bK-1;rport;alias;x-custom=Value';
    expect(formatVia(via(text))).toBe(text);
  });

  it('normalises whitespace and writes received/rport set on the parsed Via', () => {
    const v = via('SIP / 2.0 / UDP  host.example.com ; rport ; branch = z9hG4bKx');
    v.params.set('rport', '5062');
    v.params.set('received', '198.51.100.9');
    expect(formatVia(v)).toBe('SIP/2.0/UDP host.example.com;rport=5062;branch=z9hG4bKx;received=198.51.100.9');
  });

  it('writes IPv6 hosts in brackets', () => {
    expect(formatVia(via('SIP/2.0/TCP [2001:db8::1]:5070;branch=z9hG4bK1'))).toBe('SIP/2.0/TCP [2001:db8::1]:5070;branch=z9hG4bK1');
  });
});

describe('parseNameAddr', () => {
  it('reads a quoted display name with escaped quotes and backslashes', () => {
    const a = nameAddr('"Bob \\"The Builder\\" \\\\ Smith" <sip:bob@example.com>;tag=1');
    expect(a.displayName).toBe('Bob "The Builder" \\ Smith');
    expect(a.uri.user).toBe('bob');
    expect(a.params.get('tag')).toBe('1');
  });

  it('reads a display name of several tokens', () => {
    expect(nameAddr("A. G. Bell <sip:agb@bell-telephone.com> ;tag=a48s").displayName).toBe('A. G. Bell');
  });

  it('reads a token display name with no space before <', () => {
    expect(nameAddr('caller<sip:caller@example.com>;tag=323').displayName).toBe('caller');
  });

  it('has a null display name for a bare <uri>', () => {
    expect(nameAddr('<sip:a@example.com>').displayName).toBeNull();
  });

  it('keeps URI parameters inside <> and header parameters outside', () => {
    const a = nameAddr('<sip:gw.example.net;transport=tcp;lr>;expires=60;q=0.7');
    expect([...a.uri.params]).toEqual([
      ['transport', 'tcp'],
      ['lr', null],
    ]);
    expect([...a.params]).toEqual([
      ['expires', '60'],
      ['q', '0.7'],
    ]);
  });

  it('reads ;params after an addr-spec as header parameters (RFC 3261 §20)', () => {
    const a = nameAddr('sip:+19725552222@gw1.example.net;unknownparam;tag=abc');
    expect(a.uri.params.size).toBe(0);
    expect(a.params.get('unknownparam')).toBeNull();
    expect(a.params.get('tag')).toBe('abc');
  });

  it('allows whitespace around ; and = in header parameters', () => {
    const a = nameAddr('sip:vivekg@chair-dnrc.example.com ;   tag    = 1918181833n');
    expect(a.params.get('tag')).toBe('1918181833n');
  });

  it('keeps quoted header parameter values with their quotes', () => {
    const a = nameAddr('<sip:a@h>;+sip.instance="<urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6>";reg-id=1');
    expect(a.params.get('+sip.instance')).toBe('"<urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6>"');
    expect(unquote(a.params.get('+sip.instance') ?? '')).toBe('<urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6>');
  });

  it('lower-cases parameter names', () => {
    const a = nameAddr('<sip:a@h>;EXPIRES=30;Tag=AbC');
    expect(a.params.get('expires')).toBe('30');
    expect(a.params.get('tag')).toBe('AbC');
    expect(getParam(a.params, 'TAG')).toBe('AbC');
  });

  it('keeps the value exactly as it appeared in raw', () => {
    expect(nameAddr('  "X" <sip:a@h> ;tag=1 ').raw).toBe('"X" <sip:a@h> ;tag=1');
  });

  it('accepts other URI schemes', () => {
    expect(nameAddr('<tel:+1-201-555-0123>').uri.scheme).toBe('tel');
    expect(nameAddr('isbn:2983792873').uri.scheme).toBe('isbn');
  });

  it.each([
    ['an unterminated quoted display name', '"Mr. J. User <sip:j.user@example.com>'],
    ['a display name with a comma, unquoted', 'Bell, Alexander <sip:a.g.bell@example.com>'],
    ['spaces inside <>', '< sip:t.watson@example.org >'],
    ['an addr-spec with ? (RFC 3261 §20.10)', 'sip:user@example.com?Route=%3Csip:sip.example.com%3E'],
    ['an unclosed <', '<sip:a@example.com'],
    ['junk after >', '<sip:a@example.com> junk'],
    ['an empty parameter', '"Joe" <sip:joe@example.org>;;;;'],
    ['an empty value', ''],
    ['a quoted display name not followed by <', '"Joe" sip:joe@example.org'],
  ])('refuses %s', (_label, value) => {
    expect(parseNameAddr(value)).toBeNull();
  });
});

describe('parseContacts', () => {
  it('reads several contacts on one line and on several lines', () => {
    const list = parseContacts(fixtureRequest('register-odd-syntax.sip'));
    if (list === null || list.star) throw new Error('expected contacts');
    expect(list.contacts.map((c) => c.uri.host)).toEqual(['[2001:db8::10]', '192.0.2.9', '192.0.2.99']);
    expect(list.contacts[1].displayName).toBe('Desk, Office');
    expect(list.contacts[0].params.get('reg-id')).toBe('1');
    expect(list.contacts[0].uri.params.get('ob')).toBeNull();
    expect(list.contacts[2].params.get('q')).toBe('0.5');
  });

  it("reads a lone '*'", () => {
    expect(parseContacts(fixtureRequest('register-star.sip'))).toEqual({ star: true });
  });

  it("refuses '*' mixed with contacts, on one line or several", () => {
    expect(parseContacts(msgWith([['contact', '*, <sip:a@h>']]))).toBeNull();
    expect(parseContacts(msgWith([['contact', '*'], ['contact', '<sip:a@h>']]))).toBeNull();
    expect(parseContacts(msgWith([['contact', '*'], ['contact', '*']]))).toBeNull();
  });

  it('gives an empty list when there is no Contact', () => {
    expect(parseContacts(msgWith([['to', '<sip:a@h>']]))).toEqual({ star: false, contacts: [] });
  });

  it('refuses an empty Contact line or a malformed contact', () => {
    expect(parseContacts(msgWith([['contact', '']]))).toBeNull();
    expect(parseContacts(msgWith([['contact', '<sip:a@h>, sip:b@h?x=y']]))).toBeNull();
  });
});

describe('parseCSeq', () => {
  it('reads the number and method', () => {
    expect(parseCSeq('4711 INVITE')).toEqual({ seq: 4711, method: 'INVITE' });
  });

  it('accepts leading zeros and any LWS between number and method', () => {
    expect(parseCSeq('0009 \t INVITE')).toEqual({ seq: 9, method: 'INVITE' });
  });

  it('accepts 2**32-1 and refuses larger numbers', () => {
    expect(parseCSeq('4294967295 REGISTER')?.seq).toBe(4294967295);
    expect(parseCSeq('4294967296 REGISTER')).toBeNull();
    expect(parseCSeq('36893488147419103232 REGISTER')).toBeNull();
  });

  it.each(['INVITE', '12', '12INVITE', '-1 INVITE', '1 INVITE extra', '1 INV(ITE', ''])('refuses %j', (value) => {
    expect(parseCSeq(value)).toBeNull();
  });
});

describe('parseExpires', () => {
  it('reads delta-seconds, tolerating surrounding whitespace', () => {
    expect(parseExpires('3600')).toBe(3600);
    expect(parseExpires(' 0 ')).toBe(0);
    expect(parseExpires('007')).toBe(7);
  });

  it('clamps values above 2**32-1 to 2**32-1', () => {
    expect(parseExpires('4294967296')).toBe(4294967295);
    expect(parseExpires('1'.padEnd(100, '0'))).toBe(4294967295);
  });

  it.each(['', 'soon', '-1', '1.5', '60s', 'Thu, 01 Dec 1994 16:00:00 GMT'])('gives null for %j', (value) => {
    expect(parseExpires(value)).toBeNull();
  });
});

describe('parseDigestCredentials', () => {
  const example =
    'Digest username="bob", realm="biloxi.com", nonce="dcd98b7102dd2f0e8b11d0f600bfb0c093", uri="sip:bob@biloxi.com", ' +
    'qop=auth, nc=00000001, cnonce="0a4f113b", response="6629fae49393a05397450978507c4ef1", opaque="5ccc069c403ebaf9f0171e9517f40e41"';

  it('reads every parameter, unquoting quoted values', () => {
    const c = parseDigestCredentials(example);
    expect(c?.scheme).toBe('Digest');
    expect(Object.fromEntries(c?.params ?? [])).toEqual({
      username: 'bob',
      realm: 'biloxi.com',
      nonce: 'dcd98b7102dd2f0e8b11d0f600bfb0c093',
      uri: 'sip:bob@biloxi.com',
      qop: 'auth',
      nc: '00000001',
      cnonce: '0a4f113b',
      response: '6629fae49393a05397450978507c4ef1',
      opaque: '5ccc069c403ebaf9f0171e9517f40e41',
    });
  });

  it('resolves \\" escapes in quoted values', () => {
    expect(parseDigestCredentials('Digest username="a\\"b\\\\c", realm="r"')?.params.get('username')).toBe('a"b\\c');
  });

  it('tolerates spaces around = and commas, no space after commas, and empty elements', () => {
    const c = parseDigestCredentials('digest   username = "a" ,realm="r",, nc= 00000002 ,algorithm=SHA-256,');
    expect(c?.params.get('username')).toBe('a');
    expect(c?.params.get('nc')).toBe('00000002');
    expect(c?.params.get('algorithm')).toBe('SHA-256');
  });

  it('lower-cases parameter names', () => {
    expect(parseDigestCredentials('Digest UserName="a", REALM="r"')?.params.get('username')).toBe('a');
  });

  it('keeps commas inside quoted values', () => {
    expect(parseDigestCredentials('Digest username="a,b", qop="auth,auth-int"')?.params.get('qop')).toBe('auth,auth-int');
  });

  it.each([
    ['another scheme', 'NoOneKnowsThisScheme opaque-data=here'],
    ['Basic', 'Basic YWxhZGRpbjpvcGVuc2VzYW1l'],
    ['no parameters', 'Digest'],
    ['a repeated parameter', 'Digest username="a", username="b"'],
    ['an unterminated quote', 'Digest username="a, realm="r'],
    ['a parameter without =', 'Digest username'],
    ['missing separators', 'Digest username="a" realm="r"'],
  ])('gives null for %s', (_label, value) => {
    expect(parseDigestCredentials(value)).toBeNull();
  });
});
