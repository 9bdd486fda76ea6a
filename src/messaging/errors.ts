/**
 * Why a messaging operation was refused; the API maps `kind` to a status
 * (invalid → 400 naming `field`, not_found → 404, conflict → 409, window → 400,
 * unavailable → 503). Messages never carry a token or a secret.
 */
export type MessagingErrorKind = 'invalid' | 'not_found' | 'conflict' | 'window' | 'unavailable';

export class MessagingError extends Error {
  constructor(
    readonly kind: MessagingErrorKind,
    message: string,
    /** invalid: the request field at fault. */
    readonly field?: string,
    /** A stable code (`outside_customer_service_window`, `phone_number_id_taken` …). */
    readonly code?: string,
  ) {
    super(message);
    this.name = 'MessagingError';
  }
}
