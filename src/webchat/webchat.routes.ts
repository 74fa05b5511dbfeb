import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { AppError, Forbidden, ValidationError } from '../errors.js';
import { ErrorRef, NoQuery, Success } from '../http/schemas.js';
import { isExistingDateTime } from '../http/validation.js';
import { hijackForSse, SSE_CONTENT_TYPE } from '../realtime/sse.js';
import { TooManyStreams, type VisitorStreamLimits, type VisitorStreams } from './visitor-stream.js';
import {
  IdentifyBody,
  MessagesQuery,
  ReceiptsBody,
  SendBody,
  Session,
  SessionBody,
  StreamQuery,
  VisitorMessage,
  WidgetKeyParams,
} from './webchat.schema.js';
import type { RateLimiter } from '../http/rate-limiter.js';
import type { VisitorContext, Widget, WebchatService } from './webchat.service.js';

/** The visitor endpoints' rate limits, and the caps of their streams. */
export interface WebchatLimits extends VisitorStreamLimits {
  /** Requests per rolling minute from one address (IP), on every endpoint. */
  perAddress: number;
  /** Requests per rolling minute of one visitor, on every endpoint but the session start. */
  perVisitor: number;
}

export const DEFAULT_WEBCHAT_LIMITS: WebchatLimits = { perAddress: 600, perVisitor: 120 };

class RateLimited extends AppError {
  constructor(
    limit: number,
    readonly retryAfterSeconds: number,
  ) {
    super(
      'rate_limited',
      `rate limit of ${limit} requests per minute exceeded; retry in ${retryAfterSeconds} s`,
    );
  }
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The widget named by the path's key, once its origin check passed. */
    widget: Widget;
  }
}

const BEARER = /^Bearer (\S{1,1000})$/i;
const errors = (...statuses: number[]) =>
  Object.fromEntries([400, 401, 403, 404, 422, 429, ...statuses].map((s) => [s, ErrorRef]));

/**
 * The widget's own endpoints, `/webchat/v1/{widget_key}/…`, outside /v1 and its API keys. The
 * key in the path names the account, so that even a CORS preflight (which carries no
 * credentials) is answered for that account's allowed origins alone. Every request is counted
 * per address; every request but the session start carries a visitor token and is counted per
 * visitor.
 */
