/**
 * Deep fuzzing of the registrar: REGISTERs that pass digest authentication (the
 * digest covers only method and Request-URI, RFC 3261 §22.4) while every other
 * header is hostile — Contact lists of every shape, Expires values, Path,
 * Require, Supported, RFC 5626 parameters, Call-ID/CSeq order — so the binding
 * rules and the location store see what a compromised or broken phone could send.
 */
import { createHash, randomBytes } from 'node:crypto';
import { prng } from './mutate.mjs';

const md5 = (s) => createHash('md5').update(s).digest('hex');

/** Expires values: mostly acceptable, some at and past the limits, some not numbers. */
const GOOD_EXPIRES = ['0', '60', '61', '300', '3600', '7200', '86400', '4294967295'];
const BAD_EXPIRES = ['-1', '', 'abc', '1.5', '"3600"', '0x10', '4294967296', '9'.repeat(40), '59', '1'];
const GOOD_URIS = [
  (u) => `sip:${u}@192.0.2.10:5060`,
  (u) => `sip:${u}@192.0.2.11;transport=tcp`,
  (u) => `sips:${u}@example.net`,
  (u) => `sip:${u}@[2001:db8::1]:5070;transport=udp`,
  (u) => `sip:${u}@df7jal23ls0d.invalid;transport=ws`,
  (u) => `sip:${u}@${'h'.repeat(60)}.example`,
];
const BAD_URIS = [
  (u) => `sip:${u}%40x@host;lr;maddr=192.0.2.1?Subject=x&Priority=urgent`,
  (u) => `sip:${u}@${'h'.repeat(200)}.example`,
  () => 'tel:+15551234567', () => 'sip:@', () => 'sip:', () => `sip:a@b;${'p=v;'.repeat(300)}`, () => 'mailto:x@y', () => '<<sip:a@b>>'];
const GOOD_PARAMS = [';q=0.5', ';q=1.0', ';+sip.instance="<urn:uuid:00000000-0000-4000-8000-00000000000X>";reg-id=1', ';reg-id=2', ';methods="INVITE,BYE"', ';audio', ';+g.oma.sip-im', ';x=' + 'y'.repeat(1500)];
const BAD_PARAMS = [';q=2', ';q=', ';reg-id=', ';reg-id=99999999999', ';+sip.instance=', ';expires=', ';=', ';;'];

/**
 * @param {number} seed
 * @param {{ user: string, domain: string, password: string }} who
 * @returns {(nonce: string, transport: string) => Buffer}
 */
