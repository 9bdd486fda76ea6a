/// <reference lib="dom" />
/**
 * The browser side of test/e2e/liveness.test.ts: a page that registers with SIP.js
 * over WSS on library defaults (no keep-alive options, the Registerer's default
 * expiry), answers every MESSAGE with 200, and then does nothing. Its settings come
 * in the URL fragment (`#server=…&domain=…&username=…&password=…`); what happened is
 * kept in `window.phone` for the test to read.
 */
import { Registerer, UserAgent } from 'sip.js';

interface PhoneLog {
  states: string[];
  messages: string[];
  disconnects: number;
}
const log: PhoneLog = { states: [], messages: [], disconnects: 0 };
(window as unknown as { phone: PhoneLog }).phone = log;

const p = new URLSearchParams(location.hash.slice(1));
const user = p.get('username') ?? '';
const ua = new UserAgent({
  uri: UserAgent.makeURI(`sip:${user}@${p.get('domain') ?? ''}`),
  authorizationUsername: user,
  authorizationPassword: p.get('password') ?? '',
  transportOptions: { server: p.get('server') ?? '' },
  logLevel: 'warn',
  delegate: {
    onMessage: (m) => {
      log.messages.push(m.request.body);
      void m.accept();
    },
    onDisconnect: () => {
      log.disconnects++;
    },
  },
});
const registerer = new Registerer(ua);
registerer.stateChange.addListener((s) => {
  log.states.push(s);
  document.body.dataset.state = s;
});
void ua.start().then(() => registerer.register());
