/**
 * The error bodies of the HTTP API (spec "Errors"), in one registry (fastify
 * lib/errors.js): every refusal is an {@link ApiError} with a stable `error` code;
 * only the server's error handler turns it into a response.
 *
 * Body shapes:
 * - general: `{api_id, error, message}`;
 * - 400: `{api_id, error: 'invalid_request', message, details: {field: message}}`;
 * - endpoint retrieve 404: `{api_id, error: 'not_found', message, endpoint_id}`;
 * - endpoint update/delete 404: no body ({@link ApiError.noBody}).
 */
import type { ErrorObject } from 'ajv';

/** Field name → what is wrong with it. */
export type Details = Record<string, string>;

/** An HTTP refusal with a stable machine-readable code. */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    readonly code: string,
    message: string,
    /** Extra body fields (details, endpoint_id). */
    readonly extra: Record<string, unknown> = {},
    /** Send the status with an empty body (spec: endpoint update/delete 404). */
    readonly noBody = false,
    /** Extra response headers. */
    readonly headers: Record<string, string> = {},
  ) {
    super(message);
    this.name = 'ApiError';
  }
}

/** 400 naming every bad field. */
export function badRequest(details: Details, message = 'The request has invalid fields; see details.'): ApiError {
  return new ApiError(400, 'invalid_request', message, { details });
}

export function unauthorized(message = 'Missing, malformed or wrong X-Auth-ID / X-Auth-Token.'): ApiError {
  return new ApiError(401, 'unauthorized', message);
}

export function forbidden(message: string): ApiError {
  return new ApiError(403, 'forbidden', message);
}

export function notFound(message = 'No such resource.'): ApiError {
  return new ApiError(404, 'not_found', message);
}

/** 404 with an empty body (endpoint update and delete). */
export function notFoundNoBody(): ApiError {
  return new ApiError(404, 'not_found', 'No such resource.', {}, true);
}

/** The endpoint retrieve 404: `{api_id, error, message, endpoint_id}`. */
export function endpointNotFound(endpointId: string): ApiError {
  return new ApiError(404, 'not_found', 'No endpoint with this endpoint_id on this account.', { endpoint_id: endpointId });
}

export function conflict(code: string, message: string): ApiError {
  return new ApiError(409, code, message);
}

/**
 * Messages for schema patterns, keyed by the pattern source (ajv reports the
 * pattern, not the field): "must match pattern ^[A-Za-z0-9]+$" means nothing to
 * a caller.
 */
const PATTERN_MESSAGES = new Map<string, string>();

/** Register a readable message for a JSON-schema pattern; returns the pattern. */
export function describedPattern(pattern: string, message: string): string {
  PATTERN_MESSAGES.set(pattern, message);
  return pattern;
}

/** Readable messages for fields that may not appear, by field name. */
export type ForbiddenFieldMessages = Readonly<Record<string, string>>;

const TYPE_NAMES: Record<string, string> = {
  string: 'a string',
  boolean: 'a boolean',
  integer: 'an integer',
  number: 'a number',
  object: 'a JSON object',
  array: 'an array',
  null: 'null',
};

function typeMessage(t: unknown): string {
  const types = Array.isArray(t) ? t : [t];
  return `must be ${types.map((x) => TYPE_NAMES[String(x)] ?? String(x)).join(' or ')}`;
}

/** One ajv error as (field, message). `root` names the whole part (body, querystring). */
function describe(e: ErrorObject, root: string, forbiddenFields: ForbiddenFieldMessages): [string, string] {
  const path = e.instancePath.replace(/^\//, '').split('/')[0] ?? '';
  const p = e.params as Record<string, unknown>;
  switch (e.keyword) {
    case 'required':
      return [String(p.missingProperty), 'is required'];
    case 'additionalProperties': {
      const f = String(p.additionalProperty);
      return [f, forbiddenFields[f] ?? 'is not a recognised field'];
    }
    case 'type':
      return [path || root, typeMessage(p.type)];
    case 'pattern':
      return [path, PATTERN_MESSAGES.get(String(p.pattern)) ?? `must match ${String(p.pattern)}`];
    case 'minLength':
      return [path, Number(p.limit) === 1 ? 'must not be empty' : `must be at least ${String(p.limit)} characters`];
    case 'maxLength':
      return [path, `must be at most ${String(p.limit)} characters`];
    case 'minimum':
      return [path, `must be at least ${String(p.limit)}`];
    case 'maximum':
      return [path, `must be at most ${String(p.limit)}`];
    case 'enum':
      return [path, `must be one of: ${(Array.isArray(p.allowedValues) ? p.allowedValues : []).map(String).join(', ')}`];
    default:
      return [path || root, e.message ?? 'is invalid'];
  }
}

/**
 * Turn ajv errors (allErrors: every failure) into `details`, one message per
 * field: the first error met for that field.
 */
export function detailsFromAjv(
  errors: readonly ErrorObject[],
  root: string,
  forbiddenFields: ForbiddenFieldMessages = {},
): Details {
  const out: Details = {};
  for (const e of errors) {
    const [field, msg] = describe(e, root, forbiddenFields);
    if (!(field in out)) out[field] = msg;
  }
  return out;
}
