import { AppError, Unavailable } from '../../errors.js';
import { GraphError, TOKEN_CODES, classifyGraphError } from './graph-client.js';

/** What a Meta connection keeps: settings anyone with the API key may read, and the sealed rest. */
export interface CheckedCredentials {
  settings: Record<string, unknown>;
  secrets: Record<string, string>;
}

/**
 * One Graph call that checks credentials: its answer (an object, else empty). A refusal is a 422
 * quoting Graph on the field it concerns (the token, or the id asked for); Graph unreachable,
 * failing or throttling us is a 503 the client may retry. The token never appears in either.
 */
export async function askGraph<T>(
  call: () => Promise<unknown>,
  fields: { idField: string; tokenField: string; token: string },
): Promise<T> {
  try {
    const answer = await call();
    return (answer && typeof answer === 'object' ? answer : {}) as T;
  } catch (err) {
    if (!(err instanceof GraphError)) throw err;
    // Quoted back to the client: never with the token in it, whatever answered.
    const said = err.describe().split(fields.token).join('[token]');
    if (classifyGraphError(err) !== 'final') {
      throw new Unavailable(
        `Graph could not check the credentials now (${said}); try again`,
        err.retryAfterMs === null ? 5 : Math.max(1, Math.ceil(err.retryAfterMs / 1000)),
      );
    }
    const field =
      err.code !== null && TOKEN_CODES.has(err.code) ? fields.tokenField : fields.idField;
    throw new AppError('validation_error', `Graph refused the credentials: ${said}`, 422, [
      { field, issue: said },
    ]);
  }
}

/** A non-empty string Graph answered, else null. */
export function textOf(v: unknown): string | null {
  return typeof v === 'string' && v !== '' ? v : null;
}
