/**
 * An account's money (docs/api.md "Balance and transactions"; docs/billing.md):
 * `GET /api/v1/Account/<auth_id>/balance/<currency>` and
 * `GET /api/v1/Account/<auth_id>/transactions` (limit/offset, newest first),
 * plus the request and response pieces the admin and partner money routes share.
 */
import { createHash } from 'node:crypto';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { formatAmount, parseAmount } from '../billing/amount.js';
import { normalizeCurrency } from '../billing/currency.js';
import type { BalanceView, CustomerRef, LedgerAddress } from '../billing/ledger.js';
import type { LedgerRow, LedgerSummary } from '../store/billing/billing.js';
import { headerValue } from './auth.js';
import { ApiError, badRequest, notFound, type Details } from './errors.js';
import { bodyObject, customerOf, optString, pageOf, queryObject, validationDetails, type ApiContext } from './context.js';

/** Body of the credit and transfer routes: `{amount, currency, description?}`. */
export const moneyBody = {
  type: 'object',
  additionalProperties: false,
  required: ['amount', 'currency'],
  properties: {
    // A decimal string ("10.50") or a JSON number (the vendor's SDK sends one); parsed exactly below.
    amount: { type: ['string', 'number'], maxLength: 32 },
    currency: { type: 'string', maxLength: 8 },
    description: { type: 'string', maxLength: 255 },
  },
} as const;

/** A validated money request. Amount in minor units. */
export interface MoneyRequest {
  amount: number;
  currency: string;
  description: string;
}

/**
 * The money body of a request (route declared with `attachValidation`): one 400
 * naming every bad field — an amount that is negative, zero, not numeric or has
 * more than five decimals; a currency that is not ISO 4217.
 */
export function moneyRequest(req: FastifyRequest): MoneyRequest {
  const details: Details = validationDetails(req);
  const body = bodyObject(req);
  let amount = 0;
  if (details.amount === undefined && body.amount !== undefined) {
    const a = parseAmount(body.amount);
    if (a.ok) amount = a.minor;
    else details.amount = a.problem;
  }
  const currency = normalizeCurrency(body.currency);
  if (details.currency === undefined && body.currency !== undefined && currency === null) details.currency = 'must be an ISO 4217 currency code such as USD';
  if (Object.keys(details).length > 0) throw badRequest(details);
  return { amount, currency: currency as string, description: optString(body, 'description') ?? '' };
}

/** An Idempotency-Key header as the ledger's post key (hashed with who and what), or null. */
export function idempotencyKeyOf(req: FastifyRequest, scope: string): string | null {
  const raw = headerValue(req, 'idempotency-key');
  if (raw === null) {
    if (req.headers['idempotency-key'] !== undefined) throw badRequest({ 'Idempotency-Key': 'must be given once' });
    return null;
  }
  if (!/^[\x21-\x7e]{1,255}$/.test(raw)) throw badRequest({ 'Idempotency-Key': 'must be 1-255 visible ASCII characters' });
  return createHash('sha256').update(`${scope}\u0000${raw}`).digest('hex');
}

/** A replayed post must be the same request: else 422 (as for any Idempotency-Key, docs/api.md). */
export function checkReplay(row: LedgerRow, m: MoneyRequest): void {
  if (row.amount !== m.amount || row.currency !== m.currency || row.description !== m.description) {
    throw new ApiError(422, 'idempotency_key_reused', 'This Idempotency-Key was used with a different request body.');
  }
}

/** A ledger row as the API shows it (the vendor's transaction fields plus ours). */
export function rowView(r: LedgerRow, accountId: string): Record<string, unknown> {
  return {
    id: r.id,
    account_id: accountId,
    type: r.type,
    amount: formatAmount(r.amount),
    currency: r.currency,
    reference_type: r.reference_type,
    reference_id: r.reference_id,
    reference: r.reference_id,
    balance_after: formatAmount(r.balance_after),
    description: r.description,
    status: 'completed',
    created_at: r.created_at,
    processed_at: r.created_at,
  };
}

