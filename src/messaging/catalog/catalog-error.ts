/**
 * Why a messaging catalog operation was refused. The API maps `kind` to its status:
 * not_found → 404, conflict → 409, invalid → 400 (naming `field`), too_large → 413,
 * provider → 502 (the provider failed or timed out) or 400 when `providerStatus` is a 4xx
 * (the provider refused the request; its error code is kept in `providerCode`).
 */
export class CatalogError extends Error {
  constructor(
    readonly kind: 'not_found' | 'conflict' | 'invalid' | 'too_large' | 'provider',
    message: string,
    /** Stable error code of the body (`campaign_running`, `phone_taken`, …). */
    readonly code: string = kind,
    /** The field at fault (kind `invalid`). */
    readonly field?: string,
    /** The provider's HTTP status and error code (kind `provider`). */
    readonly providerStatus?: number,
    readonly providerCode?: string | number,
  ) {
    super(message);
    this.name = 'CatalogError';
  }
}
