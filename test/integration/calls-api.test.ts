/**
 * The Calls API routes in process (docs/api.md "Calls") against a fake CallControl
 * that records what it was asked: the parsed PlaceCallRequest (`to` split on `<`,
 * methods and timers defaulted, `sip_headers` parsed), every validation 400 naming its
 * field, CallRefusedError mapped to its status (429 with Retry-After), 404 for unknown
 * calls and recordings, 503 without a B2BUA, sub-account isolation, Idempotency-Key,
 * and answers with exactly the fields of the vendor SDK's pydantic models.
 */
import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import {
  CallRefusedError,
  type CallControl,
  type CallOwner,
  type CallView,
  type DtmfRequest,
  type PlaceCallRequest,
  type PlayRequest,
  type PlacedCall,
  type RecordingView,
  type RecordRequest,
  type SpeakRequest,
  type StartedRecording,
  type TransferRequest,
} from '../../src/calls/control.js';
import { createLogger } from '../../src/logger.js';
import { startHarness, type Creds, type Harness } from '../support/api-harness.js';

/**
 * The SDK's response models (vobiz-ai/Vobiz-Python-SDK src/vobiz/<pkg>/types/*.py),
 * field → [type, nullable]; all forbid extra fields and need every non-Optional one.
 */
type Spec = Record<string, ['str' | 'int' | 'float' | 'list[str]' | 'any', boolean]>;
const MakeCallResponse: Spec = { api_id: ['str', false], message: ['str', false], request_uuid: ['str', false] };
const ListLiveCallsResponse: Spec = { api_id: ['str', false], calls: ['list[str]', false] };
const ListQueuedCallsResponse = ListLiveCallsResponse;
const GetLiveCallResponse: Spec = {
  api_id: ['str', false],
  call_status: ['str', false],
  call_uuid: ['str', false],
  caller_name: ['str', false],
  direction: ['str', false],
  from: ['str', false],
  request_uuid: ['str', false],
  session_start: ['str', false],
  stir_attestation: ['str', false],
  stir_verification: ['str', false],
  to: ['str', false],
};
const GetQueuedCallResponse: Spec = {
  api_id: ['str', false],
  call_status: ['str', false],
  call_uuid: ['str', false],
  request_uuid: ['str', false],
  caller_name: ['str', false],
  direction: ['str', false],
  from: ['str', false],
  to: ['str', false],
};
const ListRecordingsResponseObjectsItem: Spec = {
  add_time: ['str', false],
  call_uuid: ['str', false],
  conference_name: ['str', true],
  from_number: ['str', false],
  monthly_recording_storage_amount: ['int', false],
  recording_duration_ms: ['str', false],
  recording_end_ms: ['str', true],
  recording_format: ['str', false],
  recording_id: ['str', false],
  recording_start_ms: ['str', true],
  recording_storage_duration: ['int', false],
  recording_storage_rate: ['float', false],
  recording_type: ['str', false],
  recording_url: ['str', false],
  resource_uri: ['str', false],
  rounded_recording_duration: ['int', false],
  to_number: ['str', false],
};
const GetRecordingResponse: Spec = {
  ...ListRecordingsResponseObjectsItem,
  api_id: ['str', false],
  conference_name: ['any', true],
  recording_end_ms: ['any', true],
  recording_start_ms: ['any', true],
};
const ListRecordingsResponseMeta: Spec = { limit: ['int', false], next: ['str', false], offset: ['int', false], previous: ['any', true], total_count: ['int', false] };

/** Why the SDK model would refuse `v` (empty: it parses). */
function problems(spec: Spec, v: unknown, at = 'body'): string[] {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) return [`${at}: not an object`];
  const o = v as Record<string, unknown>;
  const out: string[] = [];
  for (const k of Object.keys(o)) if (!(k in spec)) out.push(`${at}.${k}: unknown field`);
  for (const [k, [type, nullable]] of Object.entries(spec)) {
    if (!(k in o)) {
      if (!nullable) out.push(`${at}.${k}: missing`);
      continue;
    }
    const x = o[k];
    if (x === null) {
      if (!nullable) out.push(`${at}.${k}: null`);
      continue;
    }
    const ok =
      type === 'any' ||
      (type === 'str' && typeof x === 'string') ||
      (type === 'int' && Number.isInteger(x)) ||
      (type === 'float' && typeof x === 'number') ||
      (type === 'list[str]' && Array.isArray(x) && x.every((e) => typeof e === 'string'));
    if (!ok) out.push(`${at}.${k}: not ${type} (${JSON.stringify(x)})`);
  }
  return out;
}

interface Asked {
  op: string;
  owner: CallOwner;
  callUuid?: string;
  req?: unknown;
}

/** A CallControl that records what it is asked; calls and recordings are scoped by the owner's authId. */
class FakeCalls implements CallControl {
  asked: Asked[] = [];
  refusal: CallRefusedError | null = null;
  calls = new Map<string, { ownerAuthId: string; view: CallView }>();
  recs = new Map<string, { ownerAuthId: string; view: RecordingView; audio: Buffer; contentType: string }>();

