/**
 * parseAppDocument (docs/voicexml.md "Verbs"): every verb with the vendor's
 * defaults, bad attributes named, the 100 KB cap, DOCTYPEs refused, and the verbs
 * sip-edge cannot run refused with their reason.
 */
import { describe, expect, it } from 'vitest';
import { parseAppDocument, MAX_DOCUMENT_BYTES, type Verb } from '../../../src/voicexml/document.js';

const doc = (body: string): string => `<?xml version="1.0" encoding="UTF-8"?>\n<Response>\n${body}\n</Response>`;

function verbs(body: string): Verb[] {
  const r = parseAppDocument(doc(body));
  if (!r.ok) throw new Error(`refused: ${r.cause}: ${r.reason}`);
  return r.verbs;
}
function refusal(body: string): { cause: string; reason: string } {
  const r = parseAppDocument(doc(body));
  if (r.ok) throw new Error('accepted');
  return r;
}

describe('parseAppDocument: verbs and defaults', () => {
  it('reads Speak with the defaults WOMAN, en-US, loop 1 and its text', () => {
    expect(verbs('<Speak>Hello &amp; welcome</Speak>')).toEqual([{ verb: 'Speak', text: 'Hello & welcome', voice: 'WOMAN', language: 'en-US', loop: 1 }]);
    expect(verbs('<Speak voice="MAN" language="en-GB" loop="3">Hi</Speak>')[0]).toMatchObject({ voice: 'MAN', language: 'en-GB', loop: 3 });
  });

  it('keeps the words of SSML inside Speak and drops the markup', () => {
    expect(verbs('<Speak>Hello <break time="1s"/> <emphasis>there</emphasis></Speak>')[0]).toMatchObject({ text: 'Hello there' });
  });

  it('reads Play (URL text, loop), Wait (length 1, silence and beep false), Hangup, Redirect (POST)', () => {
    expect(verbs('<Play loop="0">https://app.example/a.mp3</Play><Wait/><Wait length="4" silence="true"/><Hangup/><Hangup reason="busy" schedule="30"/><Redirect method="GET">https://app.example/next</Redirect>')).toEqual([
      { verb: 'Play', url: 'https://app.example/a.mp3', loop: 0 },
      { verb: 'Wait', length: 1, silence: false, beep: false },
      { verb: 'Wait', length: 4, silence: true, beep: false },
      { verb: 'Hangup', reason: null, schedule: null },
      { verb: 'Hangup', reason: 'busy', schedule: 30 },
      { verb: 'Redirect', target: { url: 'https://app.example/next', method: 'GET' } },
    ]);
    expect(verbs('<Redirect>https://app.example/n</Redirect>')[0]).toMatchObject({ target: { method: 'POST' } });
  });

  it('reads PreAnswer with nested Speak, Play and Wait, and DTMF (async true by default)', () => {
    expect(verbs('<PreAnswer><Speak>Wait</Speak><Wait length="2"/><Play>https://a.example/r.wav</Play></PreAnswer><DTMF>12w#</DTMF><DTMF async="false">9</DTMF>')).toEqual([
      {
        verb: 'PreAnswer',
        prompts: [
          { verb: 'Speak', text: 'Wait', voice: 'WOMAN', language: 'en-US', loop: 1 },
          { verb: 'Wait', length: 2, silence: false, beep: false },
          { verb: 'Play', url: 'https://a.example/r.wav', loop: 1 },
        ],
      },
      { verb: 'DTMF', digits: '12w#', async: true },
      { verb: 'DTMF', digits: '9', async: false },
    ]);
  });

  it('reads Gather with the defaults: finishOnKey #, executionTimeout 15, digitEndTimeout 5, redirect true, numDigits 32', () => {
    const [g] = verbs('<Gather action="https://app.example/menu"><Speak>Press 1</Speak></Gather>');
    expect(g).toEqual({
      verb: 'Gather',
      action: { url: 'https://app.example/menu', method: 'POST' },
      numDigits: 32,
      finishOnKey: '#',
      executionTimeout: 15,
      digitEndTimeout: 5,
      redirect: true,
      prompts: [{ verb: 'Speak', text: 'Press 1', voice: 'WOMAN', language: 'en-US', loop: 1 }],
    });
    const [h] = verbs('<Gather inputType="dtmf" method="GET" action="https://a.example/x" numDigits="4" finishOnKey="*" executionTimeout="10" digitEndTimeout="auto" redirect="false"/>');
    expect(h).toMatchObject({ action: { method: 'GET' }, numDigits: 4, finishOnKey: '*', executionTimeout: 10, digitEndTimeout: 5, redirect: false, prompts: [] });
    expect(verbs('<Gather finishOnKey=""/>')[0]).toMatchObject({ finishOnKey: '', action: null });
  });

  it('reads Record with the defaults: maxLength 60, finishOnKey 1234567890*#, timeout 15, playBeep true, mp3', () => {
    expect(verbs('<Record action="https://app.example/rec"/>')[0]).toEqual({
      verb: 'Record',
      action: { url: 'https://app.example/rec', method: 'POST' },
      maxLength: 60,
      finishOnKey: '1234567890*#',
      timeout: 15,
      playBeep: true,
      fileFormat: 'mp3',
      recordSession: false,
      redirect: true,
      callbackUrl: null,
    });
    expect(verbs('<Record maxLength="5" fileFormat="wav" playBeep="false" recordSession="true" callbackUrl="https://a.example/cb" callbackMethod="GET"/>')[0]).toMatchObject({
      maxLength: 5,
      fileFormat: 'wav',
      playBeep: false,
      recordSession: true,
      callbackUrl: { url: 'https://a.example/cb', method: 'GET' },
    });
  });

  it('reads Dial with Number and User children and its attributes', () => {
    const [d] = verbs(
      '<Dial action="https://app.example/dialed" timeout="20" callerId="+15550001" hangupOnStar="true" dialMusic="real" confirmKey="5">' +
        '<Number sendDigits="ww12">+14155550100</Number><User sipHeaders="A=1,B=2">sip:alice@example.com</User></Dial>',
    );
    expect(d).toEqual({
      verb: 'Dial',
      action: { url: 'https://app.example/dialed', method: 'POST' },
      timeout: 20,
      timeLimit: 14400,
      callerId: '+15550001',
      callerName: null,
      hangupOnStar: true,
      dialMusic: 'real',
      redirect: true,
      confirmSound: null,
      confirmKey: '5',
      targets: [
        { kind: 'number', value: '+14155550100', sendDigits: 'ww12' },
        { kind: 'user', value: 'sip:alice@example.com', sipHeaders: 'A=1,B=2' },
      ],
    });
    expect(verbs('<Dial>+14155550100</Dial>')[0]).toMatchObject({ targets: [{ kind: 'number', value: '+14155550100' }], timeout: 30 });
  });

  it('reads an empty Response as no verbs', () => {
    expect(verbs('')).toEqual([]);
  });
});

