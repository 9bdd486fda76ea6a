/**
 * runApplication (docs/voicexml.md "Running") against a fake call port that logs
 * what it is asked to do: the Gather → action → Dial flow and the parameters sent,
 * no input, a Play whose audio fails, the Redirect loop bound, the call going away
 * mid-Gather, the fallback URL, and the causes a run ends with.
 */
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { HANGUP_CAUSES, runApplication, type CallPort, type RunOptions } from '../../../src/voicexml/runner.js';
import type { FetchResult } from '../../../src/voicexml/fetch.js';
import type { UrlTarget } from '../../../src/voicexml/document.js';

type Collect = Parameters<CallPort['collectDigits']>[0];
type CollectResult = Awaited<ReturnType<CallPort['collectDigits']>>;
type DialResult = Awaited<ReturnType<CallPort['dial']>>;
type RecordResult = Awaited<ReturnType<CallPort['record']>>;

class FakePort implements CallPort {
  readonly callUuid = 'aleg-0001';
  readonly events: string[] = [];
  isAnswered = false;
  readonly gone: Promise<void>;
  end!: () => void;
  /** What collectDigits does; by default: no input. */
  onCollect: (o: Collect) => Promise<CollectResult> = () => Promise.resolve({ digits: '', ended: 'timeout' });
  onDial: () => Promise<DialResult> = () => Promise.resolve({ status: 'completed', bLegUuid: 'bleg-0001', durationS: 42, hangupBy: 'callee' });
  onRecord: () => Promise<RecordResult> = () =>
    Promise.resolve({ recordingId: 'rec-1', url: 'https://edge.example/v1/Account/MA1/Recording/rec-1.mp3', durationMs: 7400, digits: '#', ended: 'finish-key' });
  dialed: Parameters<CallPort['dial']>[0] | null = null;

  constructor() {
    this.gone = new Promise((resolve) => (this.end = resolve));
  }
  answered(): boolean {
    return this.isAnswered;
  }
  async answer(): Promise<void> {
    this.events.push('answer');
    this.isAnswered = true;
  }
  async preAnswer(): Promise<void> {
    this.events.push('preAnswer');
  }
  async play(file: string, o: { loop: number }): Promise<'done' | 'interrupted' | 'hangup'> {
    this.events.push(`play ${file} x${o.loop}`);
    return 'done';
  }
  async stopMedia(): Promise<void> {
    this.events.push('stopMedia');
  }
  async sendDigits(d: string): Promise<void> {
    this.events.push(`sendDigits ${d}`);
  }
  collectDigits(o: Collect): Promise<CollectResult> {
    this.events.push(`collect numDigits=${o.numDigits} key=${o.finishOnKey} first=${o.firstDigitTimeoutMs} next=${o.digitTimeoutMs}`);
    return this.onCollect(o);
  }
  record(o: Parameters<CallPort['record']>[0]): Promise<RecordResult> {
    this.events.push(`record max=${o.maxLengthMs} keys=${o.finishOnKey} silence=${o.silenceTimeoutMs} beep=${o.beep} ${o.format}`);
    return this.onRecord();
  }
  dial(o: Parameters<CallPort['dial']>[0]): Promise<DialResult> {
    this.dialed = o;
    this.events.push(`dial ${o.targets.map((t) => t.value).join(',')}`);
    return this.onDial();
  }
  async wait(ms: number, o: { silence: boolean }): Promise<'done'> {
    this.events.push(`wait ${ms}${o.silence ? ' silence' : ''}`);
    return 'done';
  }
  async hangup(reason: string): Promise<void> {
    this.events.push(`hangup ${reason}`);
    this.end();
  }
}

const BASE = { CallUUID: 'aleg-0001', From: '+15550001', To: '+15550002', Direction: 'inbound', CallStatus: 'in-progress' };
const xml = (body: string): string => `<?xml version="1.0"?><Response>${body}</Response>`;

/** A fake application server: URL → document (or a failure), and the requests made. */
function app(docs: Record<string, string | { fail: string }>) {
  const requests: Array<{ url: string; method: string; params: Record<string, string> }> = [];
  const fetch = async (t: UrlTarget, params: Record<string, string>): Promise<FetchResult> => {
    requests.push({ url: t.url, method: t.method, params });
    const d = docs[t.url];
    if (d === undefined) return { ok: false, reason: 'HTTP 404 from https://app.example' };
    if (typeof d !== 'string') return { ok: false, reason: d.fail };
    return { ok: true, xml: d, status: 200 };
  };
  return { fetch, requests };
}

