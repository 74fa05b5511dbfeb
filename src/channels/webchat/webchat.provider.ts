import type { ChannelProvider, OutboundMessage, SendOutcome } from '../channel.js';

/** Wakes a visitor's open widgets (implemented by the webchat feature). */
export interface VisitorWakeups {
  publish(accountId: string, contactId: string): Promise<void>;
}

/**
 * The service's own channel. Sending is storing, which the pipeline did before calling here:
 * the provider accepts at once under an id of its own and wakes the visitor's open widgets,
 * which read the message from the database. `delivered` and `read` come from the widget.
 */
export class WebchatProvider implements ChannelProvider {
  readonly name = 'webchat' as const;
  readonly templatesBypassWindow = true;
  readonly reachesAnyContact = false;

  constructor(private readonly wakeups: VisitorWakeups) {}

  async send(message: OutboundMessage): Promise<SendOutcome> {
    await this.wakeups.publish(message.accountId, message.to.contactId);
    return { status: 'accepted', providerMessageId: `webchat_${message.messageId}` };
  }
}
