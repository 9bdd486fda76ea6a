import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { jsonObject } from '../redis/json.js';
import { LuaScript } from '../redis/script.js';
import type { ChildKind, ChildRecords, IpAclRecord, PutChildResult, TrunkCredentialRecord, TrunkRecord, TrunkStore } from './trunks.js';

/**
 * Trunks on Redis (single server, Sentinel master or Cluster). Trunk configuration is
 * small and read platform-wide (a credential by username, every ACL for the inbound
 * index), and a username must be unique at the moment it is written, so every key
 * carries the one hash tag `{trunks}` and each write is one script in one slot:
 *
 *     <p>trunks:{trunks}:t                    hash  trunk id → JSON
 *     <p>trunks:{trunks}:t:acct:<auth_id>     zset  trunk ids by creation
 *     <p>trunks:{trunks}:<kind>               hash  child id → JSON   (kind: credential, ipacl, uri)
 *     <p>trunks:{trunks}:<kind>:acct:<auth>   zset  child ids of an account by creation
 *     <p>trunks:{trunks}:<kind>:trunk:<id>    zset  child ids of a trunk by creation
 *     <p>trunks:{trunks}:user                 hash  lower-cased username → credential id
 *     <p>trunks:{trunks}:seq                  counter (creation order)
 *
 * Scripts get the base key as KEYS[1] and derive the rest (same tag, same slot).
 */
const CREATE_TRUNK = new LuaScript(`
local b = KEYS[1]
local s = redis.call('INCR', b .. ':seq')
redis.call('HSET', b .. ':t', ARGV[1], ARGV[3])
redis.call('ZADD', b .. ':t:acct:' .. ARGV[2], s, ARGV[1])
return 'ok'`);

const UPDATE_TRUNK = new LuaScript(`
local b = KEYS[1]
local t = redis.call('HGET', b .. ':t', ARGV[1])
if not t or cjson.decode(t).authId ~= ARGV[2] then return 0 end
redis.call('HSET', b .. ':t', ARGV[1], ARGV[3])
return 1`);

const DELETE_TRUNK = new LuaScript(`
local b = KEYS[1]
local t = redis.call('HGET', b .. ':t', ARGV[2])
if not t or cjson.decode(t).authId ~= ARGV[1] then return 0 end
redis.call('HDEL', b .. ':t', ARGV[2])
redis.call('ZREM', b .. ':t:acct:' .. ARGV[1], ARGV[2])
for _, k in ipairs({'credential', 'ipacl', 'uri'}) do
  local byTrunk = b .. ':' .. k .. ':trunk:' .. ARGV[2]
  for _, id in ipairs(redis.call('ZRANGE', byTrunk, 0, -1)) do
    if k == 'credential' then
      local c = redis.call('HGET', b .. ':credential', id)
      if c then
        local u = string.lower(cjson.decode(c).username)
        if redis.call('HGET', b .. ':user', u) == id then redis.call('HDEL', b .. ':user', u) end
      end
    end
    redis.call('HDEL', b .. ':' .. k, id)
    redis.call('ZREM', b .. ':' .. k .. ':acct:' .. ARGV[1], id)
  end
  redis.call('DEL', byTrunk)
end
return 1`);

/** ARGV: kind, id, json, authId, trunkId, lower-cased username ('' unless a credential). */
const PUT_CHILD = new LuaScript(`
local b = KEYS[1]
local kind, id = ARGV[1], ARGV[2]
local t = redis.call('HGET', b .. ':t', ARGV[5])
if not t or cjson.decode(t).authId ~= ARGV[4] then return 'no_trunk' end
local old = redis.call('HGET', b .. ':' .. kind, id)
if kind == 'credential' then
  local holder = redis.call('HGET', b .. ':user', ARGV[6])
  if holder and holder ~= id then return 'username_taken' end
  if old then
    local ou = string.lower(cjson.decode(old).username)
    if redis.call('HGET', b .. ':user', ou) == id then redis.call('HDEL', b .. ':user', ou) end
  end
  redis.call('HSET', b .. ':user', ARGV[6], id)
end
redis.call('HSET', b .. ':' .. kind, id, ARGV[3])
if not old then
  local s = redis.call('INCR', b .. ':seq')
  redis.call('ZADD', b .. ':' .. kind .. ':acct:' .. ARGV[4], s, id)
  redis.call('ZADD', b .. ':' .. kind .. ':trunk:' .. ARGV[5], s, id)
end
return 'ok'`);

/** ARGV: kind, authId, id. */
const DELETE_CHILD = new LuaScript(`
local b = KEYS[1]
local kind, id = ARGV[1], ARGV[3]
local c = redis.call('HGET', b .. ':' .. kind, id)
if not c then return 0 end
local rec = cjson.decode(c)
if rec.authId ~= ARGV[2] then return 0 end
if kind == 'credential' then
  local u = string.lower(rec.username)
  if redis.call('HGET', b .. ':user', u) == id then redis.call('HDEL', b .. ':user', u) end
end
redis.call('HDEL', b .. ':' .. kind, id)
redis.call('ZREM', b .. ':' .. kind .. ':acct:' .. ARGV[2], id)
redis.call('ZREM', b .. ':' .. kind .. ':trunk:' .. rec.trunkId, id)
return 1`);

