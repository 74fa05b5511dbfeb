import { STATUS_CODES, type IncomingMessage, type ServerResponse } from 'node:http';
import type { Duplex } from 'node:stream';
import type {
  FastifyBaseLogger,
  FastifyError,
  FastifyInstance,
  FastifyReply,
  FastifyRequest,
} from 'fastify';
import {
  AppError,
  ERROR_STATUS,
  RateLimited,
  Unavailable,
  type ErrorCode,
  type ErrorDetail,
} from '../errors.js';
import { isDatabaseUnavailable } from '../db/errors.js';
import { describeValidation } from './validation.js';

/**
 * Seconds a client is told to wait while the database is unreachable: long enough not to hammer
 * a restarting server, short enough that clients come back soon after it does.
 */
export const UNAVAILABLE_RETRY_AFTER_S = 5;

function send(
  reply: FastifyReply,
  code: ErrorCode,
  message: string,
  details?: ErrorDetail[],
  status: number = ERROR_STATUS[code],
  extra?: Record<string, unknown>,
) {
  const error: Record<string, unknown> = { code, message, ...extra };
  if (details && details.length > 0) error.details = details;
  if (status >= 500) error.request_id = reply.request.id;
  return reply.code(status).send({ error });
}

// Fastify's own client errors, by code: what the client did wrong, in our vocabulary.
const FASTIFY_CLIENT_ERRORS: Record<string, { code: ErrorCode; message: string }> = {
  FST_ERR_CTP_INVALID_JSON_BODY: {
    code: 'invalid_request',
    message: 'request body is not valid JSON',
  },
  FST_ERR_CTP_EMPTY_JSON_BODY: {
    code: 'invalid_request',
    message: 'request body is empty but Content-Type is application/json',
  },
  FST_ERR_CTP_INVALID_MEDIA_TYPE: {
    code: 'invalid_request',
    message: 'Content-Type must be application/json',
  },
  FST_ERR_CTP_INVALID_CONTENT_LENGTH: {
    code: 'invalid_request',
    message: 'Content-Length does not match the body',
  },
  FST_ERR_CTP_BODY_TOO_LARGE: { code: 'payload_too_large', message: 'request body exceeds 1 MiB' },
  FST_ERR_CTP_INVALID_TYPE: { code: 'invalid_request', message: 'Content-Type header is invalid' },
};

/** The database cannot be reached at the moment: 503 `unavailable` with `Retry-After`. */
export function databaseUnavailable(message = 'database unavailable; retry later'): Unavailable {
  return new Unavailable(message, UNAVAILABLE_RETRY_AFTER_S);
}

/**
 * Fastify's `frameworkErrors`: the router refuses some URLs before any hook or error handler
 * runs, and they are answered in the envelope too. No id is that long, so an overlong one is
 * simply not found (past the router's 2,048 characters; shorter ones reach their route); the other
 * refusal is a URL that is not valid percent-encoded UTF-8.
 */
export function answerRouterError(err: FastifyError, request: FastifyRequest, reply: FastifyReply) {
  // Answered before any hook: the request's id is set here, as onRequest sets it on the others.
  void reply.header('X-Request-Id', request.id);
  if (err.code === 'FST_ERR_MAX_PARAM_LENGTH') {
    void send(reply, 'not_found', 'no resource has an id this long');
    return;
  }
  void send(reply, 'invalid_request', 'the URL is not valid percent-encoded UTF-8');
}

/** The envelope as the bytes of a whole HTTP/1.1 response that closes the connection. */
function rawResponse(status: number, code: ErrorCode, message: string): string {
  const body = JSON.stringify({ error: { code, message } });
  return (
    `HTTP/1.1 ${status} ${STATUS_CODES[status] ?? 'Error'}\r\n` +
    'Content-Type: application/json; charset=utf-8\r\n' +
    `Content-Length: ${Buffer.byteLength(body)}\r\n` +
    'Connection: close\r\n\r\n' +
    body
  );
}

/** What Node's HTTP server hangs on a socket while it writes a response there. */
interface InFlight {
  _httpMessage?: { headersSent: boolean } | null;
}

/**
 * Fastify's `clientErrorHandler`: Node's HTTP parser refused the request before any route saw
 * it (a header or URL over 16 KB, a byte no header may hold, `HTTP/1.2`, an unknown method,
 * Content-Length with Transfer-Encoding, a bad chunk, an HTTP/2 preface). The client gets the
 * envelope like every other refusal, then the connection closes: what follows on it cannot be
 * told apart from the broken request.
 */
