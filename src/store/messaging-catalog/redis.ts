import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { jsonObject } from '../redis/json.js';
import { LuaScript } from '../redis/script.js';
import type {
  CallRequestRecord,
  CampaignProgress,
  CampaignRecord,
  CampaignStatus,
  CannedResponseRecord,
  ClaimRecord,
  ContactRecord,
  ContactUpsert,
  MessagingCatalogStore,
  NumberRecord,
  TemplateRecord,
  UpsertContactResult,
} from './catalog.js';

/**
 * The messaging catalog on Redis (single server, Sentinel master or Cluster). An
 * owner's records share the owner's hash tag; campaigns share one tag (the runner
 * lists the running ones of every owner); a campaign's run state has a tag of its own:
 *
 *     <p>msgcat:{o:<owner>}:<kind>              hash  id → JSON   (kind: contact, tpl, canned, num, call)
 *     <p>msgcat:{o:<owner>}:<kind>:order        zset  ids by creation
 *     <p>msgcat:{o:<owner>}:<kind>:uniq         hash  unique value → id (contact phone, canned shortcut, number)
 *     <p>msgcat:{o:<owner>}:seq                 counter (creation order)
 *     <p>msgcat:{campaigns}:c                   hash  campaign id → JSON
 *     <p>msgcat:{campaigns}:acct:<owner>        zset  campaign ids of an owner by creation
 *     <p>msgcat:{campaigns}:running             hash  campaign id → owner (status running)
 *     <p>msgcat:{campaigns}:seq                 counter
 *     <p>msgcat:{run:<id>}:rcpt                 list  recipient contact ids (snapshot at first start)
 *     <p>msgcat:{run:<id>}:claims               hash  contact id → claim JSON (HSETNX: claimed once)
 *     <p>msgcat:{run:<id>}:inflight             set   claimed, outcome not yet recorded
 *     <p>msgcat:{run:<id>}:n                    hash  total, cursor, sent, failed, unconfirmed
 *     <p>msgcat:{run:<id>}:lease                string the runner holding the campaign (PX)
 *
 * Lua's cjson writes an empty array as `{}`: records are normalised when read.
 */

/** KEYS: hash, order, uniq, seq. ARGV: id, json, unique value ('' = none). */
const PUT = new LuaScript(`
if ARGV[3] ~= '' then
  local h = redis.call('HGET', KEYS[3], ARGV[3])
  if h and h ~= ARGV[1] then return 'taken' end
  redis.call('HSET', KEYS[3], ARGV[3], ARGV[1])
end
if redis.call('HSET', KEYS[1], ARGV[1], ARGV[2]) == 1 then
  redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[4]), ARGV[1])
end
return 'ok'`);

/** KEYS: hash, order, uniq. ARGV: id, owner, unique field name ('' = none). */
const DELETE = new LuaScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local o = cjson.decode(v)
if o.owner ~= ARGV[2] then return 0 end
if ARGV[3] ~= '' then
  local u = o[ARGV[3]]
  if u and redis.call('HGET', KEYS[3], u) == ARGV[1] then redis.call('HDEL', KEYS[3], u) end
end
redis.call('HDEL', KEYS[1], ARGV[1])
redis.call('ZREM', KEYS[2], ARGV[1])
return 1`);

/** KEYS: hash, uniq. ARGV: id, json, new phone. */
const REPLACE_CONTACT = new LuaScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 'not_found' end
local h = redis.call('HGET', KEYS[2], ARGV[3])
if h and h ~= ARGV[1] then return 'phone_taken' end
local old = cjson.decode(v).phone
if redis.call('HGET', KEYS[2], old) == ARGV[1] then redis.call('HDEL', KEYS[2], old) end
redis.call('HSET', KEYS[2], ARGV[3], ARGV[1])
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
return 'ok'`);

/**
 * KEYS: hash, order, uniq (phone → id), seq. ARGV: owner, now, then (new id, upsert JSON)
 * pairs. Returns (created 0|1, contact JSON) pairs.
 */