function options(port: FakePort, fetch: RunOptions['fetch'], over: Partial<RunOptions> = {}): RunOptions {
  return {
    port,
    first: { url: 'https://app.example/answer', method: 'POST' },
    fallback: null,
    baseParams: () => ({ ...BASE }),
    fetch,
    speech: { render: async (text) => ({ path: `/tts/${text}.wav`, durationMs: 1000 }) },
    audio: {
      get: async (url) => (url.includes('missing') ? { error: 'HTTP 404 from https://media.example' } : { path: `/audio/${url.split('/').pop()}`, durationMs: 2000 }),
    },
    log: pino({ level: 'silent' }),
    ...over,
  };
}

describe('runApplication: the Gather → action → Dial flow', () => {
  it('answers, gathers with the prompts, posts Digits to the action, dials from its document, posts the Dial outcome, and ends with END_OF_XML', async () => {
    const port = new FakePort();
    port.onCollect = async (o) => {
      o.onFirstDigit();
      return { digits: '1', ended: 'complete' };
    };
    const { fetch, requests } = app({
      'https://app.example/answer': xml('<Gather action="https://app.example/menu" numDigits="1"><Speak>Press 1 for sales</Speak></Gather><Speak>No input</Speak>'),
      'https://app.example/menu': xml('<Dial action="https://app.example/dialed" callerId="+15550009" timeout="20"><Number sendDigits="w1">+14155550100</Number></Dial>'),
      'https://app.example/dialed': xml('<Speak>Goodbye</Speak>'),
    });
    const out = await runApplication(options(port, fetch));
    expect(out).toEqual({ hangupCause: HANGUP_CAUSES.END_OF_XML, endedBy: 'xml' });
    // The prompt's 1 s counts into the first-digit timer (executionTimeout 15 s after it).
    expect(port.events[0]).toBe('answer');
    expect(port.events).toContain('collect numDigits=1 key=# first=16000 next=5000');
    expect(port.events).not.toContain('play /tts/No input.wav x1');
    expect(port.events.slice(-2)).toEqual(['play /tts/Goodbye.wav x1', 'hangup END_OF_XML']);
    expect(port.dialed).toMatchObject({ targets: [{ kind: 'number', value: '+14155550100', sendDigits: 'w1' }], timeoutS: 20, timeLimitS: 14400, callerId: '+15550009', hangupOnStar: false });
    expect(requests.map((r) => r.url)).toEqual(['https://app.example/answer', 'https://app.example/menu', 'https://app.example/dialed']);
    expect(requests[0]!.params).toEqual(BASE);
    expect(requests[1]!.params).toEqual({ ...BASE, Digits: '1', InputType: 'dtmf' });
    expect(requests[2]!.params).toEqual({ ...BASE, DialStatus: 'completed', DialALegUUID: 'aleg-0001', DialBLegUUID: 'bleg-0001', DialDuration: '42' });
  });

  it('goes on with the next verb when the Gather gets no input', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    const { fetch, requests } = app({
      'https://app.example/answer': xml('<Gather action="https://app.example/menu"><Play>https://media.example/menu.wav</Play></Gather><Speak>We did not get your input</Speak>'),
    });
    const out = await runApplication(options(port, fetch));
    expect(out.hangupCause).toBe('END_OF_XML');
    expect(port.events).toEqual([
      'collect numDigits=32 key=# first=17000 next=5000',
      'play /audio/menu.wav x1',
      'play /tts/We did not get your input.wav x1',
      'hangup END_OF_XML',
    ]);
    expect(requests).toHaveLength(1);
  });

  it('with redirect="false" only tells the action and goes on', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    port.onCollect = async () => ({ digits: '42', ended: 'finish-key' });
    const { fetch, requests } = app({
      'https://app.example/answer': xml('<Gather action="https://app.example/menu" redirect="false"/><Hangup/>'),
      'https://app.example/menu': xml('<Speak>never run</Speak>'),
    });
    expect((await runApplication(options(port, fetch))).hangupCause).toBe('NORMAL_CLEARING');
    expect(requests[1]!.params).toMatchObject({ Digits: '42' });
    expect(port.events.some((e) => e.includes('never run'))).toBe(false);
  });

  it('continues after a Dial without action; a Dial asking for confirmKey ends the call naming the attribute', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    const { fetch } = app({ 'https://app.example/answer': xml('<Dial><User>sip:alice@example.com</User></Dial><Speak>After</Speak><Dial confirmKey="5"><Number>+15550100</Number></Dial>') });
    const out = await runApplication(options(port, fetch));
    expect(out.hangupCause).toBe('XML_UNSUPPORTED_ATTRIBUTE: Dial confirmKey');
    expect(port.events).toEqual(['dial sip:alice@example.com', 'play /tts/After.wav x1', 'hangup XML_UNSUPPORTED_ATTRIBUTE: Dial confirmKey']);
  });

  it('posts RecordUrl, RecordingDuration, RecordingDurationMs, RecordingID and Digits to the Record action', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    const { fetch, requests } = app({
      'https://app.example/answer': xml('<Record action="https://app.example/recorded" maxLength="30" fileFormat="wav"/>'),
      'https://app.example/recorded': xml('<Hangup reason="busy"/>'),
    });
    expect((await runApplication(options(port, fetch))).hangupCause).toBe('USER_BUSY');
    expect(port.events[0]).toBe('record max=30000 keys=1234567890*# silence=15000 beep=true wav');
    expect(requests[1]!.params).toEqual({
      ...BASE,
      RecordUrl: 'https://edge.example/v1/Account/MA1/Recording/rec-1.mp3',
      RecordingDuration: '7',
      RecordingDurationMs: '7400',
      RecordingID: 'rec-1',
      Digits: '#',
    });
  });
});