  reset(): void {
    this.asked = [];
    this.refusal = null;
  }
  private note(op: string, owner: CallOwner, callUuid?: string, req?: unknown): void {
    this.asked.push({ op, owner, ...(callUuid !== undefined ? { callUuid } : {}), ...(req !== undefined ? { req } : {}) });
    if (this.refusal) throw this.refusal;
  }
  private mine(owner: CallOwner, callUuid: string): CallView | null {
    const c = this.calls.get(callUuid);
    return c && c.ownerAuthId === owner.authId ? c.view : null;
  }
  addCall(owner: string, status: CallView['status'], over: Partial<CallView> = {}): CallView {
    const view: CallView = {
      callUuid: randomUUID(),
      requestUuid: randomUUID(),
      direction: 'outbound',
      from: '+14155551234',
      to: '+919876543210',
      callerName: 'Alice',
      status,
      sessionStart: '2026-11-26T10:00:00.000Z',
      answeredAt: status === 'in-progress' ? '2026-11-26T10:00:05.000Z' : null,
      bLegUuid: null,
      ...over,
    };
    this.calls.set(view.callUuid, { ownerAuthId: owner, view });
    return view;
  }
  addRecording(owner: string, over: Partial<RecordingView> = {}, contentType = 'audio/wav'): RecordingView {
    const id = over.recordingId ?? randomUUID();
    const view: RecordingView = {
      recordingId: id,
      callUuid: randomUUID(),
      duration: 61.5,
      format: 'wav',
      url: `https://api.test/api/v1/Account/${owner}/Recording/${id}.wav`,
      addedOn: '2026-11-20T10:00:00.000Z',
      source: 'call',
      fromNumber: '+14155551234',
      toNumber: '+919876543210',
      ...over,
    };
    this.recs.set(id, { ownerAuthId: owner, view, audio: Buffer.from(`RIFF${id}`), contentType });
    return view;
  }

  async place(owner: CallOwner, req: PlaceCallRequest): Promise<PlacedCall> {
    this.note('place', owner, undefined, req);
    return { requestUuid: `req-${this.asked.length}`, callUuids: req.to.map(() => randomUUID()) };
  }
  async list(owner: CallOwner, which: 'live' | 'queued'): Promise<CallView[]> {
    this.note('list', owner, undefined, which);
    return [...this.calls.values()]
      .filter((c) => c.ownerAuthId === owner.authId && (which === 'queued' ? c.view.status === 'queued' : c.view.status !== 'queued'))
      .map((c) => c.view);
  }
  async get(owner: CallOwner, callUuid: string, which: 'live' | 'queued'): Promise<CallView | null> {
    this.note('get', owner, callUuid, which);
    const v = this.mine(owner, callUuid);
    return v && (which === 'queued') === (v.status === 'queued') ? v : null;
  }
  async hangup(owner: CallOwner, callUuid: string): Promise<boolean> {
    this.note('hangup', owner, callUuid);
    return this.mine(owner, callUuid) !== null;
  }
  async transfer(owner: CallOwner, callUuid: string, req: TransferRequest): Promise<boolean> {
    this.note('transfer', owner, callUuid, req);
    return this.mine(owner, callUuid) !== null;
  }
  async play(owner: CallOwner, callUuid: string, req: PlayRequest): Promise<boolean> {
    this.note('play', owner, callUuid, req);
    return this.mine(owner, callUuid) !== null;
  }
  async stopPlay(owner: CallOwner, callUuid: string): Promise<boolean> {
    this.note('stopPlay', owner, callUuid);
    return this.mine(owner, callUuid) !== null;
  }
  async speak(owner: CallOwner, callUuid: string, req: SpeakRequest): Promise<boolean> {
    this.note('speak', owner, callUuid, req);
    return this.mine(owner, callUuid) !== null;
  }
  async stopSpeak(owner: CallOwner, callUuid: string): Promise<boolean> {
    this.note('stopSpeak', owner, callUuid);
    return this.mine(owner, callUuid) !== null;
  }
  async dtmf(owner: CallOwner, callUuid: string, req: DtmfRequest): Promise<boolean> {
    this.note('dtmf', owner, callUuid, req);
    return this.mine(owner, callUuid) !== null;
  }
  async record(owner: CallOwner, callUuid: string, req: RecordRequest): Promise<StartedRecording | null> {
    this.note('record', owner, callUuid, req);
    if (!this.mine(owner, callUuid)) return null;
    const recordingId = `rec-${callUuid.slice(0, 8)}`;
    return { recordingId, url: `https://api.test/api/v1/Account/${owner.authId}/Recording/${recordingId}.${req.fileFormat ?? 'mp3'}` };
  }
  async stopRecord(owner: CallOwner, callUuid: string): Promise<boolean> {
    this.note('stopRecord', owner, callUuid);
    return this.mine(owner, callUuid) !== null;
  }
  async recordings(owner: CallOwner, filter: { callUuid?: string; limit: number; offset: number }): Promise<{ total: number; items: RecordingView[] }> {
    this.note('recordings', owner, undefined, filter);
    const all = [...this.recs.values()]
      .filter((r) => r.ownerAuthId === owner.authId && (filter.callUuid === undefined || r.view.callUuid === filter.callUuid))
      .map((r) => r.view);
    return { total: all.length, items: all.slice(filter.offset, filter.offset + filter.limit) };
  }
  async recording(owner: CallOwner, recordingId: string): Promise<RecordingView | null> {
    this.note('recording', owner, undefined, recordingId);
    const r = this.recs.get(recordingId);
    return r && r.ownerAuthId === owner.authId ? r.view : null;
  }
  async recordingAudio(owner: CallOwner, recordingId: string): Promise<{ contentType: string; data: Buffer } | null> {
    this.note('recordingAudio', owner, undefined, recordingId);
    const r = this.recs.get(recordingId);
    return r && r.ownerAuthId === owner.authId ? { contentType: r.contentType, data: r.audio } : null;
  }
  async deleteRecording(owner: CallOwner, recordingId: string): Promise<boolean> {
    this.note('deleteRecording', owner, undefined, recordingId);
    const r = this.recs.get(recordingId);
    if (!r || r.ownerAuthId !== owner.authId) return false;
    this.recs.delete(recordingId);
    return true;
  }
}

