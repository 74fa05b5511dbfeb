import {
  MediaDownloadError,
  type AdapterLog,
  type FetchedMedia,
  type InboundAdapter,
  type InboundConnection,
} from '../channel.js';
import type { GraphClient } from '../meta/graph-client.js';
import { hubChallenge, isValidHubSignature, settingOf } from '../meta/signature.js';
import type { ProviderInboundMessage, ProviderWebhookContent } from '../webhook-content.js';
import { downloadWhatsAppMedia } from './inbound-media.js';
import { parseWhatsAppWebhook } from './inbound.js';

/**
 * The inbound side of a WhatsApp Cloud connection: Meta's handshake and signature, its webhooks
 * read, its files downloaded by media id with the access token. Senders come with their profile
 * name, so there is no lookup.
 */
export class WhatsAppCloudInbound implements InboundAdapter {
  readonly secretNames = { signing: 'app_secret', token: 'access_token' };
  readonly looseReports = false;

  constructor(private readonly graph: GraphClient) {}

  handshake(query: Readonly<Record<string, string | undefined>>, verifyToken: string) {
    return hubChallenge(query, verifyToken);
  }

  isSigned(body: Buffer, signature: string | undefined, signingSecret: string): boolean {
    return isValidHubSignature(signature, body, signingSecret);
  }

  parse(body: unknown, connection: InboundConnection, _log: AdapterLog): ProviderWebhookContent {
    // The ids the connection was made with (the PUT body's phone_number_id, business_account_id).
    return parseWhatsAppWebhook(body, {
      phoneNumberId: settingOf(connection.settings, 'phone_number_id') ?? '',
      businessAccountId: settingOf(connection.settings, 'business_account_id'),
    });
  }

  /** Only files need the token. */
  needsToken(content: ProviderWebhookContent): boolean {
    return content.messages.some((m) => m.media);
  }

  async fetchMedia(
    media: NonNullable<ProviderInboundMessage['media']>,
    opts: {
      token: string | null;
      maxBytes: number;
      checkUrl: (url: string) => Promise<void>;
      signal?: AbortSignal;
    },
  ): Promise<FetchedMedia> {
    if (!('providerMediaId' in media))
      throw new MediaDownloadError('WhatsApp names its files by media id', true);
    if (opts.token === null)
      throw new MediaDownloadError('the connection has no access token', true);
    return downloadWhatsAppMedia(this.graph, {
      ...opts,
      token: opts.token,
      mediaId: media.providerMediaId,
    });
  }
}