const UPSERT_CONTACTS = new LuaScript(`
local out = {}
for i = 3, #ARGV, 2 do
  local u = cjson.decode(ARGV[i + 1])
  local id = redis.call('HGET', KEYS[3], u.phone)
  local cur = id and redis.call('HGET', KEYS[1], id)
  local c, created
  if cur then
    c = cjson.decode(cur)
    if u.name ~= nil then c.name = u.name end
    local seen, tags = {}, {}
    for _, t in ipairs(c.tags or {}) do if not seen[t] then seen[t] = true; table.insert(tags, t) end end
    for _, t in ipairs(u.tags or {}) do if not seen[t] then seen[t] = true; table.insert(tags, t) end end
    c.tags = tags
    local attrs = {}
    for k, v in pairs(c.attributes or {}) do attrs[k] = v end
    for k, v in pairs(u.attributes or {}) do attrs[k] = v end
    c.attributes = attrs
    c.updatedAt = ARGV[2]
    created = 0
  else
    id = ARGV[i]
    c = { id = id, owner = ARGV[1], phone = u.phone, name = u.name or '', tags = u.tags or {}, attributes = u.attributes or {}, createdAt = ARGV[2], updatedAt = ARGV[2] }
    redis.call('HSET', KEYS[3], u.phone, id)
    redis.call('ZADD', KEYS[2], redis.call('INCR', KEYS[4]), id)
    created = 1
  end
  local json = cjson.encode(c)
  redis.call('HSET', KEYS[1], id, json)
  table.insert(out, created)
  table.insert(out, json)
end
return out`);

