import type { RedisClient } from '../redis/client.js';
import { RedisBacked, type RedisStoreOptions } from '../redis/backed.js';
import { LuaScript } from '../redis/script.js';
import {
  MAX_BALANCE_MINOR,
  rowMatches,
  summaryFrom,
  type BillingStore,
  type LedgerAccount,
  type LedgerRow,
  type LedgerSummary,
  type LedgerTerms,
  type Post,
  type PostResult,
  type RowFilter,
} from './billing.js';

/**
 * KEYS: acct (account → terms JSON), bal (account → balance).
 * ARGV: account, terms JSON. Reply: {terms JSON, balance}.
 */
const OPEN_LUA = `
redis.call('HSETNX', KEYS[1], ARGV[1], ARGV[2])
redis.call('HSETNX', KEYS[2], ARGV[1], '0')
return {redis.call('HGET', KEYS[1], ARGV[1]), redis.call('HGET', KEYS[2], ARGV[1])}
`;

/**
 * One post, all or nothing (docs/billing.md "Ledger").
 * KEYS: acct, bal, posted, then per posting: its account's row list, its account's sums.
 * ARGV: post key, currency, n, max balance, then per posting (5 each): account,
 *   type, amount, reference type, the row's JSON without its closing brace.
 * Reply: {'ok'|'replay', rows JSON} or {reason, account, …}.
 * Numbers are written with %.0f: Lua's own number-to-text keeps 14 digits only.
 */
const POST_LUA = `
local prior = redis.call('HGET', KEYS[3], ARGV[1])
if prior then return {'replay', prior} end
local n = tonumber(ARGV[3])
local max = tonumber(ARGV[4])
local next = {}
for i = 1, n do
  local o = 4 + (i - 1) * 5
  local acct = ARGV[o + 1]
  local mj = redis.call('HGET', KEYS[1], acct)
  if not mj then return {'no_account', acct} end
  local terms = cjson.decode(mj)
  if terms.currency ~= ARGV[2] then return {'currency_mismatch', acct, terms.currency} end
  local cur = next[acct]
  if cur == nil then cur = tonumber(redis.call('HGET', KEYS[2], acct) or '0') end
  local amt = tonumber(ARGV[o + 3])
  if ARGV[o + 2] == 'debit' then
    local floor = 0
    if terms.accountType == 'POSTPAID' then floor = -tonumber(terms.creditLimit) end
    if cur - amt < floor and ARGV[o + 4] ~= 'cdr' then
      return {'insufficient_funds', acct, string.format('%.0f', cur), string.format('%.0f', floor)}
    end
    next[acct] = cur - amt
  else
    if cur + amt > max then return {'balance_limit', acct} end
    next[acct] = cur + amt
  end
end
local rows = {}
for i = 1, n do
  local o = 4 + (i - 1) * 5
  local acct = ARGV[o + 1]
  local delta = ARGV[o + 3]
  if ARGV[o + 2] == 'debit' then delta = '-' .. delta end
  local after = redis.call('HINCRBY', KEYS[2], acct, delta)
  local row = ARGV[o + 5] .. ',"balance_after":' .. string.format('%.0f', after) .. '}'
  redis.call('LPUSH', KEYS[3 + (i - 1) * 2 + 1], row)
  local sums = KEYS[3 + (i - 1) * 2 + 2]
  redis.call('HINCRBY', sums, ARGV[o + 4] .. '|' .. ARGV[o + 2], ARGV[o + 3])
  redis.call('HINCRBY', sums, ARGV[o + 4] .. '|n', 1)
  rows[#rows + 1] = row
end
local all = '[' .. table.concat(rows, ',') .. ']'
redis.call('HSET', KEYS[3], ARGV[1], all)
return {'ok', all}
`;

const SCRIPTS = { open: new LuaScript(OPEN_LUA), post: new LuaScript(POST_LUA) };

/** Rows read per round trip when a filtered list walks an account. */
const SCAN_BATCH = 500;

type StoredTerms = LedgerTerms & { createdAt: string };

function termsOf(json: string | null | undefined): StoredTerms | null {
  if (!json) return null;
  try {
    const t = JSON.parse(json) as StoredTerms;
    return typeof t.currency === 'string' ? t : null;
  } catch {
    return null;
  }
}

function rowsOf(json: string): LedgerRow[] {
  return JSON.parse(json) as LedgerRow[];
}

/**
 * Production ledger on Redis: same contract as MemoryBillingStore
 * (test/contract/ledger.test.ts). Every key of a book carries the hash tag
 * `{b:<book>}`, so a post — a transfer from a partner to its customer included — is
 * one Lua script in one Cluster slot (docs/billing.md "Books and Cluster slots").
 */
export class RedisBillingStore extends RedisBacked implements BillingStore {
  constructor(redis: RedisClient, opts: RedisStoreOptions = {}) {
    super(redis, opts);
  }

