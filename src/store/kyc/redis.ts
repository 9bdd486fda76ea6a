import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { jsonObject } from '../redis/json.js';
import { LuaScript } from '../redis/script.js';
import { byCreation, VERIFICATION_TYPES, type KycSession, type KycStore, type VerificationRow, type VerificationType } from './kyc.js';

/** KEYS[1] base. ARGV: id, account, json, token, partner, seq score, now ms. */
const CREATE_SESSION = new LuaScript(`
local b = KEYS[1]
local cur = redis.call('HGET', b .. ':active', ARGV[2])
if cur then
  local j = redis.call('HGET', b .. ':s', cur)
  if j then
    local o = cjson.decode(j)
    if o.status ~= 'kyc_completed' and o.status ~= 'revoked' and o.status ~= 'expired' and tonumber(o.expiresAt) > tonumber(ARGV[7]) then return cur end
  end
end
redis.call('HSET', b .. ':s', ARGV[1], ARGV[3])
redis.call('HSET', b .. ':active', ARGV[2], ARGV[1])
redis.call('HSET', b .. ':tok', ARGV[4], ARGV[1])
redis.call('ZADD', b .. ':p:' .. ARGV[5], ARGV[6], ARGV[1])
return 'ok'`);

/** KEYS[1] the retry zset. ARGV: now, lease ms, limit. Due members moved to now + lease. */
const CLAIM_RETRIES = new LuaScript(`
local due = redis.call('ZRANGEBYSCORE', KEYS[1], '-inf', ARGV[1], 'LIMIT', 0, tonumber(ARGV[3]))
for _, m in ipairs(due) do redis.call('ZADD', KEYS[1], tonumber(ARGV[1]) + tonumber(ARGV[2]), m) end
return due`);

/** KEYS[1] base. ARGV: id, old json, new json. */
const REPLACE_SESSION = new LuaScript(`
local b = KEYS[1]
if (redis.call('HGET', b .. ':s', ARGV[1]) or '') ~= ARGV[2] then return 'conflict' end
redis.call('HSET', b .. ':s', ARGV[1], ARGV[3])
return 'ok'`);

/**
 * KYC rows on Redis (single server, Sentinel master or Cluster). Everything of one
 * sub-account is one hash under its own hash tag, so a write (the row and the
 * "latest of its type" pointer) is one HSET in one slot:
 *
 *     <p>kyc:{<sub_auth_id>}    hash  row:<id> → JSON, latest:<type> → row id
 *
 * Partners' KYC sessions share one hash tag, so "one active session per account" is
 * decided in one script:
 *
 *     <p>kyc-sessions:{kyc-sessions}:s           hash  session id → JSON
 *     <p>kyc-sessions:{kyc-sessions}:active      hash  account auth id → its latest session id
 *     <p>kyc-sessions:{kyc-sessions}:tok         hash  page token → session id
 *     <p>kyc-sessions:{kyc-sessions}:p:<partner> zset  a partner's session ids by creation
 *     <p>kyc-retry                                zset  "<sub>\n<row id>" by when its retry is due
 */
