// WSS client process of the bench: opens one WebSocket (subprotocol `sip`, TLS,
// self-signed certificate accepted) per user, registers with digest auth
// (SHA-256 or MD5, qop=auth, computed here with node:crypto), then idles and
// sends a CRLF keep-alive inside a frame every KEEPALIVE seconds.
// Configuration: one JSON argument {url, domain, from, count, localAddresses:[...],
// window, keepaliveS, expires}; users are wssUser(from … from+count-1). Reports JSON lines on
// stdout: {type:'progress', registered, failed} and {type:'done', ...}; exits on
// SIGTERM (closing every socket).
import { createHash, randomBytes } from 'node:crypto';
import WebSocket from 'ws';
import { wssUser } from './wss-users.mjs';

const cfg = JSON.parse(process.argv[2]);
const { url, domain, localAddresses, window = 100, keepaliveS = 25, expires = 3600 } = cfg;
const users = Array.from({ length: cfg.count }, (_, k) => wssUser(cfg.from + k));

const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');
const hash = (alg, s) => createHash(alg === 'SHA-256' ? 'sha256' : 'md5').update(s).digest('hex');

let registered = 0;
let failed = 0;
let dropped = 0;
let next = 0;
let inflight = 0;
const open = new Set();
const t0 = Date.now();
let firstFailure = null;

function parseChallenge(msg) {
  // Every WWW-Authenticate header; take the first whose algorithm we speak.
  const lines = msg.split('\r\n').filter((l) => /^www-authenticate\s*:/i.test(l));
  for (const l of lines) {
    const v = l.slice(l.indexOf(':') + 1).trim();
    const params = {};
    for (const m of v.replace(/^Digest\s+/i, '').matchAll(/([a-zA-Z-]+)\s*=\s*(?:"([^"]*)"|([^,\s]+))/g)) {
      params[m[1].toLowerCase()] = m[2] ?? m[3];
    }
    const alg = (params.algorithm ?? 'MD5').toUpperCase();
    if (alg === 'MD5' || alg === 'SHA-256') return { ...params, algorithm: alg };
  }
  return null;
}

function register(i) {
  const u = users[i];
  const local = localAddresses[i % localAddresses.length];
  const ws = new WebSocket(url, 'sip', { rejectUnauthorized: false, localAddress: local, perMessageDeflate: false, handshakeTimeout: 20000 });
  const callId = `${randomBytes(8).toString('hex')}@bench`;
  const tag = randomBytes(4).toString('hex');
  const instance = `<urn:uuid:${randomBytes(16).toString('hex').replace(/(.{8})(.{4})(.{4})(.{4})(.{12})/, '$1-$2-$3-$4-$5')}>`;
  const contactHost = `${randomBytes(6).toString('hex')}.invalid`;
  let cseq = 0;
  let done = false;
  const finish = (ok, why) => {
    if (done) return;
    done = true;
    inflight--;
    if (ok) {
      registered++;
      open.add(ws);
    } else {
      failed++;
      if (!firstFailure) firstFailure = why;
      ws.terminate();
    }
    pump();
  };
  const request = (authz) => {
    cseq++;
    const branch = `z9hG4bK${randomBytes(6).toString('hex')}`;
    return (
      `REGISTER sip:${domain} SIP/2.0\r\n` +
      `Via: SIP/2.0/WSS ${contactHost};branch=${branch}\r\n` +
      `Max-Forwards: 70\r\n` +
      `From: <sip:${u.user}@${domain}>;tag=${tag}\r\n` +
      `To: <sip:${u.user}@${domain}>\r\n` +
      `Call-ID: ${callId}\r\n` +
      `CSeq: ${cseq} REGISTER\r\n` +
      `Contact: <sip:${u.user}@${contactHost};transport=ws>;+sip.instance="${instance}";reg-id=1;expires=${expires}\r\n` +
      `Expires: ${expires}\r\n` +
      (authz ? `Authorization: ${authz}\r\n` : '') +
      `User-Agent: sip-edge-bench-wss\r\n` +
      `Supported: path, outbound, gruu\r\n` +
      `Content-Length: 0\r\n\r\n`
    );
  };
  const timer = setTimeout(() => finish(false, 'timeout'), 30000);
  ws.on('open', () => ws.send(request(null)));
  ws.on('message', (data) => {
    const msg = data.toString();
    if (msg.trim() === '') return; // pong to our CRLF keep-alive
    const status = Number(msg.slice(8, 11));
    if (status === 401 && cseq === 1) {
      const c = parseChallenge(msg);
      if (!c) return finish(false, 'no usable challenge');
      const uri = `sip:${domain}`;
      const cnonce = randomBytes(8).toString('hex');
      const nc = '00000001';
      const ha1 = hash(c.algorithm, `${u.user}:${c.realm}:${u.password}`);
      const ha2 = hash(c.algorithm, `REGISTER:${uri}`);
      const response = c.qop
        ? hash(c.algorithm, `${ha1}:${c.nonce}:${nc}:${cnonce}:auth:${ha2}`)
        : hash(c.algorithm, `${ha1}:${c.nonce}:${ha2}`);
      const authz =
        `Digest username="${u.user}", realm="${c.realm}", nonce="${c.nonce}", uri="${uri}", response="${response}", algorithm=${c.algorithm}` +
        (c.qop ? `, qop=auth, nc=${nc}, cnonce="${cnonce}"` : '') +
        (c.opaque !== undefined ? `, opaque="${c.opaque}"` : '');
      ws.send(request(authz));
    } else if (status === 200 && cseq === 2) {
      clearTimeout(timer);
      finish(true);
    } else if (status >= 200) {
      clearTimeout(timer);
      finish(false, `status ${status}`);
    }
  });
  ws.on('error', (e) => {
    clearTimeout(timer);
    finish(false, e.message);
  });
  ws.on('close', () => {
    if (open.delete(ws)) dropped++;
    clearTimeout(timer);
    finish(false, 'closed');
  });
}

function pump() {
  while (inflight < window && next < users.length) {
    inflight++;
    register(next++);
  }
  if (inflight === 0 && next >= users.length) {
    out({ type: 'done', registered, failed, dropped, ms: Date.now() - t0, firstFailure });
  }
}

const progress = setInterval(() => out({ type: 'progress', registered, failed, dropped, open: open.size, ms: Date.now() - t0 }), 1000);
// Keep-alives, spread over the interval: one CRLF frame per flow per keepaliveS.
let kaIndex = 0;
setInterval(() => {
  const all = [...open];
  const per = Math.ceil(all.length / (keepaliveS * 4));
  for (let k = 0; k < per && all.length; k++) {
    const ws = all[kaIndex++ % all.length];
    if (ws.readyState === WebSocket.OPEN) ws.send('\r\n\r\n');
  }
}, 250);

process.on('SIGTERM', () => {
  clearInterval(progress);
  for (const ws of open) ws.terminate();
  process.exit(0);
});
pump();
