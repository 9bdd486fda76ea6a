import { describe, expect, it } from 'vitest';
import { accountOfDomain, parseTarget, phoneNumber } from '../../../src/routing/targets.js';
import { parseUri } from '../../../src/sip/uri.js';

describe('targets', () => {
  const opts = { sipDomain: 'sip.localhost', callerDomain: 'ma1.sip.localhost', isOwnHost: (u: { host: string }) => u.host === '192.0.2.1' };
  const t = (uri: string) => parseTarget(parseUri(uri)!, opts);
  it('reads account domains as <auth_id>.<SIP_DOMAIN>', () => {
    expect(accountOfDomain('ma1b2.sip.localhost', 'sip.localhost')).toBe('MA1B2');
    expect(accountOfDomain('x.ma1.sip.localhost', 'sip.localhost')).toBeNull();
    expect(accountOfDomain('sip.localhost', 'sip.localhost')).toBeNull();
  });
  it('classifies endpoints, applications and numbers', () => {
    expect(t('sip:bob@ma2.sip.localhost')).toEqual({ kind: 'account', domain: 'ma2.sip.localhost', authId: 'MA2', user: 'bob' });
    expect(t('sip:bob@192.0.2.1:5060')).toEqual({ kind: 'account', domain: 'ma1.sip.localhost', authId: 'MA1', user: 'bob' });
    expect(t('sip:123456789012345@app.ma1.sip.localhost')).toEqual({ kind: 'app', domain: 'ma1.sip.localhost', authId: 'MA1', appId: '123456789012345' });
    expect(t('tel:+1-415-555-0100;phone-context=+1')).toEqual({ kind: 'phone', number: '+14155550100' });
    expect(t('sip:+14155550100@gw.example;user=phone')).toEqual({ kind: 'phone', number: '+14155550100' });
    expect(t('sip:4155550100@elsewhere.example')).toEqual({ kind: 'phone', number: '4155550100' });
    expect(t('sip:bob@elsewhere.example')).toEqual({ kind: 'unknown' });
    expect(t('sip:ma1.sip.localhost')).toEqual({ kind: 'unknown' });
  });
  it('strips visual separators from numbers (RFC 3966)', () => {
    expect(phoneNumber('+1 (415) 555-0100')).toBe('+14155550100');
    expect(phoneNumber('alice')).toBeNull();
    expect(phoneNumber('12')).toBeNull();
  });
});