export class RedisKycStore extends RedisBacked implements KycStore {
  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
  }

  #key(sub: string): string {
    return `${this.prefix}kyc:{${sub}}`;
  }

  async put(row: VerificationRow): Promise<void> {
    await this.guard('kyc put', () => this.redis.hset(this.#key(row.subAuthId), `row:${row.id}`, JSON.stringify(row), `latest:${row.type}`, row.id));
  }

  async latest(subAuthId: string): Promise<Partial<Record<VerificationType, VerificationRow>>> {
    const key = this.#key(subAuthId);
    const ids = await this.guard('kyc latest', () => this.redis.hmget(key, ...VERIFICATION_TYPES.map((t) => `latest:${t}`)));
    const wanted = VERIFICATION_TYPES.map((t, i) => [t, ids[i]] as const).filter((p): p is readonly [VerificationType, string] => typeof p[1] === 'string');
    if (wanted.length === 0) return {};
    const jsons = await this.guard('kyc latest', () => this.redis.hmget(key, ...wanted.map(([, id]) => `row:${id}`)));
    const out: Partial<Record<VerificationType, VerificationRow>> = {};
    wanted.forEach(([t], i) => {
      const r = parseRow(jsons[i]);
      if (r) out[t] = r;
    });
    return out;
  }

  async rows(subAuthId: string): Promise<VerificationRow[]> {
    const all = await this.guard('kyc rows', () => this.redis.hgetall(this.#key(subAuthId)));
    const out: VerificationRow[] = [];
    for (const [f, v] of Object.entries(all)) {
      if (!f.startsWith('row:')) continue;
      const r = parseRow(v);
      if (r) out.push(r);
    }
    return out.sort(byCreation);
  }

  get #sb(): string {
    return `${this.prefix}kyc-sessions:{kyc-sessions}`;
  }

  async createSession(s: KycSession, now: number): Promise<{ ok: true } | { ok: false; activeId: string }> {
    const r = await this.guard('kyc createSession', () =>
      this.evalScript(CREATE_SESSION, [this.#sb], [s.id, s.accountAuthId, JSON.stringify(s), s.token, s.partnerId, Date.parse(s.createdAt) || now, now]),
    );
    return r === 'ok' ? { ok: true } : { ok: false, activeId: String(r) };
  }

  async getSession(id: string): Promise<KycSession | null> {
    const j = await this.guard('kyc getSession', () => this.redis.hget(`${this.#sb}:s`, id));
    return parseSession(j);
  }

  async sessionByToken(token: string): Promise<KycSession | null> {
    const id = await this.guard('kyc sessionByToken', () => this.redis.hget(`${this.#sb}:tok`, token));
    return id ? this.getSession(id) : null;
  }

  async replaceSession(old: KycSession, next: KycSession): Promise<boolean> {
    const r = await this.guard('kyc replaceSession', () => this.evalScript(REPLACE_SESSION, [this.#sb], [old.id, JSON.stringify(old), JSON.stringify(next)]));
    return r === 'ok';
  }

  async partnerSessions(partnerId: string): Promise<KycSession[]> {
    const ids = await this.guard('kyc partnerSessions', () => this.redis.zrevrange(`${this.#sb}:p:${partnerId}`, 0, -1));
    if (ids.length === 0) return [];
    const jsons = await this.guard('kyc partnerSessions', () => this.redis.hmget(`${this.#sb}:s`, ...ids));
    return jsons.map(parseSession).filter((s): s is KycSession => s !== null);
  }

  async scheduleRetry(subAuthId: string, id: string, at: number): Promise<void> {
    await this.guard('kyc scheduleRetry', () => this.redis.zadd(`${this.prefix}kyc-retry`, at, `${subAuthId}\n${id}`));
  }

  async unscheduleRetry(subAuthId: string, id: string): Promise<void> {
    await this.guard('kyc unscheduleRetry', () => this.redis.zrem(`${this.prefix}kyc-retry`, `${subAuthId}\n${id}`));
  }

  async claimDueRetries(now: number, leaseMs: number, limit: number): Promise<Array<{ subAuthId: string; id: string }>> {
    const r = await this.guard('kyc claimDueRetries', () => this.evalScript(CLAIM_RETRIES, [`${this.prefix}kyc-retry`], [now, leaseMs, limit]));
    return (Array.isArray(r) ? r : []).map((m) => {
      const [subAuthId = '', id = ''] = String(m).split('\n');
      return { subAuthId, id };
    });
  }

  async row(subAuthId: string, id: string): Promise<VerificationRow | null> {
    return parseRow(await this.guard('kyc row', () => this.redis.hget(this.#key(subAuthId), `row:${id}`)));
  }

  async clear(subAuthId: string): Promise<void> {
    await this.guard('kyc clear', () => this.redis.del(this.#key(subAuthId)));
  }
}

function parseSession(text: unknown): KycSession | null {
  const o = jsonObject(text);
  if (!o || typeof o.id !== 'string' || typeof o.accountAuthId !== 'string') return null;
  return o as unknown as KycSession;
}

function parseRow(text: unknown): VerificationRow | null {
  const o = jsonObject(text);
  if (!o || typeof o.id !== 'string' || typeof o.subAuthId !== 'string' || typeof o.type !== 'string') return null;
  return o as unknown as VerificationRow;
}
