/**
 * Operator routes (docs/api.md "Operator routes", docs/billing.md "Funding"):
 * money enters the platform here. Guarded by `X-Admin-Token: <ADMIN_AUTH_TOKEN>`;
 * with no token configured they answer 404 like a route that does not exist.
 *
 * - `POST /api/v1/admin/partners/<partner_id>/credit` `{amount, currency, description?}`
 * - `POST /api/v1/admin/accounts/<auth_id>/credit` `{amount, currency, description?}`
 *
 * Each writes one `credit` row with reference_type `recharge`. An `Idempotency-Key`
 * makes a retried credit happen once.
 */
import type { FastifyInstance } from 'fastify';
import { formatAmount } from '../billing/amount.js';
import type { PostResult } from '../store/billing/billing.js';
import { ApiError, notFound } from './errors.js';
import { checkReplay, idempotencyKeyOf, moneyBody, moneyRequest, rowView, type MoneyRequest } from './balance.js';
import type { ApiContext } from './context.js';
import { randomUUID } from 'node:crypto';

/** 400 when the currency is not the one the balance is kept in. */
export function currencyMismatch(kept: string, given: string): ApiError {
  return new ApiError(400, 'currency_mismatch', `This balance is kept in ${kept}, not ${given}.`, { details: { currency: `must be ${kept}` } });
}

/** The answer of a credit: the row and the new balance. */
function credited(reqId: string, r: PostResult, m: MoneyRequest, accountId: string): { status: number; body: Record<string, unknown>; replayed: boolean } {
  if (!r.ok) {
    if (r.reason === 'currency_mismatch') throw currencyMismatch(r.currency, m.currency);
    if (r.reason === 'balance_limit') throw new ApiError(400, 'invalid_request', 'The balance would exceed what the ledger keeps.', { details: { amount: 'is too large for this balance' } });
    throw new ApiError(503, 'service_unavailable', 'The ledger refused the credit; retry.');
  }
  const row = r.rows[0];
  if (!row) throw new ApiError(500, 'internal_error', 'Internal error.');
  if (r.replayed) checkReplay(row, m);
  return {
    status: 200,
    replayed: r.replayed,
    body: { api_id: reqId, message: 'credited', balance: formatAmount(row.balance_after), currency: row.currency, transaction: rowView(row, accountId) },
  };
}

const params = (name: string) => ({ type: 'object', properties: { [name]: { type: 'string', maxLength: 128 } } }) as const;

/** Register the operator routes. */
export function registerAdminRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const ledger = ctx.billing.ledger;

  app.post(
    '/api/v1/admin/partners/:partner_id/credit',
    { schema: { params: params('partner_id'), body: moneyBody }, attachValidation: true, config: { access: 'admin' } },
    async (req, reply) => {
      const id = (req.params as Record<string, string>).partner_id;
      const partner = ctx.config.partners.find((p) => p.id === id);
      if (!partner) throw notFound('No such partner.');
      const m = moneyRequest(req);
      const key = idempotencyKeyOf(req, `admin\u0000partner\u0000${partner.id}`);
      const r = await ledger.change(
        { partner },
        { type: 'credit', amount: m.amount, currency: m.currency, referenceType: 'recharge', referenceId: key ? `RC${key.slice(0, 24)}` : `RC${randomUUID().replace(/-/g, '').slice(0, 24)}`, description: m.description, ...(key ? { key: `recharge:${key}` } : {}) },
      );
      const out = credited(req.id, r, m, partner.authId);
      req.log.info({ partner: partner.id, amount: formatAmount(m.amount), currency: m.currency, replayed: out.replayed }, 'partner credited');
      if (out.replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(out.status).send(out.body);
    },
  );

  app.post(
    '/api/v1/admin/accounts/:auth_id/credit',
    { schema: { params: params('auth_id'), body: moneyBody }, attachValidation: true, config: { access: 'admin' } },
    async (req, reply) => {
      const id = (req.params as Record<string, string>).auth_id;
      const account = await ctx.directory.getAccount(id);
      if (!account) throw notFound('No such account.');
      const m = moneyRequest(req);
      const key = idempotencyKeyOf(req, `admin\u0000account\u0000${account.authId}`);
      const r = await ledger.change(
        { customer: account },
        { type: 'credit', amount: m.amount, currency: m.currency, referenceType: 'recharge', referenceId: key ? `RC${key.slice(0, 24)}` : `RC${randomUUID().replace(/-/g, '').slice(0, 24)}`, description: m.description, ...(key ? { key: `recharge:${key}` } : {}) },
      );
      const out = credited(req.id, r, m, account.authId);
      req.log.info({ account: account.authId, amount: formatAmount(m.amount), currency: m.currency, replayed: out.replayed }, 'account credited');
      if (out.replayed) reply.header('idempotent-replayed', 'true');
      return reply.code(out.status).send(out.body);
    },
  );
}
