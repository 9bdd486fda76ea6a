/**
 * Media through rtpengine for calls the proxy forwards (docs/media.md "Calls"):
 * which calls are relayed, the flags of each direction, and the NG commands of a
 * call's life (offer per forked branch, answer from the branch that answers,
 * delete at the end). The NG protocol itself is src/media/rtpengine.ts.
 */
import type { Logger } from '../logger.js';
import { LEG_FLAGS, RtpengineRejectedError, type RtpengineClient } from '../media/rtpengine.js';
import type { SipTransportName } from '../transport/types.js';

export type MediaRelayMode = 'bridge' | 'always';

/** A leg of a call as the relay sees it: whether its party speaks WebRTC (ICE + DTLS-SRTP). */
export function isWebrtcLeg(transport: SipTransportName, sdp: string | null): boolean {
  return transport === 'ws' || transport === 'wss' || (sdp !== null && /^m=\S+ \d+ UDP\/TLS\/RTP\/SAVPF?\b/m.test(sdp));
}

/** What the proxy asks for one branch of one call. */
export interface MediaOffer {
  callId: string;
  fromTag: string;
  /** rtpengine's `via-branch`: which forked branch this offer is for. */
  branch: string;
  sdp: string;
  /** The callee's side of this branch speaks WebRTC. */
  calleeWebrtc: boolean;
  /** The engine of the call, once one took an earlier branch (every branch of a call on one engine). */
  engine?: string;
}

export class MediaRelay {
  constructor(
    private readonly o: {
      client: RtpengineClient;
      mode: MediaRelayMode;
      log: Logger;
    },
  ) {}

  /** Whether a call between these two legs goes through rtpengine. */
  relays(callerWebrtc: boolean, calleeWebrtc: boolean): boolean {
    return this.o.mode === 'always' || callerWebrtc !== calleeWebrtc;
  }

  /** Whether the call cannot work without the relay (WebRTC on one side only): it fails when no engine answers. */
  static needed(callerWebrtc: boolean, calleeWebrtc: boolean): boolean {
    return callerWebrtc !== calleeWebrtc;
  }

  /** The caller's offer, rewritten for the callee of one branch; returns the SDP to send and the engine that holds the call. */
  async offer(m: MediaOffer): Promise<{ sdp: string; engine: string }> {
    const flags = m.calleeWebrtc ? LEG_FLAGS.webrtc : LEG_FLAGS.plain;
    const r = await this.o.client.offer({ ...flags, 'call-id': m.callId, 'from-tag': m.fromTag, 'via-branch': m.branch, sdp: m.sdp }, m.engine);
    return { sdp: r.sdp, engine: r.engine };
  }

  /** The callee's answer (18x or 2xx with SDP) of one branch, rewritten for the caller. */
  async answer(a: { callId: string; fromTag: string; toTag: string; branch: string; sdp: string; callerWebrtc: boolean; engine: string }): Promise<string> {
    // Towards a browser that offered (a=setup:actpass), rtpengine takes the active DTLS role and
    // starts the handshake itself once ICE is through; as the passive side it never saw the
    // browser's ClientHello in tests (Chromium 156, rtpengine 11), the call then had no media.
    const flags = a.callerWebrtc ? { ...LEG_FLAGS.webrtc, DTLS: 'active' as const } : LEG_FLAGS.plain;
    const r = await this.o.client.answer({ ...flags, 'call-id': a.callId, 'from-tag': a.fromTag, 'to-tag': a.toTag, 'via-branch': a.branch, sdp: a.sdp }, a.engine);
    return r.sdp;
  }

  /**
   * The call is over (BYE, a final failure, CANCEL) or one branch lost (`branch`):
   * its session, or that branch's offer, is deleted. Best effort: rtpengine also
   * times out sessions that see no media.
   */
  delete(callId: string, engine: string, branch?: string, fromTag?: string): void {
    const params: { 'call-id': string; 'from-tag'?: string; 'via-branch'?: string } = { 'call-id': callId };
    if (fromTag) params['from-tag'] = fromTag;
    if (branch) params['via-branch'] = branch;
    this.o.client.delete(params as Parameters<RtpengineClient['delete']>[0], engine).catch((err: unknown) => {
      // Already gone (deleted by another node, or timed out) is the state we want.
      if (err instanceof RtpengineRejectedError && /unknown call|not found/i.test(err.message)) return;
      this.o.log.warn({ callId, engine, err: err instanceof Error ? err.message : String(err) }, 'rtpengine delete failed');
    });
  }
}
