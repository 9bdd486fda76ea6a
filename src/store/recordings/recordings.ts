/**
 * Finished call recordings (docs/calls.md "Recording"): each one's figures and its WAV
 * bytes, per account, served back by the Recording API from any node. Two
 * implementations with one contract (test/contract/recording-store.test.ts).
 */

export interface RecordingRecord {
  recordingId: string;
  /** The account's SIP domain (the store's partition). */
  domain: string;
  /** The parent account's auth_id. */
  authId: string;
  /** The sub-account whose call it is, when it is one's. */
  subAccount: string | null;
  callUuid: string;
  /** `call` (the Record API) or `xml` (a Record verb). */
  source: 'call' | 'xml';
  durationMs: number;
  format: 'wav';
  /** Bytes of the audio. */
  size: number;
  /** The call's from and to. */
  from: string;
  to: string;
  /** ms since the epoch. */
  createdAt: number;
}

export interface RecordingFilter {
  /** Only this sub-account's recordings. */
  subAccount?: string | null;
  callUuid?: string;
  limit: number;
  offset: number;
}

export interface RecordingStore {
  /** Stores a recording and its audio (replaces one of the same id). */
  put(r: RecordingRecord, audio: Buffer): Promise<void>;
  get(domain: string, recordingId: string): Promise<RecordingRecord | null>;
  audio(domain: string, recordingId: string): Promise<Buffer | null>;
  /** The account's recordings, newest first; `total` counts every match. */
  list(domain: string, filter: RecordingFilter): Promise<{ total: number; items: RecordingRecord[] }>;
  /** True when it was there. */
  delete(domain: string, recordingId: string): Promise<boolean>;
  close(): Promise<void>;
}

export function newestFirst(a: RecordingRecord, b: RecordingRecord): number {
  return b.createdAt - a.createdAt || (a.recordingId < b.recordingId ? 1 : a.recordingId > b.recordingId ? -1 : 0);
}

export function matches(r: RecordingRecord, f: RecordingFilter): boolean {
  if (f.subAccount && r.subAccount !== f.subAccount) return false;
  if (f.callUuid !== undefined && r.callUuid !== f.callUuid) return false;
  return true;
}
