// What the route schemas cannot say themselves, added to the OpenAPI document in one place: the
// answers every route may give (malformed requests, the idempotency refusals, unknown query
// parameters, an outage), the headers, HEAD of the event stream, named schemas referenced instead
// of copied, and the events that webhooks and the stream carry.
import { EVENT_TYPES, WEBHOOK_TEST_EVENT, type EventType } from './events/event-types.js';

/* eslint-disable @typescript-eslint/no-explicit-any, @typescript-eslint/no-unsafe-member-access, @typescript-eslint/no-unsafe-assignment, @typescript-eslint/no-unsafe-argument, @typescript-eslint/no-unsafe-return, @typescript-eslint/no-unsafe-call -- the document is plain JSON */
type Json = any;

const ERROR = { $ref: '#/components/schemas/Error' };
const METHODS = ['get', 'put', 'post', 'delete', 'patch', 'head', 'options'] as const;

/** The named schema each event's `data` is. */
const EVENT_DATA: Record<EventType, string> = {
  'contact.created': 'Contact',
  'contact.updated': 'Contact',
  'note.created': 'Note',
  'message.received': 'Message',
  'message.created': 'Message',
  'message.delivered': 'Message',
  'message.read': 'Message',
  'message.failed': 'Message',
  'conversation.assigned': 'Conversation',
  'conversation.resolved': 'Conversation',
  'conversation.reopened': 'Conversation',
  'conversation.unassigned': 'Conversation',
  'conversation.read': 'Conversation',
  'broadcast.completed': 'Broadcast',
  'template.updated': 'Template',
  'broadcast.updated': 'Broadcast',
};

const HEADERS: Record<string, Json> = {
  RequestId: {
    description:
      "The request's id: the client's `X-Request-Id` when it is 1–128 of `A-Za-z0-9._:-`, else a new one. Quote it when reporting a problem.",
    required: true,
    schema: { type: 'string' },
  },
  RateLimitLimit: {
    description: 'Requests allowed per minute to this API key (or session).',
    schema: { type: 'integer' },
  },
  RateLimitRemaining: {
    description: 'Requests left in the current window.',
    schema: { type: 'integer' },
  },
  RateLimitReset: {
    description: 'Seconds until the oldest counted request leaves the window.',
    schema: { type: 'integer' },
  },
  RetryAfter: {
    description: 'Seconds to wait before trying again.',
    required: true,
    schema: { type: 'integer', minimum: 1 },
  },
  RetryAfterWhenKnown: {
    description:
      'Seconds to wait before trying again: sent when the service knows (the database, the streams), not when a provider is down.',
    schema: { type: 'integer', minimum: 1 },
  },
  IdempotentReplayed: {
    description:
      '`true` when this is the stored answer of an earlier request with the same `Idempotency-Key` and body.',
    schema: { type: 'string', enum: ['true'] },
  },
};

const header = (name: string) => ({ $ref: `#/components/headers/${name}` });

function errorResponse(description: string): Json {
  return { description, content: { 'application/json': { schema: ERROR } } };
}

/** The operation is answered only after an API key or a session is checked. */
function authenticated(doc: Json, op: Json): boolean {
  const security = op.security ?? doc.security ?? [];
  return security.some((s: Json) => Object.keys(s).includes('apiKey'));
}

/** Adds a response unless the route documents that status itself. */
function ensure(op: Json, status: number, response: Json): void {
  op.responses ??= {};
  op.responses[status] ??= response;
}

