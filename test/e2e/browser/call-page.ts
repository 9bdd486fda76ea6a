/// <reference lib="dom" />
/**
 * The browser side of test/e2e/browser-media.test.ts: a WebRTC phone page (SIP.js over
 * WSS, the browser's own RTCPeerConnection and microphone — a fake one in the test)
 * that registers, then calls a number or answers an incoming call, and shows the
 * call's state and how many RTP packets came in. Bundled for the page by esbuild.
 * Settings come from the URL: ?server=&domain=&user=&password=.
 */
import { Invitation, Inviter, Registerer, RegistererState, SessionState, UserAgent, type Session } from 'sip.js';

const $ = (id: string): HTMLElement => document.getElementById(id) as HTMLElement;
const q = new URLSearchParams(location.search);
const server = q.get('server') ?? '';
const domain = q.get('domain') ?? '';
const user = q.get('user') ?? '';
let session: Session | null = null;

function show(id: string, state: string, text: string): void {
  const el = $(id);
  el.dataset.state = state;
  el.textContent = text;
}

/** Inbound RTP packets of the call's peer connection so far (getStats, inbound-rtp audio). */
async function inboundPackets(): Promise<number> {
  const sdh = session?.sessionDescriptionHandler as { peerConnection?: RTCPeerConnection } | undefined;
  const pc = sdh?.peerConnection;
  if (!pc) return 0;
  let n = 0;
  (await pc.getStats()).forEach((r: { type: string; kind?: string; packetsReceived?: number }) => {
    if (r.type === 'inbound-rtp' && r.kind === 'audio') n += r.packetsReceived ?? 0;
  });
  return n;
}

function watch(s: Session): void {
  session = s;
  s.stateChange.addListener((st) => {
    show('call', st, `Call: ${st}`);
    if (st === SessionState.Established) {
      // The remote audio plays in an <audio> element, as a softphone page would.
      const sdh = s.sessionDescriptionHandler as { remoteMediaStream?: MediaStream } | undefined;
      const audio = $('remote') as HTMLAudioElement;
      if (sdh?.remoteMediaStream) audio.srcObject = sdh.remoteMediaStream;
      void audio.play().catch(() => {});
    }
  });
}

const ua = new UserAgent({
  uri: UserAgent.makeURI(`sip:${user}@${domain}`),
  authorizationUsername: user,
  authorizationPassword: q.get('password') ?? '',
  transportOptions: { server },
  logLevel: 'warn',
  sessionDescriptionHandlerFactoryOptions: { iceGatheringTimeout: 500 },
  delegate: {
    onInvite: (inv: Invitation) => {
      watch(inv);
      void inv.accept({ sessionDescriptionHandlerOptions: { constraints: { audio: true, video: false } } });
    },
  },
});
const registerer = new Registerer(ua, { expires: 600 });
registerer.stateChange.addListener((s) => {
  if (s === RegistererState.Registered) show('reg', s, `Registered as ${user}@${domain}`);
});
void ua.start().then(() => registerer.register());

setInterval(() => {
  void inboundPackets().then((n) => {
    const el = $('rtp');
    el.dataset.packets = String(n);
    el.textContent = `RTP packets received: ${n}`;
  });
}, 200);

// For the test (and a person at the console): place a call, hang up.
Object.assign(window, {
  call: (target: string, callId?: string): void => {
    const inviter = new Inviter(ua, UserAgent.makeURI(target) as NonNullable<ReturnType<typeof UserAgent.makeURI>>, {
      sessionDescriptionHandlerOptions: { constraints: { audio: true, video: false } },
      // A SIPp callee maps an INVITE to its call by Call-ID (SIP.js passes params to the request).
      ...(callId ? { params: { callId } as Record<string, string> } : {}),
    });
    watch(inviter);
    void inviter.invite();
  },
  hangup: (): Promise<void> => (session ? session.bye().then(() => undefined) : Promise.resolve()),
  callId: (): string | null => (session ? (session as Inviter | Invitation).request.callId : null),
});
