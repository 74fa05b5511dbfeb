import { randomBytes } from 'node:crypto';
import { postWebhook } from './server.js';

export { hubSignature } from './server.js';

/**
 * WhatsApp Cloud API webhook payloads, shaped after the examples in Meta's webhook reference
 * (messages, statuses, message_template_status_update), and a client that posts them signed
 * the way Meta signs them.
 */

export interface WhatsAppBusiness {
  phoneNumberId: string;
  businessAccountId: string;
  /** As Meta shows it in `metadata.display_phone_number` (digits, no `+`). */
  displayPhoneNumber?: string;
}

type Json = Record<string, unknown>;

/** A message id like Meta's: `wamid.` and an opaque base64 string. */
export function wamid(): string {
  return `wamid.${randomBytes(30).toString('base64')}`;
}

/**
 * Where webhook timestamps come from: the app's test clock, once a test set it with
 * `stampWebhooksWith` (the service opens the 24-hour window at Meta's timestamp, so a test that
 * moves its clock must stamp what Meta would), else the real clock.
 */
let stampClock: { now(): Date } = { now: () => new Date() };

/** Webhooks built from now on carry this clock's time (see above). */
export function stampWebhooksWith(clock: { now(): Date }): void {
  stampClock = clock;
}

/** Now, in milliseconds, as webhook timestamps carry it. */
export function webhookNow(): number {
  return stampClock.now().getTime();
}

function timestamp(): string {
  return String(Math.floor(webhookNow() / 1000));
}

/** `value.contacts[]`: who wrote, with the name on their profile. */
export function waContact(waId: string, name: string): Json {
  return { profile: { name }, wa_id: waId };
}

/** One `messages`-field webhook: `{ object, entry: [{ id, changes: [{ value, field }] }] }`. */
export function whatsappWebhook(
  business: WhatsAppBusiness,
  value: { contacts?: Json[]; messages?: Json[]; statuses?: Json[] },
): Json {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: business.businessAccountId,
        changes: [
          {
            value: {
              messaging_product: 'whatsapp',
              metadata: {
                display_phone_number: business.displayPhoneNumber ?? '15550783881',
                phone_number_id: business.phoneNumberId,
              },
              ...value,
            },
            field: 'messages',
          },
        ],
      },
    ],
  };
}

/** An inbound message from `from` (wa_id digits) as one webhook, with the sender's profile. */
export function inboundWebhook(
  business: WhatsAppBusiness,
  from: { waId: string; name: string },
  ...messages: Json[]
): Json {
  return whatsappWebhook(business, {
    contacts: [waContact(from.waId, from.name)],
    messages,
  });
}

function message(from: string, type: string, body: Json, id = wamid()): Json {
  return { from, id, timestamp: timestamp(), type, ...body };
}

const mediaObject = (media: {
  id: string;
  mimeType: string;
  caption?: string;
  filename?: string;
  voice?: boolean;
}) => ({
  ...(media.caption === undefined ? {} : { caption: media.caption }),
  ...(media.filename === undefined ? {} : { filename: media.filename }),
  mime_type: media.mimeType,
  sha256: randomBytes(32).toString('base64'),
  id: media.id,
  ...(media.voice === undefined ? {} : { voice: media.voice }),
});

