import type { FastifyRequest } from 'fastify';
import { pino, type DestinationStream, type LoggerOptions } from 'pino';

/**
 * Query parameters whose values are credentials, compared without case (and without a `[…]`
 * suffix): a key or token sent by mistake in the URL (`?api_key=`), the visitor token the widget's
 * event stream must carry there (`?token=`), Meta's `hub.verify_token`, and the usual names of
 * other secrets. Their values never reach a log line.
 */
export const CREDENTIAL_PARAMS: ReadonlySet<string> = new Set([
  'api_key',
  'apikey',
  'key',
  'token',
  'access_token',
  'refresh_token',
  'id_token',
  'auth',
  'authorization',
  'session',
  'secret',
  'client_secret',
  'password',
  'sig',
  'signature',
  'hub.verify_token',
]);

export const REDACTED = '[REDACTED]';

function isCredential(name: string): boolean {
  let decoded = name;
  try {
    decoded = decodeURIComponent(name.replace(/\+/g, ' '));
  } catch {
    // A malformed escape: judged as written.
  }
  return CREDENTIAL_PARAMS.has(
    decoded
      .trim()
      .replace(/\[[^\]]*\]$/, '')
      .toLowerCase(),
  );
}

/** `query` (after its `?`) with each credential's value replaced, every other byte kept. */
function scrubQuery(query: string): string {
  return query
    .split('&')
    .map((pair) => {
      const eq = pair.indexOf('=');
      return eq >= 0 && isCredential(pair.slice(0, eq))
        ? `${pair.slice(0, eq + 1)}${REDACTED}`
        : pair;
    })
    .join('&');
}

/** A URL (or request target) with the values of its credential parameters replaced. */
export function scrubUrl(url: string): string {
  const q = url.indexOf('?');
  if (q < 0) return url;
  const hash = url.indexOf('#', q);
  const end = hash < 0 ? url.length : hash;
  return `${url.slice(0, q + 1)}${scrubQuery(url.slice(q + 1, end))}${url.slice(end)}`;
}

// A query string inside a JSON log line: up to a quote or white space, JSON escapes included.
const QUERY_IN_LINE = /\?((?:\\.|[^\\"\s#])+)/g;
// Our API keys, wherever one was pasted (a path, another parameter, a message).
const API_KEY_IN_LINE = /sb_live_[A-Za-z0-9_-]+/g;

/**
 * A serialized log line with credentials scrubbed from every URL in it (Fastify's own messages
 * name the URL too: "Route GET:/x?api_key=… not found") and every API key replaced.
 */
export function scrubLogLine(line: string): string {
  let out = line.includes('?')
    ? line.replace(QUERY_IN_LINE, (_m, query: string) => `?${scrubQuery(query)}`)
    : line;
  if (out.includes('sb_live_')) out = out.replace(API_KEY_IN_LINE, `sb_live_${REDACTED}`);
  return out;
}

// A signed media link, `/media/{account_id}/{id}/{signature}[/{filename}]`: whoever holds it
// has the file for an hour.
const MEDIA_LINK = /^(\/media\/[^/?]+\/[^/?]+\/)[^/?]+/;

/** Fastify's request serializer, its URL scrubbed (a media link's signature included). */
function serializeRequest(req: FastifyRequest) {
  return {
    method: req.method,
    url: scrubUrl(req.url).replace(MEDIA_LINK, `$1${REDACTED}`),
    version: req.headers['accept-version'],
    host: req.host,
    remoteAddress: req.ip,
    remotePort: req.socket?.remotePort,
  };
}

/**
 * The options of every logger of the service (the HTTP app's and the services'): pino JSON
 * lines without credentials.
 */
export function loggerOptions(level: string): LoggerOptions {
  return {
    level,
    redact: {
      paths: ['req.headers.authorization', 'req.headers["idempotency-key"]'],
      remove: true,
    },
    serializers: { req: serializeRequest },
    hooks: { streamWrite: scrubLogLine },
  };
}

/** A logger of the service's own (outside a request), with the options above. */
export function newLogger(level: string, stream?: DestinationStream) {
  return pino(loggerOptions(level), stream);
}

export interface LogDeps {
  /** Where log lines are written (stdout by default; tests read them). */
  logStream?: DestinationStream;
}
