import type { ChannelProvider, OutboundMessage, SendOutcome } from '../channel.js';
import { outcomeOfError } from '../meta/errors.js';
import { GraphError, TOKEN_CODES, type GraphClient } from '../meta/graph-client.js';
import { buildWhatsAppRequest } from './requests.js';

export interface WhatsAppCloudOptions {
  graph: GraphClient;
  phoneNumberId: string;
  accessToken: string;
  /**
   * Told when Graph refuses the access token itself (expired, revoked), with Graph's words, so
   * that the connection shows the refusal until it is connected again. Must not throw.
   */
  tokenRefused?: (reason: string) => Promise<void>;
}

/** Meta's answer to a send: `messages[0].id` (a `wamid.…`) names the message in status webhooks. */
interface SendAnswer {
  messaging_product?: string;
  contacts?: Array<{ input?: string; wa_id?: string }>;
  messages?: Array<{ id?: unknown }>;
}

/** Sends through the WhatsApp Cloud API of one connected phone number. */
export class WhatsAppCloudProvider implements ChannelProvider {
  readonly name = 'whatsapp_cloud';
  readonly templatesBypassWindow = true;
  readonly reachesAnyContact = false;

  constructor(private readonly opts: WhatsAppCloudOptions) {}

  async send(message: OutboundMessage, signal?: AbortSignal): Promise<SendOutcome> {
    const request = buildWhatsAppRequest(message);
    if (!request.ok) return { status: 'failed', reason: request.reason };
    let answer: SendAnswer;
    try {
      answer = await this.opts.graph.call<SendAnswer>(
        'POST',
        `${encodeURIComponent(this.opts.phoneNumberId)}/messages`,
        { token: this.opts.accessToken, json: request.body, signal },
      );
    } catch (err) {
      if (!(err instanceof GraphError)) throw err;
      if (err.code !== null && TOKEN_CODES.has(err.code))
        await this.opts.tokenRefused?.(err.describe());
      return outcomeOfError(err);
    }
    const id = answer.messages?.[0]?.id;
    // Meta took the request, so sending it again could deliver it twice: without an id to track
    // it by, the message is failed rather than retried.
    if (typeof id !== 'string' || id === '')
      return { status: 'failed', reason: 'WhatsApp accepted the message without a message id' };
    return { status: 'accepted', providerMessageId: id };
  }
}
