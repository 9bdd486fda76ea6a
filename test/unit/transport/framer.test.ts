import { describe, expect, it } from 'vitest';
import { StreamFramer, contentLength } from '../../../src/transport/framer.js';

const msg = (body = ''): string =>
  `REGISTER sip:a.sip.localhost SIP/2.0\r\nVia: SIP/2.0/TCP 10.0.0.1:5060;branch=z9hG4bK1\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`;

describe('StreamFramer', () => {
  it('cuts back-to-back messages by Content-Length', () => {
    const f = new StreamFramer({ maxMessageSize: 65535 });
    const ev = f.push(Buffer.from(msg('hello') + msg() + msg('x')));
    expect(ev.map((e) => e.type)).toEqual(['message', 'message', 'message']);
    expect(ev[0].type === 'message' && ev[0].data.toString().endsWith('\r\n\r\nhello')).toBe(true);
  });

  it('waits for a message split across chunks, byte by byte', () => {
    const f = new StreamFramer({ maxMessageSize: 65535 });
    const whole = Buffer.from(msg('body-bytes'));
    const events = [];
    for (let i = 0; i < whole.length; i++) events.push(...f.push(whole.subarray(i, i + 1)));
    expect(events).toHaveLength(1);
    expect(events[0].type === 'message' && events[0].data.equals(whole)).toBe(true);
  });

  it('answers a double-CRLF keep-alive as a ping (RFC 5626 §3.5.1), even when split', () => {
    const f = new StreamFramer({ maxMessageSize: 65535 });
    expect(f.push(Buffer.from('\r\n'))).toEqual([]);
    expect(f.push(Buffer.from('\r\n'))).toEqual([{ type: 'ping' }]);
    expect(f.push(Buffer.from('\r\n\r\n' + msg()))).toMatchObject([{ type: 'ping' }, { type: 'message' }]);
  });

  it('skips a single stray CRLF before a start line', () => {
    const f = new StreamFramer({ maxMessageSize: 65535 });
    expect(f.push(Buffer.from('\r\n' + msg()))).toMatchObject([{ type: 'message' }]);
  });

  it('fails the stream when Content-Length is missing (RFC 3261 §18.3)', () => {
    const f = new StreamFramer({ maxMessageSize: 65535 });
    const ev = f.push(Buffer.from('OPTIONS sip:x SIP/2.0\r\nVia: SIP/2.0/TCP h\r\n\r\n'));
    expect(ev).toMatchObject([{ type: 'error' }]);
    expect(f.push(Buffer.from(msg()))).toEqual([]);
  });

  it('fails the stream when a message exceeds the size limit, without buffering it', () => {
    const f = new StreamFramer({ maxMessageSize: 200 });
    expect(f.push(Buffer.from(msg('x'.repeat(500))))).toMatchObject([{ type: 'error' }]);
    const g = new StreamFramer({ maxMessageSize: 200 });
    expect(g.push(Buffer.from('REGISTER sip:x SIP/2.0\r\nX: ' + 'a'.repeat(300)))).toMatchObject([{ type: 'error' }]);
    expect(g.pending).toBe(0);
  });

  it('reads the compact form l: and any letter case', () => {
    const head = Buffer.from('INVITE sip:x SIP/2.0\r\nl: 3\r\n\r\nabc');
    expect(contentLength(head, head.indexOf('\r\n\r\n'))).toBe(3);
    const upper = Buffer.from('INVITE sip:x SIP/2.0\r\nCONTENT-LENGTH:  7 \r\n\r\n');
    expect(contentLength(upper, upper.indexOf('\r\n\r\n'))).toBe(7);
    const bad = Buffer.from('INVITE sip:x SIP/2.0\r\nContent-Length: -1\r\n\r\n');
    expect(contentLength(bad, bad.indexOf('\r\n\r\n'))).toBeNull();
  });
});
