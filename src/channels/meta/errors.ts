import { MediaDownloadError, ProfileLookupError, type SendOutcome } from '../channel.js';
import { classifyGraphError, GraphError, TOKEN_CODES } from './graph-client.js';

/** Graph's refusal in our terms: throttling and transient faults are retried, the rest is final. */
export function outcomeOfError(err: GraphError): SendOutcome {
  switch (classifyGraphError(err)) {
    case 'throttled':
    case 'transient':
      return err.retryAfterMs === null
        ? { status: 'retry', reason: err.describe() }
        : { status: 'retry', reason: err.describe(), afterMs: err.retryAfterMs };
    case 'final':
      return { status: 'failed', reason: err.describe() };
  }
}

/** Graph's words when it refused the connection's token itself (expired, revoked); else null. */
export function tokenRefusalOf(err: GraphError): string | null {
  return err.code !== null && TOKEN_CODES.has(err.code) ? err.describe() : null;
}

/**
 * A failed step of a media download (`doing`: "downloading the file") in our terms: too large
 * or refused for good is final, the rest is tried again. `withToken`: the step carried the
 * connection's token, so a refusal of the token is told.
 */
export function mediaErrorOf(err: unknown, doing: string, withToken: boolean): MediaDownloadError {
  if (!(err instanceof GraphError))
    return new MediaDownloadError(`${doing} failed: ${String(err)}`, false);
  if (err.httpStatus === 413) return new MediaDownloadError(err.message, true);
  return new MediaDownloadError(
    `${doing} failed: ${err.describe()}`,
    classifyGraphError(err) === 'final',
    withToken ? tokenRefusalOf(err) : null,
  );
}

/** A refused profile lookup in our terms; anything but Graph's refusal is thrown as it is. */
export function profileErrorOf(err: unknown): unknown {
  if (!(err instanceof GraphError)) return err;
  return new ProfileLookupError(
    err.describe(),
    classifyGraphError(err) === 'final',
    tokenRefusalOf(err),
    err.retryAfterMs,
  );
}
