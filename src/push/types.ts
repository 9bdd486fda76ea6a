import type { PushParams } from './params.js';

/** One push to send: the device's parameters and what wakes it. */
export interface PushRequest {
  push: PushParams;
  /** The Call-ID of the request waiting for the device. */
  callId: string;
  method: string;
}

/**
 * What one attempt came to: `sent`; `gone` (the token is dead: the binding is removed);
 * `retry` (a 5xx: tried once more); `failed` (anything else).
 */
export interface PushAttempt {
  outcome: 'sent' | 'gone' | 'retry' | 'failed';
  status: number;
  reason?: string;
}

export interface PushSender {
  send(req: PushRequest): Promise<PushAttempt>;
  close(): void;
}
