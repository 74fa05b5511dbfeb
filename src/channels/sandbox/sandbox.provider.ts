import type { JobQueue } from '../../jobs/job-queue.js';
import type { ChannelProvider, OutboundMessage, ParsedWebhook, SendContext } from '../channel.js';

export interface SandboxOptions {
  autoAdvance: boolean;
  deliveredAfterMs: number;
  readAfterMs: number;
}

/** Recipients whose phone ends like this fail at delivery time, as an unreachable handset would. */
export const SANDBOX_FAILING_SUFFIX = '0000';

/**
 * A provider that accepts every send and then, like a real one, reports delivery and reading
 * later. Its reports are durable jobs written with the message, so a restart loses none.
 */
export class SandboxProvider implements ChannelProvider {
  readonly name = 'sandbox';

  constructor(
    private readonly jobs: JobQueue,
    private readonly options: SandboxOptions,
  ) {}

  async send(
    ctx: SendContext,
    messages: OutboundMessage[],
  ): Promise<{ providerMessageId: string }[]> {
    if (this.options.autoAdvance) {
      const { deliveredAfterMs, readAfterMs } = this.options;
      await this.jobs.enqueueMany(
        ctx.trx,
        messages.flatMap((m) => {
          const job = (
            status: 'delivered' | 'read' | 'failed',
            delayMs: number,
            reason?: string,
          ) => ({
            accountId: m.accountId,
            kind: 'sandbox.status' as const,
            payload: {
              v: 1 as const,
              message_id: m.messageId,
              status,
              ...(reason ? { reason } : {}),
            },
            delayMs,
          });
          return m.to.phone.endsWith(SANDBOX_FAILING_SUFFIX)
            ? [job('failed', deliveredAfterMs, 'sandbox: recipient unreachable')]
            : [job('delivered', deliveredAfterMs), job('read', readAfterMs)];
        }),
      );
    }
    return messages.map((m) => ({ providerMessageId: `sandbox_${m.messageId}` }));
  }

  /** The sandbox's "webhook" is the body of POST /v1/sandbox/inbound, already validated. */
  parseWebhook(body: unknown): ParsedWebhook {
    const b = body as {
      channel: OutboundMessage['channel'];
      phone?: string;
      contact_id?: string;
      type: 'text' | 'image' | 'document';
      content?: string;
      media_url?: string;
    };
    const from =
      b.contact_id !== undefined ? { contactId: b.contact_id } : { phone: b.phone ?? '' };
    return {
      inbound: [
        {
          channel: b.channel,
          from,
          type: b.type,
          content: b.content ?? null,
          mediaUrl: b.media_url ?? null,
        },
      ],
      statuses: [],
    };
  }
}
