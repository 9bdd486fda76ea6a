import { describe, expect, it } from 'vitest';
import { bindingKey, contactsForReply, planRegister, withExpires, type ExpiresPolicy, type RegisterContext } from '../../../src/registrar/bindings.js';
import { parseNameAddr } from '../../../src/sip/headers.js';
import { SipError } from '../../../src/errors.js';
import type { ContactList, NameAddr } from '../../../src/sip/message.js';
import type { Binding } from '../../../src/store/location/location.js';

const policy: ExpiresPolicy = { minExpires: 60, maxExpires: 7200, defaultExpires: 3600, clampMinExpires: false, maxContacts: 10 };
const now = 1_700_000_000_000;
const ctx = (over: Partial<RegisterContext> = {}): RegisterContext => ({
  callId: 'c1', cseq: 5, expiresHeader: null, now, userAgent: 'UA/1', received: 'sip:10.0.0.1:5060;transport=udp',
  transport: 'udp', path: null, nodeId: null, connId: null, ...over,
});
const na = (v: string): NameAddr => {
  const p = parseNameAddr(v);
  if (!p) throw new Error(`unparseable ${v}`);
  return p;
};
const list = (...v: string[]): ContactList => ({ star: false, contacts: v.map(na) });
const refusal = (f: () => unknown): SipError => {
  try {
    f();
  } catch (e) {
    if (e instanceof SipError) return e;
    throw e;
  }
  throw new Error('expected a SipError');
};

describe('planRegister (RFC 3261 §10.3)', () => {
  it('uses the contact expires parameter over the Expires header, and the header over the default', () => {
    const op = planRegister(list('<sip:a@h1>;expires=120', '<sip:a@h2>', 'sip:a@h3'), ctx({ expiresHeader: 300 }), policy);
    expect(op.writes.map((w) => (w.expiresAt - now) / 1000)).toEqual([120, 300, 300]);
    const d = planRegister(list('<sip:a@h1>'), ctx(), policy);
    expect((d.writes[0].expiresAt - now) / 1000).toBe(3600);
  });

  it('answers 423 with Min-Expires when Expires < minExpires', () => {
    const e = refusal(() => planRegister(list('<sip:a@h1>;expires=30'), ctx(), policy));
    expect(e.status).toBe(423);
    expect(e.headers).toEqual([['Min-Expires', '60']]);
  });

  it('raises a too-short Expires to the minimum instead when clamping is configured', () => {
    const op = planRegister(list('<sip:a@h1>;expires=30'), ctx(), { ...policy, clampMinExpires: true });
    expect((op.writes[0].expiresAt - now) / 1000).toBe(60);
  });

  it('clamps an Expires above maxExpires to the maximum', () => {
    const op = planRegister(list('<sip:a@h1>;expires=999999'), ctx(), policy);
    expect((op.writes[0].expiresAt - now) / 1000).toBe(7200);
  });

  it('turns expires=0 into a removal of that binding', () => {
    const op = planRegister(list('<sip:a@h1>;expires=0', '<sip:a@h2>'), ctx(), policy);
    expect(op.removes).toEqual(['sip:a@h1']);
    expect(op.writes.map((w) => w.key)).toEqual(['sip:a@h2']);
  });

  it('accepts * only with Expires: 0, else 400 (step 6)', () => {
    expect(planRegister({ star: true }, ctx({ expiresHeader: 0 }), policy).removeAll).toBe(true);
    expect(refusal(() => planRegister({ star: true }, ctx({ expiresHeader: 60 }), policy)).status).toBe(400);
    expect(refusal(() => planRegister({ star: true }, ctx(), policy)).status).toBe(400);
    expect(refusal(() => planRegister(null, ctx(), policy)).status).toBe(400);
  });

  it('refuses a non-SIP contact scheme and a malformed expires or q', () => {
    expect(refusal(() => planRegister(list('<tel:+15551234>'), ctx(), policy)).status).toBe(400);
    expect(refusal(() => planRegister(list('<sip:a@h>;expires=soon'), ctx(), policy)).status).toBe(400);
    expect(refusal(() => planRegister(list('<sip:a@h>;q=2'), ctx(), policy)).status).toBe(400);
  });

  it('records Call-ID, CSeq, user agent, received, path, q, instance and flow on each write', () => {
    const op = planRegister(
      list('<sip:x@df.invalid;transport=ws>;q=0.5;+sip.instance="<urn:uuid:1>";reg-id=2'),
      ctx({ transport: 'wss', connId: 'wss-1', nodeId: 'n1', path: '<sip:edge;lr>' }),
      policy,
    );
    expect(op.writes[0]).toMatchObject({
      key: '<urn:uuid:1>;reg-id=2', callId: 'c1', cseq: 5, userAgent: 'UA/1', q: 0.5, instanceId: '<urn:uuid:1>', regId: 2,
      transport: 'wss', connId: 'wss-1', nodeId: 'n1', path: '<sip:edge;lr>', uri: 'sip:x@df.invalid;transport=ws',
    });
  });

  it('keeps the first of two identical contacts in one REGISTER', () => {
    const op = planRegister(list('<sip:a@h1>;expires=100', '<sip:a@H1>;expires=200'), ctx(), policy);
    expect(op.writes).toHaveLength(1);
    expect((op.writes[0].expiresAt - now) / 1000).toBe(100);
  });
});

describe('bindingKey', () => {
  it('compares scheme and host case-insensitively, and ignores display names and header params', () => {
    expect(bindingKey(na('"Bob" <sip:bob@EXAMPLE.com:5060;transport=tcp>;expires=5'))).toBe(bindingKey(na('<sip:bob@example.com:5060;transport=TCP>')));
    expect(bindingKey(na('<sip:bob@example.com:5061>'))).not.toBe(bindingKey(na('<sip:bob@example.com:5060>')));
  });
});

describe('the 200 OK Contact list (step 8)', () => {
  it('echoes each Contact as sent with expires set to the remaining seconds', () => {
    expect(withExpires('<sip:a@h;transport=tcp>;expires=3600;+sip.instance="<urn:x>"', 42)).toBe('<sip:a@h;transport=tcp>;+sip.instance="<urn:x>";expires=42');
    expect(withExpires('"A" <sip:a@h>', 10)).toBe('"A" <sip:a@h>;expires=10');
    expect(withExpires('sip:a@h;expires=5', 7)).toBe('sip:a@h;expires=7');
    const b = { contact: '<sip:a@h>', expiresAt: now + 59_600 } as Binding;
    expect(contactsForReply([b], now)).toEqual(['<sip:a@h>;expires=60']);
  });
});
