import {
  aorKey,
  bindingFromWrite,
  ownBinding,
  ownString,
  compareBindings,
  type Aor,
  type Binding,
  type LocationStore,
  type RegisterOp,
  type RegisterResult,
  type RegistrationEvent,
  type RegistrationEventKind,
  type SipTransportName,
  EVENT_LOG_MAX,
  EVENT_LOG_RETENTION_MS,
  RETRANSMISSION_WINDOW_MS,
  eventIdAfter,
} from './location.js';

/** Options of {@link MemoryLocationStore}. */
export interface MemoryLocationStoreOptions {
  /**
   * How often expired bindings are deleted, ms. Reads never depend on it (every
   * read checks expiry); it only bounds memory. 0 disables the timer.
   * @default 30000
   */
  sweepIntervalMs?: number;
  /** Keep registration events (docs/events.md). @default true */
  events?: boolean;
  /** Events were written for this account domain (the event stream wakes up). */
  onEvents?: (domain: string) => void;
}

/** How far past EVENT_LOG_MAX an account's in-memory log may grow before its head is cut. */
export const EVENT_LOG_TRIM_SLACK = 1000;

/** Every second: the sweep is what reports lapsed bindings as `expired` (docs/events.md). */
const DEFAULT_SWEEP_INTERVAL_MS = 1_000;

function copy(b: Binding): Binding {
  // Bindings are flat records of primitives: a shallow copy keeps callers from
  // mutating what the store holds.
  return { ...b };
}

/**
 * The embedded location store: one process, data gone at exit (the default when
 * `REDIS_URL` is unset). Same semantics as RedisLocationStore, proven by
 * test/contract/location-store.test.ts.
 *
 * @remarks
 * Liveness is decided on every read against the caller's clock (a binding whose
 * `expiresAt <= now` is never returned), so no timer has to run for state to be
 * right; an unref'd sweep only deletes expired entries so memory stays bounded.
 */
export class MemoryLocationStore implements LocationStore {
  /** aorKey → binding key → binding. */
  readonly #aors = new Map<string, Map<string, Binding>>();
  #timer: NodeJS.Timeout | null = null;
  /** Account domain → its registration events, oldest first (null: events off). */
  readonly #log: Map<string, RegistrationEvent[]> | null;
  readonly #onEvents: ((domain: string) => void) | undefined;
  #lastMs = 0;
  #seq = 0;

  constructor(opts: MemoryLocationStoreOptions = {}) {
    this.#log = opts.events === false ? null : new Map();
    this.#onEvents = opts.onEvents;
    const every = opts.sweepIntervalMs ?? DEFAULT_SWEEP_INTERVAL_MS;
    if (every > 0) {
      this.#timer = setInterval(() => this.sweep(), every);
      // The sweep must never keep the process alive on its own.
      this.#timer.unref();
    }
  }

  /** Delete every binding with `expiresAt <= now`, each with an `expired` event; returns how many were deleted. */
  sweep(now: number = Date.now()): number {
    let n = 0;
    for (const [k, m] of this.#aors) {
      const lapsed: Binding[] = [];
      for (const [bk, b] of m) {
        if (b.expiresAt <= now) {
          m.delete(bk);
          lapsed.push(b);
          n++;
        }
      }
      if (m.size === 0) this.#aors.delete(k);
      if (lapsed.length > 0) this.#emit(aorOfKey(k), lapsed.map((b) => ['expired', b]), m.size > 0, now);
    }
    return n;
  }

  async sweepExpired(now: number = Date.now()): Promise<number> {
    return this.sweep(now);
  }

  async registrationEvents(domain: string, after: string | null, limit: number): Promise<RegistrationEvent[]> {
    const log = this.#log?.get(domain);
    if (!log) return [];
    this.#trim(domain, log, Date.now());
    const from = after === null ? 0 : log.findIndex((e) => eventIdAfter(e.id, after));
    return from < 0 ? [] : log.slice(from, from + limit).map((e) => ({ ...e, aor: { ...e.aor }, binding: copy(e.binding) }));
  }