/** Totals of an account's rows, amounts as decimal text. */
export function summaryView(s: LedgerSummary): Record<string, unknown> {
  return {
    total_transactions: s.total_transactions,
    total_debit: formatAmount(s.total_debit),
    total_credit: formatAmount(s.total_credit),
    net_amount: formatAmount(s.total_credit - s.total_debit),
    by_reference_type: s.by_reference_type.map((b) => ({
      reference_type: b.reference_type,
      total_debit: formatAmount(b.total_debit),
      total_credit: formatAmount(b.total_credit),
      count: b.count,
    })),
  };
}

/**
 * The Balance resource: the spec's fields (auth_id, balance as decimal text,
 * currency, auto_recharge) and the vendor's (reserved_funds, available_balance,
 * credit_limit, is_postpaid …), every amount as decimal text with five decimals.
 */
export async function balanceResource(ctx: ApiContext, authId: string, v: BalanceView, a: LedgerAddress): Promise<Record<string, unknown>> {
  const last = await ctx.billing.ledger.transactions(a, {}, { limit: 1, offset: 0 });
  return {
    id: `BAL-${authId}-${v.currency}`,
    auth_id: authId,
    account_id: authId,
    balance: formatAmount(v.balance),
    currency: v.currency,
    auto_recharge: false,
    reserved_funds: formatAmount(v.reserved),
    available_balance: formatAmount(v.available),
    credit_limit: formatAmount(v.creditLimit),
    is_postpaid: v.accountType === 'POSTPAID',
    status: 'active',
    created_at: v.createdAt,
    updated_at: last.items[0]?.created_at ?? v.createdAt,
  };
}

/** The Balance of a customer in `currency` (404 when it keeps its balance in another). */
export async function customerBalance(ctx: ApiContext, c: CustomerRef, currency: string): Promise<Record<string, unknown>> {
  const acct = await ctx.billing.ledger.customerAccount(c);
  if (acct.currency !== currency) throw notFound(`This account keeps its balance in ${acct.currency}, not ${currency}.`);
  const reserved = await ctx.billing.charging.reserved(c.authId);
  return balanceResource(ctx, c.authId, ctx.billing.ledger.view(acct, reserved), ctx.billing.ledger.address({ customer: c }));
}

const authIdParams = { type: 'object', properties: { auth_id: { type: 'string', maxLength: 128 } } } as const;

/** Register the account's balance and transactions routes. */
export function registerBalanceRoutes(app: FastifyInstance, ctx: ApiContext): void {
  app.get(
    '/api/v1/Account/:auth_id/balance/:currency',
    {
      schema: { params: { type: 'object', properties: { auth_id: { type: 'string', maxLength: 128 }, currency: { type: 'string', maxLength: 8 } } } },
      config: { access: 'account' },
    },
    async (req) => {
      const { account } = customerOf(req);
      const raw = (req.params as Record<string, string>).currency;
      const currency = normalizeCurrency(raw);
      if (currency === null) throw badRequest({ currency: 'must be an ISO 4217 currency code such as USD' });
      return { api_id: req.id, ...(await customerBalance(ctx, account, currency)) };
    },
  );

  app.get(
    '/api/v1/Account/:auth_id/transactions',
    {
      schema: {
        params: authIdParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            limit: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
            offset: { type: 'integer', minimum: 0, maximum: 1_000_000, default: 0 },
          },
        },
      },
      config: { access: 'account' },
    },
    async (req) => {
      const { account } = customerOf(req);
      const page = pageOf(queryObject(req));
      await ctx.billing.ledger.customerAccount(account);
      const where = ctx.billing.ledger.address({ customer: account });
      const [rows, summary] = await Promise.all([ctx.billing.ledger.transactions(where, {}, page), ctx.billing.ledger.summary(where)]);
      return {
        api_id: req.id,
        transactions: rows.items.map((r) => rowView(r, account.authId)),
        summary: summaryView(summary),
        total: rows.total,
        limit: page.limit,
        offset: page.offset,
      };
    },
  );
}
