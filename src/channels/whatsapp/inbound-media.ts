import {
  classifyGraphError,
  GraphError,
  TOKEN_CODES,
  type GraphClient,
} from '../meta/graph-client.js';

/** A media file WhatsApp holds for us, downloaded. */
export interface WhatsAppMediaFile {
  bytes: Buffer;
  contentType: string | null;
}

/**
 * Why a file could not be downloaded. `final` when trying again cannot help (Graph refused for
 * good, the file is too large, the URL is refused); otherwise the download is retried.
 */
export class MediaDownloadError extends Error {
  constructor(
    message: string,
    readonly final: boolean,
    /** Graph's words when it refused the token itself (expired, revoked); else null. */
    readonly tokenRefused: string | null = null,
  ) {
    super(message);
  }
}

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
): Promise<WhatsAppMediaFile> {
  let meta: { url?: unknown; mime_type?: unknown; file_size?: unknown };
  try {
    meta = await graph.call('GET', encodeURIComponent(opts.mediaId), {
      token: opts.token,
      signal: opts.signal,
    });
  } catch (err) {
    throw fromGraph(err, 'looking the file up');
  }
  if (typeof meta.url !== 'string' || meta.url === '')
    throw new MediaDownloadError('WhatsApp answered the media lookup without a URL', false);
  const size = Number(meta.file_size);
  if (Number.isFinite(size) && size > opts.maxBytes)
    throw new MediaDownloadError(`the file is larger than ${opts.maxBytes} bytes`, true);
  await opts.checkUrl(meta.url);
  let file: { bytes: Buffer; contentType: string | null };
  try {
    file = await graph.download(meta.url, {
      token: opts.token,
      maxBytes: opts.maxBytes,
      signal: opts.signal,
    });
  } catch (err) {
    throw fromGraph(err, 'downloading the file');
  }
  const declared =
    typeof meta.mime_type === 'string' && meta.mime_type !== '' ? meta.mime_type : null;
  return { bytes: file.bytes, contentType: declared ?? file.contentType };
}

function fromGraph(err: unknown, doing: string): MediaDownloadError {
  if (!(err instanceof GraphError))
    return new MediaDownloadError(`${doing} failed: ${String(err)}`, false);
  if (err.httpStatus === 413) return new MediaDownloadError(err.message, true);
  return new MediaDownloadError(
    `${doing} failed: ${err.describe()}`,
    classifyGraphError(err) === 'final',
    err.code !== null && TOKEN_CODES.has(err.code) ? err.describe() : null,
  );
}
