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

/**
 * Where a body, valid JSON, has a `__proto__` key (the JSON parser refuses them, so that no
 * object of ours can be given another prototype): the fields, as the client wrote them.
 */
export function protoKeys(value: unknown, path = '', out: string[] = []): string[] {
  if (Array.isArray(value)) {
    value.forEach((item, i) => protoKeys(item, join(path, i), out));
  } else if (value !== null && typeof value === 'object') {
    // JSON.parse makes `__proto__` an own property like any other: safe to walk.
    for (const [key, item] of Object.entries(value)) {
      if (key === '__proto__') out.push(join(path, key));
      else protoKeys(item, join(path, key), out);
    }
  }
  return out;
}

/** Integers in a query string are decimal digits: Ajv's coercion would read 0x10 as 16. */
const DECIMAL_INTEGER = /^-?\d+$/;

type QuerySchema = {
  properties?: Record<string, { type?: unknown; anyOf?: { type?: unknown }[] }>;
};

/** The query parameters a route's schema types as integers, remembered per schema. */
const integerParams = new WeakMap<object, Set<string>>();
function integerParamsOf(schema: QuerySchema): Set<string> {
  let names = integerParams.get(schema);
  if (!names) {
    names = new Set(
      Object.entries(schema.properties ?? {})
        .filter(([, p]) => [p, ...(p.anyOf ?? [])].some((t) => t.type === 'integer'))
        .map(([name]) => name),
    );
    integerParams.set(schema, names);
  }
  return names;
}

/** Integer query parameters written other than in decimal digits (`0x10`, `1e3`, ` 1`). */
export function nonDecimalIntegers(query: unknown, schema: QuerySchema | undefined): ErrorDetail[] {
  if (!schema || query === null || typeof query !== 'object') return [];
  const out: ErrorDetail[] = [];
  for (const name of integerParamsOf(schema)) {
    const value = (query as Record<string, unknown>)[name];
    const values = Array.isArray(value) ? value : [value];
    if (values.some((v) => typeof v === 'string' && !DECIMAL_INTEGER.test(v)))
      out.push({ field: name, issue: 'must be an integer written in decimal digits' });
  }
  return out;
}

function validJson(text: string): boolean {
  try {
    JSON.parse(text);
    return true;
  } catch {
    return false;
  }
}

/**
 * A JSON body sent to a `/v1` route that takes none (`POST …/resolve`): every field it holds is
 * unknown, as it would be on a route with a body schema, so a client learns that it was not read
 * (an empty object, or no body at all, is fine).
 */
function unexpectedBody(request: FastifyRequest): ErrorDetail[] {
  // No route (a 404 is answered as such), or one with a body schema (which judges it).
  if (request.is404 || request.routeOptions.schema?.body !== undefined) return [];
  if (!request.url.startsWith('/v1/')) return [];
  if (!/^application\/json\b/i.test(request.headers['content-type'] ?? '')) return [];
  const body = request.body;
  if (body === null) return [];
  // A route that parses its own body (a provider's webhook keeps the raw bytes) is not ours to judge.
  if (
    typeof body === 'object' &&
    !Array.isArray(body) &&
    Object.getPrototypeOf(body) !== Object.prototype
  )
    return [];
  if (typeof body !== 'object' || Array.isArray(body))
    return [{ field: 'body', issue: 'this request takes no body; send none or {}' }];
  return Object.keys(body).map((field) => ({ field, issue: 'unknown field' }));
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
    void parse(request, text, (err, body) => {
      if (err) {
        // Valid JSON refused all the same: it has a `__proto__` key, which no field is called.
        const paths = validJson(text) ? protoKeys(JSON.parse(text)) : [];
        if (paths.length > 0) {
          done(refuse(paths.map((field) => ({ field, issue: 'unknown field' }))), undefined);
          return;
        }
      }
      done(err, body);
    });
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
    const integers = nonDecimalIntegers(
      request.query,
      request.routeOptions.schema?.querystring as QuerySchema | undefined,
    );
    if (integers.length > 0) throw refuse(integers);
    if (request.body !== undefined) {
      const body = findHostileValues(request.body);
      if (body.length > 0) throw refuse(body);
      const unexpected = unexpectedBody(request);
      if (unexpected.length > 0) throw refuse(unexpected);
    }
  });
}