function parse<T>(text: unknown): T | null {
  return jsonObject(text) as T | null;
}

export class RedisTrunkStore extends RedisBacked implements TrunkStore {
  readonly #base: string;

  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
    this.#base = `${this.prefix}trunks:{trunks}`;
  }

  #run(what: string, s: LuaScript, args: Array<string | number>): Promise<unknown> {
    return this.guard(what, () => this.evalScript(s, [this.#base], args));
  }

  async #many<T>(hash: string, ids: string[]): Promise<T[]> {
    if (ids.length === 0) return [];
    const vals = await this.guard('trunks read', () => this.redis.hmget(hash, ...ids));
    return vals.map((v) => parse<T>(v)).filter((v): v is NonNullable<typeof v> => v !== null) as T[];
  }

  async createTrunk(t: TrunkRecord): Promise<void> {
    await this.#run('trunk create', CREATE_TRUNK, [t.trunkId, t.authId, JSON.stringify(t)]);
  }

  async getTrunk(trunkId: string): Promise<TrunkRecord | null> {
    return parse<TrunkRecord>(await this.guard('trunk get', () => this.redis.hget(`${this.#base}:t`, trunkId)));
  }

  async listTrunks(authId: string): Promise<TrunkRecord[]> {
    const ids = await this.guard('trunk list', () => this.redis.zrange(`${this.#base}:t:acct:${authId}`, 0, -1));
    return this.#many<TrunkRecord>(`${this.#base}:t`, ids);
  }

  async updateTrunk(t: TrunkRecord): Promise<boolean> {
    return (await this.#run('trunk update', UPDATE_TRUNK, [t.trunkId, t.authId, JSON.stringify(t)])) === 1;
  }

  async deleteTrunk(authId: string, trunkId: string): Promise<boolean> {
    return (await this.#run('trunk delete', DELETE_TRUNK, [authId, trunkId])) === 1;
  }

  async putChild<K extends ChildKind>(kind: K, rec: ChildRecords[K]): Promise<PutChildResult> {
    const user = kind === 'credential' ? (rec as TrunkCredentialRecord).username.toLowerCase() : '';
    const r = await this.#run('trunk child put', PUT_CHILD, [kind, rec.id, JSON.stringify(rec), rec.authId, rec.trunkId, user]);
    return r === 'no_trunk' || r === 'username_taken' ? r : 'ok';
  }

  async getChild<K extends ChildKind>(kind: K, id: string): Promise<ChildRecords[K] | null> {
    return parse<ChildRecords[K]>(await this.guard('trunk child get', () => this.redis.hget(`${this.#base}:${kind}`, id)));
  }

  async listChildren<K extends ChildKind>(kind: K, authId: string): Promise<Array<ChildRecords[K]>> {
    const ids = await this.guard('trunk child list', () => this.redis.zrange(`${this.#base}:${kind}:acct:${authId}`, 0, -1));
    return this.#many<ChildRecords[K]>(`${this.#base}:${kind}`, ids);
  }

  async childrenOf<K extends ChildKind>(kind: K, trunkId: string): Promise<Array<ChildRecords[K]>> {
    const ids = await this.guard('trunk child list', () => this.redis.zrange(`${this.#base}:${kind}:trunk:${trunkId}`, 0, -1));
    return this.#many<ChildRecords[K]>(`${this.#base}:${kind}`, ids);
  }

  async deleteChild(kind: ChildKind, authId: string, id: string): Promise<boolean> {
    return (await this.#run('trunk child delete', DELETE_CHILD, [kind, authId, id])) === 1;
  }

  async credentialByUsername(username: string): Promise<TrunkCredentialRecord | null> {
    const id = await this.guard('trunk credential get', () => this.redis.hget(`${this.#base}:user`, username.toLowerCase()));
    return id === null ? null : this.getChild('credential', id);
  }

  async allAcls(): Promise<Array<{ acl: IpAclRecord; trunk: TrunkRecord }>> {
    const [acls, trunks] = await this.guard('trunk acl scan', () =>
      Promise.all([this.redis.hgetall(`${this.#base}:ipacl`), this.redis.hgetall(`${this.#base}:t`)]),
    );
    const out: Array<{ acl: IpAclRecord; trunk: TrunkRecord }> = [];
    for (const text of Object.values(acls)) {
      const acl = parse<IpAclRecord>(text);
      const trunk = acl ? parse<TrunkRecord>(trunks[acl.trunkId]) : null;
      if (acl && trunk) out.push({ acl, trunk });
    }
    return out;
  }
}
