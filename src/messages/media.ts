import { Unavailable, ValidationError } from '../errors.js';
import { ConcurrencyLimit, FairConcurrencyLimit } from '../net/concurrency-limit.js';
import { guardedFetch, OutboundError } from '../net/guarded-fetch.js';

export const MEDIA_MAX_BYTES = 16 * 1024 * 1024;
export const MEDIA_TIMEOUT_MS = 10_000;
/** Sends that may wait for a fetch slot, per slot. */
export const MEDIA_QUEUE_PER_SLOT = 4;
/** What a refused send is told to wait: about the time a few fetches take. */
export const MEDIA_RETRY_AFTER_S = 5;

export interface FetchedMedia {
  url: string;
  contentType: string;
  bytes: Buffer;
}

/** Fetches a send's media for an account (which shares the process's fetch slots fairly). */
export type MediaFetcher = (
  url: string,
  kind: 'image' | 'document',
  accountId: string,
) => Promise<FetchedMedia>;

/**
 * Fetches `media_url` at send time, as SPEC.md asks, through the private-address guard; any
 * failure is a 422 on `media_url` that says why. Each fetch may hold up to MEDIA_MAX_BYTES in
 * memory, so at most `concurrency` run at once in the process and 4 times as many sends wait for
 * a slot; a send beyond that is a 503 `unavailable` with `Retry-After`. One account holds at most
 * half the slots (and 4 times as many sends waiting for them): one that floods the process with
 * slow media is refused beyond its share, while other accounts' fetches keep the other half.
 */
export function mediaFetcher(opts: { allowPrivate: boolean; concurrency: number }): MediaFetcher {
  const share = Math.ceil(opts.concurrency / 2);
  const limit = new FairConcurrencyLimit(
    new ConcurrencyLimit(opts.concurrency, opts.concurrency * MEDIA_QUEUE_PER_SLOT),
    share,
    share * MEDIA_QUEUE_PER_SLOT,
  );
  const busy = () =>
    new Unavailable('too many media fetches in progress; try again shortly', MEDIA_RETRY_AFTER_S);
  return async (url, kind, accountId) => {
    let res;
    try {
      res = await limit.run(
        accountId,
        () =>
          guardedFetch({
            url,
            timeoutMs: MEDIA_TIMEOUT_MS,
            maxBytes: MEDIA_MAX_BYTES,
            maxRedirects: 3,
            allowPrivate: opts.allowPrivate,
          }),
        busy,
      );
    } catch (err) {
      if (err instanceof Unavailable) throw err;
      const reason = err instanceof OutboundError ? err.message : 'could not be fetched';
      throw new ValidationError('media_url', `could not be fetched: ${reason}`);
    }
    if (res.status < 200 || res.status >= 300) {
      throw new ValidationError(
        'media_url',
        `could not be fetched: the server answered ${res.status}`,
      );
    }
    const contentType = String(res.headers['content-type'] ?? '')
      .split(';')[0]!
      .trim()
      .toLowerCase();
    if (kind === 'image' && !contentType.startsWith('image/')) {
      throw new ValidationError(
        'media_url',
        `is not an image (Content-Type ${contentType || 'missing'})`,
      );
    }
    if (kind === 'document' && (contentType === '' || contentType === 'text/html')) {
      throw new ValidationError(
        'media_url',
        `is not a document (Content-Type ${contentType || 'missing'})`,
      );
    }
    if (res.body.length === 0) throw new ValidationError('media_url', 'is empty');
    // The message keeps the URL the client gave, even when a redirect served the file.
    return { url, contentType, bytes: res.body };
  };
}

/** The account's uploaded files (the media feature), as sending uses them. */
export interface Uploads {
  /** The URL a message keeps for the account's file, and its type; 404 when it has none such. */
  attachable(accountId: string, id: string): Promise<{ url: string; contentType: string }>;
  /**
   * What a provider fetches for a message's media URL: a signed link with the file's name for
   * one of the service's own files, null for any other URL (given to the provider as it is).
   */
  providerLink(
    accountId: string,
    url: string,
  ): Promise<{ url: string; filename: string | null } | null>;
}