  #k(book: string): { acct: string; bal: string; posted: string; tx: (a: string) => string; sums: (a: string) => string } {
    // encodeURIComponent: a book id never carries a brace into the hash tag.
    const base = `${this.prefix}led:{b:${encodeURIComponent(book)}}`;
    return {
      acct: `${base}:acct`,
      bal: `${base}:bal`,
      posted: `${base}:posted`,
      tx: (a) => `${base}:tx:${a}`,
      sums: (a) => `${base}:sum:${a}`,
    };
  }

  async open(book: string, account: string, terms: LedgerTerms, at: string): Promise<LedgerAccount> {
    const k = this.#k(book);
    const stored: StoredTerms = { currency: terms.currency, accountType: terms.accountType, creditLimit: terms.creditLimit, createdAt: at };
    const r = (await this.guard('ledgerOpen', () => this.evalScript(SCRIPTS.open, [k.acct, k.bal], [account, JSON.stringify(stored)]))) as [string, string];
    const t = termsOf(r[0]) ?? stored;
    return { account, currency: t.currency, accountType: t.accountType, creditLimit: t.creditLimit, createdAt: t.createdAt, balance: Number(r[1]) };
  }

  async account(book: string, account: string): Promise<LedgerAccount | null> {
    const k = this.#k(book);
    const [terms, bal] = await this.guard('ledgerAccount', async () => {
      const m = await this.redis.multi().hget(k.acct, account).hget(k.bal, account).exec();
      if (!m) throw new Error('MULTI aborted');
      for (const [err] of m) if (err) throw err;
      return [m[0]?.[1] as string | null, m[1]?.[1] as string | null];
    });
    const t = termsOf(terms);
    if (!t) return null;
    return { account, currency: t.currency, accountType: t.accountType, creditLimit: t.creditLimit, createdAt: t.createdAt, balance: Number(bal ?? '0') };
  }

  async accounts(book: string): Promise<LedgerAccount[]> {
    const k = this.#k(book);
    const [terms, bals] = await this.guard('ledgerAccounts', () => Promise.all([this.redis.hgetall(k.acct), this.redis.hgetall(k.bal)]));
    const out: LedgerAccount[] = [];
    for (const [account, json] of Object.entries(terms)) {
      const t = termsOf(json);
      if (t) out.push({ account, currency: t.currency, accountType: t.accountType, creditLimit: t.creditLimit, createdAt: t.createdAt, balance: Number(bals[account] ?? '0') });
    }
    return out.sort((a, b) => (a.account < b.account ? -1 : a.account > b.account ? 1 : 0));
  }

  async post(book: string, post: Post): Promise<PostResult> {
    const k = this.#k(book);
    const keys = [k.acct, k.bal, k.posted];
    const args: Array<string | number> = [post.key, post.currency, post.postings.length, MAX_BALANCE_MINOR];
    for (const p of post.postings) {
      keys.push(k.tx(p.account), k.sums(p.account));
      const row: Omit<LedgerRow, 'balance_after'> = {
        id: p.id,
        account: p.account,
        type: p.type,
        amount: p.amount,
        currency: post.currency,
        reference_type: p.referenceType,
        reference_id: p.referenceId,
        description: p.description,
        created_at: post.at,
      };
      args.push(p.account, p.type, String(p.amount), p.referenceType, JSON.stringify(row).slice(0, -1));
    }
    const r = (await this.guard('ledgerPost', () => this.evalScript(SCRIPTS.post, keys, args))) as string[];
    const [what, a = '', b = '', c = ''] = r;
    switch (what) {
      case 'ok':
        return { ok: true, replayed: false, rows: rowsOf(a) };
      case 'replay':
        return { ok: true, replayed: true, rows: rowsOf(a) };
      case 'insufficient_funds':
        return { ok: false, reason: 'insufficient_funds', account: a, balance: Number(b), floor: Number(c) };
      case 'currency_mismatch':
        return { ok: false, reason: 'currency_mismatch', account: a, currency: b };
      case 'balance_limit':
        return { ok: false, reason: 'balance_limit', account: a };
      default:
        return { ok: false, reason: 'no_account', account: a };
    }
  }

  async transactions(book: string, account: string, filter: RowFilter, page: { limit: number; offset: number }): Promise<{ total: number; items: LedgerRow[] }> {
    const key = this.#k(book).tx(account);
    const parse = (l: string[]): LedgerRow[] => l.map((j) => JSON.parse(j) as LedgerRow);
    if (filter.type === undefined && filter.referenceType === undefined && filter.from === undefined && filter.to === undefined) {
      const m = await this.guard('ledgerRows', async () => {
        const res = await this.redis.multi().llen(key).lrange(key, page.offset, page.offset + page.limit - 1).exec();
        if (!res) throw new Error('MULTI aborted');
        for (const [err] of res) if (err) throw err;
        return res;
      });
      return { total: Number(m[0]?.[1] ?? 0), items: parse((m[1]?.[1] as string[]) ?? []) };
    }
    // Filtered: walk the list newest first (rows are never rewritten, so a page is stable).
    const matched: LedgerRow[] = [];
    for (let start = 0; ; start += SCAN_BATCH) {
      const chunk = await this.guard('ledgerRows', () => this.redis.lrange(key, start, start + SCAN_BATCH - 1));
      for (const r of parse(chunk)) {
        if (rowMatches(r, filter)) matched.push(r);
      }
      if (chunk.length < SCAN_BATCH) break;
    }
    return { total: matched.length, items: matched.slice(page.offset, page.offset + page.limit) };
  }

  async summary(book: string, account: string): Promise<LedgerSummary> {
    const h = await this.guard('ledgerSummary', () => this.redis.hgetall(this.#k(book).sums(account)));
    return summaryFrom(new Map(Object.entries(h).map(([k, v]) => [k, Number(v)])));
  }
}
