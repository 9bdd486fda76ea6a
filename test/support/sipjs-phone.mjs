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
 * Configured by SERVER (ws://…), USERNAME, DOMAIN, PASSWORD, GRUU=1 to ask for GRUUs, and
 * MESSAGE_TO + MESSAGE_COUNT to send MESSAGEs ({"event":"sent","status":…} each). SIGTERM stops it.
 */
import { randomUUID } from 'node:crypto';
import WebSocket from 'ws';
import { Messager, Registerer, UserAgent } from 'sip.js';

const { SERVER, USERNAME, DOMAIN, PASSWORD } = process.env;
const out = (o) => process.stdout.write(JSON.stringify(o) + '\n');

/** Node 20 has no WebSocket global: SIP.js constructs this one (subprotocol `sip`). */
class NodeWebSocket extends WebSocket {
  constructor(url, protocols) {
    super(url, protocols ?? 'sip');
    this.on('ping', () => out({ event: 'ping' }));
  }
}
globalThis.WebSocket = NodeWebSocket;

const ua = new UserAgent({
  uri: UserAgent.makeURI(`sip:${USERNAME}@${DOMAIN}`),
  authorizationUsername: USERNAME,
  authorizationPassword: PASSWORD,
  transportOptions: { server: SERVER },
  logLevel: 'error',
  delegate: {
    onMessage: (m) => {
      out({ event: 'message', body: m.request.body, uri: m.request.ruri.toString() });
      void m.accept();
    },
    // No media in Node: an INVITE is reported and declined with 486 (the ring is what tests look at).
    onInvite: (inv) => {
      out({ event: 'invite', uri: inv.request.ruri.toString() });
      void inv.reject({ statusCode: 486 });
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
