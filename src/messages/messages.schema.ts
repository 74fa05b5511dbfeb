import { Type, type Static, type TSchema } from 'typebox';
import { CHANNELS } from '../channels/channel.js';
import { AuthorSchema, Nullable, Timestamp } from '../http/schemas.js';

export const ChannelSchema = Type.Enum(CHANNELS, {
  description: 'whatsapp, instagram, messenger or webchat.',
});
const MessageTypeSchema = Type.Union([
  Type.Literal('text'),
  Type.Literal('template'),
  Type.Literal('image'),
  Type.Literal('document'),
]);
const HttpsUrl = Type.String({
  maxLength: 2048,
  pattern: '^https://',
  description: 'An https:// URL.',
});

export const Message = Type.Object(
  {
    id: Type.String({ description: 'Prefixed `msg_`.' }),
    conversation_id: Type.String(),
    direction: Type.Union([Type.Literal('inbound'), Type.Literal('outbound')]),
    type: MessageTypeSchema,
    content: Nullable(Type.String()),
    media_url: Nullable(
      Type.String({
        description:
          'The file of an `image` or `document`: the `media_url` it was sent with, or `{PUBLIC_URL}/v1/media/{id}` for a file the service keeps (received, or uploaded and sent by `media_id`), read with an API key or a session.',
      }),
    ),
    status: Type.Union(
      [
        Type.Literal('queued'),
        Type.Literal('sent'),
        Type.Literal('delivered'),
        Type.Literal('read'),
        Type.Literal('failed'),
      ],
      {
        description:
          'Delivery status of an outbound message (`queued` until the provider has answered); inbound messages are `delivered`.',
      },
    ),
    failure_reason: Nullable(
      Type.String({ description: 'Why delivery failed, when status is `failed`.' }),
    ),
    author: AuthorSchema,
    created_at: Timestamp,
  },
  { $id: 'Message' },
);
export type Message = Static<typeof Message>;

export const SendMessageBody = Type.Object(
  {
    contact_id: Type.String({ minLength: 1 }),
    channel: ChannelSchema,
    type: MessageTypeSchema,
    content: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 4096,
        description: 'Text; required for `text`, an optional caption for `image` and `document`.',
      }),
    ),
    template_name: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 512,
        description: 'Required for `template`: an approved template.',
      }),
    ),
    template_params: Type.Optional(
      Type.Array(Type.String({ maxLength: 1024 }), {
        maxItems: 50,
        description: 'Values for {{1}}…{{n}}, in order.',
      }),
    ),
    media_url: Type.Optional({
      ...HttpsUrl,
      description: 'For `image` and `document`, this or `media_id`: a file fetched at send time.',
    }),
    media_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 64,
        description:
          'For `image` and `document`, this or `media_url`: a file uploaded with `POST /v1/media` (an image for `image`). The message keeps its `/v1/media/{id}` URL as `media_url`.',
      }),
    ),
  },
  { additionalProperties: false },
);
export type SendMessageBody = Static<typeof SendMessageBody>;

/**
 * The send body as the document describes it: one shape per `type`. Requests are still checked
 * against SendMessageBody (then by the service), which accepts no more than these together.
 */
const sendVariant = (
  type: 'text' | 'template' | 'image' | 'document',
  id: string,
  fields: Record<string, TSchema>,
) =>
  Type.Object(
    {
      contact_id: Type.String({ minLength: 1 }),
      channel: ChannelSchema,
      type: Type.Literal(type),
      ...fields,
    },
    { additionalProperties: false, $id: id },
  );
const mediaFields = {
  content: Type.Optional(
    Type.String({ minLength: 1, maxLength: 4096, description: 'An optional caption.' }),
  ),
  media_url: Type.Optional({
    ...HttpsUrl,
    description: 'This or `media_id`: a file fetched at send time.',
  }),
  media_id: Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 64,
      description:
        'This or `media_url`: a file uploaded with `POST /v1/media`. The message keeps its `/v1/media/{id}` URL as `media_url`.',
    }),
  ),
};
export const SendMessageUnion = Type.Union(
  [
    sendVariant('text', 'SendTextMessage', {
      content: Type.String({ minLength: 1, maxLength: 4096 }),
    }),
    sendVariant('template', 'SendTemplateMessage', {
      template_name: Type.String({
        minLength: 1,
        maxLength: 512,
        description: 'An approved template.',
      }),
      template_params: Type.Optional(
        Type.Array(Type.String({ maxLength: 1024 }), {
          maxItems: 50,
          description: 'Values for {{1}}…{{n}}, in order.',
        }),
      ),
    }),
    sendVariant('image', 'SendImageMessage', mediaFields),
    sendVariant('document', 'SendDocumentMessage', mediaFields),
  ],
  {
    discriminator: {
      propertyName: 'type',
      mapping: {
        text: '#/components/schemas/SendTextMessage',
        template: '#/components/schemas/SendTemplateMessage',
        image: '#/components/schemas/SendImageMessage',
        document: '#/components/schemas/SendDocumentMessage',
      },
    },
  },
);

export const SandboxInboundBody = Type.Object(
  {
    channel: ChannelSchema,
    phone: Type.Optional(
      Type.String({
        maxLength: 32,
        description: 'The sender; an unknown phone creates the contact. Give this or contact_id.',
      }),
    ),
    contact_id: Type.Optional(Type.String({ minLength: 1 })),
    type: Type.Union([Type.Literal('text'), Type.Literal('image'), Type.Literal('document')]),
    content: Type.Optional(Type.String({ minLength: 1, maxLength: 4096 })),
    media_url: Type.Optional(HttpsUrl),
  },
  { additionalProperties: false },
);
export type SandboxInboundBody = Static<typeof SandboxInboundBody>;

export const SandboxStatusBody = Type.Object(
  {
    status: Type.Union([Type.Literal('delivered'), Type.Literal('read'), Type.Literal('failed')]),
    reason: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { additionalProperties: false },
);
export type SandboxStatusBody = Static<typeof SandboxStatusBody>;
