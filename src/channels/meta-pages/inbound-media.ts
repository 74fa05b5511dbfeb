import { classifyGraphError, GraphError, type GraphClient } from '../meta/graph-client.js';
import { MediaDownloadError } from '../whatsapp/inbound-media.js';

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
): Promise<{ bytes: Buffer; contentType: string | null }> {
  await opts.checkUrl(opts.url);
  try {
    return await graph.download(opts.url, {
      token: null,
      maxBytes: opts.maxBytes,
      signal: opts.signal,
    });
  } catch (err) {
    if (!(err instanceof GraphError))
      throw new MediaDownloadError(`downloading the file failed: ${String(err)}`, false);
    if (err.httpStatus === 413) throw new MediaDownloadError(err.message, true);
    // An expired or removed CDN file (403, 404) will not come back.
    throw new MediaDownloadError(
      `downloading the file failed: ${err.describe()}`,
      classifyGraphError(err) === 'final',
    );
  }
}
