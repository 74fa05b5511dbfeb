import { createHash } from 'node:crypto';
import dns from 'node:dns/promises';
import net from 'node:net';
import type { Clock } from '../clock.js';
import type { Scope } from '../db/transactor.js';
import { NotFound } from '../errors.js';
import { isPrivateAddress } from '../net/address-guard.js';
import type { MediaRepository } from './media.repository.js';

/** A file as served by GET /v1/media/{id}. */
export interface StoredMedia {
  contentType: string;
  filename: string | null;
  bytes: Buffer;
}

/** Why a media URL may not be fetched; never worth retrying. */
export class MediaUrlRefused extends Error {}

/**
 * Media the service keeps for the account (inbound files from providers, which their own URLs
 * stop serving after minutes) and serves at `{PUBLIC_URL}/v1/media/{id}`.
 */
export class MediaService {
  constructor(
    private readonly deps: {
      media: MediaRepository;
      clock: Clock;
      /** PUBLIC_URL, without a trailing slash. */
      publicUrl: string;
      /** ALLOW_PRIVATE_TARGETS: development and tests only. */
      allowPrivate: boolean;
      /** Resolves a host name to every address it has (tests may replace it). */
      lookup?: (host: string) => Promise<string[]>;
    },
  ) {}

  /**
   * The media id of a provider's file: derived from what names it (account, channel, provider
   * message id), so a retried job finds the file it kept before instead of keeping it twice.
   */
  idFor(accountId: string, key: string): string {
    const digest = createHash('sha256').update(`${accountId}\n${key}`).digest('hex');
    return `med_${digest.slice(0, 32)}`;
  }

  urlOf(id: string): string {
    return `${this.deps.publicUrl}/v1/media/${id}`;
  }

  async has(accountId: string, id: string): Promise<boolean> {
    return this.deps.media.exists(accountId, id);
  }

  async keep(accountId: string, id: string, file: StoredMedia): Promise<string> {
    await this.deps.media.insertOnce({
      account_id: accountId,
      id,
      content_type: file.contentType,
      filename: file.filename,
      size: file.bytes.length,
      bytes: file.bytes,
      created_at: this.deps.clock.now(),
    });
    return this.urlOf(id);
  }

  /** The account's file; another account's id is simply not found. */
  async get(scope: Scope, id: string): Promise<StoredMedia> {
    const row = await this.deps.media.find(scope.accountId, id);
    if (!row) throw new NotFound('media', id);
    return { contentType: row.content_type, filename: row.filename, bytes: row.bytes };
  }

  /**
   * Refuses a download URL that a provider handed out when it points at a private, loopback,
   * link-local or reserved address (unless ALLOW_PRIVATE_TARGETS), or is not https (our token
   * goes with it). The name is resolved here, before the download connects: a DNS answer that
   * changes in between is not caught (see the report on GraphClient.download).
   */
  async checkDownloadUrl(raw: string): Promise<void> {
    let url: URL;
    try {
      url = new URL(raw);
    } catch {
      throw new MediaUrlRefused('the download URL is not a valid URL');
    }
    if (url.protocol !== 'https:' && !(this.deps.allowPrivate && url.protocol === 'http:'))
      throw new MediaUrlRefused('the download URL is not https://');
    if (url.username || url.password)
      throw new MediaUrlRefused('the download URL carries credentials');
    if (this.deps.allowPrivate) return;
    const host = url.hostname.replace(/^\[|\]$/g, '');
    let addresses: string[];
    if (net.isIP(host)) addresses = [host];
    else {
      try {
        addresses = await (this.deps.lookup ?? lookupAll)(host);
      } catch {
        // Perhaps a passing DNS fault: a plain error, so the download is tried again.
        throw new Error(`the download host ${host} does not resolve`);
      }
    }
    if (addresses.length === 0 || addresses.some(isPrivateAddress))
      throw new MediaUrlRefused(`the download host ${host} is a private or reserved address`);
  }
}

async function lookupAll(host: string): Promise<string[]> {
  return (await dns.lookup(host, { all: true })).map((a) => a.address);
}
