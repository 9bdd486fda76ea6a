/**
 * Exact field sets and types of the API's bodies, from the spec's tables
 * (the platform interface specification) and the additive fields docs/api.md names.
 */
import { expect } from 'vitest';

export const ISO_DATE_TIME = /^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d{1,3})?Z$/;

/** Fields of an Endpoint object in a list. */
export const ENDPOINT_LIST_FIELDS = [
  'endpoint_id',
  'username',
  'alias',
  'sip_uri',
  'sip_registered',
  'sip_contact',
  'sip_expires',
  'sip_user_agent',
  'application',
  'allow_voice',
  'allow_message',
  'allow_video',
  'allow_same_domain',
  'allow_other_domains',
  'allow_phones',
  'allow_apps',
  'sub_account',
  'resource_uri',
  'created_at',
  'updated_at',
].sort();

/** Fields of a retrieved Endpoint while unregistered (sip_registrations is additive). */
export const ENDPOINT_RETRIEVE_FIELDS = [...ENDPOINT_LIST_FIELDS, 'api_id', 'sip_registrations'].sort();

/** …and while registered. */
export const ENDPOINT_RETRIEVE_REGISTERED_FIELDS = [...ENDPOINT_RETRIEVE_FIELDS, 'sip_registration'].sort();

export const SIP_REGISTRATION_FIELDS = ['contact', 'expires', 'user_agent', 'received', 'path'].sort();

export const APPLICATION_FIELDS = [
  'app_id',
  'app_name',
  'application_type',
  'answer_url',
  'answer_method',
  'hangup_url',
  'hangup_method',
  'fallback_answer_url',
  'fallback_method',
  'message_url',
  'message_method',
  'sip_transfer_url',
  'sip_transfer_method',
  'default_number_app',
  'default_endpoint_app',
  'default_app',
  'enabled',
  'log_incoming_message',
  'public_uri',
  'sip_uri',
  'sub_account',
  'resource_uri',
  'created_at',
  'updated_at',
].sort();

export const SUBACCOUNT_FIELDS = [
  'auth_id',
  'name',
  'enabled',
  'kyc_mode',
  'business_type',
  'kyc_calls_blocked',
  'account',
  'resource_uri',
  'created_at',
  'updated_at',
].sort();

export const ACCOUNT_FIELDS = [
  'id',
  'auth_id',
  'name',
  'email',
  'country',
  'account_type',
  'enabled',
  'is_active',
  'cps_limit',
  'concurrent_calls_limit',
  'sip_domain',
  'resource_uri',
  'created_at',
].sort();

export const PARTNER_PROFILE_FIELDS = [
  'api_id',
  'id',
  'name',
  'email',
  'phone',
  'company',
  'balance',
  'currency',
  'gstin',
  'gst_status',
  'tds_applicable',
  'tds_percentage',
  'account_type',
  'status',
  'can_create_accounts',
  'can_transfer_balance',
  'created_at',
  'updated_at',
].sort();

export const keys = (o: unknown): string[] => Object.keys(o as object).sort();

function isStringOrNull(v: unknown): boolean {
  return v === null || typeof v === 'string';
}

/** Every field of an Endpoint object has the spec's type. */
export function expectEndpointTypes(o: Record<string, unknown>, detail: boolean): void {
  for (const f of ['endpoint_id', 'username', 'alias', 'sip_uri', 'resource_uri']) expect(typeof o[f], f).toBe('string');
  expect(['true', 'false']).toContain(o.sip_registered);
  for (const f of ['sip_contact', 'sip_expires', 'sip_user_agent', 'sub_account']) expect(isStringOrNull(o[f]), f).toBe(true);
  for (const f of ['allow_voice', 'allow_message', 'allow_video', 'allow_same_domain', 'allow_other_domains', 'allow_phones', 'allow_apps']) {
    expect(typeof o[f], f).toBe('boolean');
  }
  expect(o.created_at).toMatch(ISO_DATE_TIME);
  expect(o.updated_at).toMatch(ISO_DATE_TIME);
  expect(o.resource_uri).toBe(`/v1/Account/${String(o.resource_uri).split('/')[3]}/Endpoint/${String(o.endpoint_id)}/`);
  if (o.sip_registered === 'false') {
    expect(o.sip_contact).toBeNull();
    expect(o.sip_expires).toBeNull();
    expect(o.sip_user_agent).toBeNull();
    expect('sip_registration' in o).toBe(false);
  } else {
    expect(o.sip_contact).toMatch(/^[^:]+:\d+$|^\[[^\]]+\]:\d+$/);
    expect(o.sip_expires).toMatch(ISO_DATE_TIME);
  }
  if (o.application !== null) {
    const app = o.application as Record<string, unknown>;
    expect(keys(app)).toEqual(detail ? ['answer_method', 'answer_url', 'app_id', 'app_name'] : ['app_id', 'app_name']);
    expect(typeof app.app_id).toBe('string');
    expect(typeof app.app_name).toBe('string');
  }
  if (detail) {
    expect(typeof o.api_id).toBe('string');
    expect(Array.isArray(o.sip_registrations)).toBe(true);
    if (o.sip_registered === 'true') {
      const r = o.sip_registration as Record<string, unknown>;
      expect(keys(r)).toEqual(SIP_REGISTRATION_FIELDS);
      expect(typeof r.contact).toBe('string');
      expect(r.expires).toMatch(ISO_DATE_TIME);
      expect(isStringOrNull(r.user_agent)).toBe(true);
      expect(typeof r.received).toBe('string');
      expect(isStringOrNull(r.path)).toBe(true);
    }
  }
}

/** The general error object `{api_id, error, message}` (plus the given extra fields). */
export function expectError(body: unknown, error: string, extra: string[] = []): void {
  const o = body as Record<string, unknown>;
  expect(keys(o)).toEqual(['api_id', 'error', 'message', ...extra].sort());
  expect(typeof o.api_id).toBe('string');
  expect(o.error).toBe(error);
  expect(typeof o.message).toBe('string');
}

/** A 400 body: `{api_id, error, message, details}` whose details name exactly `fields`. */
export function expectBadRequest(body: unknown, fields: string[]): Record<string, string> {
  expectError(body, 'invalid_request', ['details']);
  const details = (body as Record<string, unknown>).details as Record<string, string>;
  expect(keys(details)).toEqual([...fields].sort());
  for (const m of Object.values(details)) expect(typeof m).toBe('string');
  return details;
}
