import type { Channel, MessageType } from '../db/schema.js';
import type { Tx } from '../db/database.js';

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

export interface OutboundMessage {
  accountId: string;
  messageId: string;
  channel: Channel;
  to: { contactId: string; phone: string };
  type: MessageType;
  content: string | null;
  media: { url: string; contentType: string; bytes: Buffer } | null;
}

/** Sends run inside the transaction that records the message, so work they queue commits with it. */
export interface SendContext {
  trx: Tx;
}

export interface InboundMessage {
  channel: Channel;
  from: { phone: string } | { contactId: string };
  type: 'text' | 'image' | 'document';
  content: string | null;
  mediaUrl: string | null;
}

export interface StatusUpdate {
  messageId: string;
  status: 'delivered' | 'read' | 'failed';
  reason?: string;
}

export interface ParsedWebhook {
  inbound: InboundMessage[];
  statuses: StatusUpdate[];
}

/** One messaging provider: translates our messages into its API, and its callbacks into ours. */
export interface ChannelProvider {
  readonly name: string;
  /** Hands messages to the provider, in order; one result per message. Throws when it refuses them. */
  send(ctx: SendContext, messages: OutboundMessage[]): Promise<{ providerMessageId: string }[]>;
  parseWebhook(body: unknown): ParsedWebhook;
}

export type ChannelProviders = Record<Channel, ChannelProvider>;
