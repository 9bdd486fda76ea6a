/**
 * A SIP.js 0.21 phone in Node over the `ws` package, as a process of its own, for
 * tests that must freeze it (SIGSTOP) or watch it sit quiet for a long time
 * (test/e2e/liveness.test.ts). Library defaults throughout: no keep-alive options,
 * the Registerer's default expiry. It registers, answers every MESSAGE with 200,
 * and writes one JSON line per event on stdout:
 *   {"event":"state","state":"Registered"}   registerer state changes
 *   {"event":"message","body":"…","uri":"…"} a MESSAGE arrived (and was accepted)
 *   {"event":"gruu","pub":"…","temp":"…"}    GRUUs given with the registration (RFC 5627)
 *   {"event":"invite","uri":"…"}             an INVITE arrived (declined with 486: no media in Node)
 *   {"event":"ping"}                         a WebSocket ping arrived (`ws` answers it)
 *   {"event":"disconnect"}                   the WebSocket closed
 *   {"event":"request","method":"…","uri":"…","callId":"…"}  every request frame that arrived on
 *                                            the WebSocket, as read off the wire (before SIP.js)
 * Configured by SERVER (ws://…), USERNAME, DOMAIN, PASSWORD, GRUU=1 to ask for GRUUs, and
 * MESSAGE_TO + MESSAGE_COUNT to send MESSAGEs ({"event":"sent","status":…} each).
 *
 * ANSWER=1 makes it a phone that takes calls: an INVITE is answered 200 with a fixed audio
 * SDP (signalling only: Node has no WebRTC, so a stand-in session description handler gives
 * the SDP), except from a caller whose username contains "ring": that call only rings (180)
 * until the caller cancels it. {"event":"call-in","state":"Established"|"Terminated",…}.
 *
 * Commands, one JSON object per line on stdin, each answered by {"event":"done","id":…}:
 *   {"id":1,"cmd":"call","to":"sip:…","callId":"…","holdMs":200}   INVITE, ACK, BYE after holdMs;
 *        answers {invite: <final status>, bye: <status or null>}
 *   {"id":2,"cmd":"call","to":"sip:…","callId":"…","cancel":true}  INVITE, CANCEL after the 180;
 *        answers {invite: 487 (or the final status that came first), cancelled: true}
 *   {"id":3,"cmd":"message","to":"sip:…","callId":"…"}             MESSAGE; answers {status}
 * `callId` is optional: a SIPp callee maps an incoming request to its call by Call-ID.
 * SIGTERM stops it.
 */
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { createInterface } from 'node:readline';
import { Inviter, Messager, Registerer, SessionState, UserAgent } from 'sip.js';

const { SERVER, USERNAME, DOMAIN, PASSWORD } = process.env;
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

/** Node 20 has no WebSocket global: SIP.js constructs this one (subprotocol `sip`). */
class NodeWebSocket extends WebSocket {
  constructor(url, protocols) {
    super(url, protocols ?? 'sip');
    this.on('ping', () => out({ event: 'ping' }));
    // What reached this phone on the wire: every request's method, Request-URI and Call-ID.
    this.on('message', (data) => {
      const text = data.toString();
      const callId = /\r\n(?:Call-ID|i)\s*:\s*([^\r\n]+)/i.exec(text)?.[1]?.trim() ?? null;
      const status = /^SIP\/2\.0 (\d{3}) /.exec(text);
      if (status) {
        // Final responses by Call-ID and method, for the commands (SIP.js forgets a BYE's answer).
        const method = /\r\nCSeq\s*:\s*\d+\s+([A-Z]+)/i.exec(text)?.[1];
        if (Number(status[1]) >= 200) finalResponse(`${callId} ${method}`, Number(status[1]));
        return;
      }
      const line = /^([A-Z]+) (\S+) SIP\/2\.0\r\n/.exec(text);
      if (!line) return;
      out({ event: 'request', method: line[1], uri: line[2], callId });
    });
  }
}

/** Waiters for a final response, by `<Call-ID> <method>`. */
const responseWaiters = new Map();
function finalResponse(key, status) {
  const w = responseWaiters.get(key);
  if (w) {
    responseWaiters.delete(key);
    w(status);
  }
}
function nextFinal(key, ms) {
  return new Promise((resolve) => {
    const t = setTimeout(() => {
      responseWaiters.delete(key);
      resolve(null);
    }, ms);
    responseWaiters.set(key, (status) => {
      clearTimeout(t);
      resolve(status);
    });
  });
}

/** Signalling only: a fixed audio offer/answer instead of WebRTC. */
const SDP = ['v=0', 'o=- 1 1 IN IP4 127.0.0.1', 's=-', 'c=IN IP4 127.0.0.1', 't=0 0', 'm=audio 40000 RTP/AVP 0', 'a=rtpmap:0 PCMU/8000', ''].join('\r\n');
class StaticSdp {
  close() {}
  getDescription() {
    return Promise.resolve({ body: SDP, contentType: 'application/sdp' });
  }
  hasDescription(contentType) {
    return contentType === 'application/sdp';
  }
  setDescription() {
    return Promise.resolve();
  }
  sendDtmf() {
    return false;
  }
}
const ANSWER = process.env.ANSWER === '1';
globalThis.WebSocket = NodeWebSocket;

