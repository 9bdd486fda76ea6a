/**
 * The media of a placed call on rtpengine (docs/calls.md "Media"): one rtpengine call per
 * placed call (`b2b-<call_uuid>`), with up to three parties — `app` (the platform's side:
 * a silent stand-in address rtpengine plays prompts from), `a` (the A leg) and `b` (a
 * leg a Dial connects). Prompts are rtpengine's `play media` to a party, digits out are
 * `play DTMF`, digits in come from rtpengine's DTMF log (`--dtmf-log-dest`, see
 * {@link DtmfListener}). A Dial re-pairs `a` with `b` in the same rtpengine call, so the
 * A leg keeps sending to the port it already has.
 */
import { createSocket, type Socket } from 'node:dgram';
import type { Logger } from '../logger.js';
import { LEG_FLAGS, type RtpengineClient } from '../media/rtpengine.js';

export type MediaParty = 'a' | 'b';

/** Every party of a placed call is plain RTP to rtpengine (a browser leg is anchored by the proxy). */
const PLAIN = { ...LEG_FLAGS.plain, flags: ['trust-address'] } as const;

/** The platform's side of a call: rtpengine sends what the A leg says here (discarded). */
function appSdp(sessionId: number): string {
  return [
    'v=0',
    `o=sip-edge ${sessionId} 1 IN IP4 127.0.0.1`,
    's=sip-edge',
    'c=IN IP4 127.0.0.1',
    't=0 0',
    'm=audio 9 RTP/AVP 0 8 101',
    'a=rtpmap:0 PCMU/8000',
    'a=rtpmap:8 PCMA/8000',
    'a=rtpmap:101 telephone-event/8000',
    'a=fmtp:101 0-16',
    'a=ptime:20',
    'a=sendrecv',
    '',
  ].join('\r\n');
}

/** The first `m=audio <port>` of an SDP. */
function portOfSdp(sdp: string): number | null {
  const m = /^m=audio (\d+)/m.exec(sdp);
  return m ? Number(m[1]) : null;
}

/** Why a media command failed (the call's hangup cause names it: docs/calls.md "Causes"). */
export class MediaError extends Error {
  constructor(message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'MediaError';
  }
}

export class CallMediaSession {
  readonly ngCallId: string;
  private engine: string | null = null;
  private bridged = false;
  /** rtpengine's port facing the A leg (`m=audio` of the SDP offered to it): what A sends to. */
  private aPort: number | null = null;

  constructor(
    private readonly client: RtpengineClient,
    callUuid: string,
    private readonly log: Logger,
  ) {
    this.ngCallId = `b2b-${callUuid}`;
  }

  get engineId(): string | null {
    return this.engine;
  }

  /** The SDP offered to the A leg (rtpengine's ports facing it). */
  async offerA(): Promise<string> {
    const r = await this.wrap('offer', () =>
      this.client.offer({ 'call-id': this.ngCallId, 'from-tag': 'app', sdp: appSdp(Date.now() % 1e9), ...PLAIN }),
    );
    this.engine = r.engine;
    this.aPort = portOfSdp(r.sdp);
    return r.sdp;
  }

  /** The A leg's answer. */
  async answerA(sdp: string): Promise<void> {
    await this.wrap('answer', () => this.client.answer({ 'call-id': this.ngCallId, 'from-tag': 'app', 'to-tag': 'a', sdp, ...PLAIN }, this.need()));
  }

  /** A call to an application: the caller's offer (party `a`) answered by the platform's side; the SDP for the caller. */
  async answerOffer(aSdp: string): Promise<string> {
    const o = await this.wrap('offer', () => this.client.offer({ 'call-id': this.ngCallId, 'from-tag': 'a', sdp: aSdp, ...PLAIN }));
    this.engine = o.engine;
    const r = await this.wrap('answer', () => this.client.answer({ 'call-id': this.ngCallId, 'from-tag': 'a', 'to-tag': 'app', sdp: appSdp(Date.now() % 1e9), ...PLAIN }, o.engine));
    return r.sdp;
  }

  /** A Dial: the A leg's session offered to the B leg (the SDP for B). */
  async offerB(aSdp: string): Promise<string> {
    const r = await this.wrap('offer', () => this.client.offer({ 'call-id': this.ngCallId, 'from-tag': 'a', sdp: aSdp, ...PLAIN }, this.need()));
    return r.sdp;
  }

  /** The B leg answered: A and B now hear each other. */
  async answerB(bSdp: string): Promise<void> {
    await this.wrap('answer', () => this.client.answer({ 'call-id': this.ngCallId, 'from-tag': 'a', 'to-tag': 'b', sdp: bSdp, ...PLAIN }, this.need()));
    this.bridged = true;
  }

  get isBridged(): boolean {
    return this.bridged;
  }

  /** Plays a file to a party; resolves with its length in ms (rtpengine's `duration`). */
  async play(to: MediaParty, file: string): Promise<number> {
    const r = await this.wrap('play media', () => this.client.command('play media', { 'call-id': this.ngCallId, 'from-tag': to, file }, this.need()));
    const d = Number(r.reply['duration']);
    return Number.isFinite(d) && d > 0 ? d : 0;
  }

