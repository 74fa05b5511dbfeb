import type {
  ChannelProvider,
  InboundMessage,
  OutboundMessage,
  SendOutcome,
  SimulatedReport,
} from '../channel.js';

export interface SandboxOptions {
  autoAdvance: boolean;
  deliveredAfterMs: number;
  readAfterMs: number;
}

/** Recipients whose phone ends like this fail at delivery time, as an unreachable handset would. */
export const SANDBOX_FAILING_SUFFIX = '0000';

/**
 * A provider that accepts every send at once and then, like a real one, reports delivery and
 * reading later: its reports are durable jobs recorded with the acceptance, so a restart loses
 * none.
 */
export class SandboxProvider implements ChannelProvider {
  readonly name = 'sandbox';
  readonly templatesBypassWindow = true;
  readonly reachesAnyContact = true;

  constructor(private readonly options: SandboxOptions) {}

  send(message: OutboundMessage): Promise<SendOutcome> {
    const { autoAdvance, deliveredAfterMs, readAfterMs } = this.options;
    let reports: SimulatedReport[] | undefined;
    if (autoAdvance) {
      reports = message.to.phone?.endsWith(SANDBOX_FAILING_SUFFIX)
        ? [
            {
              status: 'failed',
              afterMs: deliveredAfterMs,
              reason: 'sandbox: recipient unreachable',
            },
          ]
        : [
            { status: 'delivered', afterMs: deliveredAfterMs },
            { status: 'read', afterMs: readAfterMs },
          ];
    }
    return Promise.resolve({
      status: 'accepted',
      providerMessageId: `sandbox_${message.messageId}`,
      simulatedReports: reports,
    });
  }

  /** The sandbox's "webhook" is the body of POST /v1/sandbox/inbound, already validated. */
  parseInbound(body: {
    channel: InboundMessage['channel'];
    phone?: string;
    contact_id?: string;
    type: 'text' | 'image' | 'document';
    content?: string;
    media_url?: string;
  }): InboundMessage {
    return {
      channel: body.channel,
      from:
        body.contact_id !== undefined
          ? { contactId: body.contact_id }
          : { phone: body.phone ?? '' },
      type: body.type,
      content: body.content ?? null,
      mediaUrl: body.media_url ?? null,
    };
  }
}
