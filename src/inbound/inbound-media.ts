import { MediaDownloadError, type FetchedMedia, type InboundAdapter } from '../channels/channel.js';
import type { ProviderInboundMessage } from '../channels/webhook-content.js';
import type { Channel } from '../db/schema.js';
import type { ConnectionRow } from '../connections/connections.repository.js';
import { MediaUrlRefused, type MediaService } from '../media/media.service.js';
import type { SinkInboundMessage } from './inbound-sink.js';

/** Inbound messages' files: downloaded through the connection's adapter and kept, once. */
export class InboundMedia {
  constructor(private readonly deps: { media: MediaService; mediaMaxBytes: number }) {}

  /**
   * The message as the sink records it, its file downloaded and kept first (once). Rejects with
   * a MediaDownloadError when the file could not be had.
   */
  async withMedia(
    accountId: string,
    via: { connection: ConnectionRow; adapter: InboundAdapter; token: string | null },
    message: ProviderInboundMessage,
  ): Promise<SinkInboundMessage> {
    const { connection, adapter, token } = via;
    const recorded = {
      channel: connection.channel,
      from: message.from,
      type: message.type,
      content: message.content,
      mediaUrl: null as string | null,
      providerMessageId: message.providerMessageId,
      sentAt: message.sentAt ?? null,
    };
    if (!message.media) return recorded;
    const media = this.deps.media;
    const id = media.idFor(accountId, `${connection.channel}\n${message.providerMessageId}`);
    if (!(await media.has(accountId, id))) {
      let file: FetchedMedia;
      try {
        file = await adapter.fetchMedia(message.media, {
          token,
          maxBytes: this.deps.mediaMaxBytes,
          checkUrl: (url) => media.checkDownloadUrl(url),
        });
      } catch (err) {
        if (err instanceof MediaUrlRefused) throw new MediaDownloadError(err.message, true);
        if (err instanceof MediaDownloadError) throw err;
        throw new MediaDownloadError(err instanceof Error ? err.message : String(err), false);
      }
      await media.keep(accountId, id, {
        contentType: file.contentType ?? message.media.mimeType ?? 'application/octet-stream',
        filename: message.media.filename,
        bytes: file.bytes,
      });
    }
    return { ...recorded, mediaUrl: media.urlOf(id) };
  }
}

/** A message whose file could not be kept: recorded as text that says so, caption and all. */
export function withoutMedia(
  channel: Channel,
  message: ProviderInboundMessage,
  reason: string,
): SinkInboundMessage {
  const kind = message.media?.kind ?? 'file';
  const note = `[${kind} not available: ${reason}]`;
  return {
    channel,
    from: message.from,
    type: 'text',
    content: message.content ? `${note}\n${message.content}` : note,
    mediaUrl: null,
    providerMessageId: message.providerMessageId,
    sentAt: message.sentAt ?? null,
  };
}