const ANSWER = 'https://app.example.test/answer';

describe('calls API', () => {
  const fake = new FakeCalls();
  let h: Harness;
  let a: Creds & { sipDomain: string };
  beforeAll(async () => {
    h = await startHarness('memory', {}, { callControl: fake });
  });
  afterAll(async () => {
    await h.close();
  });
  beforeEach(async () => {
    a = await h.newAccount();
    fake.reset();
  });
  const base = (c: Creds = a): string => `/api/v1/Account/${c.id}`;
  const req = (method: string, path: string, body?: unknown, auth: Creds = a, headers: Record<string, string> = {}) =>
    h.request(method, path, { auth, body, headers });
  const place = (body: Record<string, unknown>, auth: Creds = a) => req('POST', `${base(auth)}/Call/`, body, auth);
  const lastAsked = (): Asked => {
    const x = fake.asked.at(-1);
    if (!x) throw new Error('the fake was not asked anything');
    return x;
  };
  const expect400 = (r: { status: number; json: Record<string, unknown>; text: string }, field: string): void => {
    expect(r.status, r.text).toBe(400);
    expect(r.json.error).toBe('invalid_request');
    expect(Object.keys(r.json.details as Record<string, string>), r.text).toContain(field);
  };

  it('places a call: 201 {api_id, message, request_uuid} exactly; `to` split on <, methods and timers defaulted, sip_headers parsed', async () => {
    const r = await place({
      from: '+14155551234',
      to: '+919876543210<sip:alice@x.sip.test<14155550000',
      answer_url: ANSWER,
      sip_headers: 'Foo=bar,X-Trace=a b=c',
    });
    expect(r.status, r.text).toBe(201);
    expect(problems(MakeCallResponse, r.json)).toEqual([]);
    expect(r.json.message).toBe('call fired');
    expect(r.json.api_id).toBe(r.headers.get('x-request-id'));
    const asked = lastAsked();
    expect(asked.op).toBe('place');
    expect(r.json.request_uuid).toBe(`req-${fake.asked.length}`);
    expect(asked.owner).toEqual({ authId: a.id, domain: a.sipDomain, subAccount: null });
    expect(asked.req).toEqual({
      from: '+14155551234',
      to: ['+919876543210', 'sip:alice@x.sip.test', '14155550000'],
      answer: { url: ANSWER, method: 'POST' },
      ring: null,
      hangup: null,
      fallback: null,
      callerName: null,
      timeLimit: 14_400,
      ringTimeout: 60,
      hangupOnRing: null,
      sipHeaders: { Foo: 'bar', 'X-Trace': 'a b=c' },
    } satisfies PlaceCallRequest);
  });

  it('places a call with every optional field, the trailing slash optional', async () => {
    const r = await req('POST', `${base()}/Call`, {
      from: 'alice01',
      to: 'sip:bob@x.sip.test:5061;transport=tls',
      answer_url: ANSWER,
      answer_method: 'GET',
      ring_url: 'https://app.example.test/ring',
      ring_method: 'GET',
      hangup_url: 'https://app.example.test/hangup',
      fallback_url: 'https://app.example.test/fallback',
      fallback_method: 'POST',
      caller_name: 'x'.repeat(50),
      time_limit: 120,
      ring_timeout: 30,
      hangup_on_ring: 10,
      sip_headers: null,
    });
    expect(r.status, r.text).toBe(201);
    expect(lastAsked().req).toEqual({
      from: 'alice01',
      to: ['sip:bob@x.sip.test:5061;transport=tls'],
      answer: { url: ANSWER, method: 'GET' },
      ring: { url: 'https://app.example.test/ring', method: 'GET' },
      hangup: { url: 'https://app.example.test/hangup', method: 'POST' },
      fallback: { url: 'https://app.example.test/fallback', method: 'POST' },
      callerName: 'x'.repeat(50),
      timeLimit: 120,
      ringTimeout: 30,
      hangupOnRing: 10,
      sipHeaders: null,
    });
  });

  it('accepts 1000 destinations and refuses 1001 (400 naming to)', async () => {
    const many = (n: number) => Array.from({ length: n }, (_, i) => `+9198${String(i).padStart(8, '0')}`).join('<');
    const ok = await place({ from: '+14155551234', to: many(1000), answer_url: ANSWER });
    expect(ok.status, ok.text).toBe(201);
    expect((lastAsked().req as PlaceCallRequest).to).toHaveLength(1000);
    fake.reset();
    const bad = await place({ from: '+14155551234', to: many(1001), answer_url: ANSWER });
    expect400(bad, 'to');
    expect((bad.json.details as Record<string, string>).to).toMatch(/at most 1000/);
    expect(fake.asked).toEqual([]);
  });

  it('every malformed field is a 400 naming it, and nothing is placed', async () => {
    const good = { from: '+14155551234', to: '+919876543210', answer_url: ANSWER };
    const cases: Array<[Record<string, unknown>, string]> = [
      [{ ...good, answer_url: undefined }, 'answer_url'],
      [{ ...good, to: undefined }, 'to'],
      [{ ...good, from: undefined }, 'from'],
      [{ ...good, answer_url: 'http://app.example.test/answer' }, 'answer_url'],
      [{ ...good, answer_url: 'ftp://x' }, 'answer_url'],
      [{ ...good, answer_method: 'PUT' }, 'answer_method'],
      [{ ...good, answer_method: 'post' }, 'answer_method'],
      [{ ...good, ring_url: 'http://x.test/ring' }, 'ring_url'],
      [{ ...good, hangup_method: 'DELETE', hangup_url: 'https://x.test/h' }, 'hangup_method'],
      [{ ...good, fallback_method: 'GET' }, 'fallback_method'],
      [{ ...good, to: 'not-a-number' }, 'to'],
      [{ ...good, to: '+919876543210<<+14155551234' }, 'to'],
      [{ ...good, to: '+919876543210<' }, 'to'],
      [{ ...good, to: 'sip:' }, 'to'],
      [{ ...good, to: '+1234567890123456' }, 'to'],
      [{ ...good, from: 'sip:<bad>' }, 'from'],
      [{ ...good, from: 'a b' }, 'from'],
      [{ ...good, caller_name: 'x'.repeat(51) }, 'caller_name'],
      [{ ...good, time_limit: 0 }, 'time_limit'],
      [{ ...good, time_limit: 86_401 }, 'time_limit'],
      [{ ...good, time_limit: '60' }, 'time_limit'],
      [{ ...good, ring_timeout: 0 }, 'ring_timeout'],
      [{ ...good, ring_timeout: 301 }, 'ring_timeout'],
      [{ ...good, hangup_on_ring: -1 }, 'hangup_on_ring'],
      [{ ...good, sip_headers: 'Foo' }, 'sip_headers'],
      [{ ...good, sip_headers: 'Fo o=1' }, 'sip_headers'],
      [{ ...good, sip_headers: 'Foo=1,foo=2' }, 'sip_headers'],
      [{ ...good, sip_headers: 'Foo=a\r\nVia: evil' }, 'sip_headers'],
      [{ ...good, sip_headers: { Foo: 'bar' } }, 'sip_headers'],
      [{ ...good, machine_detection: 'true' }, 'machine_detection'],
    ];
    for (const [body, field] of cases) {
      const r = await place(body);
      expect400(r, field);
    }
    expect(fake.asked).toEqual([]);
    // One 400 names every bad field at once.
    const many = await place({ from: '+14155551234', to: 'x', answer_url: 'http://x', caller_name: 'y'.repeat(60) });
    expect(Object.keys(many.json.details as Record<string, string>).sort()).toEqual(['answer_url', 'caller_name', 'to']);
  });

  it('CallRefusedError answers its status with {api_id, error, message}; 429 carries Retry-After', async () => {
    const good = { from: '+14155551234', to: '+919876543210', answer_url: ANSWER };
    for (const [status, error] of [
      [402, 'insufficient_balance'],
      [403, 'kyc_calls_blocked'],
      [400, 'from_not_owned'],
      [503, 'no_media'],
    ] as const) {
      fake.refusal = new CallRefusedError(status, error, `refused: ${error}`);
      const r = await place(good);
      expect(r.status, r.text).toBe(status);
      expect(Object.keys(r.json).sort()).toEqual(['api_id', 'error', 'message']);
      expect(r.json).toMatchObject({ error, message: `refused: ${error}` });
      expect(r.headers.get('retry-after')).toBeNull();
    }
    fake.refusal = new CallRefusedError(429, 'cps_limit', 'Too many calls per second.', 2.5);
    const limited = await place(good);
    expect(limited.status).toBe(429);
    expect(limited.json).toMatchObject({ error: 'cps_limit', message: 'Too many calls per second.' });
    expect(limited.headers.get('retry-after')).toBe('3');
    fake.refusal = new CallRefusedError(429, 'concurrent_calls_limit', 'Too many calls at once.');
    const noHint = await place(good);
    expect(noHint.status).toBe(429);
    expect(noHint.headers.get('retry-after')).toBe('1');
    // The other routes map refusals too.
    fake.refusal = new CallRefusedError(403, 'forbidden_action', 'Not allowed.');
    const hang = await req('DELETE', `${base()}/Call/${randomUUID()}/`);
    expect(hang.status).toBe(403);
    expect(hang.json.error).toBe('forbidden_action');
  });

  it('Idempotency-Key: the same place again answers the first response and places nothing', async () => {
    const key = randomUUID();
    const body = { from: '+14155551234', to: '+919876543210', answer_url: ANSWER };
    const once = await h.request('POST', `${base()}/Call/`, { auth: a, body, headers: { 'idempotency-key': key } });
    const twice = await h.request('POST', `${base()}/Call/`, { auth: a, body, headers: { 'idempotency-key': key } });
    expect([once.status, twice.status]).toEqual([201, 201]);
    expect(twice.headers.get('idempotent-replayed')).toBe('true');
    expect(twice.json.request_uuid).toBe(once.json.request_uuid);
    expect(fake.asked.filter((x) => x.op === 'place')).toHaveLength(1);
    const other = await h.request('POST', `${base()}/Call/`, { auth: a, body: { ...body, to: '+14155550000' }, headers: { 'idempotency-key': key } });
    expect(other.status).toBe(422);
  });

  it('lists live and queued calls as {api_id, calls: [uuids]} on /Call/ and /Call; status is required', async () => {
    const live = fake.addCall(a.id, 'in-progress');
    const ringing = fake.addCall(a.id, 'ringing');
    const queued = fake.addCall(a.id, 'queued');
    for (const path of [`${base()}/Call/?status=live`, `${base()}/Call?status=live`]) {
      const r = await req('GET', path);
      expect(r.status, r.text).toBe(200);
      expect(problems(ListLiveCallsResponse, r.json)).toEqual([]);
      expect((r.json.calls as string[]).sort()).toEqual([live.callUuid, ringing.callUuid].sort());
    }
    const q = await req('GET', `${base()}/Call/?status=queued`);
    expect(problems(ListQueuedCallsResponse, q.json)).toEqual([]);
    expect(q.json.calls).toEqual([queued.callUuid]);
    expect(lastAsked()).toMatchObject({ op: 'list', req: 'queued', owner: { authId: a.id, subAccount: null } });
    expect400(await req('GET', `${base()}/Call/`), 'status');
    expect400(await req('GET', `${base()}/Call/?status=completed`), 'status');
    // The vendor's "max 20" queued calls.
    for (let i = 0; i < 25; i++) fake.addCall(a.id, 'queued');
    expect(((await req('GET', `${base()}/Call/?status=queued`)).json.calls as string[]).length).toBe(20);
  });

  it('reads one live or queued call with exactly the SDK fields; 404 when unknown or in the other state', async () => {
    const live = fake.addCall(a.id, 'in-progress', { stirAttestation: 'A', stirVerification: 'Verified', direction: 'inbound' });
    for (const path of [`${base()}/Call/${live.callUuid}?status=live`, `${base()}/Call/${live.callUuid}/?status=live`]) {
      const r = await req('GET', path);
      expect(r.status, r.text).toBe(200);
      expect(problems(GetLiveCallResponse, r.json)).toEqual([]);
      expect(r.json).toEqual({
        api_id: r.headers.get('x-request-id'),
        call_status: 'in-progress',
        call_uuid: live.callUuid,
        caller_name: 'Alice',
        direction: 'inbound',
        from: '+14155551234',
        request_uuid: live.requestUuid,
        session_start: live.sessionStart,
        stir_attestation: 'A',
        stir_verification: 'Verified',
        to: '+919876543210',
      });
    }
    const plain = fake.addCall(a.id, 'ringing');
    const p = await req('GET', `${base()}/Call/${plain.callUuid}/?status=live`);
    expect(problems(GetLiveCallResponse, p.json)).toEqual([]);
    expect(p.json).toMatchObject({ call_status: 'ringing', stir_attestation: '', stir_verification: 'Not Applicable' });
    const queued = fake.addCall(a.id, 'queued');
    const q = await req('GET', `${base()}/Call/${queued.callUuid}/?status=queued`);
    expect(q.status).toBe(200);
    expect(problems(GetQueuedCallResponse, q.json)).toEqual([]);
    expect(q.json).toMatchObject({ call_status: 'queued', call_uuid: queued.callUuid, request_uuid: queued.requestUuid });
    expect((await req('GET', `${base()}/Call/${queued.callUuid}/?status=live`)).status).toBe(404);
    const unknown = await req('GET', `${base()}/Call/${randomUUID()}/?status=live`);
    expect(unknown.status).toBe(404);
    expect(unknown.json.error).toBe('not_found');
    expect400(await req('GET', `${base()}/Call/${live.callUuid}/`), 'status');
  });

  it('hangs up: 204 with no body; 404 when unknown', async () => {
    const c = fake.addCall(a.id, 'in-progress');
    const r = await req('DELETE', `${base()}/Call/${c.callUuid}/`);
    expect(r.status).toBe(204);
    expect(r.text).toBe('');
    expect(lastAsked()).toMatchObject({ op: 'hangup', callUuid: c.callUuid });
    expect((await req('DELETE', `${base()}/Call/${c.callUuid}`)).status).toBe(204);
    expect((await req('DELETE', `${base()}/Call/${randomUUID()}/`)).status).toBe(404);
  });

  it('transfers: 202 {api_id, message}; the URL of each named leg required; 404 when unknown', async () => {
    const c = fake.addCall(a.id, 'in-progress');
    const path = `${base()}/Call/${c.callUuid}/`;
    const r = await req('POST', path, { legs: 'both', aleg_url: 'https://x.test/a', bleg_url: 'https://x.test/b', bleg_method: 'GET' });
    expect(r.status, r.text).toBe(202);
    expect(Object.keys(r.json).sort()).toEqual(['api_id', 'message']);
    expect(r.json.message).toBe('call transferred');
    expect(lastAsked()).toMatchObject({
      op: 'transfer',
      callUuid: c.callUuid,
      req: { legs: 'both', aleg: { url: 'https://x.test/a', method: 'POST' }, bleg: { url: 'https://x.test/b', method: 'GET' } },
    });
    const aDefault = await req('POST', path, { aleg_url: 'https://x.test/a' });
    expect(aDefault.status).toBe(202);
    expect(lastAsked().req).toEqual({ legs: 'aleg', aleg: { url: 'https://x.test/a', method: 'POST' }, bleg: null });
    fake.reset();
    expect400(await req('POST', path, { legs: 'aleg' }), 'aleg_url');
    expect400(await req('POST', path, { legs: 'both', aleg_url: 'https://x.test/a' }), 'bleg_url');
    expect400(await req('POST', path, { legs: 'cleg', aleg_url: 'https://x.test/a' }), 'legs');
    expect400(await req('POST', path, { aleg_url: 'http://x.test/a' }), 'aleg_url');
    expect400(await req('POST', path, { aleg_url: 'https://x.test/a', aleg_method: 'PATCH' }), 'aleg_method');
    expect(fake.asked).toEqual([]);
    expect((await req('POST', `${base()}/Call/${randomUUID()}/`, { aleg_url: 'https://x.test/a' })).status).toBe(404);
  });

  it('play, speak and DTMF: 202 with the SDK paths, requests parsed, defaults applied; stop is 204; 404 when unknown', async () => {
    const c = fake.addCall(a.id, 'in-progress');
    const call = `${base()}/Call/${c.callUuid}`;
    const play = await req('POST', `${call}/Play/`, { urls: 'https://x.test/a.mp3, https://x.test/b.wav', legs: 'both', loop: true });
    expect(play.status, play.text).toBe(202);
    expect(play.json).toEqual({ api_id: play.headers.get('x-request-id'), message: 'play started' });
    expect(lastAsked().req).toEqual({ urls: ['https://x.test/a.mp3', 'https://x.test/b.wav'], legs: 'both', length: null, loop: true, mix: true });
    expect((await req('DELETE', `${call}/Play/`)).status).toBe(204);
    expect(lastAsked().op).toBe('stopPlay');

    const speak = await req('POST', `${call}/Speak`, { text: 'Hello there', voice: 'WOMAN', language: 'en-GB' });
    expect(speak.status, speak.text).toBe(202);
    expect(speak.json.message).toBe('speak started');
    expect(lastAsked().req).toEqual({ text: 'Hello there', voice: 'WOMAN', language: 'en-GB', legs: 'aleg', loop: false, mix: true });
    expect((await req('DELETE', `${call}/Speak/`)).status).toBe(204);

    const dtmf = await req('POST', `${call}/DTMF/`, { digits: '12w#*W9', leg: 'bleg' });
    expect(dtmf.status, dtmf.text).toBe(202);
    expect(dtmf.json.message).toBe('digits sent');
    expect(lastAsked().req).toEqual({ digits: '12w#*W9', leg: 'bleg' });
    await req('POST', `${call}/DTMF/`, { digits: '1' });
    expect(lastAsked().req).toEqual({ digits: '1', leg: 'aleg' });

    fake.reset();
    expect400(await req('POST', `${call}/Play/`, { urls: 'http://x.test/a.mp3' }), 'urls');
    expect400(await req('POST', `${call}/Play/`, { urls: 'https://x.test/a.mp3,' }), 'urls');
    expect400(await req('POST', `${call}/Play/`, {}), 'urls');
    expect400(await req('POST', `${call}/Play/`, { urls: 'https://x.test/a.mp3', legs: 'all' }), 'legs');
    expect400(await req('POST', `${call}/Speak/`, { text: '   ' }), 'text');
    expect400(await req('POST', `${call}/Speak/`, { text: 'x'.repeat(3001) }), 'text');
    expect400(await req('POST', `${call}/DTMF/`, { digits: '12x' }), 'digits');
    expect400(await req('POST', `${call}/DTMF/`, { digits: '1', leg: 'both' }), 'leg');
    expect(fake.asked).toEqual([]);

    const gone = `${base()}/Call/${randomUUID()}`;
    expect((await req('POST', `${gone}/Play/`, { urls: 'https://x.test/a.mp3' })).status).toBe(404);
    expect((await req('DELETE', `${gone}/Play/`)).status).toBe(404);
    expect((await req('POST', `${gone}/Speak/`, { text: 'hi' })).status).toBe(404);
    expect((await req('DELETE', `${gone}/Speak/`)).status).toBe(404);
    expect((await req('POST', `${gone}/DTMF/`, { digits: '1' })).status).toBe(404);
  });

  it('record: 202 {api_id, message, recording_id, url}; defaults; stop is 204; 404 when unknown', async () => {
    const c = fake.addCall(a.id, 'in-progress');
    const call = `${base()}/Call/${c.callUuid}`;
    const r = await req('POST', `${call}/Record/`, {});
    expect(r.status, r.text).toBe(202);
    expect(Object.keys(r.json).sort()).toEqual(['api_id', 'message', 'recording_id', 'url']);
    expect(r.json).toMatchObject({ message: 'call recording started', recording_id: `rec-${c.callUuid.slice(0, 8)}` });
    expect(lastAsked().req).toEqual({ timeLimit: 60, fileFormat: 'mp3', callback: null });
    const full = await req('POST', `${call}/Record/`, {
      time_limit: 600,
      file_format: 'wav',
      callback_url: 'https://x.test/rec',
      callback_method: 'GET',
      record_channel_type: 'stereo',
      transcription_type: 'auto',
    });
    expect(full.status).toBe(202);
    expect(full.json.url).toMatch(/\.wav$/);
    expect(lastAsked().req).toEqual({
      timeLimit: 600,
      fileFormat: 'wav',
      callback: { url: 'https://x.test/rec', method: 'GET' },
      recordChannelType: 'stereo',
      transcriptionType: 'auto',
    });
    fake.reset();
    expect400(await req('POST', `${call}/Record/`, { file_format: 'ogg' }), 'file_format');
    expect400(await req('POST', `${call}/Record/`, { time_limit: 0 }), 'time_limit');
    expect400(await req('POST', `${call}/Record/`, { callback_url: 'http://x.test/rec' }), 'callback_url');
    expect400(await req('POST', `${call}/Record/`, { record_channel_type: 'quad' }), 'record_channel_type');
    expect400(await req('POST', `${call}/Record/`, { transcription_type: 'manual' }), 'transcription_type');
    expect(fake.asked).toEqual([]);
    expect((await req('DELETE', `${call}/Record/`)).status).toBe(204);
    expect(lastAsked().op).toBe('stopRecord');
    expect((await req('POST', `${base()}/Call/${randomUUID()}/Record/`, {})).status).toBe(404);
    expect((await req('DELETE', `${base()}/Call/${randomUUID()}/Record/`)).status).toBe(404);
  });

  it('recordings: list {api_id, meta, objects} and retrieve with exactly the SDK fields; paging; delete 204; 404 when unknown', async () => {
    const recs = [0, 1, 2].map(() => fake.addRecording(a.id));
    const first = await req('GET', `${base()}/Recording/?limit=2`);
    expect(first.status, first.text).toBe(200);
    expect(Object.keys(first.json).sort()).toEqual(['api_id', 'meta', 'objects']);
    expect(problems(ListRecordingsResponseMeta, first.json.meta, 'meta')).toEqual([]);
    const objects = first.json.objects as Array<Record<string, unknown>>;
    expect(objects).toHaveLength(2);
    for (const o of objects) expect(problems(ListRecordingsResponseObjectsItem, o, 'object')).toEqual([]);
    expect(first.json.meta).toEqual({ limit: 2, offset: 0, total_count: 3, next: `/api/v1/Account/${a.id}/Recording/?limit=2&offset=2`, previous: null });
    expect(objects[0]).toMatchObject({
      recording_id: recs[0]?.recordingId,
      call_uuid: recs[0]?.callUuid,
      recording_format: 'wav',
      recording_duration_ms: '61500',
      rounded_recording_duration: 120,
      recording_type: 'call',
      recording_url: recs[0]?.url,
      from_number: '+14155551234',
      to_number: '+919876543210',
      resource_uri: `/v1/Account/${a.id}/Recording/${recs[0]?.recordingId}/`,
    });
    const last = await req('GET', `${base()}/Recording?limit=2&offset=2`);
    // The SDK's model types meta.next as str (not Optional): "" on the last page.
    expect(last.json.meta).toMatchObject({ next: '', previous: `/api/v1/Account/${a.id}/Recording/?limit=2&offset=0` });
    expect(problems(ListRecordingsResponseMeta, last.json.meta, 'meta')).toEqual([]);
    const filtered = await req('GET', `${base()}/Recording/?call_uuid=${recs[1]?.callUuid}`);
    expect((filtered.json.objects as Array<Record<string, unknown>>).map((o) => o.recording_id)).toEqual([recs[1]?.recordingId]);
    expect(lastAsked().req).toEqual({ callUuid: recs[1]?.callUuid, limit: 20, offset: 0 });
    expect400(await req('GET', `${base()}/Recording/?limit=101`), 'limit');
    expect400(await req('GET', `${base()}/Recording/?add_time=x`), 'add_time');

    const one = await req('GET', `${base()}/Recording/${recs[2]?.recordingId}/`);
    expect(one.status).toBe(200);
    expect(problems(GetRecordingResponse, one.json)).toEqual([]);
    expect((await req('GET', `${base()}/Recording/${randomUUID()}/`)).status).toBe(404);
    const del = await req('DELETE', `${base()}/Recording/${recs[2]?.recordingId}/`);
    expect(del.status).toBe(204);
    expect(del.text).toBe('');
    expect((await req('GET', `${base()}/Recording/${recs[2]?.recordingId}/`)).status).toBe(404);
    expect((await req('DELETE', `${base()}/Recording/${recs[2]?.recordingId}/`)).status).toBe(404);
  });

  it('serves a recording’s audio at …/Recording/{id}.wav|.mp3 whatever the Accept; the other extension and unknown ids are 404', async () => {
    const wav = fake.addRecording(a.id);
    const mp3 = fake.addRecording(a.id, { format: 'mp3' }, 'audio/mpeg');
    const get = (path: string, accept: string) =>
      fetch(h.base + path, { headers: { accept, 'x-auth-id': a.id, 'x-auth-token': a.token } });
    const r = await get(`${base()}/Recording/${wav.recordingId}.wav`, 'audio/*');
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toBe('audio/wav');
    expect(r.headers.get('cache-control')).toBe('private, no-store');
    expect(Buffer.from(await r.arrayBuffer()).toString()).toBe(`RIFF${wav.recordingId}`);
    expect(lastAsked()).toMatchObject({ op: 'recordingAudio', req: wav.recordingId });
    const m = await get(`${base()}/Recording/${mp3.recordingId}.mp3`, 'audio/mpeg');
    expect(m.status).toBe(200);
    expect(m.headers.get('content-type')).toBe('audio/mpeg');
    expect((await get(`${base()}/Recording/${wav.recordingId}.mp3`, 'audio/*')).status).toBe(404);
    expect((await get(`${base()}/Recording/${randomUUID()}.wav`, 'audio/*')).status).toBe(404);
    const anon = await fetch(`${h.base}${base()}/Recording/${wav.recordingId}.wav`, { headers: { accept: 'audio/*' } });
    expect(anon.status).toBe(401);
  });

  it('sub-accounts: their own path, their own calls (owner.subAccount); other paths are 404', async () => {
    const sub = await h.newSubAccount(a);
    fake.reset();
    const r = await place({ from: '+14155551234', to: '+919876543210', answer_url: ANSWER }, sub);
    expect(r.status, r.text).toBe(201);
    expect(lastAsked().owner).toEqual({ authId: sub.id, domain: a.sipDomain, subAccount: sub.id });
    const parentCall = fake.addCall(a.id, 'in-progress');
    const subCall = fake.addCall(sub.id, 'in-progress');
    const subList = await req('GET', `${base(sub)}/Call/?status=live`, undefined, sub);
    expect(subList.json.calls).toEqual([subCall.callUuid]);
    expect(lastAsked().owner).toEqual({ authId: sub.id, domain: a.sipDomain, subAccount: sub.id });
    // The parent's call through the sub-account's path: not its call.
    expect((await req('GET', `${base(sub)}/Call/${parentCall.callUuid}/?status=live`, undefined, sub)).status).toBe(404);
    expect((await req('DELETE', `${base(sub)}/Call/${parentCall.callUuid}/`, undefined, sub)).status).toBe(404);
    expect(fake.calls.has(parentCall.callUuid)).toBe(true);
    fake.reset();
    // Sub-account credentials on the parent's path, and the parent's on the sub-account's: 404, the fake not asked.
    expect((await req('GET', `${base(a)}/Call/?status=live`, undefined, sub)).status).toBe(404);
    expect((await req('GET', `${base(sub)}/Call/?status=live`, undefined, a)).status).toBe(404);
    expect((await req('DELETE', `${base(sub)}/Call/${subCall.callUuid}/`, undefined, a)).status).toBe(404);
    expect((await place({ from: '+14155551234', to: '+919876543210', answer_url: ANSWER }, { id: sub.id, token: a.token })).status).toBe(401);
    expect(fake.asked).toEqual([]);
    // The parent sees its own calls only.
    const parentList = await req('GET', `${base()}/Call/?status=live`);
    expect(parentList.json.calls).toEqual([parentCall.callUuid]);
  });

  it('another account’s path is 404, no credentials 401, and nothing reaches the B2BUA', async () => {
    const b = await h.newAccount();
    const c = fake.addCall(b.id, 'in-progress');
    fake.reset();
    expect((await req('DELETE', `${base(b)}/Call/${c.callUuid}/`)).status).toBe(404);
    expect((await req('POST', `${base(b)}/Call/`, { from: '+14155551234', to: '+919876543210', answer_url: ANSWER })).status).toBe(404);
    expect((await h.request('GET', `${base()}/Call/?status=live`)).status).toBe(401);
    expect(fake.asked).toEqual([]);
    // A call of account b through account a's own path: the B2BUA scopes by owner.
    expect((await req('DELETE', `${base()}/Call/${c.callUuid}/`)).status).toBe(404);
    expect(fake.calls.has(c.callUuid)).toBe(true);
  });
});

