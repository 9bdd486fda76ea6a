import { describe, expect, it } from 'vitest';
import { Gruus } from '../../../src/registrar/gruu.js';
import { parseUri } from '../../../src/sip/uri.js';

const INSTANCE = '<urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6>';
const uri = (s: string) => {
  const u = parseUri(s);
  if (!u) throw new Error(`bad uri ${s}`);
  return u;
};

describe('Gruus (RFC 5627)', () => {
  const g = new Gruus(Buffer.from('secret-one'));

  it('the public GRUU is the AOR with gr=<instance URN> (§3.1) and parses back to that device', () => {
    const pub = g.pub('acme.sip.localhost', 'alice', INSTANCE);
    expect(pub).toBe('sip:alice@acme.sip.localhost;gr=urn:uuid:f81d4fae-7dec-11d0-a765-00a0c91e6bf6');
    expect(g.parse(uri(pub))).toEqual({ kind: 'pub', user: 'alice', instance: INSTANCE });
  });

  it('a temporary GRUU hides the AOR, differs on every registration and opens to user, instance and Call-ID (§3.2)', () => {
    const a = g.temp('acme.sip.localhost', 'alice', INSTANCE, 'call-1@host');
    const b = g.temp('acme.sip.localhost', 'alice', INSTANCE, 'call-1@host');
    expect(a).not.toBe(b);
    expect(a).not.toMatch(/alice|f81d4fae|call-1/);
    expect(a).toMatch(/^sip:tgruu\.[A-Za-z0-9_-]+@acme\.sip\.localhost;gr$/);
    expect(g.parse(uri(a))).toEqual({ kind: 'temp', user: 'alice', instance: INSTANCE, callId: 'call-1@host' });
  });

  it('a temporary GRUU does not open under another secret, in another domain, or tampered with', () => {
    const t = g.temp('acme.sip.localhost', 'alice', INSTANCE, 'c');
    expect(new Gruus(Buffer.from('secret-two')).parse(uri(t))).toBe('invalid');
    expect(g.parse(uri(t.replace('acme.sip.localhost', 'other.sip.localhost')))).toBe('invalid');
    const user = t.slice(4, t.indexOf('@'));
    // A character in the middle (the last one of base64url may carry only padding bits).
    const mid = Math.floor(user.length / 2);
    const flipped = user.slice(0, mid) + (user[mid] === 'A' ? 'B' : 'A') + user.slice(mid + 1);
    expect(g.parse(uri(t.replace(user, flipped)))).toBe('invalid');
  });

  it('a URI without gr is no GRUU', () => {
    expect(g.parse(uri('sip:alice@acme.sip.localhost'))).toBeNull();
    expect(g.parse(uri('sip:alice@acme.sip.localhost;gr'))).toBe('invalid');
  });
});