/** `messages[]` entries of every kind Meta documents, each with a fresh `wamid` unless given. */
export const waMessage = {
  text: (from: string, body: string, id?: string) => message(from, 'text', { text: { body } }, id),
  image: (from: string, media: { id: string; mimeType?: string; caption?: string }, id?: string) =>
    message(from, 'image', { image: mediaObject({ mimeType: 'image/jpeg', ...media }) }, id),
  document: (
    from: string,
    media: { id: string; mimeType?: string; caption?: string; filename?: string },
    id?: string,
  ) =>
    message(
      from,
      'document',
      { document: mediaObject({ mimeType: 'application/pdf', ...media }) },
      id,
    ),
  audio: (from: string, media: { id: string; mimeType?: string }, id?: string) =>
    message(
      from,
      'audio',
      { audio: mediaObject({ mimeType: 'audio/ogg; codecs=opus', voice: true, ...media }) },
      id,
    ),
  video: (from: string, media: { id: string; mimeType?: string; caption?: string }, id?: string) =>
    message(from, 'video', { video: mediaObject({ mimeType: 'video/mp4', ...media }) }, id),
  sticker: (from: string, media: { id: string }, id?: string) =>
    message(
      from,
      'sticker',
      { sticker: { ...mediaObject({ mimeType: 'image/webp', ...media }), animated: false } },
      id,
    ),
  location: (
    from: string,
    place: { latitude: number; longitude: number; name?: string; address?: string },
    id?: string,
  ) => message(from, 'location', { location: place }, id),
  contacts: (
    from: string,
    card: { formattedName: string; firstName?: string; phone?: string; email?: string },
    id?: string,
  ) =>
    message(
      from,
      'contacts',
      {
        contacts: [
          {
            name: {
              formatted_name: card.formattedName,
              ...(card.firstName === undefined ? {} : { first_name: card.firstName }),
            },
            phones:
              card.phone === undefined
                ? []
                : [{ phone: card.phone, wa_id: card.phone.replace(/\D/g, ''), type: 'CELL' }],
            emails: card.email === undefined ? [] : [{ email: card.email, type: 'WORK' }],
          },
        ],
      },
      id,
    ),
  /** A quick-reply button of a template message. */
  button: (from: string, text: string, payload: string, context = wamid(), id?: string) =>
    message(
      from,
      'button',
      { context: { from: '15550783881', id: context }, button: { text, payload } },
      id,
    ),
  buttonReply: (from: string, reply: { id: string; title: string }, id?: string) =>
    message(
      from,
      'interactive',
      {
        context: { from: '15550783881', id: wamid() },
        interactive: { type: 'button_reply', button_reply: reply },
      },
      id,
    ),
  listReply: (
    from: string,
    reply: { id: string; title: string; description?: string },
    id?: string,
  ) =>
    message(
      from,
      'interactive',
      {
        context: { from: '15550783881', id: wamid() },
        interactive: { type: 'list_reply', list_reply: reply },
      },
      id,
    ),
  /** An empty `emoji` is a reaction taken back. */
  reaction: (from: string, emoji: string, reactedTo = wamid(), id?: string) =>
    message(from, 'reaction', { reaction: { message_id: reactedTo, emoji } }, id),
  /** What Meta sends for a message type the Cloud API does not support (type `unsupported`). */
  unsupported: (from: string, id?: string) =>
    message(
      from,
      'unsupported',
      {
        errors: [
          {
            code: 131051,
            title: 'Message type unknown',
            message: 'Message type unknown',
            error_data: { details: 'Message type is currently not supported.' },
          },
        ],
      },
      id,
    ),
};

/** `statuses[]` entries on an outbound message (`id` is its provider message id). */
export const waStatus = {
  sent: (id: string, recipient: string) => ({
    id,
    status: 'sent',
    timestamp: timestamp(),
    recipient_id: recipient,
    conversation: {
      id: randomBytes(16).toString('hex'),
      expiration_timestamp: String(Math.floor(Date.now() / 1000) + 86_400),
      origin: { type: 'service' },
    },
    pricing: { billable: true, pricing_model: 'PMP', category: 'service' },
  }),
  delivered: (id: string, recipient: string) => ({
    id,
    status: 'delivered',
    timestamp: timestamp(),
    recipient_id: recipient,
    pricing: { billable: true, pricing_model: 'PMP', category: 'service' },
  }),
  read: (id: string, recipient: string) => ({
    id,
    status: 'read',
    timestamp: timestamp(),
    recipient_id: recipient,
  }),
  failed: (
    id: string,
    recipient: string,
    error: { code: number; title: string; details?: string } = {
      code: 131026,
      title: 'Message undeliverable',
      details: 'Message Undeliverable.',
    },
  ) => ({
    id,
    status: 'failed',
    timestamp: timestamp(),
    recipient_id: recipient,
    errors: [
      {
        code: error.code,
        title: error.title,
        message: error.title,
        error_data: { details: error.details ?? error.title },
        href: 'https://developers.facebook.com/docs/whatsapp/cloud-api/support/error-codes/',
      },
    ],
  }),
};

/** A statuses-only webhook. */
export function statusWebhook(business: WhatsAppBusiness, ...statuses: Json[]): Json {
  return whatsappWebhook(business, { statuses });
}

/** `field: "message_template_status_update"`: Meta's review of a template. */
export function templateStatusWebhook(
  businessAccountId: string,
  update: {
    templateId: string | number;
    name: string;
    language?: string;
    /** `APPROVED`, `REJECTED`, `PENDING`, `PAUSED`, `DISABLED`, `FLAGGED`… */
    event: string;
    reason?: string;
  },
): Json {
  return {
    object: 'whatsapp_business_account',
    entry: [
      {
        id: businessAccountId,
        time: Math.floor(Date.now() / 1000),
        changes: [
          {
            value: {
              event: update.event,
              message_template_id: update.templateId,
              message_template_name: update.name,
              message_template_language: update.language ?? 'en_US',
              reason: update.reason ?? 'NONE',
            },
            field: 'message_template_status_update',
          },
        ],
      },
    ],
  };
}

/**
 * POSTs a webhook as Meta does: JSON bytes signed with the app secret in X-Hub-Signature-256.
 * `signature` replaces the header (`null` leaves it out) to test refusals.
 */
export async function postSignedWebhook(
  url: string,
  payload: Json | string | Buffer,
  appSecret: string,
  opts: { signature?: string | null } = {},
): Promise<{ status: number; body: string }> {
  const raw = Buffer.isBuffer(payload)
    ? payload
    : Buffer.from(typeof payload === 'string' ? payload : JSON.stringify(payload), 'utf8');
  return postWebhook(url, undefined, { appSecret, signature: opts.signature, raw });
}