function completeOperation(doc: Json, path: string, method: string, op: Json): void {
  const v1 = path.startsWith('/v1/');
  const withKey = v1 && authenticated(doc, op);
  const hasParams = /\{[^}]+\}/.test(path);

  ensure(
    op,
    400,
    errorResponse(
      '`invalid_request`: a body that is not valid JSON, a Content-Type other than `application/json`, a URL that is not valid percent-encoded UTF-8.',
    ),
  );
  if (op.requestBody) ensure(op, 413, errorResponse('`payload_too_large`: a body over 1 MiB.'));
  if (op.requestBody)
    ensure(
      op,
      408,
      errorResponse(
        '`invalid_request`: the body stopped arriving (no byte for 10 s, or under 1 KiB/s after the first 10 s); the connection is closed.',
      ),
    );
  if (hasParams) ensure(op, 404, errorResponse('`not_found`.'));
  if (v1) ensure(op, 422, errorResponse('`validation_error`: an unknown query parameter.'));
  if (withKey && method === 'post') {
    op.parameters ??= [];
    op.parameters.push({ $ref: '#/components/parameters/IdempotencyKey' });
    ensure(op, 409, errorResponse('`idempotency_error`: a request with this key is under way.'));
    ensure(
      op,
      422,
      errorResponse(
        '`idempotency_error`: the key was used with another body (or `validation_error`).',
      ),
    );
  }
  ensure(op, 500, errorResponse('`internal_error`: a bug; quote `request_id`.'));
  ensure(
    op,
    503,
    errorResponse('`unavailable`: the database is unreachable; nothing was written.'),
  );

  for (const [status, response] of Object.entries<Json>(op.responses)) {
    if (response.$ref) continue;
    response.headers ??= {};
    response.headers['X-Request-Id'] ??= header('RequestId');
    if (withKey) {
      response.headers['X-RateLimit-Limit'] ??= header('RateLimitLimit');
      response.headers['X-RateLimit-Remaining'] ??= header('RateLimitRemaining');
      response.headers['X-RateLimit-Reset'] ??= header('RateLimitReset');
    }
    if (status === '429') response.headers['Retry-After'] ??= header('RetryAfter');
    if (status === '503') response.headers['Retry-After'] ??= header('RetryAfterWhenKnown');
    if (withKey && method === 'post' && status.startsWith('2'))
      response.headers['Idempotent-Replayed'] ??= header('IdempotentReplayed');
  }
}

