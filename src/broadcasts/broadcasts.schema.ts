import { Type, type Static } from 'typebox';
import { LIFECYCLE_STAGES } from '../contacts/contacts.schema.js';
import { Nullable, PageQuery, Timestamp } from '../http/schemas.js';
import { ChannelSchema } from '../messages/messages.schema.js';

export const BROADCAST_STATUSES = ['draft', 'scheduled', 'sending', 'sent', 'failed'] as const;

const Audience = Type.Object(
  {
    tags: Type.Optional(
      // Checked as a contact's tags are: 1 to 64 characters once trimmed (by the service).
      Type.Array(Type.String({ maxLength: 200 }), {
        minItems: 1,
        maxItems: 50,
        description:
          'Contacts having any of these tags. Trimmed like stored tags, then 1–64 characters each.',
      }),
    ),
    lifecycle_stage: Type.Optional(
      Type.Enum(LIFECYCLE_STAGES, {
        description: 'Contacts in this stage (and, with tags, having one of them).',
      }),
    ),
    all: Type.Optional(
      Type.Boolean({ description: '`true` targets every contact; not combined with the others.' }),
    ),
  },
  { additionalProperties: false },
);

const BroadcastMessage = Type.Object(
  {
    type: Type.Enum(['text', 'template'] as const),
    content: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    template_name: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
    template_params: Type.Optional(Type.Array(Type.String({ maxLength: 1024 }), { maxItems: 50 })),
  },
  { additionalProperties: false },
);

export const Broadcast = Type.Object(
  {
    id: Type.String({ description: 'Prefixed `bc_`.' }),
    name: Type.String(),
    channel: ChannelSchema,
    audience: Audience,
    message: BroadcastMessage,
    status: Type.Enum(BROADCAST_STATUSES),
    stats: Type.Object({
      sent: Type.Integer({ description: 'Accepted by the provider.' }),
      delivered: Type.Integer({ description: 'Reached delivered or read.' }),
      read: Type.Integer(),
      replied: Type.Integer({
        description: 'Contacts who answered after the broadcast message, once each.',
      }),
      failed: Type.Integer({ description: 'Failed before or after acceptance.' }),
    }),
    failure_reason: Nullable(
      Type.String({ description: 'Why the broadcast could not go on, when status is `failed`.' }),
    ),
    scheduled_at: Nullable(Timestamp),
    created_at: Timestamp,
  },
  { $id: 'Broadcast' },
);
export type Broadcast = Static<typeof Broadcast>;

export const CreateBroadcastBody = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 200 }),
    channel: ChannelSchema,
    audience: Audience,
    message: BroadcastMessage,
    scheduled_at: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'ISO 8601 with a zone, at least 5 minutes ahead; omitted sends now.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type CreateBroadcastBody = Static<typeof CreateBroadcastBody>;

export const ListBroadcastsQuery = Type.Object(
  { ...PageQuery, status: Type.Optional(Type.Enum(BROADCAST_STATUSES)) },
  { additionalProperties: false },
);
export type ListBroadcastsQuery = Static<typeof ListBroadcastsQuery>;

export const PreviewBroadcastBody = Type.Object(
  { channel: ChannelSchema, audience: Audience },
  {
    additionalProperties: false,
    examples: [{ channel: 'whatsapp', audience: { tags: ['vip'], lifecycle_stage: 'customer' } }],
  },
);
export type PreviewBroadcastBody = Static<typeof PreviewBroadcastBody>;

export const BroadcastPreview = Type.Object(
  { total: Type.Integer({ minimum: 0, description: 'Contacts the audience matches now.' }) },
  { examples: [{ total: 1280 }] },
);

export const RECIPIENT_STATUSES = ['queued', 'sent', 'delivered', 'read', 'failed'] as const;

export const BroadcastRecipient = Type.Object(
  {
    contact_id: Type.String(),
    message_id: Nullable(
      Type.String({ description: 'Null for a recipient refused before a message was made.' }),
    ),
    status: Type.Enum(RECIPIENT_STATUSES, {
      description: "The message's status (`failed` for a recipient never sent).",
    }),
    failure_reason: Nullable(Type.String()),
    replied: Type.Boolean({ description: 'The contact wrote after the broadcast message.' }),
  },
  {
    $id: 'BroadcastRecipient',
    examples: [
      {
        contact_id: 'ct_01HZX3V6K8Q2',
        message_id: 'msg_01HZX3V9A1B4',
        status: 'failed',
        failure_reason: 'sandbox: recipient unreachable',
        replied: false,
      },
    ],
  },
);
export type BroadcastRecipient = Static<typeof BroadcastRecipient>;

export const ListRecipientsQuery = Type.Object(
  { ...PageQuery, status: Type.Optional(Type.Enum(RECIPIENT_STATUSES)) },
  { additionalProperties: false },
);
export type ListRecipientsQuery = Static<typeof ListRecipientsQuery>;