describe('parseAppDocument: refusals', () => {
  it('refuses bad attribute values, naming the verb and attribute', () => {
    expect(refusal('<Speak loop="x">Hi</Speak>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('Speak loop') });
    expect(refusal('<Wait length="-1"/>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('Wait length') });
    expect(refusal('<Gather numDigits="33"/>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('Gather numDigits') });
    expect(refusal('<Gather redirect="yes"/>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('Gather redirect') });
    expect(refusal('<Gather action="http://app.example/x"/>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('https://') });
    expect(refusal('<Record fileFormat="ogg"/>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('Record fileFormat') });
    expect(refusal('<Hangup reason="angry"/>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('Hangup reason') });
    expect(refusal('<Redirect method="PUT">https://a.example/</Redirect>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('Redirect method') });
    expect(refusal('<Play>ftp://a.example/x.mp3</Play>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('Play URL') });
    expect(refusal('<DTMF>12x</DTMF>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('DTMF') });
    expect(refusal('<Speak>   </Speak>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('Speak text') });
  });

  it('refuses a Dial without targets, with more than 10, or with a bad Number or User', () => {
    expect(refusal('<Dial/>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('at least one') });
    expect(refusal(`<Dial>${'<Number>+15550100</Number>'.repeat(11)}</Dial>`)).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('at most 10') });
    expect(refusal('<Dial><Number>call me</Number></Dial>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('Number') });
    expect(refusal('<Dial><User>alice</User></Dial>')).toMatchObject({ cause: 'bad-attribute', reason: expect.stringContaining('sip: URI') });
  });

  it('refuses speech input as unsupported (dtmf only)', () => {
    expect(refusal('<Gather inputType="speech"/>')).toMatchObject({ cause: 'unsupported-verb', reason: expect.stringContaining('speech') });
    expect(refusal('<Gather inputType="dtmf speech"/>')).toMatchObject({ cause: 'unsupported-verb' });
    expect(refusal('<Gather inputType="fax"/>')).toMatchObject({ cause: 'bad-attribute' });
  });

  it('refuses Conference, MultiPartyCall, Stream and AudioStream: they need a mixing media server', () => {
    for (const v of ['Conference', 'MultiPartyCall', 'Stream', 'AudioStream']) {
      const r = parseAppDocument(doc(`<${v}>x</${v}>`));
      expect(r).toMatchObject({ ok: false, cause: 'unsupported-verb', verb: v, reason: expect.stringContaining('needs a mixing media server') });
      expect((r as { reason: string }).reason.startsWith(v)).toBe(true);
    }
  });

  it('refuses Message and SMS: not available in calls', () => {
    for (const v of ['Message', 'SMS']) {
      expect(parseAppDocument(doc(`<${v}>hi</${v}>`))).toMatchObject({ ok: false, cause: 'unsupported-verb', reason: expect.stringContaining('not available in calls') });
    }
  });

  it('refuses unknown elements, and verb names in another case', () => {
    expect(refusal('<Dance/>')).toMatchObject({ cause: 'unknown-verb', reason: expect.stringContaining('Dance') });
    expect(refusal('<speak>hi</speak>')).toMatchObject({ cause: 'unknown-verb', reason: expect.stringContaining('speak') });
    expect(refusal('<Gather><Dial>+1555</Dial></Gather>')).toMatchObject({ cause: 'unknown-verb', reason: expect.stringContaining('Gather may hold only') });
  });

  it('refuses XML that is not well-formed, a root other than Response, and stray text', () => {
    expect(parseAppDocument('<Response><Speak>hi</Response>')).toMatchObject({ ok: false, cause: 'invalid-xml' });
    expect(parseAppDocument('<Answer><Speak>hi</Speak></Answer>')).toMatchObject({ ok: false, cause: 'invalid-xml', reason: expect.stringContaining('<Response>') });
    expect(parseAppDocument('not xml at all')).toMatchObject({ ok: false, cause: 'invalid-xml' });
    expect(parseAppDocument('<Response>hello<Hangup/></Response>')).toMatchObject({ ok: false, cause: 'invalid-xml' });
  });

  it('refuses a DOCTYPE (no entity definitions, no expansion)', () => {
    const bomb = '<?xml version="1.0"?><!DOCTYPE r [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;">]><Response><Speak>&b;</Speak></Response>';
    expect(parseAppDocument(bomb)).toMatchObject({ ok: false, cause: 'invalid-xml', reason: expect.stringContaining('DOCTYPE') });
    const external = '<!DOCTYPE r [<!ENTITY x SYSTEM "file:///etc/passwd">]><Response><Speak>&x;</Speak></Response>';
    expect(parseAppDocument(external)).toMatchObject({ ok: false, cause: 'invalid-xml' });
  });

  it('leaves an undefined entity unexpanded (only the five XML entities are known)', () => {
    expect(parseAppDocument(doc('<Speak>&lt;hi&gt; &nbsp;</Speak>'))).toMatchObject({ ok: true, verbs: [{ text: '<hi> &nbsp;' }] });
  });

  it('refuses a document over 100 KB as too-large, and accepts one just under', () => {
    const filler = (n: number): string => `<Speak>${'a'.repeat(n)}</Speak>`;
    const overhead = Buffer.byteLength(doc(filler(0)));
    expect(parseAppDocument(doc(filler(MAX_DOCUMENT_BYTES - overhead + 1)))).toMatchObject({ ok: false, cause: 'too-large' });
    expect(parseAppDocument(doc(filler(MAX_DOCUMENT_BYTES - overhead)))).toMatchObject({ ok: true });
  });
});
