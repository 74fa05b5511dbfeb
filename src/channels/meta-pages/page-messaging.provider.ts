import type { ChannelProvider, OutboundMessage, SendOutcome } from '../channel.js';
import { GraphError, TOKEN_CODES, type GraphClient } from '../meta/graph-client.js';
import { outcomeOfError } from '../meta/errors.js';
import { buildPageRequests, type PageChannel } from './requests.js';

export interface PageMessagingOptions {
  graph: GraphClient;
  /** `messenger` for the Page itself, `instagram` for the professional account linked to it. */
  channel: PageChannel;
  pageId: string;
  pageAccessToken: string;
  /**
   * Told when Graph refuses the page token itself (expired, revoked), with Graph's words, so
   * that the connection shows the refusal until it is connected again. Must not throw.
   */
  tokenRefused?: (reason: string) => Promise<void>;
  /**
   * Told when a caption, sent after its attachment, was accepted under its own message id, so
   * that reports naming that id apply to the message (see ProviderIdAliasesRepository). A
   * failure is logged by the caller; it must not throw.
   */
  captionSent?: (attachmentId: string, captionId: string) => Promise<void>;
  /** Told when a caption could not be sent (its attachment was); must not throw. */
  captionFailed?: (attachmentId: string, reason: string) => void;
}

/** Meta's answer to a Send API call: `message_id` names the message in later webhooks. */
interface SendAnswer {
  recipient_id?: unknown;
  message_id?: unknown;
}

/**
 * Sends through the Send API of one Facebook Page: Messenger conversations of the Page, or
 * Instagram conversations of the professional account linked to it. Both are the same request
 * (`POST /{page_id}/messages` with the page token); only the recipient's id differs in kind.
 */
export class PageMessagingProvider implements ChannelProvider {
  readonly name: PageChannel;
  /** Meta has no approved templates on Messenger or Instagram: they follow the window. */
  readonly templatesBypassWindow = false;
  readonly reachesAnyContact = false;

  constructor(private readonly opts: PageMessagingOptions) {
    this.name = opts.channel;
  }

  async send(message: OutboundMessage, signal?: AbortSignal): Promise<SendOutcome> {
    const request = buildPageRequests(this.opts.channel, message);
    if (!request.ok) return { status: 'failed', reason: request.reason };
    let answer: SendAnswer;
    try {
      answer = await this.post(request.main, signal);
    } catch (err) {
      if (!(err instanceof GraphError)) throw err;
      return outcomeOfError(err);
    }
    const id = answer.message_id;
    // Meta took the request, so sending it again could deliver it twice: without an id to track
    // it by, the message is failed rather than retried.
    if (typeof id !== 'string' || id === '')
      return {
        status: 'failed',
        reason: `${this.label()} accepted the message without a message id`,
      };
    if (request.caption) {
      // The attachment is delivered whatever happens now, so the message is sent: a caption that
      // fails is lost (and told, to be logged) rather than the whole message retried, which would
      // repeat the attachment.
      try {
        const caption = (await this.post(request.caption, signal)).message_id;
        if (typeof caption === 'string' && caption !== '')
          await this.opts.captionSent?.(id, caption);
        else this.opts.captionFailed?.(id, 'accepted without a message id');
      } catch (err) {
        this.opts.captionFailed?.(
          id,
          err instanceof GraphError
            ? err.describe()
            : err instanceof Error
              ? err.message
              : String(err),
        );
      }
    }
    return { status: 'accepted', providerMessageId: id };
  }

  private async post(body: Record<string, unknown>, signal?: AbortSignal): Promise<SendAnswer> {
    try {
      return await this.opts.graph.call<SendAnswer>(
        'POST',
        `${encodeURIComponent(this.opts.pageId)}/messages`,
        { token: this.opts.pageAccessToken, json: body, signal },
      );
    } catch (err) {
      if (err instanceof GraphError && err.code !== null && TOKEN_CODES.has(err.code))
        await this.opts.tokenRefused?.(err.describe());
      throw err;
    }
  }

  private label(): string {
    return this.opts.channel === 'messenger' ? 'Messenger' : 'Instagram';
  }
}
