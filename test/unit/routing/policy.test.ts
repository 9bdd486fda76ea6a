import { describe, expect, it } from 'vitest';
import { calleeRefusal, callerRefusal, refusalHeaders } from '../../../src/routing/policy.js';
import type { EndpointRecord, SubAccountRecord } from '../../../src/store/directory/directory.js';

const endpoint = (over: Partial<EndpointRecord> = {}): EndpointRecord => ({
  endpointId: '1', accountAuthId: 'MA1', username: 'u', alias: 'u', appId: null, subAccount: null,
  allowVoice: true, allowMessage: true, allowVideo: false, allowSameDomain: true, allowOtherDomains: false, allowPhones: true, allowApps: true,
  createdAt: '', updatedAt: '', ...over,
});
const sub = (over: Partial<SubAccountRecord> = {}): SubAccountRecord => ({
  authId: 'SA1', parentAuthId: 'MA1', tokenHash: '', name: 's', enabled: true, kycMode: 'customer_use', businessType: '', kycCallsBlocked: true,
  createdAt: '', updatedAt: '', ...over,
});
const INVITE = { method: 'INVITE', video: false };

describe('policy (the Endpoint flags of the interface specification)', () => {
  it('names the caller flag that refuses: voice, video, message, then the kind of target', () => {
    expect(callerRefusal(endpoint({ allowVoice: false }), null, INVITE, 'same_domain')).toEqual({ flag: 'allow_voice', party: 'caller' });
    expect(callerRefusal(endpoint(), null, { method: 'INVITE', video: true }, 'same_domain')?.flag).toBe('allow_video');
    expect(callerRefusal(endpoint({ allowMessage: false }), null, { method: 'MESSAGE', video: false }, 'same_domain')?.flag).toBe('allow_message');
    expect(callerRefusal(endpoint({ allowSameDomain: false }), null, INVITE, 'same_domain')?.flag).toBe('allow_same_domain');
    expect(callerRefusal(endpoint(), null, INVITE, 'other_domain')?.flag).toBe('allow_other_domains');
    expect(callerRefusal(endpoint({ allowPhones: false }), null, INVITE, 'phone')?.flag).toBe('allow_phones');
    expect(callerRefusal(endpoint({ allowApps: false }), null, INVITE, 'app')?.flag).toBe('allow_apps');
    expect(callerRefusal(endpoint({ allowVoice: false }), null, { method: 'OPTIONS', video: false }, 'same_domain')).toBeNull();
  });
  it('blocks calls to phones only, from customer_use sub-accounts with kyc_calls_blocked', () => {
    expect(callerRefusal(endpoint(), sub(), INVITE, 'phone')?.flag).toBe('kyc_calls_blocked');
    expect(callerRefusal(endpoint(), sub(), INVITE, 'same_domain')).toBeNull();
    expect(callerRefusal(endpoint(), sub(), { method: 'MESSAGE', video: false }, 'phone')).toBeNull();
    expect(callerRefusal(endpoint(), sub({ kycCallsBlocked: false }), INVITE, 'phone')).toBeNull();
    expect(callerRefusal(endpoint(), sub({ kycMode: 'personal_use' }), INVITE, 'phone')).toBeNull();
  });
  it('checks the callee for what it receives and from where', () => {
    expect(calleeRefusal(endpoint({ allowVoice: false }), INVITE, 'same_domain')).toEqual({ flag: 'allow_voice', party: 'callee' });
    expect(calleeRefusal(endpoint(), INVITE, 'other_domain')?.flag).toBe('allow_other_domains');
    expect(calleeRefusal(endpoint({ allowOtherDomains: true }), INVITE, 'other_domain')).toBeNull();
  });
  it('names the flag in Warning (RFC 3261 §20.43) and Reason (RFC 3326)', () => {
    expect(refusalHeaders({ flag: 'allow_video', party: 'callee' }, 'edge')).toEqual([
      ['Warning', '399 edge "allow_video is false for the callee"'],
      ['Reason', 'SIP;cause=403;text="allow_video"'],
    ]);
  });
});
