/** Every error code the API answers with, and its HTTP status. */
export const ERROR_STATUS = {
  invalid_request: 400,
  unauthorized: 401,
  forbidden: 403,
  not_found: 404,
  conflict: 409,
  payload_too_large: 413,
  validation_error: 422,
  idempotency_error: 422,
  rate_limited: 429,
  internal_error: 500,
  unavailable: 503,
} as const;

export type ErrorCode = keyof typeof ERROR_STATUS;

export interface ErrorDetail {
  field: string;
  issue: string;
}

/** A failure the client can act on; the error handler turns it into the error envelope. */
export class AppError extends Error {
  constructor(
    readonly code: ErrorCode,
    message: string,
    readonly status: number = ERROR_STATUS[code],
    readonly details?: ErrorDetail[],
    /** More fields of the error object, beside code and message (e.g. `accounts`). */
    readonly extra?: Record<string, unknown>,
  ) {
    super(message);
  }
}

export class NotFound extends AppError {
  constructor(resource: string, id?: string) {
    super('not_found', id === undefined ? `${resource} not found` : `${resource} ${id} not found`);
  }
}

export class Conflict extends AppError {
  constructor(message: string) {
    super('conflict', message);
  }
}

export class ValidationError extends AppError {
  constructor(field: string, issue: string) {
    super('validation_error', `${field}: ${issue}`, 422, [{ field, issue }]);
  }
}

export class Unauthorized extends AppError {
  constructor(message = 'API key missing or invalid') {
    super('unauthorized', message);
  }
}

export class Forbidden extends AppError {
  constructor(message: string) {
    super('forbidden', message);
  }
}

/** Too many requests of this kind for now: 429 `rate_limited` with `Retry-After`. */
export class RateLimited extends AppError {
  constructor(
    message: string,
    /** Sent as `Retry-After`. */
    readonly retryAfterSeconds: number,
  ) {
    super('rate_limited', message);
  }
}

/** The service cannot take this request now; the client should try again after a while. */
export class Unavailable extends AppError {
  constructor(
    message: string,
    /** Sent as `Retry-After`. */
    readonly retryAfterSeconds?: number,
  ) {
    super('unavailable', message);
  }
}

/** Refused by `openStore(…, { existing: true })`: there is no store there yet. */
export class EmptyStore extends Error {}
