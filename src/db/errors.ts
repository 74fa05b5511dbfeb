/** True when `err` is PostgreSQL's unique violation on the named constraint or index. */
export function isUniqueViolation(err: unknown, constraint: string): boolean {
  const e = err as { code?: string; constraint?: string } | null;
  return e?.code === '23505' && e.constraint === constraint;
}

// SQLSTATEs that mean "no usable connection", not "this statement is wrong": class 08
// (connection exception), the server shutting down under us (57P01 admin, 57P02 crash) or not
// taking connections yet (57P03, while it starts or recovers).
const UNAVAILABLE_SQLSTATE = /^(08...|57P01|57P02|57P03)$/;
const UNAVAILABLE_ERRNO = new Set([
  'ECONNREFUSED',
  'ECONNRESET',
  'ETIMEDOUT',
  'EPIPE',
  'EHOSTUNREACH',
  'ENETUNREACH',
  'ENOTFOUND',
  'EAI_AGAIN',
]);
// node-postgres reports a lost or never-made connection with plain Errors and no code.
const UNAVAILABLE_MESSAGE =
  /^(Connection terminated|timeout exceeded when trying to connect|Client has encountered a connection error|Connection terminated due to connection timeout)/;

/**
 * True when `err` says the database cannot be reached (down, restarting, cut off, or the pool
 * could not get a connection in time) rather than that a statement failed: the request can be
 * retried as it is, so it answers 503 instead of 500. Follows `cause` and AggregateError's
 * `errors` (Node reports a refused dual-stack connect as one).
 */
export function isDatabaseUnavailable(err: unknown, depth = 0): boolean {
  if (typeof err !== 'object' || err === null || depth > 5) return false;
  const e = err as { code?: unknown; message?: unknown; cause?: unknown; errors?: unknown };
  if (typeof e.code === 'string') {
    if (UNAVAILABLE_SQLSTATE.test(e.code) || UNAVAILABLE_ERRNO.has(e.code)) return true;
  }
  if (typeof e.message === 'string' && UNAVAILABLE_MESSAGE.test(e.message)) return true;
  if (Array.isArray(e.errors) && e.errors.some((inner) => isDatabaseUnavailable(inner, depth + 1)))
    return true;
  return isDatabaseUnavailable(e.cause, depth + 1);
}
