/**
 * RFC 8599 push parameters: parsing and checking at REGISTER (400 naming the bad
 * parameter, 555 for a service not offered), reading back from a stored binding, the
 * shortened token, the APNs topic and push type.
 */
import { describe, expect, it } from 'vitest';
import { SipError } from '../../../src/errors.js';
import { apnsPushType, isAsleep, parsePushParams, pushOf, redactContact, shortPrid, topicOf } from '../../../src/push/params.js';
import type { Binding } from '../../../src/store/location/location.js';

const TOKEN = 'a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718293a4b5c6d7e8f90';
const params = (o: Record<string, string | null>) => new Map(Object.entries(o));
const refusal = (f: () => unknown): SipError => {
  try {
    f();
  } catch (e) {
    if (e instanceof SipError) return e;
    throw e;
  }
  throw new Error('expected a refusal');
};

describe('parsePushParams', () => {
  it('reads apns and fcm parameters (provider case-insensitive, pn-param optional)', () => {
    expect(parsePushParams(params({ 'pn-provider': 'apns', 'pn-prid': TOKEN, 'pn-param': 'ABCDE12345.com.example.phone.voip' }))).toEqual({
      provider: 'apns',
      prid: TOKEN,
      param: 'ABCDE12345.com.example.phone.voip',
    });
    expect(parsePushParams(params({ 'pn-provider': 'FCM', 'pn-prid': 'dGVzdA:APA91b-x_y', 'pn-param': 'my-project' }))).toEqual({ provider: 'fcm', prid: 'dGVzdA:APA91b-x_y', param: 'my-project' });
    expect(parsePushParams(params({ 'pn-provider': 'fcm', 'pn-prid': 'tok' }))?.param).toBeNull();
  });

  it('pn-provider alone (RFC 8599 §5.1, a query of support): no push parameters, but 555 for another service', () => {
    expect(parsePushParams(params({ 'pn-provider': 'apns' }))).toBeNull();
    expect(refusal(() => parsePushParams(params({ 'pn-provider': 'webpush' }))).status).toBe(555);
  });

  it('no pn-* parameter: null (nothing changes for such a contact)', () => {
    expect(parsePushParams(params({ transport: 'tcp', ob: null }))).toBeNull();
  });

  it('another provider: 555 Push Notification Service Not Supported, with Feature-Caps naming the supported ones', () => {
    const e = refusal(() => parsePushParams(params({ 'pn-provider': 'webpush', 'pn-prid': 'x' })));
    expect(e.status).toBe(555);
    expect(e.reason).toBe('Push Notification Service Not Supported');
    expect(e.headers).toContainEqual(['Feature-Caps', '*;+sip.pns="apns,fcm"']);
  });

  it('malformed or oversized pn-* parameters: 400 naming them', () => {
    expect(refusal(() => parsePushParams(params({ 'pn-provider': 'apns', 'pn-param': 'ABCDE12345.x' }))).reason).toBe('Bad pn-prid parameter');
    expect(refusal(() => parsePushParams(params({ 'pn-prid': TOKEN }))).reason).toBe('Bad pn-provider parameter');
    expect(refusal(() => parsePushParams(params({ 'pn-provider': 'apns', 'pn-prid': 'x'.repeat(1025) }))).reason).toBe('Bad pn-prid parameter');
    expect(refusal(() => parsePushParams(params({ 'pn-provider': 'apns', 'pn-prid': 'tok"en' }))).reason).toBe('Bad pn-prid parameter');
    const both = refusal(() => parsePushParams(params({ 'pn-provider': 'a'.repeat(40), 'pn-prid': TOKEN, 'pn-param': 'y'.repeat(300) })));
    expect(both.status).toBe(400);
    expect(both.reason).toBe('Bad pn-provider, pn-param parameters');
    expect(refusal(() => parsePushParams(params({ 'pn-provider': 'apns', 'pn-prid': TOKEN, 'pn-param': null }))).reason).toBe('Bad pn-param parameter');
    // APNs: a pn-param with no topic after the team id.
    expect(refusal(() => parsePushParams(params({ 'pn-provider': 'apns', 'pn-prid': TOKEN, 'pn-param': 'ABCDE12345' }))).status).toBe(400);
  });
});

describe('a stored binding', () => {
  const binding = (uri: string, connId: string | null, transport: Binding['transport'] = 'tcp') => ({ uri, connId, transport }) as Binding;
  const uri = `sip:alice@192.0.2.7:40000;transport=tcp;pn-provider=apns;pn-prid=${TOKEN};pn-param=ABCDE12345.com.example.phone.voip`;

  it('pushOf reads the parameters back from the Contact URI', () => {
    expect(pushOf(binding(uri, 'c1'))).toEqual({ provider: 'apns', prid: TOKEN, param: 'ABCDE12345.com.example.phone.voip' });
    expect(pushOf(binding('sip:alice@192.0.2.7:5060', null))).toBeNull();
  });

  it('is asleep when it has push parameters and no connection any more', () => {
    expect(isAsleep(binding(uri, null))).toBe(true);
    expect(isAsleep(binding(uri, 'c1'))).toBe(false);
    expect(isAsleep(binding('sip:alice@192.0.2.7:40000;transport=tcp', null))).toBe(false);
  });

  it('the token is shown shortened only', () => {
    expect(shortPrid(TOKEN)).toBe('a1b2c3…8f90');
    expect(shortPrid('short')).toBe('sh…');
    const shown = redactContact(uri);
    expect(shown).not.toContain(TOKEN);
    expect(shown).toBe('sip:alice@192.0.2.7:40000;transport=tcp;pn-provider=apns;pn-prid=a1b2c3…8f90;pn-param=ABCDE12345.com.example.phone.voip');
  });
});

describe('APNs topic and push type', () => {
  it('the topic is the part of pn-param after the team id', () => {
    expect(topicOf('ABCDE12345.com.example.phone.voip')).toBe('com.example.phone.voip');
    expect(topicOf('ABCDE12345')).toBeNull();
    expect(topicOf('ABCDE12345.')).toBeNull();
  });
  it('voip for .voip topics, alert otherwise', () => {
    expect(apnsPushType('com.example.phone.voip')).toBe('voip');
    expect(apnsPushType('com.example.phone')).toBe('alert');
  });
});