const ua = new UserAgent({
  uri: UserAgent.makeURI(`sip:${USERNAME}@${DOMAIN}`),
  authorizationUsername: USERNAME,
  authorizationPassword: PASSWORD,
  transportOptions: { server: SERVER },
  logLevel: 'error',
  sessionDescriptionHandlerFactory: () => new StaticSdp(),
  delegate: {
    onMessage: (m) => {
      out({ event: 'message', body: m.request.body, uri: m.request.ruri.toString() });
      void m.accept();
    },
    onInvite: (inv) => {
      out({ event: 'invite', uri: inv.request.ruri.toString() });
      // No media in Node: without ANSWER=1 an INVITE is declined with 486 (the ring is what tests look at).
      if (!ANSWER) return void inv.reject({ statusCode: 486 });
      const callId = inv.request.callId;
      inv.stateChange.addListener((state) => {
        if (state === SessionState.Established || state === SessionState.Terminated) out({ event: 'call-in', state, callId });
      });
      // SIP.js has already sent 180 Ringing (sendInitialProvisionalResponse): a "ring…" caller is left ringing.
      if (/ring/.test(inv.request.from.uri.user ?? '')) return;
      void inv.accept();
    },
    onDisconnect: () => out({ event: 'disconnect' }),
  },
});
// SIP.js always sends `Supported: gruu` on REGISTER; GRUU=1 adds the `+sip.instance`
// (and reg-id) that RFC 5627 §4.1 needs for the registrar to hand out GRUUs.
const registerer = new Registerer(ua, process.env.GRUU === '1' ? { regId: 1, instanceId: randomUUID() } : {});
registerer.stateChange.addListener((state) => {
  out({ event: 'state', state });
  // GRUUs (RFC 5627) the registrar gave this device, when it gave any.
  const { pubGruu, tempGruu } = ua.contact;
  if (state === 'Registered' && pubGruu) out({ event: 'gruu', pub: pubGruu.toString(), temp: tempGruu ? tempGruu.toString() : null });
});
process.on('SIGTERM', () => {
  void Promise.race([ua.stop(), new Promise((r) => setTimeout(r, 500))]).then(() => process.exit(0));
});
await ua.start();
await registerer.register();

// MESSAGE_TO=<uri> MESSAGE_COUNT=<n>: once registered, send n MESSAGEs one after the
// other and report each final status: {"event":"sent","status":200}.
if (process.env.MESSAGE_TO) {
  const target = UserAgent.makeURI(process.env.MESSAGE_TO);
  const count = Number(process.env.MESSAGE_COUNT ?? '1');
  const registered = () => new Promise((resolve) => {
    if (registerer.state === 'Registered') return resolve();
    registerer.stateChange.addListener((st) => st === 'Registered' && resolve());
  });
  await registered();
  for (let i = 0; i < count; i++) {
    const status = await new Promise((resolve) => {
      void new Messager(ua, target, `hello ${i}`).message({
        requestDelegate: {
          onAccept: (r) => resolve(r.message.statusCode),
          onReject: (r) => resolve(r.message.statusCode),
        },
      });
    });
    out({ event: 'sent', status });
  }
}

// Commands on stdin (see the header).
const registeredOnce = () =>
  new Promise((resolve) => {
    if (registerer.state === 'Registered') return resolve();
    registerer.stateChange.addListener((st) => st === 'Registered' && resolve());
  });

const waitState = (session, wanted, ms) =>
  new Promise((resolve) => {
    if (session.state === wanted) return resolve(true);
    const t = setTimeout(() => resolve(false), ms);
    session.stateChange.addListener((st) => {
      if (st === wanted) {
        clearTimeout(t);
        resolve(true);
      }
    });
  });

async function call(c) {
  const target = UserAgent.makeURI(c.to);
  let ringing;
  const rang = new Promise((r) => (ringing = r));
  let final = null;
  const inviter = new Inviter(ua, target, c.callId ? { params: { callId: c.callId } } : {});
  await inviter.invite({
    requestDelegate: {
      onProgress: (r) => r.message.statusCode >= 180 && ringing(),
      onAccept: (r) => (final = r.message.statusCode),
      onReject: (r) => (final = r.message.statusCode),
    },
  });
  if (c.cancel) {
    await Promise.race([rang, new Promise((r) => setTimeout(r, 10_000))]);
    await inviter.cancel();
    await waitState(inviter, SessionState.Terminated, 10_000);
    return { invite: final, cancelled: true };
  }
  if (!(await waitState(inviter, SessionState.Established, 15_000))) return { invite: final, bye: null };
  await new Promise((r) => setTimeout(r, c.holdMs ?? 0));
  // SIP.js ends the session as it sends the BYE and never reports the answer: read it off the wire.
  const answered = nextFinal(`${inviter.request.callId} BYE`, 10_000);
  await inviter.bye();
  const bye = await answered;
  await waitState(inviter, SessionState.Terminated, 10_000);
  return { invite: final, bye };
}

function message(c) {
  return new Promise((resolve) => {
    const m = new Messager(ua, UserAgent.makeURI(c.to), c.body ?? `hello from ${USERNAME}`, 'text/plain', c.callId ? { params: { callId: c.callId } } : {});
    void m.message({
      requestDelegate: {
        onAccept: (r) => resolve({ status: r.message.statusCode }),
        onReject: (r) => resolve({ status: r.message.statusCode }),
      },
    });
  });
}

createInterface({ input: process.stdin }).on('line', async (line) => {
  if (!line.trim()) return;
  const c = JSON.parse(line);
  try {
    await registeredOnce();
    const r = c.cmd === 'call' ? await call(c) : c.cmd === 'message' ? await message(c) : { error: `unknown command ${c.cmd}` };
    out({ event: 'done', id: c.id, ...r });
  } catch (err) {
    out({ event: 'done', id: c.id, error: err instanceof Error ? err.message : String(err) });
  }
});
