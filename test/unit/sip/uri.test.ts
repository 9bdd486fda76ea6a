import { describe, expect, it } from 'vitest';
import type { SipUri } from '../../../src/sip/message.js';
import { aorOf, formatUri, parseUri } from '../../../src/sip/uri.js';

function uri(text: string): SipUri {
  const u = parseUri(text);
  if (u === null) throw new Error(`URI did not parse: ${text}`);
  return u;
}

describe('parseUri', () => {
  it('reads user, host and port of a SIP URI', () => {
    expect(uri('sip:alice@atlanta.com:5070')).toMatchObject({
      scheme: 'sip',
      user: 'alice',
      password: null,
      host: 'atlanta.com',
      port: 5070,
      headers: null,
      raw: 'sip:alice@atlanta.com:5070',
    });
  });

  it('reads a SIPS URI and a URI without user part', () => {
    expect(uri('sips:biloxi.com')).toMatchObject({ scheme: 'sips', user: null, host: 'biloxi.com', port: null });
  });

  it('reads a password', () => {
    expect(uri('sip:alice:secretword@atlanta.com;transport=tcp')).toMatchObject({ user: 'alice', password: 'secretword' });
  });

  it('reads parameters in order, lower-casing names, null for a parameter without value', () => {
    const u = uri('sip:gw.example.com;Transport=TCP;lr;maddr=239.255.255.1;TTL=15');
    expect([...u.params]).toEqual([
      ['transport', 'TCP'],
      ['lr', null],
      ['maddr', '239.255.255.1'],
      ['ttl', '15'],
    ]);
  });

  it('keeps the ?headers part raw', () => {
    expect(uri('sip:atlanta.com;method=REGISTER?to=alice%40atlanta.com&subject=hi').headers).toBe('to=alice%40atlanta.com&subject=hi');
  });

  it('reads IPv6 references with and without port, keeping the brackets', () => {
    expect(uri('sip:alice@[2001:db8::10]:5060')).toMatchObject({ host: '[2001:db8::10]', port: 5060 });
    expect(uri('sip:[2001:DB8::1];transport=tls')).toMatchObject({ host: '[2001:db8::1]', port: null });
    expect(uri('sip:[::ffff:192.0.2.1]').host).toBe('[::ffff:192.0.2.1]');
  });

  it('decodes escaped characters in the user part', () => {
    expect(uri('sip:%61lice@atlanta.com').user).toBe('alice');
    expect(uri('sip:I%20have%20spaces@example.net').user).toBe('I have spaces');
    expect(uri('sip:null-%00-null@example.com').user).toBe('null-\u0000-null');
    expect(uri('sip:%E2%82%AC@example.com').user).toBe('€');
  });

  it('keeps user-unreserved characters such as ; and ? in the user part', () => {
    expect(uri('sip:user;par=u%40example.net@example.com')).toMatchObject({ user: 'user;par=u@example.net', host: 'example.com' });
    expect(uri('sip:+1-212-555-1212;phone-context=x?@gw.com').user).toBe('+1-212-555-1212;phone-context=x?');
  });

  it('decodes escaped parameter names and values', () => {
    expect([...uri('sip:host5.example.net;%6C%72;n%61me=v%61lue%25%34%31').params]).toEqual([
      ['lr', null],
      ['name', 'value%41'],
    ]);
  });

  it('lower-cases scheme and host', () => {
    expect(uri('SIP:Alice@AtLanta.COM')).toMatchObject({ scheme: 'sip', user: 'Alice', host: 'atlanta.com' });
  });

  it('returns other schemes with scheme and raw only', () => {
    expect(uri('tel:+1-201-555-0123')).toEqual({
      scheme: 'tel',
      user: null,
      password: null,
      host: '',
      port: null,
      params: new Map(),
      headers: null,
      raw: 'tel:+1-201-555-0123',
    });
    expect(uri('urn:service:sos').scheme).toBe('urn');
    expect(uri('soap.beep://192.0.2.103:3002').scheme).toBe('soap.beep');
    expect(uri('NobodyKnowsThisScheme:totallyopaquecontent').scheme).toBe('nobodyknowsthisscheme');
  });

  it.each([
    ['no scheme', 'alice@atlanta.com'],
    ['an empty string', ''],
    ['an empty host', 'sip:alice@'],
    ['an empty user', 'sip:@atlanta.com'],
    ['a port above 65535', 'sip:atlanta.com:65536'],
    ['an empty port', 'sip:atlanta.com:'],
    ['a non-numeric port', 'sip:atlanta.com:50a0'],
    ['a space', 'sip:alice@atlanta .com'],
    ['angle brackets', '<sip:alice@atlanta.com>'],
    ['a broken escape', 'sip:%G1ice@atlanta.com'],
    ['a truncated escape', 'sip:alice%2@atlanta.com'],
    ['an unterminated IPv6 reference', 'sip:[2001:db8::1'],
    ['an IPv6 reference without colons', 'sip:[abcd]'],
    ['an empty parameter', 'sip:atlanta.com;;lr'],
    ['a parameter with empty value', 'sip:atlanta.com;transport='],
    ['an empty headers part', 'sip:atlanta.com?'],
    ['a scheme starting with a digit', '1sip:atlanta.com'],
    ['another scheme with nothing after the colon', 'tel:'],
    ['another scheme holding a space', 'tel:+1 555'],
  ])('refuses %s', (_label, text) => {
    expect(parseUri(text)).toBeNull();
  });
});