  async stop(to: MediaParty): Promise<void> {
    try {
      await this.client.command('stop media', { 'call-id': this.ngCallId, 'from-tag': to }, this.need());
    } catch (err) {
      // Nothing playing is not an error worth a call.
      this.log.debug({ err: err instanceof Error ? err.message : String(err) }, 'stop media');
    }
  }

  /** Sends digits to a party as RFC 4733 events (from the other side of its stream). */
  async digits(to: MediaParty, digits: string): Promise<void> {
    const from = to === 'a' ? (this.bridged ? 'b' : 'app') : 'a';
    for (const d of digits) {
      if (d === 'w' || d === 'W') {
        await new Promise((r) => setTimeout(r, d === 'w' ? 500 : 1000));
        continue;
      }
      await this.wrap('play DTMF', () => this.client.command('play DTMF', { 'call-id': this.ngCallId, 'from-tag': from, code: d, duration: 160 }, this.need()));
      await new Promise((r) => setTimeout(r, 250));
    }
  }

  /** The port rtpengine receives the A leg's RTP on (a recording keeps what arrived there). */
  get aLegPort(): number | null {
    return this.aPort;
  }

  /** rtpengine starts writing the call's packets to a pcap file (`--recording-method=pcap`; docs/calls.md "Recording"). */
  async startRecording(): Promise<void> {
    await this.wrap('start recording', () => this.client.command('start recording', { 'call-id': this.ngCallId }, this.need()));
  }

  /** rtpengine closes the recording's pcap file (complete once it answers). A call already deleted is not an error. */
  async stopRecording(): Promise<void> {
    if (!this.engine) return;
    try {
      await this.client.command('stop recording', { 'call-id': this.ngCallId }, this.engine);
    } catch (err) {
      this.log.debug({ err: err instanceof Error ? err.message : String(err), call: this.ngCallId }, 'rtpengine stop recording failed');
    }
  }

  async delete(): Promise<void> {
    if (!this.engine) return;
    try {
      await this.client.command('delete', { 'call-id': this.ngCallId }, this.engine);
    } catch (err) {
      this.log.debug({ err: err instanceof Error ? err.message : String(err), call: this.ngCallId }, 'rtpengine delete failed');
    }
  }

  private need(): string {
    if (!this.engine) throw new MediaError('no media session');
    return this.engine;
  }

  private async wrap<T>(what: string, f: () => Promise<T>): Promise<T> {
    try {
      return await f();
    } catch (err) {
      throw new MediaError(`rtpengine ${what} failed: ${err instanceof Error ? err.message : String(err)}`, { cause: err });
    }
  }
}

/** A digit rtpengine saw, with the call and party it came from. */
export interface DtmfEvent {
  ngCallId: string;
  /** `a` or `b` (the party whose stream carried it). */
  party: string;
  digit: string;
}

const EVENT_DIGITS = '0123456789*#ABCD';

/** Reads rtpengine's DTMF log (`--dtmf-log-dest`): one JSON datagram per digit. */
export function parseDtmfLog(data: Buffer): DtmfEvent | null {
  try {
    const j = JSON.parse(data.toString('utf8')) as { callid?: unknown; source_tag?: unknown; event?: unknown; type?: unknown };
    if (typeof j.callid !== 'string' || typeof j.source_tag !== 'string' || typeof j.event !== 'number') return null;
    if (j.type !== undefined && j.type !== 'DTMF') return null;
    const digit = EVENT_DIGITS[j.event];
    return digit === undefined ? null : { ngCallId: j.callid, party: j.source_tag, digit };
  } catch {
    return null;
  }
}

/**
 * The UDP socket rtpengine's DTMF log is sent to (CALLS_DTMF_LISTEN). One process of a node
 * binds it; the digits of calls another process runs are handed on by `forward`.
 */
export class DtmfListener {
  private socket: Socket | null = null;

  constructor(
    private readonly address: { host: string; port: number },
    private readonly onEvent: (e: DtmfEvent) => void,
    private readonly log: Logger,
  ) {}

  /** True when this process holds the socket (another one of the node may). */
  async start(): Promise<boolean> {
    const s = createSocket({ type: this.address.host.includes(':') ? 'udp6' : 'udp4', reuseAddr: false });
    return new Promise((resolve) => {
      s.once('error', (err) => {
        this.log.info({ err: err.message, address: `${this.address.host}:${this.address.port}` }, 'DTMF log socket held elsewhere; digits arrive through the fleet');
        s.close();
        resolve(false);
      });
      s.bind(this.address.port, this.address.host, () => {
        s.removeAllListeners('error');
        s.on('error', (err) => this.log.warn({ err: err.message }, 'DTMF log socket error'));
        s.on('message', (m) => {
          const e = parseDtmfLog(m);
          if (e) this.onEvent(e);
        });
        this.socket = s;
        resolve(true);
      });
    });
  }

  stop(): void {
    this.socket?.close();
    this.socket = null;
  }
}
