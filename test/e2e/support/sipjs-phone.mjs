/**
 * A SIP.js 0.21 phone in Node over the `ws` package, as a process of its own, for
 * tests that must freeze it (SIGSTOP) or watch it sit quiet for a long time
 * (test/e2e/liveness.test.ts). Library defaults throughout: no keep-alive options,
 * the Registerer's default expiry. It registers, answers every MESSAGE with 200,
 * and writes one JSON line per event on stdout:
 *   {"event":"state","state":"Registered"}   registerer state changes
 *   {"event":"message","body":"…"}           a MESSAGE arrived (and was accepted)
 *   {"event":"ping"}                         a WebSocket ping arrived (`ws` answers it)
 *   {"event":"disconnect"}                   the WebSocket closed
 * Configured by SERVER (ws://…), USERNAME, DOMAIN, PASSWORD. SIGTERM stops it.
 */
import WebSocket from 'ws';
import { Registerer, UserAgent } from 'sip.js';

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
      out({ event: 'message', body: m.request.body });
      void m.accept();
    },
    onDisconnect: () => out({ event: 'disconnect' }),
  },
});
const registerer = new Registerer(ua);
registerer.stateChange.addListener((state) => out({ event: 'state', state }));
process.on('SIGTERM', () => {
  void Promise.race([ua.stop(), new Promise((r) => setTimeout(r, 500))]).then(() => process.exit(0));
});
await ua.start();
await registerer.register();
