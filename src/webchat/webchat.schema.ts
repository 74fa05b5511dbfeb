import { Type, type Static } from 'typebox';
import { Nullable, Timestamp } from '../http/schemas.js';

export const WidgetKeyParams = Type.Object({
  widget_key: Type.String({ maxLength: 100, description: "The connection's `widget_key`." }),
});

export const VisitorMessage = Type.Object(
  {
    id: Type.String({ description: 'The message id (`msg_…`), as the API shows it.' }),
    client_id: Nullable(
      Type.String({ description: "The visitor's own id for a message this visitor sent." }),
    ),
    author: Type.Enum(['visitor', 'team'] as const),
    type: Type.Enum(['text', 'template', 'image', 'document'] as const),
    content: Nullable(Type.String()),
    media_url: Nullable(Type.String()),
    created_at: Timestamp,
  },
  { $id: 'WebchatMessage' },
);
export type VisitorMessage = Static<typeof VisitorMessage>;

export const WidgetSettings = Type.Object({
  title: Type.String(),
  greeting: Nullable(Type.String()),
  color: Type.String(),
  identity_verification: Type.Enum(['off', 'required'] as const),
});

export const SessionBody = Type.Object(
  {
    token: Type.Optional(
      Type.String({
        maxLength: 1000,
        description: 'A token this browser was given before; a new visitor starts without one.',
      }),
    ),
  },
  { additionalProperties: false },
);

export const Session = Type.Object({
  token: Type.String({ description: 'The visitor token: `Authorization: Bearer <token>`.' }),
  visitor: Type.Object({
    id: Type.String(),
    identified: Type.Boolean({ description: 'Identified with a valid identifier_hash.' }),
  }),
  widget: WidgetSettings,
});
export type Session = Static<typeof Session>;

const ClientId = Type.String({
  minLength: 8,
  maxLength: 64,
  pattern: '^[A-Za-z0-9_-]+$',
  description:
    'Made by the widget for each message (a UUID); sending it again returns the message already recorded.',
});

export const SendBody = Type.Object(
  {
    client_id: ClientId,
    content: Type.String({ minLength: 1, maxLength: 4096 }),
  },
  { additionalProperties: false },
);
export type SendBody = Static<typeof SendBody>;

export const IdentifyBody = Type.Object(
  {
    identifier: Type.String({ minLength: 1, maxLength: 256 }),
    identifier_hash: Type.String({
      minLength: 64,
      maxLength: 64,
      pattern: '^[0-9a-fA-F]{64}$',
      description: 'Hex HMAC-SHA256 of `identifier` keyed with the identity secret.',
    }),
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    email: Type.Optional(Type.String({ minLength: 3, maxLength: 320 })),
  },
  { additionalProperties: false },
);
export type IdentifyBody = Static<typeof IdentifyBody>;

export const ReceiptsBody = Type.Object(
  {
    status: Type.Enum(['delivered', 'read'] as const),
    message_ids: Type.Array(Type.String({ maxLength: 64 }), { minItems: 1, maxItems: 100 }),
  },
  { additionalProperties: false },
);
export type ReceiptsBody = Static<typeof ReceiptsBody>;

export const MessagesQuery = Type.Object(
  {
    since: Type.Optional(
      Type.String({
        format: 'date-time',
        description: 'The first 200 messages created at or after this time (else the latest 200).',
      }),
    ),
  },
  { additionalProperties: false },
);

export const StreamQuery = Type.Object(
  {
    token: Type.String({ maxLength: 1000 }),
    since: Type.Optional(Type.String({ format: 'date-time' })),
  },
  { additionalProperties: false },
);