describe('calls API logs', () => {
  it('a placed call logs its request_uuid, never its URLs, numbers or SIP header values', async () => {
    const fake = new FakeCalls();
    let logs = '';
    const logger = createLogger('trace', { write: (line: string) => void (logs += line) });
    const h = await startHarness('memory', {}, { callControl: fake, logger });
    try {
      const a = await h.newAccount();
      const r = await h.request('POST', `/api/v1/Account/${a.id}/Call/`, {
        auth: a,
        body: {
          from: '+14155557777',
          to: '+919812345678<sip:carol@x.sip.test',
          answer_url: 'https://app.example.test/answer?token=answer-secret-1',
          hangup_url: 'https://app.example.test/hangup?token=hangup-secret-2',
          sip_headers: 'Auth=header-secret-3',
        },
      });
      expect(r.status, r.text).toBe(201);
      expect(logs).toContain(String(r.json.request_uuid));
      for (const secret of ['answer-secret-1', 'hangup-secret-2', 'header-secret-3', '4155557777', '9812345678', 'carol@', a.token]) {
        expect(logs, secret).not.toContain(secret);
      }
    } finally {
      await h.close();
    }
  });
});

describe('calls API without a B2BUA', () => {
  let h: Harness;
  beforeAll(async () => {
    h = await startHarness('memory');
  });
  afterAll(async () => {
    await h.close();
  });

  it('every route answers 503 calls_unavailable (after authentication)', async () => {
    const a = await h.newAccount();
    const base = `/api/v1/Account/${a.id}`;
    const routes: Array<[string, string, unknown?]> = [
      ['POST', `${base}/Call/`, { from: '+14155551234', to: '+919876543210', answer_url: ANSWER }],
      ['GET', `${base}/Call/?status=live`],
      ['GET', `${base}/Call/x/?status=queued`],
      ['DELETE', `${base}/Call/x/`],
      ['POST', `${base}/Call/x/`, { aleg_url: 'https://x.test/a' }],
      ['POST', `${base}/Call/x/Play/`, { urls: 'https://x.test/a.mp3' }],
      ['DELETE', `${base}/Call/x/Speak/`],
      ['POST', `${base}/Call/x/DTMF/`, { digits: '1' }],
      ['POST', `${base}/Call/x/Record/`, {}],
      ['GET', `${base}/Recording/`],
      ['GET', `${base}/Recording/x/`],
      ['GET', `${base}/Recording/x.wav`],
    ];
    for (const [method, path, body] of routes) {
      const r = await h.request(method, path, { auth: a, body });
      expect(r.status, `${method} ${path}`).toBe(503);
      expect(r.json).toMatchObject({ error: 'calls_unavailable' });
      expect(Object.keys(r.json).sort()).toEqual(['api_id', 'error', 'message']);
    }
    expect((await h.request('GET', `${base}/Call/?status=live`)).status).toBe(401);
  });
});
