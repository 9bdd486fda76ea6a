import { describe, expect, it } from 'vitest';
import { FlowTokens } from '../../../src/proxy/flow-token.js';

describe('FlowTokens (RFC 5626 §5.2)', () => {
  const tokens = new FlowTokens(Buffer.from('0123456789abcdef0123456789abcdef'));
  const ws = { transport: 'ws' as const, address: '203.0.113.9', port: 51000, connId: 'ws-1f' };
  const udp = { transport: 'udp' as const, address: '2001:db8::7', port: 5062, connId: null };

  it('round-trips a flow for the same Call-ID, as URI-safe user-part characters', () => {
    for (const d of [ws, udp]) {
      const t = tokens.encode(d, 'c1@x');
      expect(t).toMatch(/^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$/);
      expect(tokens.decode(t, 'c1@x')).toEqual(d);
    }
  });
  it('refuses a token lifted into another dialog, a tampered one, and one from another secret', () => {
    const t = tokens.encode(ws, 'c1@x');
    expect(tokens.decode(t, 'c2@x')).toBeNull();
    const forged = Buffer.from('ws|ws-2|203.0.113.9|51000').toString('base64url') + t.slice(t.indexOf('.'));
    expect(tokens.decode(forged, 'c1@x')).toBeNull();
    expect(new FlowTokens(Buffer.from('another-secret-another-secret!!')).decode(t, 'c1@x')).toBeNull();
    expect(tokens.decode('alice', 'c1@x')).toBeNull();
  });
  it('carries the owning process, the call record domain and the media engine, each optional', () => {
    const owned = { ...ws, node: 'n1-abc' };
    expect(tokens.decode(tokens.encode(owned, 'c1@x'), 'c1@x')).toEqual(owned);
    expect(tokens.decode(tokens.encode(owned, 'c1@x', 'acme.sip.localhost'), 'c1@x')).toEqual({ ...owned, callDomain: 'acme.sip.localhost' });
    expect(tokens.decode(tokens.encode(owned, 'c1@x', 'acme.sip.localhost', '[::1]:2223'), 'c1@x')).toEqual({ ...owned, callDomain: 'acme.sip.localhost', media: '[::1]:2223' });
    // A media engine without a node or call record: the empty fields in between stay empty.
    expect(tokens.decode(tokens.encode(udp, 'c1@x', undefined, '127.0.0.1:2223'), 'c1@x')).toEqual({ ...udp, media: '127.0.0.1:2223' });
  });
});
