import { Type, type Static } from 'typebox';
import { EVENT_TYPES, WEBHOOK_TEST_EVENT } from '../events/event-types.js';
import { Nullable, PageQuery, Timestamp } from '../http/schemas.js';

const EventList = Type.Array(Type.Enum(EVENT_TYPES), {
  minItems: 1,
  uniqueItems: true,
  description: 'Event types to receive.',
});
const Status = Type.Enum(['active', 'disabled'] as const, {
  description:
    '`disabled` after a 410 Gone, after 5 days in which every delivery failed, or when set so; `PATCH` with `status: active` re-enables it.',
});

export const Webhook = Type.Object(
  {
    id: Type.String({ description: 'Prefixed `wh_`.' }),
    url: Type.String(),
    events: Type.Array(Type.Enum(EVENT_TYPES)),
    status: Status,
    created_at: Timestamp,
  },
  { $id: 'Webhook' },
);
export type Webhook = Static<typeof Webhook>;

export const WebhookWithSecret = Type.Object(
  {
    id: Type.String(),
    url: Type.String(),
    events: Type.Array(Type.Enum(EVENT_TYPES)),
    status: Status,
    secret: Type.String({
      description: 'Signing secret (`whsec_…`); shown only in this response.',
    }),
    created_at: Timestamp,
  },
  { $id: 'WebhookWithSecret' },
);
export type WebhookWithSecret = Static<typeof WebhookWithSecret>;

export const CreateWebhookBody = Type.Object(
  {
    url: Type.String({ maxLength: 2048, description: 'An https:// URL without credentials.' }),
    events: EventList,
  },
  { additionalProperties: false },
);
export type CreateWebhookBody = Static<typeof CreateWebhookBody>;

export const UpdateWebhookBody = Type.Object(
  { events: Type.Optional(EventList), status: Type.Optional(Status) },
  {
    additionalProperties: false,
    description: 'Change the events, or re-enable (`status: active`) a disabled webhook.',
  },
);
export type UpdateWebhookBody = Static<typeof UpdateWebhookBody>;

export const DeliveryAttempt = Type.Object(
  {
    id: Type.String({ description: 'Prefixed `dlv_`.' }),
    event_id: Type.String(),
    event: Type.Enum([...EVENT_TYPES, WEBHOOK_TEST_EVENT]),
    attempt: Type.Integer({ minimum: 1 }),
    status_code: Nullable(Type.Integer()),
    error: Nullable(Type.String()),
    duration_ms: Type.Integer(),
    response_excerpt: Nullable(
      Type.String({
        maxLength: 500,
        description:
          "The start of the receiver's answer (at most 500 characters); null when it sent no body or did not answer.",
      }),
    ),
    next_attempt_at: Nullable(
      Type.String({
        format: 'date-time',
        description:
          'When the retry this failed attempt scheduled is due; null when it succeeded, was given up, or the webhook was disabled.',
      }),
    ),
    created_at: Timestamp,
  },
  { $id: 'DeliveryAttempt' },
);
export type DeliveryAttempt = Static<typeof DeliveryAttempt>;

export const ListDeliveriesQuery = Type.Object({ ...PageQuery }, { additionalProperties: false });
export const DeliveryParams = Type.Object({ id: Type.String(), delivery_id: Type.String() });

export const WebhookTestResult = Type.Object(
  { event_id: Type.String({ description: 'The `webhook.test` event queued for this webhook.' }) },
  { $id: 'WebhookTestResult', examples: [{ event_id: 'evt_01JD2X3Y4Z5A6B7C8D9E0F1G2H' }] },
);
export type WebhookTestResult = Static<typeof WebhookTestResult>;
