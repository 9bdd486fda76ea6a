import { describe, expect, it } from 'vitest';
import { callbackTargets, messageTarget, unansweredOutcome } from '../../../src/proxy/call-tracker.js';
import type { ApplicationRecord, ApplicationSettings } from '../../../src/store/directory/directory.js';

const settings = (over: Partial<ApplicationSettings> = {}): ApplicationSettings => ({
  app_name: 'a',
  application_type: 'XML',
  answer_url: 'https://cb.example/answer',
  answer_method: 'POST',
  hangup_url: 'https://cb.example/hangup',
  hangup_method: 'GET',
  fallback_answer_url: '',
  fallback_method: 'POST',
  message_url: 'https://cb.example/message',
  message_method: 'POST',
  sip_transfer_url: '',
  sip_transfer_method: 'POST',
  default_number_app: false,
  default_app: false,
  enabled: true,
  log_incoming_message: true,
  public_uri: false,
  ...over,
});
const app = (over: Partial<ApplicationSettings> = {}): ApplicationRecord =>
  ({ appId: '1', accountAuthId: 'MA', subAccount: null, settings: settings(over), defaultEndpointApp: false }) as ApplicationRecord;

describe('where callbacks go', () => {
  it('answer and hangup targets with their methods; answer_url falls back to fallback_answer_url', () => {
    expect(callbackTargets(app({ fallback_answer_url: 'https://cb.example/fb', fallback_method: 'GET' }))).toEqual({
      answer: { url: 'https://cb.example/answer', method: 'POST', fallback: { url: 'https://cb.example/fb', method: 'GET' } },
      hangup: { url: 'https://cb.example/hangup', method: 'GET' },
    });
    expect(callbackTargets(app({ hangup_url: '' })).hangup).toBeNull();
  });
  it('a disabled application, or none, gets no callbacks', () => {
    expect(callbackTargets(app({ enabled: false }))).toEqual({ answer: null, hangup: null });
    expect(callbackTargets(null)).toEqual({ answer: null, hangup: null });
  });
  it('Message callbacks only when the application logs incoming messages and has a message_url', () => {
    expect(messageTarget(app())).toEqual({ url: 'https://cb.example/message', method: 'POST' });
    expect(messageTarget(app({ message_method: 'GET' }))?.method).toBe('GET');
    expect(messageTarget(app({ log_incoming_message: false }))).toBeNull();
    expect(messageTarget(app({ message_url: '' }))).toBeNull();
    expect(messageTarget(app({ enabled: false }))).toBeNull();
    expect(messageTarget(null)).toBeNull();
  });
});

describe('how an unanswered call is recorded', () => {
  it.each([
    [{ status: 486, how: 'refused' }, 'busy', 'USER_BUSY', 'send_refuse'],
    [{ status: 487, how: 'cancelled' }, 'cancelled', 'ORIGINATOR_CANCEL', 'recv_cancel'],
    [{ status: 408, how: 'no-answer' }, 'no-answer', 'NO_ANSWER', 'send_cancel'],
    [{ status: 480, how: 'rejected-here' }, 'failed', 'USER_NOT_REGISTERED', 'send_refuse'],
    [{ status: 480, how: 'refused' }, 'failed', 'NO_USER_RESPONSE', 'send_refuse'],
    [{ status: 403, how: 'refused' }, 'failed', 'CALL_REJECTED', 'send_refuse'],
    [{ status: 488, how: 'refused' }, 'failed', 'INCOMPATIBLE_DESTINATION', 'send_refuse'],
    [{ status: 503, how: 'refused' }, 'failed', 'NORMAL_TEMPORARY_FAILURE', 'send_refuse'],
    [{ status: 599, how: 'refused' }, 'failed', 'NORMAL_UNSPECIFIED', 'send_refuse'],
  ] as const)('%j → %s, %s, %s', (u, status, cause, disposition) => {
    expect(unansweredOutcome(u)).toEqual({ status, cause, disposition });
  });
});
