/**
 * What every route module of the API is given, and the small request helpers
 * they share.
 */
import type { FastifyRequest } from 'fastify';
import type { ErrorObject } from 'ajv';
import type { Config } from '../config.js';
import type { Logger } from '../logger.js';
import type { CredentialStore } from '../store/credentials/credentials.js';
import type { AccountRecord, Directory, SubAccountRecord } from '../store/directory/directory.js';
import type { LocationStore } from '../store/location/location.js';
import type { CallStore } from '../store/calls/calls.js';
import type { EndpointProvisioning } from '../provisioning/endpoints.js';
import type { Authenticator } from './auth.js';
import { detailsFromAjv, unauthorized, type Details, type ForbiddenFieldMessages } from './errors.js';
import type { Idempotency } from './idempotency.js';
import type { Billing } from '../billing/index.js';
import type { Numbers } from '../numbers/index.js';
import type { Trunks } from '../trunks/index.js';
import type { Kyc } from '../kyc/index.js';
import type { CallControl } from '../calls/control.js';
import type { Messaging } from '../messaging/index.js';

/** Dependencies and shared services of the route modules. */
export interface ApiContext {
  config: Readonly<Config>;
  log: Logger;
  location: LocationStore;
  credentials: CredentialStore;
  directory: Directory;
  /** Calls, CDRs, callback outbox and signing secrets. */
  calls: CallStore;
  /** Ledger and rates (docs/billing.md). */
  billing: Billing;
  /** Inventory, owned numbers, their routes and rental (docs/numbers.md). */
  numbers: Numbers;
  /** SIP trunks, their credentials, IP ACLs and origination URIs (docs/trunks.md). */
  trunks: Trunks;
  /** Sub-account KYC: verifications, test mode, the calls block (docs/kyc.md). */
  kyc: Kyc;
  /** Channels, send, conversations, event subscriptions (docs/messaging.md). */
  messaging: Messaging;
  auth: Authenticator;
  idempotency: Idempotency;
  /** The writes behind endpoint create/update/delete and the sub-account cascade. */
  provisioning: EndpointProvisioning;
  /** When this server was built (partner profile timestamps). */
  startedAt: string;
  /** The B2BUA behind the Calls API (api/calls.ts); null: those routes answer 503 `calls_unavailable`. */
  callControl: CallControl | null;
}

/** The calling account, and the sub-account when a sub-account is calling. */
export interface Customer {
  account: AccountRecord;
  subAccount: SubAccountRecord | null;
}

/** The customer behind a `customer`/`account` route (the auth hook has run). */
export function customerOf(req: FastifyRequest): Customer {
  const p = req.principal;
  if (p?.kind === 'account') return { account: p.account, subAccount: null };
  if (p?.kind === 'subaccount') return { account: p.account, subAccount: p.subAccount };
  throw unauthorized();
}

/** The request body as an object (empty when it is not one; validation reports that). */
export function bodyObject(req: FastifyRequest): Record<string, unknown> {
  const b = req.body;
  return typeof b === 'object' && b !== null && !Array.isArray(b) ? (b as Record<string, unknown>) : {};
}

/** The query as validated (defaults applied) by the route's querystring schema. */
export function queryObject(req: FastifyRequest): Record<string, unknown> {
  const q = req.query;
  return typeof q === 'object' && q !== null ? (q as Record<string, unknown>) : {};
}

/**
 * The schema failures of a route declared with `attachValidation`, as
 * `details`; empty when the request passed. Handlers add their own checks to the
 * same object so one 400 names every bad field.
 */
export function validationDetails(req: FastifyRequest, forbiddenFields: ForbiddenFieldMessages = {}): Details {
  const err = req.validationError as (Error & { validation?: unknown; validationContext?: string }) | undefined;
  if (!err || !Array.isArray(err.validation)) return {};
  return detailsFromAjv(err.validation as ErrorObject[], err.validationContext ?? 'body', forbiddenFields);
}

/** Pagination of a validated list query (schemas give the defaults and bounds). */
export function pageOf(q: Record<string, unknown>): { limit: number; offset: number } {
  return {
    limit: typeof q.limit === 'number' ? q.limit : 20,
    offset: typeof q.offset === 'number' ? q.offset : 0,
  };
}

export const optString = (o: Record<string, unknown>, k: string): string | undefined =>
  typeof o[k] === 'string' ? (o[k] as string) : undefined;

export const optBool = (o: Record<string, unknown>, k: string): boolean | undefined =>
  typeof o[k] === 'boolean' ? (o[k] as boolean) : undefined;

/** ISO 8601 UTC with milliseconds. */
export const isoNow = (): string => new Date().toISOString();
