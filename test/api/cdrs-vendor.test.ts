/**
 * The vendor SDK's CDR paths (`…/cdr`, `/cdr/search`, `/cdr/recent`, `/cdr/export`,
 * `/cdr/<call_id>`, the partner's `…/cdrs`) on the memory store and a real
 * redis-server: every body parses with the SDK's own response model (exact field
 * sets, types, nulls), the records and totals are those of the `CDR/` routes.
 */
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import type { CallStart, CdrRecord } from '../../src/store/calls/calls.js';
import { LIMITED_PARTNER, PARTNER, STORE_KINDS, startHarness, stopRedisServer, type Creds, type Harness } from '../support/api-harness.js';
import { modelFields, modelProblems } from '../support/vendor-sdk-models.js';
import { VENDOR_CDR_FIELDS } from '../../src/api/vendor-cdr.js';

afterAll(stopRedisServer);

const partner: Creds = { id: PARTNER.authId, token: PARTNER.authToken };
const limited: Creds = { id: LIMITED_PARTNER.authId, token: LIMITED_PARTNER.authToken };

const today = (): string => new Date().toISOString().slice(0, 10);

let seq = 0;
/** A finished call written the way the proxy writes one (start, then end with its CDR). */
async function addCdr(h: Harness, domain: string, authId: string, over: Partial<CdrRecord> = {}, at = Date.now()): Promise<CdrRecord> {
  seq++;
  const start: CallStart = {
    callUuid: `uuid-${seq}-${Math.random().toString(36).slice(2)}`,
    authId,
    domain,
    sipCallId: `sip-${seq}@test`,
    fromTag: 'ft',
    fromNumber: over.from_number ?? 'alice',
    toNumber: over.to_number ?? 'bob',
    direction: over.call_direction ?? 'outbound',
    context: 'endpoint',
    subAccount: over.sub_account ?? null,
    startedAt: at,
    callbacks: { answer: null, hangup: null },
    ttlMs: 60_000,
  };
  await h.calls.start(start);
  const answered = (over.call_status ?? 'answered') === 'answered';
  const cdr = await h.calls.end(domain, start.sipCallId, (s) => ({
    cdr: {
      call_uuid: s.callUuid,
      from_number: s.fromNumber,
      to_number: s.toNumber,
      call_status: 'answered',
      duration: answered ? 30 : 0,
      bill_duration: answered ? 30 : 0,
      billed_amount: '0.00000',
      created_at: new Date(at).toISOString(),
      answered_at: answered ? new Date(at + 1000).toISOString() : null,
      ended_at: new Date(at + 31_000).toISOString(),
      sip_call_id: s.sipCallId,
      hangup_cause: answered ? 'NORMAL_CLEARING' : 'USER_BUSY',
      hangup_disposition: 'recv_bye',
      call_direction: s.direction,
      context: s.context,
      bridge_uuid: null,
      campaign_id: null,
      sip_status: answered ? 200 : 486,
      sub_account: s.subAccount,
      ...over,
    },
    callback: null,
  }));
  if (!cdr) throw new Error('call did not end');
  return cdr;
}