describe('runApplication: Record when the caller hangs up', () => {
  it('the recording made so far still goes to the action; the run ends with CALL_GONE', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    port.onRecord = () =>
      new Promise((resolve) => {
        // The caller hangs up mid-recording; the port stores what it has a moment later.
        setTimeout(() => port.end(), 10);
        setTimeout(() => resolve({ recordingId: 'rec-2', url: '/api/v1/Account/MA1/Recording/rec-2.wav', durationMs: 1500, digits: '', ended: 'hangup' }), 50);
      });
    const { fetch, requests } = app({
      'https://app.example/answer': xml('<Record action="https://app.example/recorded" maxLength="30"/>'),
      'https://app.example/recorded': xml('<Speak>never run</Speak>'),
    });
    const out = await runApplication(options(port, fetch));
    expect(out.hangupCause).toBe('CALL_GONE');
    expect(requests[1]!.params).toMatchObject({ RecordingID: 'rec-2', RecordingDurationMs: '1500', RecordUrl: '/api/v1/Account/MA1/Recording/rec-2.wav' });
    expect(port.events.some((e) => e.startsWith('play'))).toBe(false);
  });

  it('a recording that never comes back does not hold the run past the call', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    port.onRecord = () => {
      setTimeout(() => port.end(), 10);
      return new Promise(() => undefined);
    };
    const { fetch, requests } = app({ 'https://app.example/answer': xml('<Record action="https://app.example/recorded" maxLength="30"/>') });
    const t0 = Date.now();
    expect((await runApplication(options(port, fetch))).hangupCause).toBe('CALL_GONE');
    expect(Date.now() - t0).toBeLessThan(7000);
    expect(requests).toHaveLength(1);
  }, 10_000);
});

