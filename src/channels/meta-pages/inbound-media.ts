import type { FetchedMedia } from '../channel.js';
import { mediaErrorOf } from '../meta/errors.js';
import type { GraphClient } from '../meta/graph-client.js';

/**
 * Downloads a Messenger or Instagram attachment from the URL in the webhook. Those CDN URLs are
 * signed, so no token goes with them (the page token must not travel to a URL a payload named);
 * `checkUrl` vets the URL first, and the download checks each address it connects to.
 */
export async function downloadPageAttachment(
  graph: GraphClient,
  opts: {
    url: string;
    maxBytes: number;
    checkUrl: (url: string) => Promise<void>;
    signal?: AbortSignal;
  },
): Promise<FetchedMedia> {
  await opts.checkUrl(opts.url);
  try {
    return await graph.download(opts.url, {
      token: null,
      maxBytes: opts.maxBytes,
      signal: opts.signal,
    });
  } catch (err) {
    // An expired or removed CDN file (403, 404) will not come back.
    throw mediaErrorOf(err, 'downloading the file', false);
  }
}
