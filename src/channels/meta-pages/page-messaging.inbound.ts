import {
  MediaDownloadError,
  type AdapterLog,
  type FetchedMedia,
  type InboundAdapter,
  type InboundConnection,
} from '../channel.js';
import { profileErrorOf } from '../meta/errors.js';
import type { GraphClient } from '../meta/graph-client.js';
import { hubChallenge, isValidHubSignature, settingOf } from '../meta/signature.js';
import type { ProviderInboundMessage, ProviderWebhookContent } from '../webhook-content.js';
import { downloadPageAttachment } from './inbound-media.js';
import { parsePageWebhook } from './inbound.js';
import { lookUpSenderName } from './profiles.js';
import type { PageChannel } from './requests.js';

/**
 * The inbound side of a Messenger or Instagram connection: Meta's handshake and signature, its
 * webhooks read, attachments downloaded from their signed URLs (no token), and a new sender's
 * name looked up with the page token.
 */
export class PageMessagingInbound implements InboundAdapter {
  readonly secretNames = { signing: 'app_secret', token: 'page_access_token' };
  // Reports also name replies sent from the Page inbox or the Instagram app, and captions' ids.
  readonly looseReports = true;

  constructor(
    private readonly graph: GraphClient,
    private readonly channel: PageChannel,
  ) {}

  handshake(query: Readonly<Record<string, string | undefined>>, verifyToken: string) {
    return hubChallenge(query, verifyToken);
  }

  isSigned(body: Buffer, signature: string | undefined, signingSecret: string): boolean {
    return isValidHubSignature(signature, body, signingSecret);
  }

  parse(body: unknown, connection: InboundConnection, log: AdapterLog): ProviderWebhookContent {
    // The ids the connection was made with (the PUT body's page_id, instagram_account_id).
    const { settings } = connection;
    return parsePageWebhook(body, {
      channel: this.channel,
      // Instagram entries name the professional account, or (in newer payloads) the Page.
      entryIds: [
        settingOf(settings, 'page_id'),
        this.channel === 'instagram' ? settingOf(settings, 'instagram_account_id') : null,
      ].filter((id): id is string => id !== null),
      skipped: (entryId) =>
        log.warn(
          { entry: entryId },
          'inbound webhook: an entry for another Page or account than this connection’s; skipped',
        ),
    });
  }

  /** A new sender's name is looked up with the page token. */
  needsToken(content: ProviderWebhookContent): boolean {
    return content.messages.length > 0;
  }

  async fetchMedia(
    media: NonNullable<ProviderInboundMessage['media']>,
    opts: { maxBytes: number; checkUrl: (url: string) => Promise<void>; signal?: AbortSignal },
  ): Promise<FetchedMedia> {
    if (!('url' in media))
      throw new MediaDownloadError('Messenger and Instagram name their files by URL', true);
    return downloadPageAttachment(this.graph, { ...opts, url: media.url });
  }

  async lookUpName(identity: string, opts: { token: string; signal?: AbortSignal }) {
    try {
      return await lookUpSenderName(this.graph, {
        channel: this.channel,
        token: opts.token,
        senderId: identity,
        signal: opts.signal,
      });
    } catch (err) {
      throw profileErrorOf(err);
    }
  }
}
