import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { Type } from 'typebox';
import { errorResponses } from '../http/schemas.js';
import { SSE_CONTENT_TYPE } from '../realtime/sse.js';
import { STREAM_EVENT_TYPES } from './event-types.js';
import {
  TooManyStreams,
  type EventStreamService,
  type StreamCredential,
} from './event-stream.service.js';
import { RETRY_HINT_MS } from './event-stream.js';

const StreamQuery = Type.Object(
  {
    events: Type.Optional(
      Type.String({
        maxLength: 1000,
        description: `Comma-separated event types to receive (all when absent): ${STREAM_EVENT_TYPES.join(', ')}. An unknown type is a 422. \`presence.updated\` comes only on streams: never stored, never replayed, with no \`id:\` line.`,
      }),
    ),
    last_event_id: Type.Optional(
      Type.String({
        maxLength: 64,
        description:
          'Resume after this event, for clients that cannot set the `Last-Event-ID` header (the header wins when both are given).',
      }),
    ),
  },
  { additionalProperties: false },
);

const StreamHeaders = Type.Object({
  'last-event-id': Type.Optional(
    Type.String({
      maxLength: 64,
      description:
        "Resume after this event (EventSource sends it when it reconnects): exactly the events committed since, in order. The opening's `pos_…` id resumes from where that stream started. An id older than the 7 days of retention resumes from the oldest event kept; an id that is not one of the account's events is a 422.",
    }),
  ),
});

/** `GET /v1/events/stream` (register under /v1). */
export function eventsRoutes(app: FastifyInstance, streams: EventStreamService): void {
  // The stream's credential, checked again while it is open (see EventStreamService).
  const credentialOf = (req: FastifyRequest): StreamCredential | undefined => {
    const p = req.principal;
    if (p?.session) return { kind: 'session', id: p.session.tokenHash };
    if (p?.keyId) return { kind: 'key', id: p.keyId };
    return undefined;
  };
  const r = app.withTypeProvider<TypeBoxTypeProvider>();
  r.get('/events/stream', {
    schema: {
      tags: ['Webhooks'],
      operationId: 'streamEvents',
      summary: "The account's events, live, as Server-Sent Events",
      description:
        'Every event of the account as it is committed, in the webhook envelope (`{ id, event, timestamp, data }`), as an SSE message with the event id as `id` and the event type as `event`. ' +
        `The headers are sent at once; \`retry: ${RETRY_HINT_MS}\` comes first, and a \`: keep-alive\` comment every 15 s while idle. ` +
        'A stream opened without `Last-Event-ID` names where it starts in its first message, an `id:` (`pos_…`) with no data: EventSource keeps it as its last event id without firing an event, so a client dropped before any event came resumes from there and misses nothing. ' +
        'Counted once against the rate limit, when the connection opens. Events come in the order of the transactions that wrote them, each sent once the transactions before it have ended (`timestamp` tells when each happened). ' +
        'At most 500 open streams per account on one API server (429 beyond); a server shutting down ends its streams, and clients reconnect with `Last-Event-ID`.',
      querystring: StreamQuery,
      headers: StreamHeaders,
      response: {
        200: {
          description: 'A stream of `id:`, `event:` and `data:` (one JSON line) messages.',
          content: { 'text/event-stream': { schema: { type: 'string' } } },
        },
        ...errorResponses(422, 503),
      },
    },
    handler: async (req, reply) => {
      const query = {
        types: req.query.events,
        lastEventId: req.headers['last-event-id'] ?? req.query.last_event_id,
      };
      let output;
      try {
        // HEAD (which Fastify routes here too) answers what a GET would, but opens nothing:
        // Fastify drains a HEAD's stream without ever ending it, and it would hold its place.
        if (req.method === 'HEAD') await streams.check(req.scope, query);
        else output = await streams.openStream(req.scope, query, credentialOf(req));
      } catch (err) {
        if (err instanceof TooManyStreams) reply.header('Retry-After', 5);
        throw err;
      }
      reply
        .type(SSE_CONTENT_TYPE)
        .header('Cache-Control', 'no-cache')
        .header('X-Accel-Buffering', 'no');
      if (!output) return (reply as FastifyReply).send();
      // The stream ends with the connection, whatever Fastify does with it (a client gone
      // while the stream was being opened included).
      const stream = output;
      if (reply.raw.destroyed) stream.destroy();
      else reply.raw.on('close', () => stream.destroy());
      // The stream is sent as it is written; the schema above only describes it.
      return (reply as FastifyReply).send(stream);
    },
  });
}