/** Order-independent JSON of a schema, without the words around it. */
function shape(schema: Json): string {
  if (Array.isArray(schema)) return `[${schema.map(shape).join(',')}]`;
  if (schema !== null && typeof schema === 'object') {
    return `{${Object.keys(schema)
      .filter((k) => k !== '$id' && k !== 'title')
      .sort()
      .map((k) => `${JSON.stringify(k)}:${shape(schema[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(schema);
}

/** Replaces inline copies of a named schema by a `$ref` to it, everywhere under `node`. */
function referenceNamed(node: Json, named: Map<string, string>): Json {
  if (Array.isArray(node)) return node.map((n) => referenceNamed(n, named));
  if (node === null || typeof node !== 'object') return node;
  // A union told apart by a property is one of its shapes exactly.
  if (node.discriminator && node.anyOf && !node.oneOf) {
    const { anyOf, ...rest } = node;
    return referenceNamed({ ...rest, oneOf: anyOf }, named);
  }
  if (node.type === 'object' || node.anyOf || node.oneOf) {
    const name = named.get(shape(node));
    if (name) return { $ref: `#/components/schemas/${name}` };
  }
  const out: Json = {};
  for (const [k, v] of Object.entries(node)) out[k] = referenceNamed(v, named);
  return out;
}

function envelope(event: string, data: Json, description: string): Json {
  return {
    type: 'object',
    required: ['id', 'event', 'timestamp', 'data'],
    properties: {
      id: {
        type: 'string',
        description: 'The event id, prefixed `evt_`; the same on every retry.',
      },
      event: { const: event },
      timestamp: { type: 'string', format: 'date-time', description: 'When it happened.' },
      data,
    },
    description,
  };
}

function webhookOperation(event: string, schema: Json, summary: string): Json {
  const signed = (name: string, description: string) => ({
    name,
    in: 'header',
    required: true,
    description,
    schema: { type: 'string' },
  });
  return {
    post: {
      operationId: `on_${event.replace(/\./g, '_')}`,
      summary,
      tags: ['Webhooks'],
      security: [],
      parameters: [
        signed('webhook-id', 'The event id (Standard Webhooks).'),
        signed('webhook-timestamp', 'Unix seconds of this attempt.'),
        signed(
          'webhook-signature',
          '`v1,` and the base64 HMAC-SHA256, under the webhook secret, of `{webhook-id}.{webhook-timestamp}.{body}`.',
        ),
        signed('X-Service-Signature', 'Hex HMAC-SHA256 of the body under the webhook secret.'),
        signed('X-Service-Event-Id', 'The event id.'),
        signed('X-Service-Delivery-Attempt', 'The attempt, from 1.'),
      ],
      requestBody: { required: true, content: { 'application/json': { schema } } },
      responses: {
        '2XX': { description: 'Received; any other answer (or none in 10 s) is retried.' },
        '410': { description: 'Gone: the webhook is disabled.' },
      },
    },
  };
}

function addWebhooks(doc: Json): void {
  const schemas = doc.components.schemas;
  const ref = (name: string) => ({ $ref: `#/components/schemas/${name}` });
  const webhooks: Json = {};
  for (const event of EVENT_TYPES) {
    const name = `Event_${event.replace(/\./g, '_')}`;
    schemas[name] = envelope(event, ref(EVENT_DATA[event]), `The \`${event}\` event.`);
    webhooks[event] = webhookOperation(event, ref(name), `\`${event}\`: ${EVENT_DATA[event]}`);
  }
  const testName = 'Event_webhook_test';
  schemas[testName] = envelope(
    WEBHOOK_TEST_EVENT,
    {
      type: 'object',
      required: ['webhook_id', 'message'],
      properties: { webhook_id: { type: 'string' }, message: { type: 'string' } },
    },
    'Sent to one webhook by `POST /v1/webhooks/{id}/test`; never subscribed to.',
  );
  webhooks[WEBHOOK_TEST_EVENT] = webhookOperation(WEBHOOK_TEST_EVENT, ref(testName), 'A test');
  // Live streams only: never sent to webhooks, never stored.
  schemas.Event_presence_updated = {
    ...envelope(
      'presence.updated',
      {
        type: 'object',
        required: ['conversation_id', 'user', 'state', 'expires_at'],
        properties: {
          conversation_id: { type: 'string' },
          user: {
            type: 'object',
            required: ['id', 'name'],
            properties: { id: { type: 'string' }, name: { type: 'string' } },
          },
          state: { enum: ['viewing', 'typing'] },
          expires_at: { type: 'string', format: 'date-time' },
        },
      },
      'On `GET /v1/events/stream` only: who is viewing or typing in a conversation. Has no `id`.',
    ),
    required: ['event', 'timestamp', 'data'],
  };
  schemas.Event = {
    oneOf: [...EVENT_TYPES.map((e) => ref(`Event_${e.replace(/\./g, '_')}`))],
    description:
      'The envelope of every event, as webhooks receive it and `GET /v1/events/stream` sends it.',
  };
  doc.webhooks = webhooks;
}

/** HEAD of the event stream: what a GET would answer, with nothing opened. */
function addStreamHead(doc: Json): void {
  const item = doc.paths['/v1/events/stream'];
  if (!item?.get || item.head) return;
  const get = item.get;
  const responses: Json = {};
  for (const [status, r] of Object.entries<Json>(get.responses)) {
    responses[status] = { ...r };
    if (status.startsWith('2')) {
      responses[status] = {
        description: 'The stream would open; nothing is sent.',
        headers: r.headers,
      };
    }
  }
  // Each `data:` line of the stream is one event's JSON.
  const ok = get.responses['200']?.content?.['text/event-stream'];
  if (ok)
    ok.schema = {
      type: 'string',
      contentMediaType: 'application/json',
      contentSchema: {
        oneOf: [
          { $ref: '#/components/schemas/Event' },
          { $ref: '#/components/schemas/Event_presence_updated' },
        ],
      },
    };
  item.head = {
    ...get,
    operationId: 'checkEventStream',
    summary: 'Check that the event stream would open (same checks, no stream)',
    description: 'Answers the status and headers a GET would, without opening a stream.',
    responses,
  };
}

/** Completes the document @fastify/swagger makes of the route schemas. */
export function completeOpenApi<T extends object>(document: T): T {
  const doc: Json = document;
  doc.components ??= {};
  doc.components.schemas ??= {};
  doc.components.headers = { ...(doc.components.headers ?? {}), ...HEADERS };
  doc.components.parameters = {
    ...(doc.components.parameters ?? {}),
    IdempotencyKey: {
      name: 'Idempotency-Key',
      in: 'header',
      required: false,
      description:
        'Makes the POST safe to retry: the first answer (any status but 429 and 5xx) is kept for 24 hours and replayed for the same key and body. 1–255 visible ASCII characters.',
      schema: { type: 'string', minLength: 1, maxLength: 255, pattern: '^[\\x21-\\x7E]+$' },
    },
  };
  const named = new Map<string, string>();
  for (const [name, schema] of Object.entries<Json>(doc.components.schemas))
    named.set(shape(schema), name);
  for (const [path, item] of Object.entries<Json>(doc.paths ?? {})) {
    for (const method of METHODS) {
      const op = item[method];
      if (!op) continue;
      for (const r of Object.values<Json>(op.responses ?? {})) {
        if (r.content) r.content = referenceNamed(r.content, named);
      }
      if (op.requestBody?.content)
        op.requestBody.content = referenceNamed(op.requestBody.content, named);
      completeOperation(doc, path, method, op);
    }
  }
  addStreamHead(doc);
  addWebhooks(doc);
  return doc;
}