describe('runApplication: failures', () => {
  it('skips a Play whose audio cannot be fetched and goes on', async () => {
    const port = new FakePort();
    const { fetch } = app({ 'https://app.example/answer': xml('<Play>https://media.example/missing.mp3</Play><Play loop="2">https://media.example/ok.wav</Play>') });
    expect((await runApplication(options(port, fetch))).hangupCause).toBe('END_OF_XML');
    expect(port.events).toEqual(['answer', 'play /audio/ok.wav x2', 'hangup END_OF_XML']);
  });

  it('ends a Redirect loop after maxDocuments documents with XML_DOCUMENT_LIMIT', async () => {
    const port = new FakePort();
    const { fetch, requests } = app({
      'https://app.example/answer': xml('<Redirect>https://app.example/loop</Redirect>'),
      'https://app.example/loop': xml('<Redirect method="GET">https://app.example/loop</Redirect>'),
    });
    const out = await runApplication(options(port, fetch, { maxDocuments: 5 }));
    expect(out).toEqual({ hangupCause: 'XML_DOCUMENT_LIMIT', endedBy: 'xml' });
    expect(requests).toHaveLength(5);
    expect(requests[4]).toMatchObject({ url: 'https://app.example/loop', method: 'GET' });
    expect(port.events).toEqual(['hangup XML_DOCUMENT_LIMIT']);
  });

  it('stops promptly when the call goes away mid-Gather: no hangup sent, no action fetched', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    port.onCollect = () => new Promise(() => undefined); // the port never answers
    const { fetch, requests } = app({ 'https://app.example/answer': xml('<Gather action="https://app.example/menu"/><Speak>after</Speak>') });
    const running = runApplication(options(port, fetch));
    setTimeout(() => port.end(), 20);
    const started = Date.now();
    expect(await running).toEqual({ hangupCause: HANGUP_CAUSES.CALL_GONE, endedBy: 'call' });
    expect(Date.now() - started).toBeLessThan(1000);
    expect(port.events.filter((e) => e.startsWith('hangup') || e.startsWith('play'))).toEqual([]);
    expect(requests).toHaveLength(1);
  });

  it('runs the fallback URL when the answer URL returns invalid XML', async () => {
    const port = new FakePort();
    const { fetch, requests } = app({
      'https://app.example/answer': '<Response><Speak>broken</Response>',
      'https://app.example/fallback': xml('<Speak>From the fallback</Speak>'),
    });
    const out = await runApplication(options(port, fetch, { fallback: { url: 'https://app.example/fallback', method: 'GET' } }));
    expect(out.hangupCause).toBe('END_OF_XML');
    expect(requests.map((r) => `${r.method} ${r.url}`)).toEqual(['POST https://app.example/answer', 'GET https://app.example/fallback']);
    expect(port.events).toContain('play /tts/From the fallback.wav x1');
  });

  it('runs the fallback URL when the answer URL fails; ANSWER_URL_FAILED when both fail', async () => {
    const port = new FakePort();
    const { fetch } = app({ 'https://app.example/answer': { fail: 'no complete answer within 5000 ms' } });
    const out = await runApplication(options(port, fetch, { fallback: { url: 'https://app.example/fallback', method: 'POST' } }));
    expect(out).toEqual({ hangupCause: 'ANSWER_URL_FAILED', endedBy: 'xml' });
    expect(port.events).toEqual(['hangup ANSWER_URL_FAILED']);
  });

  it('names the cause of a refused document: XML_INVALID: <reason>, XML_UNSUPPORTED_VERB: <verb>', async () => {
    const p1 = new FakePort();
    const r1 = await runApplication(options(p1, app({ 'https://app.example/answer': xml('<Speak loop="many">hi</Speak>') }).fetch));
    expect(r1.hangupCause).toMatch(/^XML_INVALID: Speak loop="many"/);
    const p2 = new FakePort();
    const r2 = await runApplication(options(p2, app({ 'https://app.example/answer': xml('<Speak>hi</Speak><Conference>room</Conference>') }).fetch));
    expect(r2.hangupCause).toBe('XML_UNSUPPORTED_VERB: Conference');
    expect(p2.events).toEqual(['hangup XML_UNSUPPORTED_VERB: Conference']);
  });

  it('ends with ACTION_URL_FAILED when an action does not answer with a document', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    port.onCollect = async () => ({ digits: '9', ended: 'complete' });
    const { fetch } = app({ 'https://app.example/answer': xml('<Gather action="https://app.example/gone"/>') });
    expect((await runApplication(options(port, fetch))).hangupCause).toBe('ACTION_URL_FAILED');
  });
});