/** KEYS: hash, running. ARGV: id, json, new status, owner, allowed old statuses (comma-separated). */
const UPDATE_CAMPAIGN = new LuaScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return {0} end
local o = cjson.decode(v)
if o.owner ~= ARGV[4] then return {0} end
local ok = false
for s in string.gmatch(ARGV[5], '[^,]+') do if s == o.status then ok = true end end
if not ok then return {2, o.status} end
redis.call('HSET', KEYS[1], ARGV[1], ARGV[2])
if ARGV[3] == 'running' then redis.call('HSET', KEYS[2], ARGV[1], ARGV[4]) else redis.call('HDEL', KEYS[2], ARGV[1]) end
return {1}`);

/** KEYS: rcpt, n. ARGV: ids… Returns the total (the first snapshot's). */
const SET_RECIPIENTS = new LuaScript(`
local t = redis.call('HGET', KEYS[2], 'total')
if t then return tonumber(t) end
for i = 1, #ARGV, 1000 do
  redis.call('RPUSH', KEYS[1], unpack(ARGV, i, math.min(i + 999, #ARGV)))
end
redis.call('HSET', KEYS[2], 'total', #ARGV)
return #ARGV`);

/** KEYS: claims, inflight, n. ARGV: contact id, claim JSON, index. */
const CLAIM = new LuaScript(`
if redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2]) == 0 then return 0 end
redis.call('SADD', KEYS[2], ARGV[1])
local cur = tonumber(redis.call('HGET', KEYS[3], 'cursor') or '0')
local nxt = tonumber(ARGV[3]) + 1
if nxt > cur then redis.call('HSET', KEYS[3], 'cursor', nxt) end
return 1`);

/** KEYS: claims, inflight, n. ARGV: contact id, state (sent|failed), sent id or error. */
const SETTLE = new LuaScript(`
local v = redis.call('HGET', KEYS[1], ARGV[1])
if not v then return 0 end
local o = cjson.decode(v)
if o.state ~= 'claimed' and o.state ~= 'unconfirmed' then return 0 end
if o.state == 'unconfirmed' then redis.call('HINCRBY', KEYS[3], 'unconfirmed', -1) end
redis.call('SREM', KEYS[2], ARGV[1])
o.state = ARGV[2]
if ARGV[2] == 'sent' then
  o.sentId = ARGV[3]
  redis.call('HINCRBY', KEYS[3], 'sent', 1)
else
  o.error = ARGV[3]
  redis.call('HINCRBY', KEYS[3], 'failed', 1)
end
redis.call('HSET', KEYS[1], ARGV[1], cjson.encode(o))
return 1`);

/** KEYS: claims, inflight, n. */
const MARK_UNCONFIRMED = new LuaScript(`
local ids = redis.call('SMEMBERS', KEYS[2])
for _, id in ipairs(ids) do
  local v = redis.call('HGET', KEYS[1], id)
  if v then
    local o = cjson.decode(v)
    if o.state == 'claimed' then
      o.state = 'unconfirmed'
      redis.call('HSET', KEYS[1], id, cjson.encode(o))
      redis.call('HINCRBY', KEYS[3], 'unconfirmed', 1)
    end
  end
end
redis.call('DEL', KEYS[2])
return #ids`);

/** KEYS: lease. ARGV: holder, ttl ms, mode (acquire|renew). */
const LEASE = new LuaScript(`
local h = redis.call('GET', KEYS[1])
if h == ARGV[1] or (not h and ARGV[3] == 'acquire') then
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
  return 1
end
return 0`);

/** KEYS: lease. ARGV: holder. */
const RELEASE = new LuaScript(`
if redis.call('GET', KEYS[1]) == ARGV[1] then redis.call('DEL', KEYS[1]) end
return 1`);

type Kind = 'contact' | 'tpl' | 'canned' | 'num' | 'call';

const strArr = (v: unknown): string[] => (Array.isArray(v) ? v.filter((x): x is string => typeof x === 'string') : []);
const strMap = (v: unknown): Record<string, string> => {
  const out: Record<string, string> = {};
  if (typeof v === 'object' && v !== null && !Array.isArray(v)) for (const [k, x] of Object.entries(v)) if (typeof x === 'string') out[k] = x;
  return out;
};

function contactOf(text: unknown): ContactRecord | null {
  const o = jsonObject(text);
  if (!o) return null;
  return { ...(o as unknown as ContactRecord), tags: strArr(o.tags), attributes: strMap(o.attributes) };
}

function recordOf<T>(text: unknown): T | null {
  return jsonObject(text) as T | null;
}

function campaignOf(text: unknown): CampaignRecord | null {
  const o = jsonObject(text) as unknown as CampaignRecord | null;
  if (!o) return null;
  return { ...o, template: { ...o.template, components: Array.isArray(o.template?.components) ? o.template.components : [] } };
}

export class RedisMessagingCatalogStore extends RedisBacked implements MessagingCatalogStore {
  readonly #p: string;
  readonly #camp: string;

  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
    this.#p = `${this.prefix}msgcat:`;
    this.#camp = `${this.#p}{campaigns}`;
  }

  #o(owner: string): string {
    return `${this.#p}{o:${owner}}`;
  }
  #keys(owner: string, kind: Kind): [string, string, string, string] {
    const b = this.#o(owner);
    return [`${b}:${kind}`, `${b}:${kind}:order`, `${b}:${kind}:uniq`, `${b}:seq`];
  }
  #run(id: string): { rcpt: string; claims: string; inflight: string; n: string; lease: string } {
    const b = `${this.#p}{run:${id}}`;
    return { rcpt: `${b}:rcpt`, claims: `${b}:claims`, inflight: `${b}:inflight`, n: `${b}:n`, lease: `${b}:lease` };
  }
  #eval(what: string, s: LuaScript, keys: string[], args: Array<string | number>): Promise<unknown> {
    return this.guard(what, () => this.evalScript(s, keys, args));
  }

  async #put(owner: string, kind: Kind, id: string, rec: unknown, unique = ''): Promise<'ok' | 'taken'> {
    return (await this.#eval(`msgcat ${kind} write`, PUT, this.#keys(owner, kind), [id, JSON.stringify(rec), unique])) as 'ok' | 'taken';
  }
  async #list<T>(owner: string, kind: Kind, parse: (t: unknown) => T | null): Promise<T[]> {
    const [hash, order] = this.#keys(owner, kind);
    const ids = await this.guard('msgcat read', () => this.redis.zrange(order, 0, -1));
    return this.#many(hash, ids, parse);
  }
  async #many<T>(hash: string, ids: string[], parse: (t: unknown) => T | null): Promise<T[]> {
    const out: T[] = [];
    for (let i = 0; i < ids.length; i += 1000) {
      const vals = await this.guard('msgcat read', () => this.redis.hmget(hash, ...ids.slice(i, i + 1000)));
      for (const v of vals) {
        const r = parse(v);
        if (r !== null) out.push(r);
      }
    }
    return out;
  }
  async #get<T extends { owner: string }>(owner: string, kind: Kind, id: string, parse: (t: unknown) => T | null): Promise<T | null> {
    const [hash] = this.#keys(owner, kind);
    const r = parse(await this.guard('msgcat read', () => this.redis.hget(hash, id)));
    return r && r.owner === owner ? r : null;
  }
  async #delete(owner: string, kind: Kind, id: string, uniqueField = ''): Promise<boolean> {
    const [hash, order, uniq] = this.#keys(owner, kind);
    return (await this.#eval(`msgcat ${kind} delete`, DELETE, [hash, order, uniq], [id, owner, uniqueField])) === 1;
  }

  async upsertContacts(owner: string, rows: ContactUpsert[], newId: (i: number) => string, now: string): Promise<UpsertContactResult[]> {
    if (rows.length === 0) return [];
    const args: string[] = [owner, now];
    rows.forEach((r, i) => {
      args.push(newId(i), JSON.stringify(r));
    });
    const res = (await this.#eval('msgcat contact upsert', UPSERT_CONTACTS, this.#keys(owner, 'contact'), args)) as Array<number | string>;
    const out: UpsertContactResult[] = [];
    for (let i = 0; i < res.length; i += 2) {
      const contact = contactOf(res[i + 1]);
      if (contact) out.push({ created: res[i] === 1, contact });
    }
    return out;
  }
  async replaceContact(c: ContactRecord): Promise<'ok' | 'phone_taken' | 'not_found'> {
    const [hash, , uniq] = this.#keys(c.owner, 'contact');
    return (await this.#eval('msgcat contact write', REPLACE_CONTACT, [hash, uniq], [c.id, JSON.stringify(c), c.phone])) as 'ok' | 'phone_taken' | 'not_found';
  }
  getContact(owner: string, id: string): Promise<ContactRecord | null> {
    return this.#get(owner, 'contact', id, contactOf);
  }
  async getContacts(owner: string, ids: string[]): Promise<Array<ContactRecord | null>> {
    if (ids.length === 0) return [];
    const [hash] = this.#keys(owner, 'contact');
    const vals = await this.guard('msgcat read', () => this.redis.hmget(hash, ...ids));
    return vals.map((v) => {
      const c = contactOf(v);
      return c && c.owner === owner ? c : null;
    });
  }
  listContacts(owner: string): Promise<ContactRecord[]> {
    return this.#list(owner, 'contact', contactOf);
  }
  deleteContact(owner: string, id: string): Promise<boolean> {
    return this.#delete(owner, 'contact', id, 'phone');
  }

  async putTemplate(t: TemplateRecord): Promise<void> {
    await this.#put(t.owner, 'tpl', t.id, t);
  }
  listTemplates(owner: string): Promise<TemplateRecord[]> {
    return this.#list(owner, 'tpl', (x) => {
      const t = recordOf<TemplateRecord>(x);
      return t ? { ...t, components: Array.isArray(t.components) ? t.components : [] } : null;
    });
  }
  deleteTemplate(owner: string, id: string): Promise<boolean> {
    return this.#delete(owner, 'tpl', id);
  }

  createCanned(c: CannedResponseRecord): Promise<'ok' | 'taken'> {
    return this.#put(c.owner, 'canned', c.id, c, c.shortcut);
  }
  listCanned(owner: string): Promise<CannedResponseRecord[]> {
    return this.#list(owner, 'canned', recordOf<CannedResponseRecord>);
  }
  deleteCanned(owner: string, id: string): Promise<boolean> {
    return this.#delete(owner, 'canned', id, 'shortcut');
  }

  createNumber(n: NumberRecord): Promise<'ok' | 'taken'> {
    return this.#put(n.owner, 'num', n.id, n, n.phoneNumber);
  }
  listNumbers(owner: string): Promise<NumberRecord[]> {
    return this.#list(owner, 'num', recordOf<NumberRecord>);
  }
  getNumber(owner: string, id: string): Promise<NumberRecord | null> {
    return this.#get(owner, 'num', id, recordOf<NumberRecord>);
  }
  deleteNumber(owner: string, id: string): Promise<boolean> {
    return this.#delete(owner, 'num', id, 'phoneNumber');
  }

  async createCall(c: CallRequestRecord): Promise<void> {
    await this.#put(c.owner, 'call', c.id, c);
  }
  listCalls(owner: string): Promise<CallRequestRecord[]> {
    return this.#list(owner, 'call', recordOf<CallRequestRecord>);
  }
  getCall(owner: string, id: string): Promise<CallRequestRecord | null> {
    return this.#get(owner, 'call', id, recordOf<CallRequestRecord>);
  }

  async createCampaign(c: CampaignRecord): Promise<void> {
    const b = this.#camp;
    await this.#eval('msgcat campaign write', PUT, [`${b}:c`, `${b}:acct:${c.owner}`, `${b}:uniq`, `${b}:seq`], [c.id, JSON.stringify(c), '']);
    if (c.status === 'running') await this.guard('msgcat campaign write', () => this.redis.hset(`${b}:running`, c.id, c.owner));
  }
  async getCampaign(owner: string, id: string): Promise<CampaignRecord | null> {
    const c = campaignOf(await this.guard('msgcat read', () => this.redis.hget(`${this.#camp}:c`, id)));
    return c && c.owner === owner ? c : null;
  }
  async listCampaigns(owner: string): Promise<CampaignRecord[]> {
    const ids = await this.guard('msgcat read', () => this.redis.zrange(`${this.#camp}:acct:${owner}`, 0, -1));
    return (await this.#many(`${this.#camp}:c`, ids, campaignOf)).filter((c) => c.owner === owner);
  }
  async updateCampaign(c: CampaignRecord, from: readonly CampaignStatus[]): Promise<CampaignRecord | { conflict: CampaignStatus } | null> {
    const b = this.#camp;
    const r = (await this.#eval('msgcat campaign write', UPDATE_CAMPAIGN, [`${b}:c`, `${b}:running`], [c.id, JSON.stringify(c), c.status, c.owner, from.join(',')])) as [number, string?];
    if (r[0] === 0) return null;
    if (r[0] === 2) return { conflict: r[1] as CampaignStatus };
    return structuredClone(c);
  }
  async deleteCampaign(owner: string, id: string): Promise<boolean> {
    const b = this.#camp;
    const ok = (await this.#eval('msgcat campaign delete', DELETE, [`${b}:c`, `${b}:acct:${owner}`, `${b}:uniq`], [id, owner, ''])) === 1;
    if (!ok) return false;
    const k = this.#run(id);
    await this.guard('msgcat campaign delete', async () => {
      await this.redis.hdel(`${b}:running`, id);
      await this.redis.del(k.rcpt, k.claims, k.inflight, k.n, k.lease);
    });
    return true;
  }
  async runningCampaigns(): Promise<Array<{ owner: string; id: string }>> {
    const all = await this.guard('msgcat read', () => this.redis.hgetall(`${this.#camp}:running`));
    return Object.entries(all).map(([id, owner]) => ({ owner, id }));
  }

  async setRecipients(campaignId: string, contactIds: string[]): Promise<number> {
    const k = this.#run(campaignId);
    return Number(await this.#eval('msgcat recipients', SET_RECIPIENTS, [k.rcpt, k.n], contactIds));
  }
  async recipients(campaignId: string, start: number, count: number): Promise<string[]> {
    if (count <= 0) return [];
    return this.guard('msgcat read', () => this.redis.lrange(this.#run(campaignId).rcpt, start, start + count - 1));
  }
  async claim(campaignId: string, index: number, contactId: string, messageId: string, holder: string): Promise<boolean> {
    const k = this.#run(campaignId);
    const claim: ClaimRecord = { state: 'claimed', messageId, holder };
    return (await this.#eval('msgcat claim', CLAIM, [k.claims, k.inflight, k.n], [contactId, JSON.stringify(claim), index])) === 1;
  }
  async settle(campaignId: string, contactId: string, outcome: { state: 'sent'; sentId: string } | { state: 'failed'; error: string }): Promise<boolean> {
    const k = this.#run(campaignId);
    const value = outcome.state === 'sent' ? outcome.sentId : outcome.error;
    return (await this.#eval('msgcat settle', SETTLE, [k.claims, k.inflight, k.n], [contactId, outcome.state, value])) === 1;
  }
  async markUnconfirmed(campaignId: string): Promise<number> {
    const k = this.#run(campaignId);
    return Number(await this.#eval('msgcat unconfirmed', MARK_UNCONFIRMED, [k.claims, k.inflight, k.n], []));
  }
  async progress(campaignId: string): Promise<CampaignProgress> {
    const k = this.#run(campaignId);
    const [vals, inFlight] = await this.guard('msgcat read', () =>
      Promise.all([this.redis.hmget(k.n, 'total', 'sent', 'failed', 'unconfirmed', 'cursor'), this.redis.scard(k.inflight)]),
    );
    const [total, sent, failed, unconfirmed, cursor] = vals.map((v) => Number(v ?? 0));
    return { total: total ?? 0, sent: sent ?? 0, failed: failed ?? 0, unconfirmed: unconfirmed ?? 0, inFlight, cursor: cursor ?? 0 };
  }
  async getClaim(campaignId: string, contactId: string): Promise<ClaimRecord | null> {
    return recordOf<ClaimRecord>(await this.guard('msgcat read', () => this.redis.hget(this.#run(campaignId).claims, contactId)));
  }
  async acquireLease(campaignId: string, holder: string, ttlMs: number): Promise<boolean> {
    return (await this.#eval('msgcat lease', LEASE, [this.#run(campaignId).lease], [holder, ttlMs, 'acquire'])) === 1;
  }
  async renewLease(campaignId: string, holder: string, ttlMs: number): Promise<boolean> {
    return (await this.#eval('msgcat lease', LEASE, [this.#run(campaignId).lease], [holder, ttlMs, 'renew'])) === 1;
  }
  async releaseLease(campaignId: string, holder: string): Promise<void> {
    await this.#eval('msgcat lease', RELEASE, [this.#run(campaignId).lease], [holder]);
  }
}
