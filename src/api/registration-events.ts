/**
 * The registration event stream (docs/events.md):
 * `GET /api/v1/Account/<auth_id>/RegistrationEvent/` — Server-Sent Events with
 * `Accept: text/event-stream` (resumable with `Last-Event-ID`), else a JSON page
 * of past events (`after`, `limit`). The events themselves are written by the
 * location store in the same atomic step as the binding change they report; this
 * module reads them and wakes its streams when any process wrote some.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { ServerResponse } from 'node:http';
import { isEventId, type RegistrationEvent } from '../store/location/location.js';
import { headerValue } from './auth.js';
import { customerOf, queryObject, type ApiContext, type Customer } from './context.js';
import { badRequest } from './errors.js';
import { redactContact } from '../push/params.js';

/** Most events one JSON page or one stream write carries. */
const PAGE_MAX = 500;
/** A comment line this often keeps proxies and load balancers from closing an idle stream. */
export const SSE_HEARTBEAT_MS = 15_000;
/** A stream reads the log this often even when nobody woke it (a lost wake-up costs at most this). */
const SSE_POLL_MS = 1_000;
/** Wake-ups for other processes are gathered this long into one publish. */
const WAKE_BATCH_MS = 10;

/**
 * Wakes the event streams of this process when events were written for an account,
 * here or (through `publish`, e.g. Redis pub/sub) in another process of the fleet.
 * A wake-up carries no event: the stream reads the log, which is the only truth.
 */
export class RegistrationEventHub {
  readonly #listeners = new Map<string, Set<() => void>>();
  readonly #outgoing = new Set<string>();
  #timer: NodeJS.Timeout | null = null;

  /** @param publish sends a newline-separated list of account domains to every other process */
  constructor(private readonly publish?: (domains: string) => void) {}

  /** Events were written for `domain` by this process. */
  changed(domain: string): void {
    this.#wake(domain);
    if (!this.publish) return;
    this.#outgoing.add(domain);
    this.#timer ??= setTimeout(() => {
      this.#timer = null;
      const list = [...this.#outgoing].join('\n');
      this.#outgoing.clear();
      this.publish?.(list);
    }, WAKE_BATCH_MS);
  }

  /** A wake-up from another process (the published list). */
  remote(domains: string): void {
    for (const d of domains.split('\n')) if (d) this.#wake(d);
  }

  /** Call `fn` whenever events may have been written for `domain`; returns the unsubscribe. */
  listen(domain: string, fn: () => void): () => void {
    let set = this.#listeners.get(domain);
    if (!set) this.#listeners.set(domain, (set = new Set()));
    set.add(fn);
    return () => {
      set.delete(fn);
      if (set.size === 0) this.#listeners.delete(domain);
    };
  }

  get streams(): number {
    let n = 0;
    for (const s of this.#listeners.values()) n += s.size;
    return n;
  }

  stop(): void {
    if (this.#timer) clearTimeout(this.#timer);
    this.#timer = null;
  }

  #wake(domain: string): void {
    const set = this.#listeners.get(domain);
    if (set) for (const fn of set) fn();
  }
}

/** An event as the API shows it. */
export function eventView(e: RegistrationEvent): Record<string, unknown> {
  const b = e.binding;
  return {
    id: e.id,
    event: e.event,
    timestamp: new Date(e.at).toISOString(),
    endpoint_id: b.endpointId ?? null,
    username: e.aor.user,
    transport: b.transport,
    sip_contact: redactContact(b.uri),
    received: b.received,
    sip_user_agent: b.userAgent,
    expiry: new Date(b.expiresAt).toISOString(),
    instance: b.instanceId,
    sip_registered: e.registered ? 'true' : 'false',
  };
}

/** Whether the request asks for the event stream rather than JSON. */
export function wantsEventStream(accept: string | undefined | null): boolean {
  return (accept ?? '').split(',').some((r) => r.split(';')[0]?.trim().toLowerCase() === 'text/event-stream');
}

/**
 * Which events a caller may see: all of the account's for the account; a
 * sub-account only those of its own endpoints (looked up once per endpoint; an
 * endpoint deleted since is no longer its own).
 */
function visibility(ctx: ApiContext, c: Customer): (e: RegistrationEvent) => Promise<boolean> {
  if (!c.subAccount) return async () => true;
  const sub = c.subAccount.authId;
  const known = new Map<string, boolean>();
  return async (e) => {
    const id = e.binding.endpointId;
    if (!id) return false;
    let mine = known.get(id);
    if (mine === undefined) {
      const rec = await ctx.directory.getEndpoint(c.account.authId, id);
      mine = rec !== null && rec.subAccount === sub;
      if (known.size > 10_000) known.clear();
      known.set(id, mine);
    }
    return mine;
  };
}

