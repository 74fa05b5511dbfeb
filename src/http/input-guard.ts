import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AppError, NotFound, type ErrorDetail } from '../errors.js';

/** Deeper JSON is refused before it is parsed: no schema of ours nests more than a few levels. */
export const MAX_JSON_DEPTH = 32;

// A UTF-16 code unit that is half of a pair without its other half: not text, and PostgreSQL
// would store it as U+FFFD.
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

/** What is wrong with a string no column can hold, or null when it is fine. */
export function badText(value: string): string | null {
  if (value.includes('\u0000')) return 'must not contain NUL characters (U+0000)';
  if (LONE_SURROGATE.test(value)) return 'must be valid Unicode (it has a lone surrogate)';
  return null;
}

/**
 * How deep the JSON text nests, counted on the raw text (brackets outside strings) so that a
 * body nested a million levels deep costs one linear scan instead of a parse and a recursion.
 */
export function jsonDepth(text: string, stopAbove = MAX_JSON_DEPTH): number {
  let depth = 0;
  let max = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 0x5c)
        i++; // backslash: skip the escaped character
      else if (c === 0x22) inString = false;
    } else if (c === 0x22) {
      inString = true;
    } else if (c === 0x7b || c === 0x5b) {
      if (++depth > max) {
        max = depth;
        if (max > stopAbove) return max;
      }
    } else if (c === 0x7d || c === 0x5d) {
      depth--;
    }
  }
  return max;
}

const join = (path: string, key: string | number) => (path === '' ? String(key) : `${path}.${key}`);

/**
 * Every value PostgreSQL or our own code cannot take, with the field it is in: NUL characters
 * and lone surrogates in strings (keys too), and numbers that are not finite (`1e999` parses as
 * Infinity). Stops at the first `limit` findings.
 */
export function findHostileValues(value: unknown, path = '', out: ErrorDetail[] = [], limit = 10) {
  if (out.length >= limit) return out;
  if (typeof value === 'string') {
    const issue = badText(value);
    if (issue) out.push({ field: path || 'body', issue });
  } else if (typeof value === 'number') {
    if (!Number.isFinite(value))
      out.push({ field: path || 'body', issue: 'must be a finite number' });
  } else if (Array.isArray(value)) {
    value.forEach((item, i) => findHostileValues(item, join(path, i), out, limit));
  } else if (value !== null && typeof value === 'object') {
    for (const [key, item] of Object.entries(value)) {
      const keyIssue = badText(key);
      if (keyIssue) {
        out.push({
          field: join(path, JSON.stringify(key).slice(1, -1)),
          issue: `name ${keyIssue}`,
        });
        continue;
      }
      findHostileValues(item, join(path, key), out, limit);
    }
  }
  return out;
}

function refuse(details: ErrorDetail[]): AppError {
  const message = details.map((d) => `${d.field}: ${d.issue}`).join('; ');
  return new AppError('validation_error', message, 422, details);
}

/**
 * Checks every value a client sends before any of it reaches validation, idempotency or the
 * database (DESIGN §2 "Hostile input"): the JSON parser refuses bodies nested deeper than
 * MAX_JSON_DEPTH, and a hook refuses NUL characters, lone surrogates and non-finite numbers in
 * the body and query (422 naming the field) and in path parameters (404: no id contains them).
 */
export function installInputGuard(app: FastifyInstance): void {
  const parse = app.getDefaultJsonParser('error', 'ignore');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'string' }, (request, body, done) => {
    const text = body as string;
    if (jsonDepth(text) > MAX_JSON_DEPTH) {
      done(
        refuse([{ field: 'body', issue: `must not nest deeper than ${MAX_JSON_DEPTH} levels` }]),
        undefined,
      );
      return;
    }
    void parse(request, text, done);
  });

  app.addHook('preValidation', async (request: FastifyRequest) => {
    const params = request.params as Record<string, unknown> | undefined;
    if (params) {
      for (const value of Object.values(params)) {
        if (typeof value === 'string' && badText(value) !== null) throw new NotFound('resource');
      }
    }
    const query = findHostileValues(request.query);
    if (query.length > 0) throw refuse(query);
    if (request.body !== undefined) {
      const body = findHostileValues(request.body);
      if (body.length > 0) throw refuse(body);
    }
  });
}
