import type { Channel, ConnectionProvider, MessageType } from '../db/schema.js';
import type { ProviderInboundMessage, ProviderWebhookContent } from './webhook-content.js';

export const CHANNELS = [
  'whatsapp',
  'instagram',
  'messenger',
  'webchat',
] as const satisfies readonly Channel[];

/** Channels whose providers only allow free-form messages within 24 h of the contact's last message. */
export const WINDOWED_CHANNELS: ReadonlySet<Channel> = new Set([
  'whatsapp',
  'messenger',
  'instagram',
]);

/** One message as a provider is asked to send it: everything it needs, no database handle. */
export interface OutboundMessage {
  accountId: string;
  messageId: string;
  channel: Channel;
  to: {
    contactId: string;
    /** E.164 with its `+`, or null for a contact without one (or deleted since). */
    phone: string | null;
    /**
     * The contact's id on this message's channel, as the provider addresses it: the PSID on
     * messenger, the IGSID on instagram, the webchat identifier, the phone's digits (no `+`) on
     * whatsapp. Null when the contact has none there (reached only through the sandbox) or was
     * deleted since the message was queued: a real provider fails such a message for good.
     */
    identity: string | null;
  };
  type: MessageType;
  /** The text, a media caption, or a template's rendered text; null for media without caption. */
  content: string | null;
  /** For `template`: what a provider with its own templates (WhatsApp) sends instead of text. */
  template: { name: string; language: string; params: string[] } | null;
  /** For `image` and `document`: the public URL the provider fetches. */
  media: { url: string; filename: string | null } | null;
}

/**
 * What the provider answered:
 * - `accepted`: it took the message; its id names the message in later status reports.
 * - `failed`: refused for good (invalid recipient, rejected template, policy); never retried.
 * - `retry`: not now (throttled, timed out, 5xx); tried again after `afterMs` when the provider
 *   hinted a delay, else on the pipeline's back-off schedule.
 */
export type SendOutcome =
  | {
      status: 'accepted';
      providerMessageId: string;
      /**
       * Status reports the provider promises for later, recorded as durable jobs in the
       * transaction that marks the message sent. Only the sandbox uses them, to simulate what a
       * real provider reports through its webhooks.
       */
      simulatedReports?: SimulatedReport[];
    }
  | { status: 'failed'; reason: string }
  | { status: 'retry'; reason: string; afterMs?: number };

export interface SimulatedReport {
  status: 'delivered' | 'read' | 'failed';
  afterMs: number;
  reason?: string;
}

/** One messaging provider: turns our messages into calls of its API. */
export interface ChannelProvider {
  /** The provider's name as connections show it ("sandbox", "whatsapp_cloud", …). */
  readonly name: 'sandbox' | ConnectionProvider;
  /**
   * Whether an approved template may be sent outside the 24-hour customer service window, as
   * the provider applies the window on its channels (DESIGN §4 "Sending"): WhatsApp Cloud API
   * yes (that is what approved templates are for), the sandbox yes (it simulates WhatsApp's rule
   * on every windowed channel), Messenger and Instagram no (Meta has no approved templates
   * there: a template is sent as its rendered text and follows the window like any text).
   * Webchat has no window at all, so the answer does not matter there.
   */
  readonly templatesBypassWindow: boolean;
  /**
   * Whether the provider reaches any contact, with or without an address on the channel: the
   * sandbox does (it simulates every contact); a real provider reaches only a contact with an
   * identity there (a phone on WhatsApp, the person's id elsewhere).
   */
  readonly reachesAnyContact: boolean;
  /**
   * Hands one message to the provider. Never called inside a database transaction. Answers
   * with the outcome rather than throwing; anything thrown counts as a temporary failure.
   * `signal`, when given, aborts the call (a provider's own timeout bounds it otherwise).
   */
  send(message: OutboundMessage, signal?: AbortSignal): Promise<SendOutcome>;
}

/** Which provider sends on an account's channel; decided per send, from the account's connection. */
export interface ProviderResolver {
  /**
   * The provider for this account's channel: its connection's, or the sandbox for an
   * unconnected channel while the sandbox is enabled. Throws a 422 `AppError` when the channel
   * is not connected and the sandbox is disabled.
   */
  resolve(accountId: string, channel: Channel): Promise<ChannelProvider>;
  /** `resolve`, with the connection the provider sends through. */
  resolveWithConnection(accountId: string, channel: Channel): Promise<ResolvedProvider>;
}

/** A channel's provider and the connection it was built from. */
export interface ResolvedProvider {
  provider: ChannelProvider;
  /**
   * The connection's id; null for the sandbox (or a test's override). A message queued for a
   * connection is only ever handed to that connection (see SendPipeline).
   */
  connectionId: string | null;
}

