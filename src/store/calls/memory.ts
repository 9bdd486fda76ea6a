import {
  CDR_MAX,
  CDR_RETENTION_MS,
  DEAD_LETTER_MAX,
  cdrMatches,
  cdrTotals,
  type CdrPage,
  type CallStart,
  type CallStore,
  type CdrFilter,
  type CdrRecord,
  type DeadLetter,
  type OutboxItem,
} from './calls.js';

type CallState = CallStart & { ringAt: number | null; answerAt: number | null; expiresAt: number };

const clone = <T>(v: T): T => structuredClone(v);

/**
 * The embedded call store (one process, gone at exit). Same contract as
 * RedisCallStore (test/contract/call-store.test.ts); every change is one
 * synchronous step, so it is atomic by construction.
 */
export class MemoryCallStore implements CallStore {
  /** `<domain>\n<Call-ID>` → state. */
  readonly #calls = new Map<string, CallState>();
  /** domain → call_uuid → CDR, in insertion (creation) order. */
  readonly #cdrs = new Map<string, Map<string, CdrRecord>>();
  /** CallbackId → [item, due]. */
  readonly #outbox = new Map<string, { item: OutboxItem; due: number }>();
  readonly #dead = new Map<string, DeadLetter[]>();
  readonly #secrets = new Map<string, string>();

  async start(call: CallStart): Promise<void> {
    const k = `${call.domain}\n${call.sipCallId}`;
    const had = this.#calls.get(k);
    if (had && had.expiresAt > Date.now()) return;
    this.#calls.set(k, { ...clone(call), ringAt: null, answerAt: null, expiresAt: Date.now() + call.ttlMs });
  }

  #state(domain: string, sipCallId: string): CallState | null {
    const k = `${domain}\n${sipCallId}`;
    const s = this.#calls.get(k);
    if (!s) return null;
    if (s.expiresAt <= Date.now()) {
      this.#calls.delete(k);
      return null;
    }
    return s;
  }

  async ring(domain: string, sipCallId: string, at: number, callback: OutboxItem | null): Promise<boolean> {
    const s = this.#state(domain, sipCallId);
    if (!s || s.ringAt !== null || s.answerAt !== null) return false;
    s.ringAt = at;
    if (callback) this.#queue(callback, at);
    return true;
  }

  async answer(domain: string, sipCallId: string, at: number, callback: OutboxItem | null, carrier?: string): Promise<boolean> {
    const s = this.#state(domain, sipCallId);
    if (!s || s.answerAt !== null) return false;
    s.answerAt = at;
    if (carrier && s.pstn) s.pstn = { ...s.pstn, carrier };
    if (callback) this.#queue(callback, at);
    return true;
  }

  async get(domain: string, sipCallId: string): Promise<(CallStart & { ringAt: number | null; answerAt: number | null }) | null> {
    const s = this.#state(domain, sipCallId);
    if (!s) return null;
    const { expiresAt: _e, ...rest } = clone(s);
    return rest;
  }

  async end(domain: string, sipCallId: string, build: Parameters<CallStore['end']>[2]): Promise<CdrRecord | null> {
    const s = this.#state(domain, sipCallId);
    if (!s) return null;
    const { expiresAt: _e, ...state } = clone(s);
    const { cdr, callback } = build(state);
    this.#calls.delete(`${domain}\n${sipCallId}`);
    let m = this.#cdrs.get(domain);
    if (!m) this.#cdrs.set(domain, (m = new Map()));
    m.set(cdr.call_uuid, clone(cdr));
    this.#trim(m);
    if (callback) this.#queue(callback, Date.parse(cdr.ended_at));
    return clone(cdr);
  }

  #trim(m: Map<string, CdrRecord>): void {
    const oldest = Date.now() - CDR_RETENTION_MS;
    for (const [id, c] of m) {
      if (m.size > CDR_MAX || Date.parse(c.created_at) < oldest) m.delete(id);
      else break;
    }
  }

  async cdr(domain: string, callUuid: string): Promise<CdrRecord | null> {
    const c = this.#cdrs.get(domain)?.get(callUuid);
    return c ? clone(c) : null;
  }

  async cdrs(domain: string, filter: CdrFilter, page: { limit: number; offset: number }): Promise<CdrPage> {
    const m = this.#cdrs.get(domain);
    if (!m) return { total: 0, items: [], totals: cdrTotals([]) };
    this.#trim(m);
    const all = [...m.values()].filter((c) => cdrMatches(c, filter)).sort(newestFirst);
    return { total: all.length, items: all.slice(page.offset, page.offset + page.limit).map(clone), totals: cdrTotals(all) };
  }

  #queue(item: OutboxItem, due: number): void {
    if (!this.#outbox.has(item.id)) this.#outbox.set(item.id, { item: clone(item), due });
  }

  async enqueue(item: OutboxItem): Promise<void> {
    this.#queue(item, item.createdAt);
  }

  async claim(now: number, max: number, leaseMs: number): Promise<OutboxItem[]> {
    const out: OutboxItem[] = [];
    const due = [...this.#outbox.values()].filter((e) => e.due <= now).sort((a, b) => a.due - b.due);
    for (const e of due.slice(0, max)) {
      e.due = now + leaseMs;
      out.push(clone(e.item));
    }
    return out;
  }

  async complete(item: OutboxItem): Promise<void> {
    this.#outbox.delete(item.id);
  }

  async retry(item: OutboxItem, at: number): Promise<void> {
    if (!this.#outbox.has(item.id)) return;
    this.#outbox.set(item.id, { item: clone(item), due: at });
  }

  async deadLetter(item: OutboxItem, reason: string, at: number): Promise<void> {
    this.#outbox.delete(item.id);
    let l = this.#dead.get(item.domain);
    if (!l) this.#dead.set(item.domain, (l = []));
    l.unshift({ item: clone(item), reason, at });
    if (l.length > DEAD_LETTER_MAX) l.length = DEAD_LETTER_MAX;
  }

  async deadLetters(domain: string, limit: number): Promise<DeadLetter[]> {
    return clone((this.#dead.get(domain) ?? []).slice(0, limit));
  }

  async signingSecret(domain: string): Promise<string | null> {
    return this.#secrets.get(domain) ?? null;
  }

  async setSigningSecret(domain: string, secret: string): Promise<void> {
    this.#secrets.set(domain, secret);
  }

  async close(): Promise<void> {
    this.#calls.clear();
  }
}

/** Newest first; ties by call_uuid so both stores agree. */
export function newestFirst(a: CdrRecord, b: CdrRecord): number {
  const d = Date.parse(b.created_at) - Date.parse(a.created_at);
  return d !== 0 ? d : a.call_uuid < b.call_uuid ? -1 : a.call_uuid > b.call_uuid ? 1 : 0;
}