export function answerClientError(
  this: { log: FastifyBaseLogger },
  err: Error & { code?: string; reason?: unknown },
  socket: Duplex,
): void {
  // The client is gone: nobody to answer.
  if (err.code === 'ECONNRESET' || socket.destroyed) return;
  // Never `err` itself: Node hangs the request's raw bytes on it (`rawPacket`), credentials
  // included (an Authorization header, a visitor's `?token=`), and pino would log them.
  this.log.debug(
    { code: err.code, reason: typeof err.reason === 'string' ? err.reason : undefined },
    'malformed HTTP request',
  );
  // A response to an earlier request on this connection is under way: bytes of ours would land
  // inside its body. Like Node's own handler, close the connection without a word.
  if ((socket as Duplex & InFlight)._httpMessage?.headersSent) {
    socket.destroy();
    return;
  }
  let response: string;
  if (err.code === 'HPE_HEADER_OVERFLOW') {
    response = rawResponse(
      431,
      'invalid_request',
      'the request line and headers exceed 16 KB (a long URL counts)',
    );
  } else if (err.code === 'ERR_HTTP_REQUEST_TIMEOUT') {
    response = rawResponse(408, 'invalid_request', 'the request did not arrive in time');
  } else {
    const reason = typeof err.reason === 'string' ? `: ${err.reason}` : '';
    response = rawResponse(400, 'invalid_request', `the request is not valid HTTP/1.1${reason}`);
  }
  if (socket.writable) socket.end(response, () => socket.destroy());
  else socket.destroy();
}

/**
 * Node's answer to an `Expect` header other than `100-continue`: 417, in the envelope (Node's
 * own 417 has an empty body).
 */
function answerExpectation(_request: IncomingMessage, response: ServerResponse): void {
  const body = JSON.stringify({
    error: {
      code: 'invalid_request',
      message: 'the only expectation supported is Expect: 100-continue',
    },
  });
  response.shouldKeepAlive = false;
  response.writeHead(417, {
    'Content-Type': 'application/json; charset=utf-8',
    'Content-Length': Buffer.byteLength(body),
    Connection: 'close',
  });
  response.end(body);
}

export function installErrorHandlers(app: FastifyInstance): void {
  app.server.on('checkExpectation', answerExpectation);
  // Node closes a CONNECT's socket without a word when nothing listens: this is no proxy.
  app.server.on('connect', (_request: IncomingMessage, socket: Duplex) => {
    socket.on('error', () => socket.destroy());
    socket.end(rawResponse(400, 'invalid_request', 'CONNECT is not supported: this is no proxy'));
  });
  // HTTP/1.1 requires a Host header (RFC 9112 3.2). Node would refuse its absence with an empty
  // 400 of its own; the server lets such requests through (requireHostHeader: false) to here.
  app.addHook('onRequest', async (request) => {
    if (request.raw.httpVersion === '1.1' && request.headers.host === undefined)
      throw new AppError('invalid_request', 'an HTTP/1.1 request must carry a Host header');
  });
  // Request bodies are JSON only (SPEC.md 1.2). Fastify also parses text/plain by default, which
  // would let a text body reach validation as a string (422); without the parser it is a 400.
  app.removeContentTypeParser('text/plain');
  app.setErrorHandler((thrown: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    let err: FastifyError | AppError = thrown;
    if (isDatabaseUnavailable(thrown)) {
      // The request can be retried as it was: whatever it wrote ran in a transaction that the
      // lost connection rolled back, or had not started.
      request.log.warn({ err: thrown }, 'database unavailable');
      err = databaseUnavailable();
    }
    if (
      (err instanceof Unavailable || err instanceof RateLimited) &&
      err.retryAfterSeconds !== undefined
    )
      reply.header('Retry-After', err.retryAfterSeconds);
    if (err instanceof AppError)
      return send(reply, err.code, err.message, err.details, err.status, err.extra);
    if (err.validation) {
      const details = describeValidation(err.validation as never, err.validationContext);
      const message = details.map((d) => `${d.field}: ${d.issue}`).join('; ');
      return send(reply, 'validation_error', message, details);
    }
    const known = err.code ? FASTIFY_CLIENT_ERRORS[err.code] : undefined;
    if (known) return send(reply, known.code, known.message);
    if (err instanceof SyntaxError && err.message.includes('JSON')) {
      return send(reply, 'invalid_request', 'request body is not valid JSON');
    }
    if (err.statusCode && err.statusCode >= 400 && err.statusCode < 500) {
      return send(reply, 'invalid_request', err.message);
    }
    request.log.error({ err }, 'unhandled error');
    return send(reply, 'internal_error', 'internal error; quote the request_id when reporting it');
  });

  app.setNotFoundHandler((request, reply) =>
    send(reply, 'not_found', `no route for ${request.method} ${request.url.split('?')[0]}`),
  );
}
