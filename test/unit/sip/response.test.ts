import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { getHeader, getHeaders } from '../../../src/sip/headers.js';
import type { SipMessage, SipRequest } from '../../../src/sip/message.js';
import { parseMessage } from '../../../src/sip/parser.js';
import { buildResponse, serializeMessage } from '../../../src/sip/response.js';

function fixture(name: string): Buffer {
  return readFileSync(new URL(`../../fixtures/sip/${name}`, import.meta.url));
}

function parsed(buf: Buffer): SipMessage {
  const r = parseMessage(buf);
  if (!r.ok) throw new Error(`did not parse: ${r.reason}`);
  return r.msg;
}

function req(lines: string[], body = ''): SipRequest {
  const m = parsed(Buffer.from(lines.join('\r\n') + '\r\n\r\n' + body));
  if (m.kind !== 'request') throw new Error('expected a request');
  return m;
}

const INVITE = [
  'INVITE sip:bob@biloxi.com SIP/2.0',
  'Via: SIP/2.0/UDP bigbox3.site3.atlanta.com;branch=z9hG4bK77ef4c2312983.1',
  'Via: SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bKnashds8;received=192.0.2.1, SIP/2.0/TCP p1.example.com;branch=z9hG4bK3',
  'Max-Forwards: 69',
  'To: Bob <sip:bob@biloxi.com>',
  'From: Alice <sip:alice@atlanta.com>;tag=1928301774',
  'Call-ID: a84b4c76e66710',
  'CSeq: 314159 INVITE',
  'Contact: <sip:alice@pc33.atlanta.com>',
  'Content-Length: 0',
];

