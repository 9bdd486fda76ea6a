/**
 * The partner's money routes (docs/api.md "Partner money"; the vendor's paths):
 *
 * - `POST /api/v1/partner/accounts/<customer_auth_id>/transfer-balance` `{amount, currency, description?}`
 * - `GET  /api/v1/partner/accounts/<customer_auth_id>/transactions` (from_date, to_date, transaction_type, page, per_page)
 * - `GET  /api/v1/partner/accounts/<customer_auth_id>/balance`
 * - `GET  /api/v1/partner/dashboard` (from_date, to_date; default: this month)
 * - `GET  /api/v1/partner/analytics` (from_date, to_date): the spec's PartnerAnalytics from CDRs
 *
 * A customer of another partner (or no account at all) is 404.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';
import type { PartnerConfig } from '../config.js';
import { amountNumber, formatAmount, parseDecimalText } from '../billing/amount.js';
import { CDR_MAX, type CdrRecord } from '../store/calls/calls.js';
import type { AccountRecord } from '../store/directory/directory.js';
import type { RowFilter } from '../store/billing/billing.js';
import { PARTNER_ACCOUNT } from '../billing/ledger.js';
import { ApiError, badRequest, forbidden, notFound } from './errors.js';
import { checkReplay, customerBalance, idempotencyKeyOf, moneyBody, moneyRequest, rowView, summaryView } from './balance.js';
import { currencyMismatch } from './admin.js';
import { queryObject, type ApiContext } from './context.js';

const DATE = { type: 'string', pattern: '^\\d{4}-\\d{2}-\\d{2}$' } as const;
const customerParams = { type: 'object', properties: { customer_auth_id: { type: 'string', maxLength: 128 } } } as const;

function partnerOf(req: FastifyRequest): PartnerConfig {
  const p = req.principal;
  if (p?.kind !== 'partner') throw forbidden('Customer credentials cannot call partner operations.');
  return p.partner;
}

/** The partner's customer named in the path, else 404 (another partner's customer cannot be told from none). */
async function customerOf(ctx: ApiContext, partner: PartnerConfig, req: FastifyRequest): Promise<AccountRecord> {
  const id = (req.params as Record<string, string>).customer_auth_id ?? '';
  const a = await ctx.directory.getAccount(id);
  if (!a || a.partnerId !== partner.id) throw notFound('No such customer account.');
  return a;
}

/** A period from `from_date`/`to_date` (UTC days, inclusive); default: the current month to today. */
export function periodOf(q: Record<string, unknown>, now = new Date()): { from: string; to: string; fromMs: number; toMs: number } {
  const today = now.toISOString().slice(0, 10);
  const from = typeof q.from_date === 'string' ? q.from_date : `${today.slice(0, 8)}01`;
  const to = typeof q.to_date === 'string' ? q.to_date : today;
  const fromMs = Date.parse(`${from}T00:00:00.000Z`);
  const toMs = Date.parse(`${to}T23:59:59.999Z`);
  const details: Record<string, string> = {};
  if (Number.isNaN(fromMs)) details.from_date = 'must be a date YYYY-MM-DD';
  if (Number.isNaN(toMs)) details.to_date = 'must be a date YYYY-MM-DD';
  if (Object.keys(details).length === 0 && fromMs > toMs) details.to_date = 'must not be before from_date';
  if (Object.keys(details).length > 0) throw badRequest(details);
  return { from, to, fromMs, toMs };
}

/** Call totals of a set of CDRs (costs in minor units, from billed_amount). */
interface Totals {
  calls: number;
  answered: number;
  failed: number;
  seconds: number;
  cost: number;
}
const zero = (): Totals => ({ calls: 0, answered: 0, failed: 0, seconds: 0, cost: 0 });
function add(t: Totals, c: CdrRecord): void {
  t.calls++;
  if (c.call_status === 'answered') t.answered++;
  else t.failed++;
  t.seconds += c.duration;
  t.cost += parseDecimalText(c.billed_amount) ?? 0;
}

/** Every customer of the partner (the accounts its ledger book holds), with its CDRs in the period. */
async function customersWithCdrs(ctx: ApiContext, partner: PartnerConfig, fromMs: number, toMs: number): Promise<Array<{ account: AccountRecord; balance: number; cdrs: CdrRecord[] }>> {
  const out: Array<{ account: AccountRecord; balance: number; cdrs: CdrRecord[] }> = [];
  for (const la of await ctx.billing.ledger.store.accounts(partner.id)) {
    if (la.account === PARTNER_ACCOUNT) continue;
    const account = await ctx.directory.getAccount(la.account);
    if (!account || account.partnerId !== partner.id) continue;
    const { items } = await ctx.calls.cdrs(account.sipDomain, { from: fromMs, to: toMs }, { limit: CDR_MAX, offset: 0 });
    out.push({ account, balance: la.balance, cdrs: items });
  }
  return out;
}

