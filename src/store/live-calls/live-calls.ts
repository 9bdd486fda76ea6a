/**
 * The calls the platform placed that are still up (docs/calls.md "Live calls"): what the
 * live and queued Call APIs list, from any node, and what a survivor needs to end the
 * calls of a process that died (each leg's dialog). Two implementations with one
 * contract (test/contract/live-call-store.test.ts).
 */

/** A leg's dialog as another process needs it to send BYE (calls/ua.ts DialogSnapshot). */
export interface StoredDialog {
  legId: string;
  callId: string;
  localTag: string;
  remoteTag: string | null;
  from: string;
  to: string;
  requestUri: string;
  remoteTarget: string | null;
  routes: string[];
  cseq: number;
}

export interface LiveCallRecord {
  callUuid: string;
  requestUuid: string;
  domain: string;
  authId: string;
  subAccount: string | null;
  /** The process that runs the call (fleet process id). */
  owner: string;
  status: 'queued' | 'ringing' | 'in-progress';
  direction: 'inbound' | 'outbound';
  from: string;
  to: string;
  callerName: string;
  /** ms since the epoch. */
  sessionStart: number;
  answeredAt: number | null;
  bLegUuid: string | null;
  /** The dialogs of its legs (A first). */
  dialogs: StoredDialog[];
  /** rtpengine call and engine of its media, when it has any. */
  media: { ngCallId: string; engine: string } | null;
}

export interface LiveCallStore {
  /** Insert or replace. */
  put(r: LiveCallRecord): Promise<void>;
  get(domain: string, callUuid: string): Promise<LiveCallRecord | null>;
  /** The account's calls (every sub-account's too), newest first. */
  list(domain: string): Promise<LiveCallRecord[]>;
  /** Removes the call; true for the one caller that removed it (whoever ends a call writes its end once). */
  remove(domain: string, callUuid: string): Promise<boolean>;
  /** The calls a process runs (the reaper's view of a dead process). */
  ofOwner(owner: string): Promise<LiveCallRecord[]>;
  close(): Promise<void>;
}

export function newestFirst(a: LiveCallRecord, b: LiveCallRecord): number {
  return b.sessionStart - a.sessionStart;
}