describe('buildResponse', () => {
  it('writes the status line and copies Via, From, To, Call-ID, CSeq with CRLF line ends', () => {
    const out = buildResponse(req(INVITE), 486, 'Busy Here').toString('utf8');
    expect(out).toBe(
      [
        'SIP/2.0 486 Busy Here',
        'Via: SIP/2.0/UDP bigbox3.site3.atlanta.com;branch=z9hG4bK77ef4c2312983.1',
        'Via: SIP/2.0/UDP pc33.atlanta.com;branch=z9hG4bKnashds8;received=192.0.2.1, SIP/2.0/TCP p1.example.com;branch=z9hG4bK3',
        'From: Alice <sip:alice@atlanta.com>;tag=1928301774',
        'To: Bob <sip:bob@biloxi.com>',
        'Call-ID: a84b4c76e66710',
        'CSeq: 314159 INVITE',
        'Content-Length: 0',
        '',
        '',
      ].join('\r\n'),
    );
  });

  it('replaces the Via values with opts.vias, one line each', () => {
    const out = buildResponse(req(INVITE), 200, 'OK', { vias: ['SIP/2.0/UDP a;branch=z9hG4bK1;received=192.0.2.9', 'SIP/2.0/UDP b;branch=z9hG4bK2'] });
    expect(getHeaders(parsed(out), 'via')).toEqual(['SIP/2.0/UDP a;branch=z9hG4bK1;received=192.0.2.9', 'SIP/2.0/UDP b;branch=z9hG4bK2']);
  });

  it('adds the To tag to a response above 100 when the To has none (RFC 3261 §8.2.6.2)', () => {
    expect(getHeader(parsed(buildResponse(req(INVITE), 180, 'Ringing', { toTag: 'a6c85cf' })), 'to')).toBe('Bob <sip:bob@biloxi.com>;tag=a6c85cf');
  });

  it('does not add a To tag to a 100 Trying', () => {
    expect(getHeader(parsed(buildResponse(req(INVITE), 100, 'Trying', { toTag: 'x' })), 'to')).toBe('Bob <sip:bob@biloxi.com>');
  });

  it('keeps an existing To tag, however it is spaced', () => {
    const lines = INVITE.map((l) => (l.startsWith('To:') ? 'To: Bob <sip:bob@biloxi.com> ; TAG = 8321234356' : l));
    expect(getHeader(parsed(buildResponse(req(lines), 200, 'OK', { toTag: 'new' })), 'to')).toBe('Bob <sip:bob@biloxi.com> ; TAG = 8321234356');
  });

  it('adds a To tag when "tag" only appears inside the URI or display name', () => {
    const lines = INVITE.map((l) => (l.startsWith('To:') ? 'To: "tag" <sip:tag@biloxi.com;tag=uri-param>' : l));
    expect(getHeader(parsed(buildResponse(req(lines), 200, 'OK', { toTag: 'z' })), 'to')).toBe('"tag" <sip:tag@biloxi.com;tag=uri-param>;tag=z');
  });

  it('adds no To tag without opts.toTag', () => {
    expect(getHeader(parsed(buildResponse(req(INVITE), 404, 'Not Found')), 'to')).toBe('Bob <sip:bob@biloxi.com>');
  });

  it('writes opts.headers in order after CSeq, then Content-Length last', () => {
    const out = buildResponse(req(INVITE), 401, 'Unauthorized', {
      headers: [
        ['WWW-Authenticate', 'Digest realm="a", nonce="1", algorithm=SHA-256'],
        ['WWW-Authenticate', 'Digest realm="a", nonce="1", algorithm=MD5'],
        ['Server', 'sip-edge'],
      ],
    });
    const lines = out.toString().split('\r\n');
    expect(lines.slice(6, 10)).toEqual([
      'CSeq: 314159 INVITE',
      'WWW-Authenticate: Digest realm="a", nonce="1", algorithm=SHA-256',
      'WWW-Authenticate: Digest realm="a", nonce="1", algorithm=MD5',
      'Server: sip-edge',
    ]);
    expect(lines[10]).toBe('Content-Length: 0');
  });

  it('writes Content-Length as the byte length of a string body', () => {
    const out = buildResponse(req(INVITE), 200, 'OK', { body: 'héllo €', headers: [['Content-Type', 'text/plain']] });
    const m = parsed(out);
    expect(getHeader(m, 'content-length')).toBe(String(Buffer.byteLength('héllo €')));
    expect(m.body.toString('utf8')).toBe('héllo €');
  });

  it('appends a Buffer body byte for byte', () => {
    const body = Buffer.from([0x00, 0xff, 0x0d, 0x0a, 0x41]);
    const m = parsed(buildResponse(req(INVITE), 200, 'OK', { body }));
    expect(m.body.equals(body)).toBe(true);
  });

  it('builds a response that parses back with the same transaction headers', () => {
    const request = parsed(fixture('register-odd-syntax.sip'));
    if (request.kind !== 'request') throw new Error('expected a request');
    const m = parsed(buildResponse(request, 200, 'OK', { toTag: 't1' }));
    if (m.kind !== 'response') throw new Error('expected a response');
    expect(m.status).toBe(200);
    for (const name of ['via', 'from', 'call-id', 'cseq']) expect(getHeaders(m, name)).toEqual(getHeaders(request, name));
    expect(getHeader(m, 'to')).toBe('Bob <sip:bob@acme.sip.localhost>;tag=t1');
  });

  it('answers a partially parsed request, skipping the headers it lacks', () => {
    const r = parseMessage(readFileSync(new URL('../../fixtures/rfc4475/insuf.dat', import.meta.url)));
    if (r.ok || r.request === undefined) throw new Error('expected a failure with a partial request');
    const out = buildResponse(r.request, 400, 'Bad Request', { toTag: 'x' }).toString();
    expect(out).toBe(
      ['SIP/2.0 400 Bad Request', 'Via: SIP/2.0/UDP 192.0.2.95;branch=z9hG4bKkdj.insuf', 'CSeq: 193942 INVITE', 'Content-Length: 0', '', ''].join('\r\n'),
    );
  });
});

describe('serializeMessage', () => {
  it('round-trips a parsed request through parseMessage', () => {
    const m = parsed(fixture('invite-sdp.sip'));
    const again = parsed(serializeMessage(m));
    expect(again).toEqual(m);
  });

  it('writes conventional header names and expands compact forms', () => {
    const out = serializeMessage(parsed(fixture('register-odd-syntax.sip'))).toString();
    expect(out).toContain('\r\nCall-ID: 8f2a1c@192.0.2.9\r\n');
    expect(out).toContain('\r\nCSeq: 7 REGISTER\r\n');
    expect(out).toContain('\r\nX-Custom-Header: value with   inner   spaces\r\n');
    expect(out.startsWith('REGISTER sip:acme.sip.localhost SIP/2.0\r\nVia: ')).toBe(true);
  });

  it('writes a Content-Length matching the body, replacing the one in headers', () => {
    const m = parsed(fixture('invite-sdp.sip'));
    const edited: SipMessage = { ...m, body: Buffer.from('v=0\r\n') };
    const out = serializeMessage(edited).toString();
    expect(out.match(/Content-Length/g)).toHaveLength(1);
    expect(out.endsWith('Content-Length: 5\r\n\r\nv=0\r\n')).toBe(true);
  });

  it('serialises a response', () => {
    const m = parsed(fixture('response-401.sip'));
    const out = serializeMessage(m);
    expect(out.toString().startsWith('SIP/2.0 401 Unauthorized\r\n')).toBe(true);
    expect(parsed(out)).toEqual(m);
  });
});