/** Register the partner's money routes. */
export function registerPartnerMoneyRoutes(app: FastifyInstance, ctx: ApiContext): void {
  const ledger = ctx.billing.ledger;

  app.post(
    '/api/v1/partner/accounts/:customer_auth_id/transfer-balance',
    { schema: { params: customerParams, body: moneyBody }, attachValidation: true, config: { access: 'partner' } },
    async (req, reply) => {
      const partner = partnerOf(req);
      if (!partner.canTransferBalance) throw forbidden('This partner may not transfer balance (can_transfer_balance is false).');
      const m = moneyRequest(req);
      const customer = await customerOf(ctx, partner, req);
      const kept = ledger.currencyOf(partner.id);
      if (m.currency !== kept) throw currencyMismatch(kept, m.currency);
      const key = idempotencyKeyOf(req, `transfer\u0000${partner.id}\u0000${customer.authId}`);
      const r = await ledger.transfer(partner, customer, m.amount, m.currency, m.description, key);
      if (!r.ok) {
        if (r.reason === 'insufficient_funds') {
          throw new ApiError(400, 'insufficient_balance', 'The partner balance does not cover this transfer.', {
            current_balance: formatAmount(r.balance),
            requested_amount: formatAmount(m.amount),
            currency: kept,
          });
        }
        if (r.reason === 'currency_mismatch') throw currencyMismatch(r.currency, m.currency);
        if (r.reason === 'balance_limit') throw badRequest({ amount: 'is too large for the customer balance' });
        throw new ApiError(503, 'service_unavailable', 'The ledger refused the transfer; retry.');
      }
      if (r.replayed) {
        checkReplay(r.debit, m);
        reply.header('idempotent-replayed', 'true');
      } else {
        req.log.info({ partner: partner.id, account: customer.authId, amount: formatAmount(m.amount), currency: m.currency, transfer: r.transferId }, 'balance transferred');
      }
      return {
        api_id: req.id,
        message: 'Transfer completed',
        transfer_id: r.transferId,
        customer_auth_id: customer.authId,
        amount: formatAmount(m.amount),
        currency: m.currency,
        partner_balance: formatAmount(r.debit.balance_after),
        customer_balance: formatAmount(r.credit.balance_after),
        transactions: [rowView(r.debit, partner.authId), rowView(r.credit, customer.authId)],
      };
    },
  );

  app.get(
    '/api/v1/partner/accounts/:customer_auth_id/transactions',
    {
      schema: {
        params: customerParams,
        querystring: {
          type: 'object',
          additionalProperties: false,
          properties: {
            from_date: DATE,
            to_date: DATE,
            transaction_type: { type: 'string', enum: ['recharge', 'debit', 'refund', 'transfer', 'credit', 'cdr', 'did_setup', 'did_rental'] },
            page: { type: 'integer', minimum: 1, maximum: 100_000, default: 1 },
            per_page: { type: 'integer', minimum: 1, maximum: 100, default: 20 },
          },
        },
      },
      config: { access: 'partner' },
    },
    async (req) => {
      const partner = partnerOf(req);
      const customer = await customerOf(ctx, partner, req);
      const q = queryObject(req);
      const filter: RowFilter = {};
      if (typeof q.from_date === 'string') filter.from = periodOf({ from_date: q.from_date, to_date: q.from_date }).fromMs;
      if (typeof q.to_date === 'string') filter.to = periodOf({ from_date: q.to_date, to_date: q.to_date }).toMs;
      const tt = q.transaction_type;
      // The vendor's transaction_type mixes the row type (debit) with reference types (recharge, refund, transfer).
      if (tt === 'debit' || tt === 'credit') filter.type = tt;
      else if (typeof tt === 'string') filter.referenceType = tt as RowFilter['referenceType'];
      const page = Number(q.page ?? 1);
      const perPage = Number(q.per_page ?? 20);
      await ledger.customerAccount(customer);
      const where = ledger.address({ customer });
      const [rows, summary] = await Promise.all([ledger.transactions(where, filter, { limit: perPage, offset: (page - 1) * perPage }), ledger.summary(where)]);
      return {
        api_id: req.id,
        account_auth_id: customer.authId,
        transactions: rows.items.map((r) => rowView(r, customer.authId)),
        summary: summaryView(summary),
        total: rows.total,
        page,
        per_page: perPage,
        total_pages: Math.ceil(rows.total / perPage),
      };
    },
  );

  app.get('/api/v1/partner/accounts/:customer_auth_id/balance', { schema: { params: customerParams }, config: { access: 'partner' } }, async (req) => {
    const partner = partnerOf(req);
    const customer = await customerOf(ctx, partner, req);
    return { api_id: req.id, ...(await customerBalance(ctx, customer, ledger.currencyOf(customer.partnerId))) };
  });

  const periodQuery = { type: 'object', additionalProperties: false, properties: { from_date: DATE, to_date: DATE } } as const;

  app.get('/api/v1/partner/dashboard', { schema: { querystring: periodQuery }, config: { access: 'partner' } }, async (req) => {
    const partner = partnerOf(req);
    const period = periodOf(queryObject(req));
    const own = await ledger.partnerAccount(partner);
    const customers = await customersWithCdrs(ctx, partner, period.fromMs, period.toMs);
    const all = zero();
    const dir = { inbound: zero(), outbound: zero() };
    const days = new Map<string, { all: Totals; inbound: Totals; outbound: Totals }>();
    let held = 0;
    for (const c of customers) {
      held += c.balance;
      for (const cdr of c.cdrs) {
        add(all, cdr);
        add(dir[cdr.call_direction], cdr);
        const day = cdr.created_at.slice(0, 10);
        let d = days.get(day);
        if (!d) days.set(day, (d = { all: zero(), inbound: zero(), outbound: zero() }));
        add(d.all, cdr);
        add(d[cdr.call_direction], cdr);
      }
    }
    const minutes = (s: number): number => Math.round((s / 60) * 100) / 100;
    const traffic = (t: Totals): Record<string, unknown> => ({ total_calls: t.calls, answered_calls: t.answered, total_minutes: minutes(t.seconds), total_cost: formatAmount(t.cost) });
    return {
      api_id: req.id,
      partner: {
        id: partner.id,
        name: partner.name,
        company: partner.company,
        auth_id: partner.authId,
        email: partner.email,
        is_active: true,
        can_create_accounts: partner.canCreateAccounts,
        can_transfer_balance: partner.canTransferBalance,
        account_count: customers.length,
        balance: formatAmount(own.balance),
      },
      period: { from: period.from, to: period.to },
      accounts: {
        total: customers.length,
        active: customers.filter((c) => c.account.enabled).length,
        customers: customers.map((c) => ({ auth_id: c.account.authId, name: c.account.name, email: c.account.email, is_active: c.account.enabled, balance: formatAmount(c.balance), created_at: c.account.createdAt })),
      },
      total_balance: formatAmount(held),
      currency: own.currency,
      calls: traffic(all),
      traffic: { inbound: traffic(dir.inbound), outbound: traffic(dir.outbound) },
      time_series: [...days.entries()]
        .sort(([a], [b]) => (a < b ? -1 : 1))
        .map(([date, d]) => ({ date, ...traffic(d.all), inbound: traffic(d.inbound), outbound: traffic(d.outbound) })),
    };
  });

  app.get('/api/v1/partner/analytics', { schema: { querystring: periodQuery }, config: { access: 'partner' } }, async (req) => {
    const partner = partnerOf(req);
    const period = periodOf(queryObject(req));
    const customers = await customersWithCdrs(ctx, partner, period.fromMs, period.toMs);
    const all = zero();
    const dir = { inbound: zero(), outbound: zero() };
    const per: Array<{ account: AccountRecord; t: Totals }> = [];
    for (const c of customers) {
      const t = zero();
      for (const cdr of c.cdrs) {
        add(all, cdr);
        add(dir[cdr.call_direction], cdr);
        add(t, cdr);
      }
      if (t.calls > 0) per.push({ account: c.account, t });
    }
    per.sort((a, b) => b.t.cost - a.t.cost || b.t.calls - a.t.calls || (a.account.authId < b.account.authId ? -1 : 1));
    return {
      api_id: req.id,
      period: { from: period.from, to: period.to },
      totals: {
        total_calls: all.calls,
        answered_calls: all.answered,
        failed_calls: all.failed,
        total_duration_seconds: all.seconds,
        total_cost: amountNumber(all.cost),
        currency: ledger.currencyOf(partner.id),
      },
      by_direction: {
        inbound: { calls: dir.inbound.calls, cost: amountNumber(dir.inbound.cost) },
        outbound: { calls: dir.outbound.calls, cost: amountNumber(dir.outbound.cost) },
      },
      top_customers: per.slice(0, 10).map((x) => ({
        auth_id: x.account.authId,
        name: x.account.name,
        calls: x.t.calls,
        duration_seconds: x.t.seconds,
        cost: amountNumber(x.t.cost),
      })),
    };
  });
}