export function registrarMessages(seed, who) {
  const rand = prng(seed);
  const pick = (a) => a[Math.floor(rand() * a.length)];
  const callIds = [];
  let nc = 0;
  let cseq = 1;
  return (nonce, transport) => {
    /** Mostly well-formed choices, a hostile one now and then: enough pass to reach the store. */
    const either = (good, bad, p = 0.12) => (rand() < p ? pick(bad) : pick(good));
    const contactOne = () => {
      const uri = either(GOOD_URIS, BAD_URIS)(who.user).replace('X', String(Math.floor(rand() * 10)));
      let c = rand() < 0.9 ? `<${uri}>` : uri;
      if (rand() < 0.2) c = `"${either(['Fuzz', '', 'a \\"q\\" b'], ['a "q" b', '\\'])}" ${c.startsWith('<') ? c : `<${c}>`}`;
      for (let k = Math.floor(rand() * 3); k > 0; k--) c += either(GOOD_PARAMS, BAD_PARAMS).replace('X', String(Math.floor(rand() * 10)));
      if (rand() < 0.5) c += `;expires=${either(GOOD_EXPIRES, BAD_EXPIRES)}`;
      return c;
    };
    const lines = [];
    // Call-ID/CSeq: new, reused in order, or reused out of order (RFC 3261 §10.3 step 7).
    let callId;
    const r = rand();
    if (r < 0.5 || callIds.length === 0) {
      callId = randomBytes(6).toString('hex');
      callIds.push(callId);
      if (callIds.length > 50) callIds.shift();
    } else callId = pick(callIds);
    cseq = rand() < 0.1 ? Math.max(0, cseq - Math.floor(rand() * 5)) : cseq + 1;
    lines.push(`REGISTER sip:${who.domain} SIP/2.0`);
    lines.push(`Via: SIP/2.0/${transport} 192.0.2.10:5060;branch=z9hG4bK${randomBytes(6).toString('hex')};rport`);
    lines.push('Max-Forwards: 70');
    lines.push(`From: <sip:${who.user}@${who.domain}>;tag=${randomBytes(3).toString('hex')}`);
    lines.push(`To: <sip:${who.user}@${who.domain}>`);
    lines.push(`Call-ID: ${callId}`);
    lines.push(`CSeq: ${rand() < 0.02 ? pick(BAD_EXPIRES) : cseq} REGISTER`);
    const shape = rand();
    const star = shape < 0.08;
    if (star) lines.push('Contact: *'); // clears the bindings (with Expires: 0), so later ones fit under the cap
    else if (shape < 0.12) {
      // no Contact: a query
    } else {
      const n = rand() < 0.05 ? 5 + Math.floor(rand() * 20) : 1 + Math.floor(rand() * 2);
      const contacts = Array.from({ length: n }, contactOne);
      if (rand() < 0.5) lines.push(`Contact: ${contacts.join(', ')}`);
      else for (const c of contacts) lines.push(`${rand() < 0.2 ? 'm' : 'Contact'}: ${c}`);
    }
    if (star && rand() < 0.8) lines.push('Expires: 0');
    else if (rand() < 0.6) lines.push(`Expires: ${either(GOOD_EXPIRES, BAD_EXPIRES)}`);
    if (rand() < 0.2) lines.push(`Path: <sip:edge${Math.floor(rand() * 3)}.example;lr>${rand() < 0.5 ? ', <sip:p2.example;lr>' : ''}`);
    if (rand() < 0.2) lines.push(`Supported: ${pick(['path', 'outbound', 'path, outbound, gruu', '', ',,,'])}`);
    if (rand() < 0.1) lines.push(`Require: ${either(['path', 'outbound', 'gruu', 'path, outbound'], ['foo', 'path, bar', ''], 0.3)}`);
    if (rand() < 0.3) lines.push(`User-Agent: ${pick(['fuzz/1', 'SIPp', '', 'x'.repeat(500), 'sipp baresip'])}`);
    nc++;
    const ncHex = nc.toString(16).padStart(8, '0');
    const cnonce = randomBytes(4).toString('hex');
    const uri = `sip:${who.domain}`;
    const ha1 = md5(`${who.user}:${who.domain}:${who.password}`);
    const response = md5(`${ha1}:${nonce}:${ncHex}:${cnonce}:auth:${md5(`REGISTER:${uri}`)}`);
    lines.push(`Authorization: Digest username="${who.user}", realm="${who.domain}", nonce="${nonce}", uri="${uri}", response="${response}", algorithm=MD5, qop=auth, nc=${ncHex}, cnonce="${cnonce}"`);
    lines.push('Content-Length: 0');
    return Buffer.from(`${lines.join('\r\n')}\r\n\r\n`, 'latin1');
  };
}

/**
 * Provision one account and endpoint through the HTTP API (partner credentials
 * from the server's environment).
 */
export async function provisionEndpoint(httpPort, partner) {
  const api = `http://127.0.0.1:${httpPort}`;
  const acc = await fetch(`${api}/api/v1/partner/accounts`, {
    method: 'POST',
    headers: { 'X-Auth-ID': partner.id, 'X-Auth-Token': partner.token, 'Content-Type': 'application/json' },
    body: JSON.stringify({ name: 'Fuzz', email: 'fuzz@example.test', password: 'a-long-password', country: 'IN' }),
  });
  if (acc.status !== 201) throw new Error(`account: ${acc.status} ${await acc.text()}`);
  const a = await acc.json();
  const who = { user: 'fuzzer', domain: a.sip_domain, password: 'fuzz-secret-pass-1' };
  const ep = await fetch(`${api}/api/v1/Account/${a.auth_id}/Endpoint/`, {
    method: 'POST',
    headers: { 'X-Auth-ID': a.auth_id, 'X-Auth-Token': a.auth_token, 'Content-Type': 'application/json' },
    body: JSON.stringify({ username: who.user, password: who.password }),
  });
  if (ep.status !== 201) throw new Error(`endpoint: ${ep.status} ${await ep.text()}`);
  return who;
}

/** A fresh MD5 nonce for `who` from the server (a REGISTER without credentials over UDP). */
export async function fetchNonce(sendAndWait, who) {
  const id = `nonce-${randomBytes(6).toString('hex')}`;
  const text = [
    `REGISTER sip:${who.domain} SIP/2.0`,
    `Via: SIP/2.0/UDP 127.0.0.1:9;branch=z9hG4bK${randomBytes(6).toString('hex')};rport`,
    'Max-Forwards: 70',
    `From: <sip:${who.user}@${who.domain}>;tag=n`,
    `To: <sip:${who.user}@${who.domain}>`,
    `Call-ID: ${id}`,
    'CSeq: 1 REGISTER',
    'User-Agent: sipp',
    'Content-Length: 0',
    '',
    '',
  ].join('\r\n');
  const res = await sendAndWait(Buffer.from(text), id);
  const m = /nonce="([^"]+)"/.exec(res);
  if (!m) throw new Error(`no nonce in ${res.split('\r\n')[0]}`);
  return m[1];
}