describe('runApplication: before the answer', () => {
  it('rejects an unanswered call with <Hangup reason="rejected"/> without answering it', async () => {
    const port = new FakePort();
    const { fetch } = app({ 'https://app.example/answer': xml('<Hangup reason="rejected"/>') });
    expect(await runApplication(options(port, fetch))).toEqual({ hangupCause: 'CALL_REJECTED', endedBy: 'xml' });
    expect(port.events).toEqual(['hangup CALL_REJECTED']);
  });

  it('plays PreAnswer prompts after a 183, then answers for the next verb; DTMF and Wait reach the port', async () => {
    const port = new FakePort();
    const { fetch } = app({
      'https://app.example/answer': xml('<PreAnswer><Speak>Connecting</Speak><Wait length="2"/></PreAnswer><DTMF async="false">12</DTMF><Wait length="3" silence="true"/>'),
    });
    await runApplication(options(port, fetch));
    expect(port.events).toEqual(['preAnswer', 'play /tts/Connecting.wav x1', 'wait 2000', 'answer', 'sendDigits 12', 'wait 3000 silence', 'hangup END_OF_XML']);
  });

  it('with <Hangup schedule> goes on with the document and hangs up when the time comes, with that cause', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    port.wait = (ms: number) =>
      new Promise<'done'>((resolve) => {
        port.events.push(`wait ${ms}`);
        setTimeout(() => resolve('done'), ms);
      });
    const { fetch } = app({ 'https://app.example/answer': xml('<Hangup reason="rejected" schedule="1"/><Wait length="5"/><Speak>never</Speak>') });
    const started = Date.now();
    expect(await runApplication(options(port, fetch))).toEqual({ hangupCause: 'CALL_REJECTED', endedBy: 'xml' });
    expect(Date.now() - started).toBeLessThan(3000);
    expect(port.events).toEqual(['wait 5000', 'hangup CALL_REJECTED']);
  });

  it('stops a prompt still playing when the Gather times out, and goes on', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    let stopPlaying: (r: 'interrupted') => void = () => undefined;
    port.play = (file: string, o: { loop: number }) => {
      port.events.push(`play ${file} x${o.loop}`);
      return file.includes('menu') ? new Promise<'done' | 'interrupted'>((resolve) => (stopPlaying = resolve)) : Promise.resolve('done' as const);
    };
    port.stopMedia = async () => {
      port.events.push('stopMedia');
      stopPlaying('interrupted');
    };
    port.onCollect = () => new Promise((resolve) => setTimeout(() => resolve({ digits: '', ended: 'timeout' }), 20));
    const { fetch } = app({ 'https://app.example/answer': xml('<Gather executionTimeout="5"><Speak loop="0">menu</Speak></Gather><Speak>next</Speak>') });
    expect((await runApplication(options(port, fetch))).hangupCause).toBe('END_OF_XML');
    // loop 0 (forever) counts 0 s: the caller has executionTimeout alone.
    expect(port.events).toEqual(['collect numDigits=32 key=# first=5000 next=5000', 'play /tts/menu.wav x0', 'stopMedia', 'play /tts/next.wav x1', 'hangup END_OF_XML']);
  });

  it('tells the Dial action the outcome when the caller hangs up during the bridge, and runs nothing more', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    port.onDial = () =>
      new Promise((resolve) =>
        setTimeout(() => {
          port.end();
          resolve({ status: 'completed', bLegUuid: 'bleg-9', durationS: 3, hangupBy: 'caller' });
        }, 10),
      );
    const { fetch, requests } = app({
      'https://app.example/answer': xml('<Dial action="https://app.example/dialed"><Number>+15550100</Number></Dial>'),
      'https://app.example/dialed': xml('<Speak>never</Speak>'),
    });
    expect(await runApplication(options(port, fetch))).toEqual({ hangupCause: 'CALL_GONE', endedBy: 'call' });
    expect(requests[1]!.params).toMatchObject({ DialStatus: 'completed', DialBLegUUID: 'bleg-9', DialDuration: '3' });
    expect(port.events).toEqual(['dial +15550100']);
  });

  it('survives the port failing after the call is gone (no unhandled rejection)', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    const unhandled: unknown[] = [];
    const onUnhandled = (e: unknown): void => void unhandled.push(e);
    process.on('unhandledRejection', onUnhandled);
    try {
      port.onCollect = () => new Promise((_resolve, reject) => setTimeout(() => reject(new Error('media gone')), 30));
      const { fetch } = app({ 'https://app.example/answer': xml('<Gather/>') });
      const running = runApplication(options(port, fetch));
      setTimeout(() => port.end(), 5);
      expect((await running).hangupCause).toBe('CALL_GONE');
      await new Promise((r) => setTimeout(r, 80));
      expect(unhandled).toEqual([]);
    } finally {
      process.off('unhandledRejection', onUnhandled);
    }
  });

  it('ends with PLATFORM_ERROR and hangs up when the port fails while the call is up', async () => {
    const port = new FakePort();
    port.isAnswered = true;
    port.onCollect = () => Promise.reject(new Error('rtpengine unreachable'));
    const { fetch } = app({ 'https://app.example/answer': xml('<Gather/>') });
    expect(await runApplication(options(port, fetch))).toEqual({ hangupCause: 'PLATFORM_ERROR', endedBy: 'xml' });
    expect(port.events.at(-1)).toBe('hangup PLATFORM_ERROR');
  });
});
