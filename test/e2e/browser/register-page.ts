/// <reference lib="dom" />
/**
 * The browser side of test/e2e/browser.test.ts: a softphone-like page that registers
 * with SIP.js over WSS. Bundled for the page by esbuild when the test starts.
 * A person fills in the form and presses Register; the page shows the registration
 * state in text (and in `data-state`, for the test to wait on).
 */
import { Registerer, RegistererState, UserAgent, version } from 'sip.js';

const $ = <T extends HTMLElement>(id: string): T => document.getElementById(id) as T;
const form = $<HTMLFormElement>('register');
const state = $<HTMLElement>('state');
const detail = $<HTMLElement>('detail');
$<HTMLElement>('library').textContent = `SIP.js ${version}`;

function show(s: string, text: string, more = ''): void {
  state.dataset.state = s;
  state.textContent = text;
  detail.textContent = more;
}

form.addEventListener('submit', (ev) => {
  ev.preventDefault();
  const value = (name: string): string => (form.elements.namedItem(name) as HTMLInputElement).value.trim();
  const server = value('server');
  const user = value('username');
  const domain = value('domain');
  $<HTMLButtonElement>('submit').disabled = true;
  show('Connecting', `Connecting to ${server} …`);

  const ua = new UserAgent({
    uri: UserAgent.makeURI(`sip:${user}@${domain}`),
    authorizationUsername: user,
    authorizationPassword: value('password'),
    transportOptions: { server },
    logLevel: 'warn',
  });
  const registerer = new Registerer(ua, { expires: 600 });
  registerer.stateChange.addListener((s) => {
    if (s === RegistererState.Registered) {
      show(s, `Registered as ${user}@${domain}`, `over ${server}`);
    } else if (s === RegistererState.Unregistered && state.dataset.state !== 'Failed') {
      show(s, 'Not registered');
    }
  });
  ua.start()
    .then(() =>
      registerer.register({
        requestDelegate: {
          onAccept: (r) => {
            const expires = /;expires=(\d+)/.exec(r.message.getHeader('contact') ?? '')?.[1] ?? '?';
            detail.textContent = `over ${server}: ${r.message.statusCode} ${r.message.reasonPhrase} from ${r.message.getHeader('server') ?? 'the registrar'}, binding expires in ${expires} s`;
          },
          onReject: (r) => show('Failed', `Registration failed: ${r.message.statusCode} ${r.message.reasonPhrase}`),
        },
      }),
    )
    .catch((e: unknown) => show('Failed', `Registration failed: ${e instanceof Error ? e.message : String(e)}`));
});