describe.each(STORE_KINDS)('vendor CDR paths on the %s store', (kind) => {
  let h: Harness;
  let acct: Creds & { sipDomain: string };
  let busy: CdrRecord;
  let answered: CdrRecord[];
  beforeAll(async () => {
    h = await startHarness(kind);
  });
  afterAll(async () => {
    await h.close();
  });
  beforeEach(async () => {
    acct = await h.newAccount();
    // Today 00:10 UTC onwards: inside the store's retention, and one day for the date filters.
    const t = Date.parse(`${today()}T00:10:00.000Z`);
    answered = [
      await addCdr(h, acct.sipDomain, acct.id, { from_number: '+14155550100' }, t),
      await addCdr(h, acct.sipDomain, acct.id, { from_number: '=HYPERLINK("http://x","y")', duration: 90, bill_duration: 90 }, t + 60_000),
    ];
    busy = await addCdr(h, acct.sipDomain, acct.id, { call_status: 'busy', to_number: 'carol' }, t + 120_000);
  });

  const cdrPath = (...rest: string[]): string => [`/api/v1/Account/${acct.id}/cdr`, ...rest].join('/');

  it('GET …/cdr answers the SDK ListCdrsResponse, its summary over every match and not only the page', async () => {
    const r = await h.request('GET', `${cdrPath()}?per_page=2&page=1`, { auth: acct });
    expect(r.status).toBe(200);
    expect(modelProblems('ListCdrsResponse', r.json)).toEqual([]);
    expect(Object.keys(r.json).sort()).toEqual(modelFields('ListCdrsResponse'));
    expect(r.json.count).toBe(2);
    expect(r.json.account_id).toBe(acct.id);
    expect(r.json.pagination).toEqual({ page: 1, per_page: 2, total: 3, pages: 2, has_next: true, has_prev: false });
    expect(r.json.summary).toEqual({
      answerRate: 66.67,
      answeredCalls: 2,
      avgCallDuration: '60',
      last_call_at: busy.created_at,
      totalCalls: 3,
      total_billable_seconds: 120,
      total_cost: 0,
      total_duration_seconds: 120,
    });
    const [first] = r.json.data as Array<Record<string, unknown>>;
    // Newest first; the SDK's fields from the CdrRecord.
    expect(first).toMatchObject({ uuid: busy.call_uuid, destination_number: 'carol', caller_id_number: 'alice', hangup_cause: 'USER_BUSY', hangup_cause_code: 17, failure_code: '486', failure_reason: 'busy', billsec: 0, account_id: acct.id });
    expect(Number.isSafeInteger(first?.id)).toBe(true);
  });

  it('GET …/cdr and GET …/CDR/ return the same records for the same filter (one query)', async () => {
    const q = `call_direction=outbound&min_duration=1&start_date=${today()}&end_date=${today()}`;
    const vendor = await h.request('GET', `${cdrPath()}?${q}`, { auth: acct });
    const ours = await h.request('GET', `/api/v1/Account/${acct.id}/CDR/?${q}`, { auth: acct });
    expect(vendor.status).toBe(200);
    const ids = (vendor.json.data as Array<{ uuid: string }>).map((x) => x.uuid);
    expect(ids).toEqual((ours.json.objects as Array<{ call_uuid: string }>).map((x) => x.call_uuid));
    expect(ids).toEqual(answered.map((c) => c.call_uuid).reverse());
    // Same validation too: a start_date alone is a 400 naming end_date.
    const bad = await h.request('GET', `${cdrPath()}?start_date=${today()}`, { auth: acct });
    expect(bad.status).toBe(400);
    expect(bad.json.details).toHaveProperty('end_date');
  });

  it('GET …/cdr/search answers SearchCdrsResponse echoing the filters it understood', async () => {
    const r = await h.request('GET', `${cdrPath('search')}?hangup_cause=user_busy`, { auth: acct });
    expect(r.status).toBe(200);
    expect(modelProblems('SearchCdrsResponse', r.json)).toEqual([]);
    expect(r.json.filters).toEqual({ call_direction: '', from_number: '', hangup_cause: 'user_busy', to_number: '' });
    expect((r.json.data as Array<{ uuid: string }>).map((x) => x.uuid)).toEqual([busy.call_uuid]);
  });

  it('GET …/cdr/recent answers ListRecentCdrsResponse with the newest `limit` records', async () => {
    const r = await h.request('GET', `${cdrPath('recent')}?limit=2`, { auth: acct });
    expect(r.status).toBe(200);
    expect(modelProblems('ListRecentCdrsResponse', r.json)).toEqual([]);
    expect((r.json.data as Array<{ uuid: string }>).map((x) => x.uuid)).toEqual([busy.call_uuid, answered[1]?.call_uuid]);
    expect((await h.request('GET', `${cdrPath('recent')}?limit=101`, { auth: acct })).status).toBe(400);
  });

  it('GET …/cdr/<call_id> answers GetCdrResponse (no nulls where the model has none); 404 when unknown', async () => {
    const r = await h.request('GET', cdrPath(busy.call_uuid), { auth: acct });
    expect(r.status).toBe(200);
    expect(modelProblems('GetCdrResponse', r.json)).toEqual([]);
    expect(r.json.success).toBe(true);
    expect((r.json.data as Record<string, unknown>).answer_time).toBe('');
    const missing = await h.request('GET', cdrPath('no-such-call'), { auth: acct });
    expect(missing.status).toBe(404);
    expect(missing.json.error).toBe('not_found');
  });

  it('a sub-account sees only its own calls on the vendor paths', async () => {
    const sub = await h.newSubAccount(acct);
    const own = await addCdr(h, acct.sipDomain, sub.id, { sub_account: sub.id });
    const r = await h.request('GET', `/api/v1/Account/${sub.id}/cdr`, { auth: sub });
    expect(r.status).toBe(200);
    expect((r.json.data as Array<{ uuid: string; account_id: string }>).map((x) => [x.uuid, x.account_id])).toEqual([[own.call_uuid, sub.id]]);
    expect((await h.request('GET', `/api/v1/Account/${sub.id}/cdr/${busy.call_uuid}`, { auth: sub })).status).toBe(404);
    const recent = await h.request('GET', `/api/v1/Account/${sub.id}/cdr/recent`, { auth: sub });
    expect(recent.json.count).toBe(1);
  });

  it('GET …/cdr/export answers text/csv: the SDK item columns, every match, formulas defused', async () => {
    const res = await fetch(`${h.base}${cdrPath('export')}?call_direction=outbound`, { headers: { 'x-auth-id': acct.id, 'x-auth-token': acct.token, accept: 'text/csv' } });
    expect(res.status).toBe(200);
    expect(res.headers.get('content-type')).toMatch(/^text\/csv/);
    expect(res.headers.get('content-disposition')).toBe(`attachment; filename="cdr-${acct.id}.csv"`);
    const lines = (await res.text()).trimEnd().split('\n');
    expect(lines[0]).toBe(VENDOR_CDR_FIELDS.join(','));
    expect(lines).toHaveLength(4);
    // A From that a spreadsheet would run is quoted and prefixed with '; a phone number is left alone.
    expect(lines.find((l) => l.includes('HYPERLINK'))).toContain(`"'=HYPERLINK(""http://x"",""y"")"`);
    expect(lines.find((l) => l.includes('4155550100'))).toContain(',+14155550100,');
    const json = await h.request('GET', cdrPath('export'), { auth: acct, headers: { accept: 'application/xml' } });
    expect(json.status).toBe(406);
  });

  it('GET /partner/accounts/<id>/cdrs answers ListCustomerCdrsResponse; status=no_answer filters; another partner gets 404', async () => {
    const na = await addCdr(h, acct.sipDomain, acct.id, { call_status: 'no-answer', hangup_cause: 'NO_ANSWER' }, Date.parse(busy.created_at) + 1000);
    const path = `/api/v1/partner/accounts/${acct.id}/cdrs`;
    const all = await h.request('GET', path, { auth: partner });
    expect(all.status).toBe(200);
    expect(modelProblems('ListCustomerCdrsResponse', all.json)).toEqual([]);
    expect(all.json.account_auth_id).toBe(acct.id);
    expect(all.json.summary).toMatchObject({ answerRate: 50, totalCalls: 4 });
    const r = await h.request('GET', `${path}?status=no_answer`, { auth: partner });
    expect((r.json.data as Array<{ uuid: string }>).map((x) => x.uuid)).toEqual([na.call_uuid]);
    const other = await h.request('GET', path, { auth: limited });
    expect(other.status).toBe(404);
    expect((await h.request('GET', path, { auth: acct })).status).toBe(403);
  });
});
