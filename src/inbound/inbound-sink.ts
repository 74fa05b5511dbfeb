import type { Channel } from '../db/schema.js';
import type { Scope } from '../db/transactor.js';
import type { AppError } from '../errors.js';
import type { ProviderSender, TemplateStatusReport } from '../channels/webhook-content.js';

/** An inbound message as the messages module records it. */
export interface SinkInboundMessage {
  channel: Channel;
  /** A phone, or the person's id on `channel` (their identity there), with the name to create with. */
  from: ProviderSender;
  type: 'text' | 'image' | 'document';
  content: string | null;
  /** `{PUBLIC_URL}/v1/media/{id}` for image and document; null for text. */
  mediaUrl: string | null;
  providerMessageId: string;
  /** When the provider says the person sent it (see ProviderInboundMessage). */
  sentAt?: Date | null;
}

/** An inbound message from a sender known by phone. */
export type PhoneSinkMessage = SinkInboundMessage & {
  from: { phone: string; name: string | null };
};

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
   * Records several messages from senders known by phone as `receive` records each, together:
   * one transaction for them all (per channel), in order. Each result is `recorded` (a provider
   * id already recorded included) or the error (4xx) that refused that message; a database
   * failure rejects the whole call, with nothing of it kept.
   */
  receiveMany(scope: Scope, messages: PhoneSinkMessage[]): Promise<Array<'recorded' | AppError>>;
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
  /**
   * Several reports applied as applyProviderStatus applies each, together (one transaction, in
   * order: two reports on one message apply one after the other).
   */
  applyProviderStatusMany(
    scope: Scope,
    updates: {
      providerMessageId: string;
      status: 'delivered' | 'read' | 'failed';
      reason: string | null;
    }[],
  ): Promise<Array<'applied' | 'unchanged' | 'unknown'>>;
  /**
   * Whether a contact of the account already has this identity on this channel. A new sender's
   * profile name is looked up (once) only when this says no.
   */
  knowsIdentity(scope: Scope, who: { channel: Channel; identity: string }): Promise<boolean>;
  /**
   * Names the contact with this identity on the channel, if it has no name yet (a profile name
   * looked up after its first message was recorded): `named`, `unchanged` (named already), or
   * `unknown` when no contact has the identity (yet).
   */
  nameIdentity(
    scope: Scope,
    who: { channel: Channel; identity: string; name: string },
  ): Promise<'named' | 'unchanged' | 'unknown'>;
  /**
   * Moves forward, as applyProviderStatus does one by one (forward only, each with its event,
   * all in one transaction), every outbound message of the conversation on `channel` of the
   * contact with this identity that the provider has accepted (it has a provider message id),
   * created at or before the bound: `at` (Messenger's watermark, a time), or the outbound
   * message of that conversation with this provider id, itself included (Instagram's read.mid).
   * `unknown` when no contact has the identity, or no outbound message of that conversation has
   * the provider id (yet); `unchanged` when nothing moved.
   */
  applyStatusUpTo(
    scope: Scope,
    report: {
      channel: Channel;
      identity: string;
      status: 'delivered' | 'read';
      upTo: { at: Date } | { providerMessageId: string };
    },
  ): Promise<'applied' | 'unchanged' | 'unknown'>;
}

/** Told when the provider has reviewed a template (implemented by TemplatesService). */
export interface TemplateStatusListener {
  onTemplateStatus(accountId: string, update: TemplateStatusReport): Promise<void>;
}