export interface InboundMessage {
  channel: Channel;
  /**
   * Who wrote. A phone finds or creates the contact by phone; an identity (the sender's id on
   * `channel`: a PSID, an IGSID, a webchat identifier) finds or creates the contact with that
   * identity, phone-less. `name` (the provider's profile name) names a contact it creates.
   */
  from:
    | { phone: string; name?: string | null }
    | { identity: string; name?: string | null }
    | { contactId: string };
  type: 'text' | 'image' | 'document';
  content: string | null;
  mediaUrl: string | null;
  /** The provider's id of the message: a second delivery of it takes effect once. */
  providerMessageId?: string | null;
  /**
   * When the provider says the person sent it (Meta's timestamp). The 24-hour window opens at
   * this time, or at its recording if that is earlier: a message processed late cannot keep the
   * window open past the provider's.
   */
  sentAt?: Date | null;
}

export interface StatusUpdate {
  messageId: string;
  status: 'delivered' | 'read' | 'failed';
  reason?: string;
}

/** A connection as an adapter's inbound side sees it (a connection row will do). */
export interface InboundConnection {
  channel: Channel;
  /** The settings it was made with: the ids its provider knows it by (phone_number_id…). */
  settings: Readonly<Record<string, unknown>>;
}

/** Where an adapter tells what it skipped (a Fastify or pino logger will do). */
export interface AdapterLog {
  warn(details: object, message: string): void;
}

/** A provider's file, downloaded. */
export interface FetchedMedia {
  bytes: Buffer;
  /** What the provider says the file is; null when it does not say. */
  contentType: string | null;
}

/**
 * The inbound side of a provider whose webhooks arrive over HTTP: the handshake and signature,
 * the webhook read into our words (see webhook-content.ts), its files and its senders' names.
 * One per connection provider and stateless: the connection, its token and its secrets come
 * with each call. Nothing outside the adapter's folder knows a vendor field name.
 */
export interface InboundAdapter {
  /** Which of the connection's secrets signs its webhooks, and which its calls take. */
  readonly secretNames: { signing: string; token: string };
  /**
   * Whether its delivery reports may name messages not sent through us (replies from the
   * provider's own inbox) or another id of one of ours (a caption sent apart): such reports are
   * looked up among the provider id aliases, and wait only briefly for an id we do not know.
   */
  readonly looseReports: boolean;
  /**
   * The subscription handshake (a GET with the query): what to answer, or null when the query
   * is not a subscription with the connection's verify token.
   */
  handshake(
    query: Readonly<Record<string, string | undefined>>,
    verifyToken: string,
  ): string | null;
  /** Whether the signature (a header's value) vouches for these exact bytes. */
  isSigned(body: Buffer, signature: string | undefined, signingSecret: string): boolean;
  /** The webhook's body (parsed JSON) in our words; what is not the connection's is skipped. */
  parse(body: unknown, connection: InboundConnection, log: AdapterLog): ProviderWebhookContent;
  /** Whether processing this content calls the provider with the connection's token. */
  needsToken(content: ProviderWebhookContent): boolean;
  /**
   * Downloads an inbound message's file. Rejects with a MediaDownloadError. `checkUrl` vets a
   * URL the provider named before anything is fetched from it.
   */
  fetchMedia(
    media: NonNullable<ProviderInboundMessage['media']>,
    opts: {
      token: string | null;
      maxBytes: number;
      checkUrl: (url: string) => Promise<void>;
      signal?: AbortSignal;
    },
  ): Promise<FetchedMedia>;
  /**
   * The name a sender (known by their identity on the channel) shows on the provider; null when
   * their profile has none. Rejects with a ProfileLookupError when the provider refuses. Absent
   * for providers whose webhooks name senders themselves.
   */
  lookUpName?(
    identity: string,
    opts: { token: string; signal?: AbortSignal },
  ): Promise<string | null>;
}

/**
 * Why a file could not be downloaded. `final` when trying again cannot help (refused for good,
 * the file too large, the URL refused); otherwise the download is retried.
 */
export class MediaDownloadError extends Error {
  constructor(
    message: string,
    readonly final: boolean,
    /** The provider's words when it refused the connection's token itself; else null. */
    readonly tokenRefused: string | null = null,
  ) {
    super(message);
  }
}

/** Why a sender's profile could not be read: `final`, or worth asking again (after a hint). */
export class ProfileLookupError extends Error {
  constructor(
    message: string,
    readonly final: boolean,
    /** The provider's words when it refused the connection's token itself; else null. */
    readonly tokenRefused: string | null,
    /** How long the provider asked us to wait, when it said. */
    readonly retryAfterMs: number | null,
  ) {
    super(message);
  }
}
