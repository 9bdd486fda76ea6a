/**
 * Waking sleeping devices (RFC 8599 §5, docs/push.md): a request for a binding that is
 * asleep sends one push and waits until the device registers again — same +sip.instance
 * or same pn-prid — on this node or another (a notice over Redis pub/sub), for at most
 * PUSH_WAIT. A dead token (APNs 410 / BadDeviceToken, FCM UNREGISTERED) removes the binding.
 */
import { Counter, type Registry } from 'prom-client';
import type { Logger } from '../logger.js';
import { aorKey, type Aor, type Binding, type LocationStore } from '../store/location/location.js';
import { pushOf, shortPrid, type PushParams, type PushProvider } from './params.js';
import type { PushAttempt, PushSender } from './types.js';

/** Pub/sub between the processes of a fleet (RedisEvents fits). */
export interface PushNotices {
  on(topic: string, handler: (message: string) => void): void;
  publish(topic: string, message: string): Promise<void>;
}

export interface PushServiceOptions {
  senders: Partial<Record<PushProvider, PushSender>>;
  /** How long a request waits for the device, ms (PUSH_WAIT). */
  waitMs: number;
  location: LocationStore;
  log: Logger;
  registry?: Registry;
  notices?: PushNotices | null;
}

interface Waiter {
  aor: Aor;
  instanceId: string | null;
  prid: string;
  resolve: (b: Binding | null) => void;
  timer: NodeJS.Timeout;
}

const TOPIC = 'push-awake';

export class PushService {
  readonly #waiters = new Map<string, Set<Waiter>>();
  /** Devices a push is on its way to (aor + prid): a second request waits for the same push. */
  readonly #pending = new Set<string>();
  readonly #lastError = new Map<string, number>();
  readonly #sent: Counter<'provider' | 'outcome'> | null;

  constructor(private readonly opts: PushServiceOptions) {
    this.#sent = opts.registry
      ? new Counter({ name: 'sip_push_sent_total', help: 'Push notifications to sleeping devices, by provider and outcome (sent, gone, failed)', labelNames: ['provider', 'outcome'], registers: [opts.registry] })
      : null;
    opts.notices?.on(TOPIC, (m) => void this.#remote(m));
  }

  /** The providers push goes out through (reported at start). */
  get providers(): PushProvider[] {
    return (Object.keys(this.opts.senders) as PushProvider[]).filter((p) => this.opts.senders[p]);
  }

  /**
   * Sends one push to the sleeping `binding` and resolves with the binding it registers
   * again with, or null (no provider for it, a dead token, nothing within PUSH_WAIT).
   */
  wake(aor: Aor, binding: Binding, callId: string, method: string): Promise<Binding | null> {
    const push = pushOf(binding);
    const sender = push ? this.opts.senders[push.provider] : undefined;
    if (!push || !sender) return Promise.resolve(null);
    const k = aorKey(aor);
    return new Promise((resolve) => {
      const w: Waiter = {
        aor,
        instanceId: binding.instanceId,
        prid: push.prid,
        resolve: (b) => {
          clearTimeout(w.timer);
          this.#waiters.get(k)?.delete(w);
          if (this.#waiters.get(k)?.size === 0) this.#waiters.delete(k);
          resolve(b);
        },
        timer: setTimeout(() => w.resolve(null), this.opts.waitMs),
      };
      w.timer.unref();
      let set = this.#waiters.get(k);
      if (!set) this.#waiters.set(k, (set = new Set()));
      set.add(w);
      const device = `${k} ${push.prid}`;
      if (this.#pending.has(device)) return;
      this.#pending.add(device);
      // Another request while this device is still being woken shares this push (until it
      // registers, or PUSH_WAIT after the push).
      void this.#push(sender, push, aor, binding, callId, method).finally(() => {
        setTimeout(() => this.#pending.delete(device), this.opts.waitMs).unref();
      });
    });
  }

  async #push(sender: PushSender, push: PushParams, aor: Aor, binding: Binding, callId: string, method: string): Promise<void> {
    const req = { push, callId, method };
    let a: PushAttempt;
    try {
      a = await sender.send(req);
      if (a.outcome === 'retry') a = await sender.send(req); // one more try on a 5xx
    } catch (err) {
      a = { outcome: 'failed', status: 0, reason: err instanceof Error ? err.message : String(err) };
    }
    const outcome = a.outcome === 'retry' ? 'failed' : a.outcome;
    this.#sent?.inc({ provider: push.provider, outcome });
    if (outcome === 'sent') {
      this.opts.log.debug({ aor: aorKey(aor), provider: push.provider, prid: shortPrid(push.prid), callId }, 'push sent');
      return;
    }
    if (outcome === 'gone') {
      this.opts.log.info({ aor: aorKey(aor), provider: push.provider, prid: shortPrid(push.prid), status: a.status, reason: a.reason }, 'push token no longer valid: binding removed');
      try {
        await this.opts.location.removeKeys(aor, [binding.key]);
      } catch (err) {
        this.opts.log.warn({ err: err instanceof Error ? err.message : String(err) }, 'could not remove the binding of a dead push token');
      }
      for (const w of [...(this.#waiters.get(aorKey(aor)) ?? [])]) if (w.prid === push.prid) w.resolve(null);
      return;
    }
    // The service is unreachable or refused: the branch ends at PUSH_WAIT; logged once per interval.
    const now = Date.now();
    if (now - (this.#lastError.get(push.provider) ?? 0) >= this.opts.waitMs) {
      this.#lastError.set(push.provider, now);
      this.opts.log.warn({ provider: push.provider, status: a.status, reason: a.reason }, 'push not sent');
    }
  }

  /** A REGISTER over a live flow wrote these bindings: requests waiting for the device go on. */
  registered(aor: Aor, bindings: readonly Binding[]): void {
    const live = bindings.filter((b) => b.connId !== null);
    if (live.length === 0) return;
    // After this turn: the 200 OK of the REGISTER goes out before the request it wakes.
    if (this.#waiters.has(aorKey(aor))) setImmediate(() => { for (const b of live) this.#match(aor, b); });
    const notices = this.opts.notices;
    if (!notices) return;
    for (const b of live) {
      // Only a device with push parameters is ever waited for: one notice per such REGISTER.
      const push = pushOf(b);
      if (!push) continue;
      notices.publish(TOPIC, JSON.stringify({ aor, key: b.key })).catch(() => undefined);
    }
  }

  #match(aor: Aor, b: Binding): void {
    const set = this.#waiters.get(aorKey(aor));
    if (!set) return;
    const prid = pushOf(b)?.prid ?? null;
    for (const w of [...set]) {
      if ((w.instanceId !== null && w.instanceId === b.instanceId) || (prid !== null && w.prid === prid)) {
        // Awake: the next request after it sleeps again sends a push of its own.
        this.#pending.delete(`${aorKey(aor)} ${w.prid}`);
        w.resolve(b);
      }
    }
  }

  /** Another process took the device's REGISTER: the binding is read back (it names that process and flow). */
  async #remote(message: string): Promise<void> {
    let m: { aor: Aor; key: string };
    try {
      m = JSON.parse(message) as { aor: Aor; key: string };
    } catch {
      return;
    }
    if (!m.aor || !this.#waiters.has(aorKey(m.aor))) return;
    const b = (await this.opts.location.lookup(m.aor).catch(() => [])).find((x) => x.key === m.key && x.connId !== null);
    if (b) this.#match(m.aor, b);
  }

  close(): void {
    for (const set of this.#waiters.values()) for (const w of [...set]) w.resolve(null);
    for (const s of Object.values(this.opts.senders)) s?.close();
  }
}