async function visibleEvents(events: RegistrationEvent[], visible: (e: RegistrationEvent) => Promise<boolean>): Promise<RegistrationEvent[]> {
  const out: RegistrationEvent[] = [];
  for (const e of events) if (await visible(e)) out.push(e);
  return out;
}

const listQuery = {
  type: 'object',
  properties: {
    after: { type: 'string', maxLength: 40 },
    limit: { type: 'integer', minimum: 1, maximum: PAGE_MAX, default: 100 },
  },
} as const;

export function registerRegistrationEventRoutes(app: FastifyInstance, ctx: ApiContext, hub: RegistrationEventHub): void {
  const url = '/api/v1/Account/:auth_id/RegistrationEvent/';
  const params = { type: 'object', properties: { auth_id: { type: 'string' } } } as const;
  app.get(url, { schema: { params, querystring: listQuery }, config: { access: 'customer' as const, eventStream: true } }, async (req, reply) => {
    const c = customerOf(req);
    const q = queryObject(req);
    const lastEventId = headerValue(req, 'last-event-id');
    const after = typeof q.after === 'string' && q.after !== '' ? q.after : lastEventId;
    if (after !== null && after !== undefined && !isEventId(after)) {
      throw badRequest({ [typeof q.after === 'string' && q.after !== '' ? 'after' : 'Last-Event-ID']: 'must be an event id (<ms>-<seq>) given by this API' });
    }
    const domain = c.account.sipDomain;
    const visible = visibility(ctx, c);
    if (wantsEventStream(headerValue(req, 'accept'))) return stream(req, reply, ctx, hub, domain, after ?? null, visible);
    const limit = typeof q.limit === 'number' ? q.limit : 100;
    const raw = await ctx.location.registrationEvents(domain, after ?? null, limit);
    const objects = await visibleEvents(raw, visible);
    const last = raw.at(-1)?.id ?? after ?? null;
    return {
      api_id: req.id,
      meta: { limit, after: after ?? null, next: raw.length === limit ? last : null, last_event_id: last },
      objects: objects.map(eventView),
    };
  });
}

/**
 * One Server-Sent Events stream (WHATWG HTML §9.2): every event after `after`
 * (or, without it, every event from now on), `id:` = event id, `event:` = kind,
 * `data:` = the JSON of {@link eventView}; a comment every SSE_HEARTBEAT_MS.
 */
async function stream(
  req: FastifyRequest,
  reply: FastifyReply,
  ctx: ApiContext,
  hub: RegistrationEventHub,
  domain: string,
  after: string | null,
  visible: (e: RegistrationEvent) => Promise<boolean>,
): Promise<void> {
  // Where a stream without Last-Event-ID starts: after the newest event kept now.
  let last = after ?? (await ctx.location.newestRegistrationEventId(domain));
  reply.hijack();
  const res: ServerResponse = reply.raw;
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache, no-transform',
    connection: 'keep-alive',
    // nginx: do not buffer the stream.
    'x-accel-buffering': 'no',
    'x-request-id': String(req.id),
  });
  res.write(`retry: 2000\n: sip-edge registration events of ${domain}\n\n`);
  let closed = false;
  let reading = false;
  let again = false;
  const pump = async (): Promise<void> => {
    if (closed) return;
    if (reading) {
      again = true;
      return;
    }
    reading = true;
    try {
      do {
        again = false;
        for (;;) {
          const batch = await ctx.location.registrationEvents(domain, last, PAGE_MAX);
          if (closed || batch.length === 0) break;
          let out = '';
          for (const e of await visibleEvents(batch, visible)) out += `id: ${e.id}\nevent: ${e.event}\ndata: ${JSON.stringify(eventView(e))}\n\n`;
          last = (batch.at(-1) as RegistrationEvent).id;
          // An event the caller may not see still moves the position (as a bare id line).
          if (out === '') out = `id: ${last}\n\n`;
          res.write(out);
          if (batch.length < PAGE_MAX) break;
        }
      } while (again && !closed);
    } catch (err) {
      req.log.debug({ err: err instanceof Error ? err.message : String(err) }, 'event stream read failed; retried at the next poll');
    } finally {
      reading = false;
    }
  };
  const unlisten = hub.listen(domain, () => void pump());
  const poll = setInterval(() => void pump(), SSE_POLL_MS);
  const heartbeat = setInterval(() => res.write(': heartbeat\n\n'), SSE_HEARTBEAT_MS);
  const close = (): void => {
    if (closed) return;
    closed = true;
    unlisten();
    clearInterval(poll);
    clearInterval(heartbeat);
  };
  req.raw.on('close', close);
  res.on('close', close);
  res.on('error', close);
  await pump();
}