  async newestRegistrationEventId(domain: string): Promise<string | null> {
    return this.#log?.get(domain)?.at(-1)?.id ?? null;
  }

  /** Record events of one AOR, written together with the change they report. */
  #emit(aor: Aor, events: Array<[RegistrationEventKind, Binding]>, registered: boolean, now: number): void {
    if (!this.#log || events.length === 0) return;
    let log = this.#log.get(aor.domain);
    if (!log) this.#log.set(aor.domain, (log = []));
    for (const [event, binding] of events) {
      const ms = Math.max(now, this.#lastMs);
      this.#seq = ms === this.#lastMs ? this.#seq + 1 : 0;
      this.#lastMs = ms;
      log.push({ id: `${ms}-${this.#seq}`, event, at: now, aor: { ...aor }, binding: copy(binding), registered });
    }
    this.#trim(aor.domain, log, now);
    this.#onEvents?.(aor.domain);
  }

  /**
   * Keeps at most about EVENT_LOG_MAX events and none older than the retention. Like
   * Redis's `MAXLEN ~`, the log may hold up to EVENT_LOG_TRIM_SLACK more: cutting the
   * head of an array moves all of it, so it is cut in batches rather than one event at
   * a time (which made every registration pay for moving 10,000 entries).
   */
  #trim(domain: string, log: RegistrationEvent[], now: number): void {
    const oldest = now - EVENT_LOG_RETENTION_MS;
    const over = log.length > EVENT_LOG_MAX + EVENT_LOG_TRIM_SLACK;
    if (!over && (log.length === 0 || (log[0] as RegistrationEvent).at >= oldest)) return;
    let drop = over ? log.length - EVENT_LOG_MAX : 0;
    while (drop < log.length && (log[drop] as RegistrationEvent).at < oldest) drop++;
    if (drop > 0) log.splice(0, drop);
    if (log.length === 0) this.#log?.delete(domain);
  }

  async register(aor: Aor, op: RegisterOp): Promise<RegisterResult> {
    const k = aorKey(aor);
    const current = this.#aors.get(k);
    // Step 1: expired bindings are absent (RFC 3261 §10.3 step 6 works on live ones).
    const live = new Map<string, Binding>();
    const lapsed: Array<[RegistrationEventKind, Binding]> = [];
    if (current) for (const [bk, b] of current) if (b.expiresAt > op.now) live.set(bk, b);
    else lapsed.push(['expired', b]);
    const liveList = (): Binding[] => [...live.values()].map(copy).sort(compareBindings);

    const outOfOrder = (b: Binding | undefined): boolean =>
      b !== undefined && b.callId === op.callId && b.cseq >= op.cseq;

    // A retransmission of the REGISTER that wrote one of its contacts changes nothing.
    for (const w of op.writes) {
      const b = live.get(w.key);
      if (b && b.callId === op.callId && b.cseq === op.cseq && op.now - b.updatedAt <= RETRANSMISSION_WINDOW_MS) {
        return { ok: true, bindings: liveList() };
      }
    }

    if (op.removeAll) {
      // RFC 3261 §10.3 step 6: '*' removes only if no binding holds a newer CSeq
      // from the same Call-ID.
      for (const b of live.values()) {
        if (outOfOrder(b)) return { ok: false, code: 'OUT_OF_ORDER', bindings: liveList() };
      }
      this.#aors.delete(k);
      this.#emit(aor, [...lapsed, ...[...live.values()].map((b): [RegistrationEventKind, Binding] => ['unregistered', b])], false, op.now);
      return { ok: true, bindings: [] };
    }

    // RFC 3261 §10.3 step 7: "If the binding does exist, the registrar checks the
    // Call-ID value ... if the CSeq value is ... less than or equal to the current
    // value for that binding, the request MUST be aborted".
    for (const key of op.removes) {
      if (outOfOrder(live.get(key))) return { ok: false, code: 'OUT_OF_ORDER', bindings: liveList() };
    }
    for (const w of op.writes) {
      if (outOfOrder(live.get(w.key))) return { ok: false, code: 'OUT_OF_ORDER', bindings: liveList() };
    }

    const next = new Map(live);
    for (const key of op.removes) next.delete(key);
    for (const w of op.writes) {
      // A write that is already expired can never be read back: it acts as a removal,
      // exactly as in the Redis script.
      if (w.expiresAt > op.now) next.set(w.key, ownBinding(bindingFromWrite(w, op.now)));
      else next.delete(w.key);
    }
    if (next.size > op.maxContacts) return { ok: false, code: 'TOO_MANY', bindings: liveList() };

    // RFC 3261 §10.3 step 8: all changes of one REGISTER are applied together.
    if (next.size === 0) this.#aors.delete(k);
    else this.#aors.set(current ? k : ownString(k), next);
    if (this.#log) {
      const events = lapsed;
      for (const [key, b] of live) if (!next.has(key)) events.push(['unregistered', b]);
      for (const w of op.writes) {
        const b = next.get(w.key);
        if (b) events.push([live.has(w.key) ? 'refreshed' : 'registered', b]);
      }
      this.#emit(aor, events, next.size > 0, op.now);
    }
    return { ok: true, bindings: [...next.values()].map(copy).sort(compareBindings) };
  }

