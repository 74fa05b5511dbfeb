import type { Channel } from '../../db/schema.js';
import type { Scope } from '../../db/transactor.js';

/**
 * What a provider webhook says happened, in our words: the provider mappers (WhatsApp today)
 * produce these, and nothing past them knows a vendor field name.
 */
export interface ProviderWebhookContent {
  messages: ProviderInboundMessage[];
  statuses: ProviderStatusReport[];
  templates: TemplateStatusReport[];
}

/** One message a contact sent, before its media (if any) has been downloaded. */
export interface ProviderInboundMessage {
  /** The provider's id of the message: it takes effect once per account. */
  providerMessageId: string;
  from: {
    /** E.164 with its `+`. */
    phone: string;
    /** The name the person gave their profile; only used when the contact is created. */
    name: string | null;
  };
  type: 'text' | 'image' | 'document';
  /** The text, a media caption, or the readable text of a kind we have no type for. */
  content: string | null;
  /** The provider's media to download and keep; null for text. */
  media: {
    providerMediaId: string;
    /** What the provider says the file is (its own download may say less). */
    mimeType: string | null;
    filename: string | null;
    /** The provider's own kind (`audio`, `sticker`…), for a readable note if the download fails. */
    kind: string;
  } | null;
}

/** A delivery report on one of our outbound messages. */
export interface ProviderStatusReport {
  providerMessageId: string;
  /** `sent` only confirms what an accepted message already is. */
  status: 'sent' | 'delivered' | 'read' | 'failed';
  /** For `failed`: the provider's code and title, as `(#131026) Message undeliverable`. */
  reason: string | null;
}

/** A provider's review of one of the account's templates (WhatsApp's message_template_status_update). */
export interface TemplateStatusReport {
  /** The provider's template id. */
  providerTemplateId: string;
  name: string | null;
  language: string | null;
  /** The provider's word, as sent: `APPROVED`, `REJECTED`, `PAUSED`, `DISABLED`… */
  event: string;
  /** Why, when the provider says (`NONE` arrives as null). */
  reason: string | null;
}

/** An inbound message as the messages module records it. */
export interface SinkInboundMessage {
  channel: Channel;
  from: { phone: string; name: string | null };
  type: 'text' | 'image' | 'document';
  content: string | null;
  /** `{PUBLIC_URL}/v1/media/{id}` for image and document; null for text. */
  mediaUrl: string | null;
  providerMessageId: string;
}

/**
 * Where inbound provider webhooks land: implemented by the messages module (MessagesService),
 * so that provider messages and statuses take the same path, and emit the same events, as
 * every other inbound message and delivery report.
 */
export interface InboundSink {
  /**
   * Records an inbound message once per (account, provider message id), in one transaction:
   * the contact found by phone or created (with `name`, `contact.created`), the conversation
   * found or created and opened, the 24-hour window opened, `message.received` recorded. A
   * provider id already recorded changes nothing and emits nothing (`duplicate`). Throws an
   * AppError (4xx) for input that can never be recorded (a phone that is not a phone).
   */
  receive(scope: Scope, message: SinkInboundMessage): Promise<'recorded' | 'duplicate'>;
  /**
   * Moves the outbound message with this provider id forward (DESIGN §2: sent → delivered →
   * read, failed from sent or delivered), with its events; `unchanged` when it is already
   * there or further, `unknown` when no message of the account has that provider id (yet).
   */
  applyProviderStatus(
    scope: Scope,
    update: {
      providerMessageId: string;
      status: 'delivered' | 'read' | 'failed';
      reason: string | null;
    },
  ): Promise<'applied' | 'unchanged' | 'unknown'>;
}

/** Told when the provider has reviewed a template (implemented by TemplatesService). */
export interface TemplateStatusListener {
  onTemplateStatus(accountId: string, update: TemplateStatusReport): Promise<void>;
}
