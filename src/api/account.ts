/**
 * The Account resource (spec "Account") of the calling account:
 * `GET /api/v1/Account/<auth_id>/`. Adds `sip_domain`, the domain every
 * endpoint of the account registers to.
 */
import type { FastifyInstance } from 'fastify';
import type { AccountRecord } from '../store/directory/directory.js';
import { customerOf, type ApiContext } from './context.js';

/** The Account object of the spec's table, plus sip_domain, country and resource_uri. */
export function accountView(a: AccountRecord): Record<string, unknown> {
  return {
    id: a.authId,
    auth_id: a.authId,
    name: a.name,
    email: a.email,
    country: a.country,
    account_type: a.accountType,
    enabled: a.enabled,
    is_active: a.enabled,
    cps_limit: a.cpsLimit,
    concurrent_calls_limit: a.concurrentCallsLimit,
    sip_domain: a.sipDomain,
    resource_uri: `/v1/Account/${a.authId}/`,
    created_at: a.createdAt,
  };
}

/** Register the Account route. */
export function registerAccountRoutes(app: FastifyInstance, _ctx: ApiContext): void {
  app.get(
    '/api/v1/Account/:auth_id/',
    { schema: { params: { type: 'object', properties: { auth_id: { type: 'string' } } } }, config: { access: 'account' } },
    async (req) => ({ api_id: req.id, ...accountView(customerOf(req).account) }),
  );
}
