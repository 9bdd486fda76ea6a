/**
 * The seed corpus of the fuzzers: every raw message in the repository
 * (test/fixtures/sip/*.sip, the RFC 4475 torture messages) plus a few
 * well-formed requests built here that reach deep code paths (digest
 * credentials, several Contacts with RFC 5626 parameters, Path, Require).
 */
import { readdirSync, readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';

const FIXTURES = fileURLToPath(new URL('../../fixtures/', import.meta.url));

/** @returns {{ name: string, data: Buffer }[]} */
export function loadCorpus() {
  const out = [];
  for (const dir of ['sip', 'rfc4475']) {
    for (const f of readdirSync(`${FIXTURES}${dir}`).sort()) {
      if (!f.endsWith('.sip') && !f.endsWith('.dat')) continue;
      out.push({ name: `${dir}/${f}`, data: readFileSync(`${FIXTURES}${dir}/${f}`) });
    }
  }
  for (const [name, text] of Object.entries(SYNTHETIC)) out.push({ name: `synthetic/${name}`, data: Buffer.from(text, 'latin1') });
  return out;
}

const crlf = (lines) => lines.join('\r\n') + '\r\n\r\n';

const SYNTHETIC = {
  'register-digest-sha256': crlf([
    'REGISTER sip:fz.sip.localhost SIP/2.0',
    'Via: SIP/2.0/UDP 192.0.2.10:5060;branch=z9hG4bK776asdhds;rport',
    'Max-Forwards: 70',
    'From: "Fuzz" <sip:alice@fz.sip.localhost>;tag=1928301774',
    'To: <sip:alice@fz.sip.localhost>',
    'Call-ID: a84b4c76e66710@pc33.example.com',
    'CSeq: 2 REGISTER',
    'Contact: <sip:alice@192.0.2.10:5060;transport=udp>;expires=3600;q=0.7',
    'Authorization: Digest username="alice", realm="fz.sip.localhost", nonce="MTcwMDAwMDAwMC4xMjM0NTY3ODkwYWJjZGVm", uri="sip:fz.sip.localhost", response="6629fae49393a05397450978507c4ef1b9e68cf8a0dd0c4a35f7c5dc0a38e1a5", algorithm=SHA-256, qop=auth, nc=00000001, cnonce="0a4f113b"',
    'Expires: 3600',
    'User-Agent: fuzz/1',
    'Content-Length: 0',
  ]),
  'register-outbound': crlf([
    'REGISTER sip:fz.sip.localhost SIP/2.0',
    'Via: SIP/2.0/TCP 192.0.2.11:5060;branch=z9hG4bKout1',
    'Max-Forwards: 70',
    'From: <sip:bob@fz.sip.localhost>;tag=77',
    'To: "Bob" <sip:bob@fz.sip.localhost>',
    'Call-ID: outbound-1',
    'CSeq: 9 REGISTER',
    'Supported: path, outbound, gruu',
    'Require: path',
    'Path: <sip:edge.example.net;lr>',
    'Contact: <sip:bob@df7jal23ls0d.invalid;transport=ws>;+sip.instance="<urn:uuid:00000000-0000-4000-8000-000000000001>";reg-id=1, <sip:bob@192.0.2.11;transport=tcp>;expires=0',
    'Authorization: Digest username="bob", realm="fz.sip.localhost", nonce="x", uri="sip:fz.sip.localhost", response="00000000000000000000000000000000", algorithm=MD5',
    'Content-Length: 0',
  ]),
  'register-star': crlf([
    'REGISTER sip:fz.sip.localhost SIP/2.0',
    'v: SIP/2.0/UDP 192.0.2.12;branch=z9hG4bKstar',
    'f: <sip:carol@fz.sip.localhost>;tag=9',
    't: <sip:carol@fz.sip.localhost>',
    'i: star-1',
    'CSeq: 3 REGISTER',
    'm: *',
    'Expires: 0',
    'l: 0',
  ]),
  options: crlf([
    'OPTIONS sip:fz.sip.localhost SIP/2.0',
    'Via: SIP/2.0/UDP 192.0.2.13:5060;branch=z9hG4bKopt;rport',
    'Max-Forwards: 70',
    'From: <sip:monitor@fz.sip.localhost>;tag=5',
    'To: <sip:fz.sip.localhost>',
    'Call-ID: options-1',
    'CSeq: 1 OPTIONS',
    'Accept: application/sdp',
    'Content-Length: 0',
  ]),
  'invite-sdp': crlf([
    'INVITE sip:bob@fz.sip.localhost SIP/2.0',
    'Via: SIP/2.0/UDP 192.0.2.14:5060;branch=z9hG4bKinv',
    'Max-Forwards: 70',
    'From: <sip:alice@fz.sip.localhost>;tag=a1',
    'To: <sip:bob@fz.sip.localhost>',
    'Call-ID: invite-1',
    'CSeq: 1 INVITE',
    'Contact: <sip:alice@192.0.2.14>',
    'Content-Type: application/sdp',
    'Content-Length: 31',
  ]).slice(0, -2) + '\r\nv=0\r\no=- 0 0 IN IP4 192.0.2.1\r\n',
};
