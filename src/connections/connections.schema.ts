import { Type, type Static } from 'typebox';
import { CHANNELS } from '../channels/channel.js';
import { Nullable, Timestamp } from '../http/schemas.js';

export const ChannelParams = Type.Object({
  channel: Type.Enum(CHANNELS, { description: 'One of whatsapp, instagram, messenger, webchat.' }),
});

// What each channel's connection keeps in its public settings.
const WhatsAppSettings = Type.Object(
  {
    phone_number_id: Type.String(),
    business_account_id: Type.String(),
    display_phone_number: Nullable(Type.String()),
    verified_name: Nullable(Type.String()),
  },
  { additionalProperties: false, title: 'WhatsApp settings' },
);
const InstagramSettings = Type.Object(
  {
    page_id: Type.String(),
    instagram_account_id: Type.String(),
    page_name: Nullable(Type.String()),
  },
  { additionalProperties: false, title: 'Instagram settings' },
);
const MessengerSettings = Type.Object(
  { page_id: Type.String(), page_name: Nullable(Type.String()) },
  { additionalProperties: false, title: 'Messenger settings' },
);
const WebchatSettings = Type.Object(
  {
    widget_key: Type.String({ description: 'Names the account to the widget; public.' }),
    allowed_origins: Type.Array(Type.String()),
    identity_verification: Type.Enum(['off', 'required'] as const),
    title: Type.String(),
    greeting: Nullable(Type.String()),
    color: Type.String(),
    widget_url: Type.String({ description: 'The script a site embeds.' }),
  },
  { additionalProperties: false, title: 'Webchat settings' },
);
const NoSettings = Type.Object({}, { additionalProperties: false, title: 'Not connected' });

export const Connection = Type.Object(
  {
    id: Nullable(Type.String({ description: 'Prefixed `chn_`; null while not connected.' })),
    channel: Type.Enum(CHANNELS),
    provider: Nullable(
      Type.Enum(['sandbox', 'whatsapp_cloud', 'messenger', 'instagram', 'webchat'] as const, {
        description:
          '`sandbox` for an unconnected channel while the sandbox is enabled; null when it is not.',
      }),
    ),
    status: Type.Enum(['active', 'error', 'not_connected'] as const, {
      description: '`error` after the provider refused our credentials (see `error`).',
    }),
    error: Nullable(
      Type.String({ description: "The provider's last refusal of the credentials." }),
    ),
    settings: Type.Union(
      [WhatsAppSettings, InstagramSettings, MessengerSettings, WebchatSettings, NoSettings],
      {
        description:
          'What was given and what the provider told us (ids, phone number, names), by channel; never a secret. Empty while the channel is not connected.',
      },
    ),
    webhook_url: Nullable(
      Type.String({ description: "Paste into the provider's dashboard as the callback URL." }),
    ),
    verify_token: Nullable(
      Type.String({ description: "Paste into the provider's dashboard as the verify token." }),
    ),
    created_at: Nullable(Timestamp),
    updated_at: Nullable(Timestamp),
    identity_secret: Type.Optional(
      Type.String({
        description:
          'Webchat only, and only in the response of the PUT that first connects webchat or rotates it (`rotate_identity_secret: true`): the key of the HMAC that signs visitor identifiers. Store it on your server; it is never shown again.',
      }),
    ),
  },
  { $id: 'Connection' },
);
export type Connection = Static<typeof Connection>;

// Graph ids are digits; tokens and secrets are opaque but bounded, printable ASCII without
// spaces (a token goes into an Authorization header, which takes nothing else), and never
// echoed back.
const GraphId = (description: string) =>
  Type.String({ minLength: 1, maxLength: 64, pattern: '^[0-9]+$', description });
const Secret = (description: string) =>
  Type.String({
    minLength: 1,
    maxLength: 4096,
    pattern: '^[\\x21-\\x7E]+$',
    description: `${description} Write-only.`,
  });

export const WhatsAppConnectBody = Type.Object(
  {
    provider: Type.Literal('whatsapp_cloud'),
    phone_number_id: GraphId('The phone number id of the WhatsApp Business Account.'),
    business_account_id: GraphId('The WhatsApp Business Account id (templates live there).'),
    access_token: Secret('A system user access token with whatsapp_business_messaging.'),
    app_secret: Secret("The Meta app's secret; signs the webhooks Meta sends."),
  },
  { additionalProperties: false, title: 'WhatsApp Cloud API' },
);

export const MessengerConnectBody = Type.Object(
  {
    provider: Type.Literal('messenger'),
    page_id: GraphId('The Facebook Page id.'),
    page_access_token: Secret('A Page access token with pages_messaging.'),
    app_secret: Secret("The Meta app's secret; signs the webhooks Meta sends."),
  },
  { additionalProperties: false, title: 'Messenger' },
);

export const InstagramConnectBody = Type.Object(
  {
    provider: Type.Literal('instagram'),
    page_id: GraphId('The Facebook Page linked to the Instagram professional account.'),
    instagram_account_id: GraphId('The Instagram professional account id.'),
    page_access_token: Secret('A Page access token with instagram_manage_messages.'),
    app_secret: Secret("The Meta app's secret; signs the webhooks Meta sends."),
  },
  { additionalProperties: false, title: 'Instagram' },
);

export const WebchatConnectBody = Type.Object(
  {
    provider: Type.Literal('webchat'),
    allowed_origins: Type.Array(Type.String({ maxLength: 2048 }), {
      maxItems: 100,
      description:
        'The sites that may embed the widget, as origins: `https://shop.example`, `http://localhost:8080` (scheme, host, optional port; no path).',
    }),
    identity_verification: Type.Enum(['off', 'required'] as const, {
      description:
        '`required`: a visitor can read and write only after `Switchboard.identify` with a valid `identifier_hash`.',
    }),
    title: Type.Optional(
      Type.String({
        maxLength: 200,
        description: 'The header of the chat. Default "Chat with us".',
      }),
    ),
    greeting: Type.Optional(
      Type.String({ maxLength: 1000, description: 'Shown at the top of every conversation.' }),
    ),
    color: Type.Optional(
      Type.String({ maxLength: 32, description: 'The accent colour, `#rrggbb`. Default #2563eb.' }),
    ),
    rotate_identity_secret: Type.Optional(
      Type.Boolean({
        description:
          'Make a new `identity_secret` (returned in this response); the old one stops verifying.',
      }),
    ),
  },
  { additionalProperties: false, title: 'Webchat' },
);

export const ConnectBody = Type.Union(
  [WhatsAppConnectBody, MessengerConnectBody, InstagramConnectBody, WebchatConnectBody],
  {
    description:
      'The provider and its credentials; `provider` must fit the channel (whatsapp: `whatsapp_cloud`, messenger: `messenger`, instagram: `instagram`, webchat: `webchat`).',
  },
);
export type ConnectBody = Static<typeof ConnectBody>;
export type WhatsAppConnectBody = Static<typeof WhatsAppConnectBody>;
export type MessengerConnectBody = Static<typeof MessengerConnectBody>;
export type InstagramConnectBody = Static<typeof InstagramConnectBody>;
export type WebchatConnectBody = Static<typeof WebchatConnectBody>;