describe('formatUri', () => {
  it('round-trips a URI with every part', () => {
    const text = 'sips:alice:pw@atlanta.com:5061;transport=tcp;lr?subject=project';
    expect(formatUri(uri(text))).toBe(text);
  });

  it('round-trips an IPv6 reference', () => {
    expect(formatUri(uri('sip:bob@[2001:db8::10]:5070;ob'))).toBe('sip:bob@[2001:db8::10]:5070;ob');
  });

  it('escapes characters that may not appear raw, re-escaping a literal %', () => {
    expect(formatUri(uri('sip:I%20have%20spaces@example.net'))).toBe('sip:I%20have%20spaces@example.net');
    expect(formatUri(uri('sip:host5.example.net;n%61me=v%61lue%25%34%31'))).toBe('sip:host5.example.net;name=value%2541');
    expect(formatUri(uri('sip:%E2%82%AC@example.com'))).toBe('sip:%E2%82%AC@example.com');
  });

  it('shows edits to params', () => {
    const u = uri('sip:alice@192.0.2.4:5060;transport=udp');
    u.params.delete('transport');
    u.params.set('ob', null);
    expect(formatUri(u)).toBe('sip:alice@192.0.2.4:5060;ob');
  });

  it('returns other schemes as they were', () => {
    expect(formatUri(uri('tel:+1-201-555-0123;phone-context=example.com'))).toBe('tel:+1-201-555-0123;phone-context=example.com');
  });
});

describe('aorOf', () => {
  it('drops parameters and headers, keeps scheme, user, host and port (RFC 3261 §10.3 step 5)', () => {
    expect(aorOf(uri('sip:alice@Atlanta.com;transport=tcp?subject=x'))).toBe('sip:alice@atlanta.com');
    expect(aorOf(uri('sips:alice@atlanta.com:5061;user=phone'))).toBe('sips:alice@atlanta.com:5061');
  });

  it('unescapes the user part', () => {
    expect(aorOf(uri('sip:%61lice@atlanta.com'))).toBe('sip:alice@atlanta.com');
  });

  it('handles a URI without user part', () => {
    expect(aorOf(uri('sip:atlanta.com;lr'))).toBe('sip:atlanta.com');
  });

  it('keeps other schemes as written, scheme lower-cased', () => {
    expect(aorOf(uri('TEL:+1-201-555-0123'))).toBe('tel:+1-201-555-0123');
  });
});
