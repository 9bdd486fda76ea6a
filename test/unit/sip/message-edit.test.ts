import { describe, expect, it } from 'vitest';
import { getHeader, getListValues } from '../../../src/sip/headers.js';
import type { SipRequest } from '../../../src/sip/message.js';
import { cloneRequest, prependHeaders, removeHeadersWhere, replaceFirstListValue, setHeader, shiftListValue } from '../../../src/sip/message-edit.js';
import { parseMessage } from '../../../src/sip/parser.js';
import { serializeMessage } from '../../../src/sip/response.js';

const req = (): SipRequest => {
  const p = parseMessage(
    Buffer.from(
      'BYE sip:b@x SIP/2.0\r\nVia: SIP/2.0/UDP a:1;branch=z9hG4bK1, SIP/2.0/UDP b:2;branch=z9hG4bK2\r\nVia: SIP/2.0/UDP c:3;branch=z9hG4bK3\r\n' +
        'Route: <sip:r1;lr>, <sip:r2;lr>\r\nFrom: <sip:a@x>;tag=1\r\nTo: <sip:b@x>;tag=2\r\nCall-ID: c\r\nCSeq: 2 BYE\r\nContent-Length: 0\r\n\r\n',
    ),
  );
  if (!p.ok || p.msg.kind !== 'request') throw new Error('fixture');
  return p.msg;
};

describe('message edits (RFC 3261 §16.6)', () => {
  it('shifts the first element of a comma-joined list header, keeping the rest in order', () => {
    const r = req();
    expect(shiftListValue(r, 'via')).toBe('SIP/2.0/UDP a:1;branch=z9hG4bK1');
    expect(getListValues(r, 'via')).toEqual(['SIP/2.0/UDP b:2;branch=z9hG4bK2', 'SIP/2.0/UDP c:3;branch=z9hG4bK3']);
    expect(shiftListValue(r, 'route')).toBe('<sip:r1;lr>');
    expect(shiftListValue(r, 'route')).toBe('<sip:r2;lr>');
    expect(shiftListValue(r, 'route')).toBeUndefined();
    expect(getHeader(r, 'route')).toBeUndefined();
  });

  it('prepends above existing lines of the name, or right after the Vias when there are none', () => {
    const r = req();
    prependHeaders(r, 'via', ['SIP/2.0/UDP me:5;branch=z9hG4bKme']);
    prependHeaders(r, 'record-route', ['<sip:rr1;lr>', '<sip:rr2;lr>']);
    const text = serializeMessage(r).toString();
    expect(text).toMatch(/^BYE sip:b@x SIP\/2\.0\r\nVia: SIP\/2\.0\/UDP me:5;branch=z9hG4bKme\r\nVia: /);
    expect(text).toMatch(/Via: SIP\/2\.0\/UDP c:3;branch=z9hG4bK3\r\nRecord-Route: <sip:rr1;lr>\r\nRecord-Route: <sip:rr2;lr>\r\nRoute:/);
  });

  it('edits a clone without touching the original', () => {
    const r = req();
    const c = cloneRequest(r);
    setHeader(c, 'max-forwards', '69');
    replaceFirstListValue(c, 'via', 'SIP/2.0/UDP a:1;branch=z9hG4bK1;received=10.0.0.1');
    removeHeadersWhere(c, 'route', (v) => v.includes('r1'));
    expect(getHeader(c, 'max-forwards')).toBe('69');
    expect(getListValues(c, 'via')[0]).toContain('received=10.0.0.1');
    expect(getHeader(c, 'route')).toBeUndefined();
    expect(getHeader(r, 'max-forwards')).toBeUndefined();
    expect(getListValues(r, 'via')[0]).toBe('SIP/2.0/UDP a:1;branch=z9hG4bK1');
    expect(getHeader(r, 'route')).toBe('<sip:r1;lr>, <sip:r2;lr>');
  });
});
