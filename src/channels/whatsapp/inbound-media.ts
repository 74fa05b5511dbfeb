import { MediaDownloadError, type FetchedMedia } from '../channel.js';
import { mediaErrorOf } from '../meta/errors.js';
import type { GraphClient } from '../meta/graph-client.js';

/**
 * Downloads an inbound file: `GET /{version}/{media id}` with the token answers its (short-lived)
 * URL, which is then fetched with the token too. `checkUrl` vets that URL first: it comes from
 * Graph's answer, not from our configuration.
 */
export async function downloadWhatsAppMedia(
  graph: GraphClient,
  opts: {
    token: string;
    mediaId: string;
    maxBytes: number;
    checkUrl: (url: string) => Promise<void>;
    signal?: AbortSignal;
  },
): Promise<FetchedMedia> {
  let meta: { url?: unknown; mime_type?: unknown; file_size?: unknown };
  try {
    meta = await graph.call('GET', encodeURIComponent(opts.mediaId), {
      token: opts.token,
      signal: opts.signal,
    });
  } catch (err) {
    throw mediaErrorOf(err, 'looking the file up', true);
  }
  if (typeof meta.url !== 'string' || meta.url === '')
    throw new MediaDownloadError('WhatsApp answered the media lookup without a URL', false);
  const size = Number(meta.file_size);
  if (Number.isFinite(size) && size > opts.maxBytes)
    throw new MediaDownloadError(`the file is larger than ${opts.maxBytes} bytes`, true);
  await opts.checkUrl(meta.url);
  let file: FetchedMedia;
  try {
    file = await graph.download(meta.url, {
      token: opts.token,
      maxBytes: opts.maxBytes,
      signal: opts.signal,
    });
  } catch (err) {
    throw mediaErrorOf(err, 'downloading the file', true);
  }
  const declared =
    typeof meta.mime_type === 'string' && meta.mime_type !== '' ? meta.mime_type : null;
  return { bytes: file.bytes, contentType: declared ?? file.contentType };
}
