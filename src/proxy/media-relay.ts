/**
 * Media through rtpengine for calls the proxy forwards (docs/media.md "Calls"):
 * which calls are relayed, the flags of each direction, and the NG commands of a
 * call's life — an offer per forked branch, the answer of the branch that answers,
 * offers and answers inside the dialog (re-INVITE, UPDATE, a late offer answered in
 * the ACK), and the delete at the end. The NG protocol itself is src/media/rtpengine.ts;
 * the call → engine mapping is src/store/media.
 */
import type { Logger } from '../logger.js';
import { LEG_FLAGS, RtpengineRejectedError, type NgSdpParams, type RtpengineClient } from '../media/rtpengine.js';
import type { MediaSession, MediaSessionStore } from '../store/media/sessions.js';
import type { SipTransportName } from '../transport/types.js';

export type MediaRelayMode = 'bridge' | 'always';

/** What became of a call the relay looked at, for `sip_media_calls_total{outcome}`. */
export type MediaCallOutcome = 'relayed' | 'unrelayed' | 'failed' | 'refused';

/** A leg of a call as the relay sees it: whether its party speaks WebRTC (ICE + DTLS-SRTP). */
export function isWebrtcLeg(transport: SipTransportName, sdp: string | null): boolean {
  return transport === 'ws' || transport === 'wss' || (sdp !== null && /^m=\S+ \d+ UDP\/TLS\/RTP\/SAVPF?\b/m.test(sdp));
}

/** The flags of SDP going TO a party; an answer towards a WebRTC offerer makes rtpengine the DTLS client. */
function flagsTowards(webrtc: boolean, answer: boolean): Partial<NgSdpParams> {
  if (!webrtc) return LEG_FLAGS.plain;
  // Towards a browser that offered (a=setup:actpass), rtpengine takes the active DTLS role and
  // starts the handshake itself once ICE is through; as the passive side it never saw the
  // browser's ClientHello in tests (Chromium 156, rtpengine 11), the call then had no media.
  return answer ? { ...LEG_FLAGS.webrtc, DTLS: 'active' } : LEG_FLAGS.webrtc;
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

/**
 * One in-dialog message with SDP, as the relay needs it: the dialog's tags as the
 * message carries them, and which side speaks WebRTC.
 */
export interface DialogSdp {
  callId: string;
  /** From and To tags of the message (of the request, for a response to it). */
  fromTag: string;
  toTag: string;
  sdp: string;
  /** The party the rewritten SDP goes to speaks WebRTC. */
  towardsWebrtc: boolean;
  engine: string;
}

export class MediaRelay {
  constructor(
    private readonly o: {
      client: RtpengineClient;
      mode: MediaRelayMode;
      /** The call → engine mapping shared by the fleet. */
      sessions: MediaSessionStore;
      /** How long a mapping lives without a BYE (the longest call), ms. */
      sessionTtlMs: number;
      log: Logger;
      onCall?: (outcome: MediaCallOutcome) => void;
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

  /** The engine a late-offer call (INVITE without SDP) will use; null when none is up. */
  choose(): string | null {
    return this.o.client.choose();
  }

  counted(outcome: MediaCallOutcome): void {
    this.o.onCall?.(outcome);
  }

  /** The caller's offer, rewritten for the callee of one branch; returns the SDP to send and the engine that holds the call. */
  async offer(m: MediaOffer): Promise<{ sdp: string; engine: string }> {
    const r = await this.o.client.offer(
      { ...flagsTowards(m.calleeWebrtc, false), 'call-id': m.callId, 'from-tag': m.fromTag, 'via-branch': m.branch, sdp: m.sdp },
      m.engine,
    );
    return { sdp: r.sdp, engine: r.engine };
  }

  /** The callee's answer (18x or 2xx with SDP) of one branch, rewritten for the caller. */
  async answer(a: { callId: string; fromTag: string; toTag: string; branch: string; sdp: string; callerWebrtc: boolean; engine: string }): Promise<string> {
    const r = await this.o.client.answer(
      { ...flagsTowards(a.callerWebrtc, true), 'call-id': a.callId, 'from-tag': a.fromTag, 'to-tag': a.toTag, 'via-branch': a.branch, sdp: a.sdp },
      a.engine,
    );
    return r.sdp;
  }

  /**
   * An offer inside the dialog (re-INVITE, UPDATE; or the offer a 2xx makes to an
   * INVITE without SDP, with the tags swapped by the caller of this method): rtpengine
   * keys the offerer by `from-tag`.
   */
  async dialogOffer(m: DialogSdp): Promise<string> {
    const r = await this.o.client.offer(
      { ...flagsTowards(m.towardsWebrtc, false), 'call-id': m.callId, 'from-tag': m.fromTag, 'to-tag': m.toTag, sdp: m.sdp },
      m.engine,
    );
    return r.sdp;
  }

  /** The answer to an in-dialog offer; `fromTag` is the offerer's tag, as in its offer. */
  async dialogAnswer(m: DialogSdp): Promise<string> {
    const r = await this.o.client.answer(
      { ...flagsTowards(m.towardsWebrtc, true), 'call-id': m.callId, 'from-tag': m.fromTag, 'to-tag': m.toTag, sdp: m.sdp },
      m.engine,
    );
    return r.sdp;
  }

  /**
   * A relayed call was answered: remember its engine and sides for the rest of the
   * dialog, wherever its in-dialog requests arrive. A store failure is logged; the
   * flow tokens still name the engine (the BYE deletes it) and transports decide the sides.
   */
  async remember(callId: string, s: MediaSession): Promise<void> {
    try {
      await this.o.sessions.put(callId, s, this.o.sessionTtlMs);
    } catch (err) {
      this.o.log.warn({ callId, err: err instanceof Error ? err.message : String(err) }, 'media session not stored');
    }
  }

  /** The relayed call's session (null when the store does not have it or cannot answer). */
  async session(callId: string, take = false): Promise<MediaSession | null> {
    try {
      return await (take ? this.o.sessions.take(callId) : this.o.sessions.get(callId));
    } catch (err) {
      this.o.log.warn({ callId, err: err instanceof Error ? err.message : String(err) }, 'media session not read');
      return null;
    }
  }

  /**
   * The call is over (BYE, a final failure, CANCEL) or one branch lost (`branch`,
   * with `toTag` when it had answered early): its session, or that branch's offer
   * and early dialogue, is deleted. Best effort: rtpengine also
   * times out sessions that see no media.
   */
  delete(callId: string, engine: string, branch?: string, fromTag?: string, toTag?: string): void {
    const params: { 'call-id': string; 'from-tag'?: string; 'to-tag'?: string; 'via-branch'?: string } = { 'call-id': callId };
    if (fromTag) params['from-tag'] = fromTag;
    // A branch that answered early (183 with SDP) has its own dialogue: only that one goes.
    if (toTag) params['to-tag'] = toTag;
    if (branch) params['via-branch'] = branch;
    this.o.client.delete(params as Parameters<RtpengineClient['delete']>[0], engine).catch((err: unknown) => {
      // Already gone (deleted by another node, or timed out) is the state we want.
      if (err instanceof RtpengineRejectedError && /unknown call|not found/i.test(err.message)) return;
      this.o.log.warn({ callId, engine, err: err instanceof Error ? err.message : String(err) }, 'rtpengine delete failed');
    });
  }
}
