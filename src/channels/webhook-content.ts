import type { TemplateStatus } from '../db/schema.js';
/**
 * What a provider webhook says happened, in our words: each adapter's webhook reader
 * produces these, and nothing past it knows a vendor field name.
 */
export interface ProviderWebhookContent {
  messages: ProviderInboundMessage[];
  statuses: ProviderStatusReport[];
  templates: TemplateStatusReport[];
  /** Reports on every message up to a point (Messenger's watermarks, Instagram's read by mid). */
  watermarks?: ProviderWatermark[];
}

/**
 * Who sent a message: a phone (WhatsApp), or the person's id on the channel's provider (a PSID
 * on Messenger, an IGSID on Instagram) for channels without phone numbers.
 */
export type ProviderSender =
  | {
      /** E.164 with its `+`. */
      phone: string;
      /** The name the person gave their profile; only used when the contact is created. */
      name: string | null;
    }
  | {
      identity: string;
      /** Looked up from the provider for a new sender; only used when the contact is created. */
      name: string | null;
    };

/** One message a contact sent, before its media (if any) has been downloaded. */
export interface ProviderInboundMessage {
  /** The provider's id of the message: it takes effect once per account. */
  providerMessageId: string;
  from: ProviderSender;
  type: 'text' | 'image' | 'document';
  /** The text, a media caption, or the readable text of a kind we have no type for. */
  content: string | null;
  /**
   * The provider's media to download and keep; null for text. WhatsApp names it by an id to look
   * up; Messenger and Instagram give its URL.
   */
  media:
    | (({ providerMediaId: string } | { url: string }) & {
        /** What the provider says the file is (its own download may say less). */
        mimeType: string | null;
        filename: string | null;
        /** The provider's own kind (`audio`, `sticker`…), for a readable note if the download fails. */
        kind: string;
      })
    | null;
  /**
   * When the provider says the person sent it (Meta's `timestamp`); the 24-hour window opens
   * then, or at the recording if that is earlier. Null when the provider does not say.
   */
  sentAt?: Date | null;
}

/** A delivery report on one of our outbound messages. */
export interface ProviderStatusReport {
  providerMessageId: string;
  /** `sent` only confirms what an accepted message already is. */
  status: 'sent' | 'delivered' | 'read' | 'failed';
  /** For `failed`: the provider's code and title, as `(#131026) Message undeliverable`. */
  reason: string | null;
}

/**
 * A report on every outbound message of one conversation up to a point: Messenger's
 * `read.watermark` and `delivery.watermark` (a time), Instagram's `read.mid` (the last message
 * seen).
 */
export interface ProviderWatermark {
  /** The person's id on the channel (PSID, IGSID): their conversation on that channel. */
  identity: string;
  status: 'delivered' | 'read';
  upTo: { at: Date } | { providerMessageId: string };
}

/** A provider's review of one of the account's templates (WhatsApp's message_template_status_update). */
export interface TemplateStatusReport {
  /** The provider's template id. */
  providerTemplateId: string;
  name: string | null;
  language: string | null;
  /**
   * The review in our words (the adapter reads the provider's: WhatsApp's `APPROVED`,
   * `REJECTED`, `DISABLED`…); events that change no status (`FLAGGED`, `PAUSED`) are not reported.
   */
  status: TemplateStatus;
  /** Why, when the provider says (WhatsApp's `NONE` arrives as null). */
  reason: string | null;
}
