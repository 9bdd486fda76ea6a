/**
 * Calls whose media rtpengine relays (docs/media.md "Calls"): Call-ID → the engine
 * that holds the call and what each side speaks. Written when a call is answered
 * through the relay; read by in-dialog requests that carry SDP (re-INVITE, UPDATE,
 * an ACK answering a late offer) on whichever node of the fleet they reach; taken
 * (read and removed at once) by the BYE, so exactly one node deletes the session.
 */
export interface MediaSession {
  /** The engine (`host:port` as RTPENGINE_NG names it) that took the call's offer. */
  engine: string;
  /** The caller's From tag: tells which side an in-dialog request comes from. */
  fromTag: string;
  /** The caller's side speaks WebRTC (ICE + DTLS-SRTP). */
  callerWebrtc: boolean;
  /** The side that answered speaks WebRTC. */
  calleeWebrtc: boolean;
}

export interface MediaSessionStore {
  /** Remember a relayed call for `ttlMs` (the longest call). */
  put(callId: string, session: MediaSession, ttlMs: number): Promise<void>;
  get(callId: string): Promise<MediaSession | null>;
  /** Read and remove: the node whose BYE takes it deletes the rtpengine session. */
  take(callId: string): Promise<MediaSession | null>;
  close(): Promise<void>;
}

/** A stored value back to a session; null when it is not one (a foreign or damaged value). */
export function parseMediaSession(raw: string | null): MediaSession | null {
  if (raw === null) return null;
  try {
    const v = JSON.parse(raw) as Partial<MediaSession>;
    if (typeof v.engine !== 'string' || typeof v.fromTag !== 'string') return null;
    return { engine: v.engine, fromTag: v.fromTag, callerWebrtc: v.callerWebrtc === true, calleeWebrtc: v.calleeWebrtc === true };
  } catch {
    return null;
  }
}