export async function webchatRoutes(
  app: FastifyInstance,
  deps: {
    webchat: WebchatService;
    streams: VisitorStreams;
    rateLimiter: RateLimiter;
    limits?: WebchatLimits;
  },
): Promise<void> {
  const { webchat, streams, rateLimiter } = deps;
  const limits = deps.limits ?? DEFAULT_WEBCHAT_LIMITS;
  const limit = async (key: string, max: number) => {
    const decision = await rateLimiter.hit(key, max);
    if (!decision.allowed) throw new RateLimited(max, decision.retryAfterSeconds);
  };
  /** The visitor of a token, counted against its own limit. */
  const authenticate = async (widget: Widget, token: string | undefined) => {
    const ctx: VisitorContext = await webchat.authenticate(widget, token);
    await limit(`webchat:visitor:${widget.accountId}:${ctx.visitor.id}`, limits.perVisitor);
    return ctx;
  };
  app.decorateRequest('widget', null as unknown as Widget);
  app.addHook('onRoute', (route) => {
    route.schema ??= {};
    route.schema.querystring ??= NoQuery;
  });
  app.addHook('onRequest', async (request, reply) => {
    // Until the widget's origins are known, any page may read the answer: the address's 429 and
    // an unknown key's 404 must reach the widget (which stops on a 404), and no credentials
    // ride on these requests.
    reply.header('Access-Control-Allow-Origin', '*');
    await limit(`webchat:address:${request.ip}`, limits.perAddress);
    const key = (request.params as { widget_key?: unknown }).widget_key;
    if (typeof key !== 'string') return; // unknown route: the 404 handler answers
    const widget = await webchat.widget(key);
    const origin = request.headers.origin;
    if (!origin || !widget.settings.allowed_origins.includes(origin)) {
      // The refusal stays readable (`*`, no credentials ride here), so that the widget can tell
      // the page's developer what to change instead of retrying a CORS failure forever; a
      // preflight is answered as usual, so that the request it asks about meets this 403.
      if (request.method === 'OPTIONS') return;
      throw new Forbidden(
        `this widget may only be used from its allowed origins${origin ? `; ${origin} is not one` : ''}: add it to allowed_origins of the account's webchat connection (PUT /v1/channels/webchat)`,
      );
    }
    reply.header('Access-Control-Allow-Origin', origin);
    reply.header('Vary', 'Origin');
    request.widget = widget;
  });
  // A 429 tells when to come back, on these routes as on /v1.
  app.addHook('onError', async (_request, reply, error) => {
    if (error instanceof RateLimited || error instanceof TooManyStreams)
      reply.header('Retry-After', error.retryAfterSeconds);
  });

  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  const tags = ['Webchat visitors'];
  const common = { tags, params: WidgetKeyParams, security: [] };
  const visitor = (request: FastifyRequest) => {
    const match = BEARER.exec(request.headers.authorization ?? '');
    return authenticate(request.widget, match?.[1]);
  };

  r.options('/:widget_key/:endpoint', {
    // A preflight carries the query of the request it asks about.
    schema: { hide: true, querystring: Type.Object({}, { additionalProperties: true }) },
    handler: async (_req, reply: FastifyReply) =>
      reply
        .header('Access-Control-Allow-Methods', 'GET, POST')
        .header('Access-Control-Allow-Headers', 'Authorization, Content-Type')
        .header('Access-Control-Max-Age', '600')
        .code(204)
        .send(),
  });

  r.post('/:widget_key/session', {
    schema: {
      ...common,
      operationId: 'startWebchatSession',
      summary: 'Start a visitor session, or resume one with the token this browser kept',
      body: SessionBody,
      response: { 200: Session, ...errors() },
    },
    handler: (req) => webchat.startSession(req.widget, req.body.token),
  });

  r.post('/:widget_key/identify', {
    schema: {
      ...common,
      operationId: 'identifyWebchatVisitor',
      summary: "Identify the visitor with the site's HMAC of its identifier",
      body: IdentifyBody,
      response: { 200: Session, ...errors() },
    },
    handler: async (req) => webchat.identify(await visitor(req), req.body),
  });

  r.get('/:widget_key/messages', {
    schema: {
      ...common,
      operationId: 'listWebchatMessages',
      summary: "The visitor's conversation, oldest first (never internal notes)",
      querystring: MessagesQuery,
      response: { 200: Type.Object({ data: Type.Array(VisitorMessage) }), ...errors() },
    },
    handler: async (req) => ({
      data: await webchat.messages(
        await visitor(req),
        req.query.since ? new Date(req.query.since) : null,
      ),
    }),
  });

  r.post('/:widget_key/messages', {
    schema: {
      ...common,
      operationId: 'sendWebchatMessage',
      summary: 'The visitor writes (the same client_id again returns the first)',
      body: SendBody,
      response: { 201: VisitorMessage, ...errors() },
    },
    handler: async (req, reply) => {
      const message = await webchat.send(await visitor(req), req.body);
      return reply.code(201).send(message);
    },
  });

  r.post('/:widget_key/receipts', {
    schema: {
      ...common,
      operationId: 'webchatReceipts',
      summary: "The widget has the team's messages (delivered) or the visitor saw them (read)",
      body: ReceiptsBody,
      response: { 200: Success, ...errors() },
    },
    handler: async (req) =>
      webchat.receipts(await visitor(req), req.body.status, req.body.message_ids),
  });

  r.get('/:widget_key/stream', {
    schema: {
      ...common,
      operationId: 'webchatStream',
      summary: "Server-Sent Events: the conversation's new messages, live",
      description:
        'EventSource cannot send headers, so the visitor token is the `token` query parameter (kept out of the logs). Each `message` event carries a message; its `id` is the creation time, and a reconnection with `Last-Event-ID` resumes from it. `ping` every 20 s; `end` `{ reason }` (`gone`, `forbidden`, `identify`, `replaced`) before the service closes a stream the widget must not simply reconnect. At most 5 streams per visitor (a sixth ends the oldest, `replaced`), 50 per client address (beyond, 429 with Retry-After) and 5,000 per account on one server (beyond, 503 with Retry-After, as when the server holds its most); a stream ends after an hour without `end`, and EventSource reconnects. A `Last-Event-ID` that is not an existing date-time is a 422.',
      querystring: StreamQuery,
      response: {
        200: Type.String({
          description:
            '`text/event-stream`: `ready`, then `message` events, `ping` events, and perhaps a last `end` event.',
        }),
        ...errors(503),
      },
    },
    handler: async (req, reply) => {
      const ctx = await authenticate(req.widget, req.query.token);
      webchat.requireIdentity(ctx);
      const resume = req.headers['last-event-id'];
      const since =
        typeof resume === 'string'
          ? parseSince('Last-Event-ID', resume)
          : parseSince('since', req.query.since);
      const owner = { accountId: req.widget.accountId, visitorId: ctx.visitor.id, address: req.ip };
      streams.admit(owner);
      // HEAD (which Fastify routes here too) answers what a GET would, but opens nothing: no
      // header is sent before a body is, so its stream would hang, holding its place.
      if (req.method === 'HEAD')
        return (reply as FastifyReply)
          .type(SSE_CONTENT_TYPE)
          .header('Cache-Control', 'no-store')
          .send();
      const res = hijackForSse(reply, 'no-store');
      // The onRequest hook let only an allowed origin through.
      streams.openStream(res, ctx, since, req.headers.origin!, req.ip);
    },
  });
}

/**
 * Where a stream starts: a given time (`since`, or the Last-Event-ID header EventSource sends,
 * which the query's schema does not check), else a moment ago.
 */
function parseSince(field: string, value: string | undefined): Date {
  if (value === undefined) return new Date(Date.now() - 5_000);
  if (!isExistingDateTime(value)) throw new ValidationError(field, 'must be a date-time');
  return new Date(value);
}