  async lookup(aor: Aor, now: number = Date.now()): Promise<Binding[]> {
    return this.#live(aor, now);
  }

  async lookupMany(aors: Aor[], now: number = Date.now()): Promise<Map<string, Binding[]>> {
    const out = new Map<string, Binding[]>();
    for (const aor of aors) out.set(aorKey(aor), this.#live(aor, now));
    return out;
  }

  async removeAll(aor: Aor): Promise<number> {
    const k = aorKey(aor);
    const m = this.#aors.get(k);
    if (!m) return 0;
    const now = Date.now();
    let n = 0;
    for (const b of m.values()) if (b.expiresAt > now) n++;
    this.#aors.delete(k);
    this.#emit(aor, [...m.values()].map((b) => [b.expiresAt > now ? 'removed' : 'expired', b]), false, now);
    return n;
  }

  async removeKeys(aor: Aor, keys: string[]): Promise<number> {
    const k = aorKey(aor);
    const m = this.#aors.get(k);
    if (!m) return 0;
    const now = Date.now();
    let n = 0;
    const events: Array<[RegistrationEventKind, Binding]> = [];
    for (const key of keys) {
      const b = m.get(key);
      if (b === undefined) continue;
      if (b.expiresAt > now) n++;
      events.push([b.expiresAt > now ? 'removed' : 'expired', b]);
      m.delete(key);
    }
    if (m.size === 0) this.#aors.delete(k);
    this.#emit(aor, events, [...m.values()].some((b) => b.expiresAt > now), now);
    return n;
  }

  async countLive(now: number = Date.now()): Promise<Record<SipTransportName, number>> {
    const counts: Record<SipTransportName, number> = { udp: 0, tcp: 0, tls: 0, ws: 0, wss: 0 };
    for (const m of this.#aors.values()) {
      for (const b of m.values()) if (b.expiresAt > now) counts[b.transport]++;
    }
    return counts;
  }

  async ping(): Promise<boolean> {
    return true;
  }

  async close(): Promise<void> {
    if (this.#timer) clearInterval(this.#timer);
    this.#timer = null;
    this.#aors.clear();
    this.#log?.clear();
  }

  #live(aor: Aor, now: number): Binding[] {
    const m = this.#aors.get(aorKey(aor));
    if (!m) return [];
    const out: Binding[] = [];
    for (const b of m.values()) if (b.expiresAt > now) out.push(copy(b));
    return out.sort(compareBindings);
  }
}

/** The AOR of a map key (`user@domain`; usernames hold no `@`). */
function aorOfKey(k: string): Aor {
  const at = k.indexOf('@');
  return { user: k.slice(0, at), domain: k.slice(at + 1) };
}
