/**
 * Idempotency-Key on creating POSTs (spec "Messaging operations": "POST requests
 * that create resources accept an Idempotency-Key header so that retries do not
 * create duplicates").
 *
 * The same key with the same body within 24 h answers the first response again
 * (header `Idempotent-Replayed: true`) and creates nothing; the same key with
 * another body is 422; a key whose first request is still running is 409.
 * Only successful responses are kept: a refused request frees its key.
 *
 * @remarks
 * Stored records hold neither the key nor the body: the record id is a SHA-256
 * over the caller, the operation and the key; the body fingerprint is an HMAC
 * keyed by the key; and the first response is AES-256-GCM-encrypted under a key
 * derived from the Idempotency-Key. A create response may carry a one-time
 * secret (a new Auth Token), which a store dump must not reveal — only a caller
 * presenting the key can read it again. Use random keys (UUIDs).
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, hkdfSync, randomBytes } from 'node:crypto';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Directory, IdempotencyRecord } from '../store/directory/directory.js';
import { ApiError, badRequest } from './errors.js';
import { headerValue } from './auth.js';

/** How long a first response is replayed. */
export const IDEMPOTENCY_TTL_MS = 24 * 60 * 60 * 1000;

/** A reservation outlives a stuck request by at most this long. */
const PENDING_TTL_MS = 60_000;

const KEY_RE = /^[\x21-\x7e]{1,255}$/;

/** A created response: status and JSON body. */
export interface Created {
  status: number;
  body: Record<string, unknown>;
}

/** JSON with object keys sorted, so equal bodies fingerprint equally. */
function canonical(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map(canonical).join(',')}]`;
  if (typeof v === 'object' && v !== null) {
    const o = v as Record<string, unknown>;
    return `{${Object.keys(o)
      .sort()
      .map((k) => `${JSON.stringify(k)}:${canonical(o[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

function cipherKey(rawKey: string, recordId: string): Buffer {
  return Buffer.from(hkdfSync('sha256', rawKey, recordId, 'sip-edge idempotent response', 32));
}

function seal(plain: string, key: Buffer): string {
  const iv = randomBytes(12);
  const c = createCipheriv('aes-256-gcm', key, iv);
  const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
  return [iv, c.getAuthTag(), ct].map((b) => b.toString('base64')).join('.');
}

function open(sealed: string, key: Buffer): string | null {
  const [iv, tag, ct] = sealed.split('.').map((s) => Buffer.from(s, 'base64'));
  if (!iv || !tag || !ct) return null;
  try {
    const d = createDecipheriv('aes-256-gcm', key, iv);
    d.setAuthTag(tag);
    return Buffer.concat([d.update(ct), d.final()]).toString('utf8');
  } catch {
    return null;
  }
}

/** Runs creating handlers at most once per Idempotency-Key. */
export class Idempotency {
  constructor(private readonly directory: Directory) {}

  /**
   * Run `create` unless this caller already ran `operation` with this
   * Idempotency-Key; send its response (or the first one again).
   *
   * @param scope Auth ID the record is stored under (the account, or the partner).
   * @param caller Auth ID of the caller (a sub-account and its parent do not share keys).
   */
  async run(
    req: FastifyRequest,
    reply: FastifyReply,
    opts: { scope: string; caller: string; operation: string },
    create: () => Promise<Created>,
  ): Promise<void> {
    const rawKey = headerValue(req, 'idempotency-key');
    if (rawKey === null) {
      if (req.headers['idempotency-key'] !== undefined) {
        throw badRequest({ 'Idempotency-Key': 'must be given once' });
      }
      const r = await create();
      await reply.code(r.status).send(r.body);
      return;
    }
    if (!KEY_RE.test(rawKey)) throw badRequest({ 'Idempotency-Key': 'must be 1-255 visible ASCII characters' });

    const id = createHash('sha256').update(`${opts.caller}\u0000${opts.operation}\u0000${rawKey}`).digest('hex');
    const fingerprint = createHmac('sha256', rawKey).update(`${opts.operation}\u0000${canonical(req.body ?? null)}`).digest('hex');
    const pending: IdempotencyRecord = { state: 'pending', fingerprint, status: 0, body: '', createdAt: Date.now() };

    const prior = await this.directory.beginIdempotent(opts.scope, id, pending, PENDING_TTL_MS);
    if (prior !== null) {
      if (prior.fingerprint !== fingerprint) {
        throw new ApiError(422, 'idempotency_key_reused', 'This Idempotency-Key was used with a different request body.');
      }
      if (prior.state === 'pending') {
        throw new ApiError(409, 'idempotency_key_in_use', 'A request with this Idempotency-Key is still being processed; retry shortly.');
      }
      const plain = open(prior.body, cipherKey(rawKey, id));
      if (plain === null) throw new ApiError(500, 'internal_error', 'The stored response could not be read.');
      await reply.code(prior.status).header('idempotent-replayed', 'true').type('application/json; charset=utf-8').send(plain);
      return;
    }

    let created: Created;
    try {
      created = await create();
    } catch (err) {
      await this.directory.abandonIdempotent(opts.scope, id).catch(() => undefined);
      throw err;
    }
    const body = JSON.stringify(created.body);
    const done: IdempotencyRecord = {
      state: 'done',
      fingerprint,
      status: created.status,
      body: seal(body, cipherKey(rawKey, id)),
      createdAt: pending.createdAt,
    };
    try {
      await this.directory.completeIdempotent(opts.scope, id, done, IDEMPOTENCY_TTL_MS);
    } catch (err) {
      // The resource exists: answering an error now would make the caller retry
      // into a duplicate once the reservation lapses. Say what was created.
      req.log.warn({ err, operation: opts.operation }, 'idempotency record not stored');
    }
    await reply.code(created.status).type('application/json; charset=utf-8').send(body);
  }
}
