import { createHash } from 'node:crypto';
import dns from 'node:dns/promises';
import net from 'node:net';
import type { Clock } from '../clock.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { Forbidden, NotFound, ValidationError } from '../errors.js';
import { newId } from '../ids.js';
import { isPrivateAddress } from '../net/address-guard.js';
import { detectFileType, type FileType } from './file-type.js';
import type { MediaLinks } from './media-links.js';
import type { MediaRepository } from './media.repository.js';
import type { UploadedMedia } from './media.schema.js';

/** A file as served by GET /v1/media/{id}. */
export interface StoredMedia {
  contentType: string;
  filename: string | null;
  bytes: Buffer;
}

/** Why a media URL may not be fetched; never worth retrying. */
export class MediaUrlRefused extends Error {}

/** An upload as the route read it: its bytes and the name it came under (if any). */
export interface UploadedFile {
  bytes: Buffer;
  filename: string | null;
}

/**
 * Media the service keeps for the account (inbound files from providers, which their own URLs
 * stop serving after minutes; files uploaded to send) and serves at `{PUBLIC_URL}/v1/media/{id}`,
 * and to those without an API key (a provider, a webchat visitor) at a signed
 * `{PUBLIC_URL}/media/{token}` that expires.
 */
export class MediaService {
  constructor(
    private readonly deps: {
      media: MediaRepository;
      /** For uploads: their row and an idempotent request's record commit together. */
      tx?: Transactor;
      /** MEDIA_MAX_BYTES: the largest upload. */
      maxUploadBytes?: number;
      /** Signs links to files; null without SECRETS_KEY (then no link is handed out). */
      links?: MediaLinks | null;
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

  /** The largest file `POST /v1/media` takes. */
  get maxUploadBytes(): number {
    return this.deps.maxUploadBytes ?? 16 * 1024 * 1024;
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

  /**
   * Keeps an upload under a new id, as the type its bytes show (never its name's or the type its
   * sender declared); a file of no accepted type is a 422.
   */
  async upload(scope: Scope, file: UploadedFile): Promise<UploadedMedia> {
    const type = detectFileType(file.bytes);
    if (!type)
      throw new ValidationError(
        'file',
        `is not a file of an accepted type (by its content): ${ACCEPTED_NAMES}`,
      );
    const filename = fileNameFor(file.filename, type);
    const row = {
      account_id: scope.accountId,
      id: newId('med'),
      content_type: type.contentType,
      filename,
      size: file.bytes.length,
      bytes: file.bytes,
      created_at: this.deps.clock.now(),
    };
    const tx = this.deps.tx;
    if (!tx) throw new Error('MediaService was built without a Transactor');
    return tx.run(scope, async (trx) => {
      await this.deps.media.insert(trx, row);
      return { id: row.id, content_type: row.content_type, size: row.size, filename };
    });
  }

  /**
   * A file of the account to attach to a message: the URL the message keeps (the one inbound
   * media have) and its content type. Another account's id, or an unknown one, is a 404.
   */
  async attachable(accountId: string, id: string): Promise<{ url: string; contentType: string }> {
    const meta = await this.deps.media.findMeta(accountId, id);
    if (!meta) throw new NotFound('media', id);
    return { url: this.urlOf(id), contentType: meta.content_type };
  }

  /** The media id in one of our `/v1/media/{id}` URLs, or null for any other URL. */
  private idIn(url: string): string | null {
    const prefix = `${this.deps.publicUrl}/v1/media/`;
    if (!url.startsWith(prefix)) return null;
    const id = url.slice(prefix.length);
    return /^med_[A-Za-z0-9]+$/.test(id) ? id : null;
  }

  /**
   * The signed link that stands for one of our `/v1/media/{id}` URLs where no API key goes with
   * the request; null for any other URL, or without SECRETS_KEY. `filename`, when given, ends the
   * link (a provider may take the attachment's name from it); the signature does not cover it.
   */
  publicLink(accountId: string, url: string, filename?: string | null): string | null {
    const id = this.idIn(url);
    const links = this.deps.links;
    if (!id || !links) return null;
    const signature = links.sign({ accountId, mediaId: id }, this.deps.clock.now());
    const name = filename ? `/${encodeURIComponent(filename)}` : '';
    return `${this.deps.publicUrl}/media/${encodeURIComponent(accountId)}/${id}/${signature}${name}`;
  }

  /** What a provider fetches for a message's media URL of ours, with the file's name; else null. */
  async providerLink(
    accountId: string,
    url: string,
  ): Promise<{ url: string; filename: string | null } | null> {
    const id = this.idIn(url);
    if (!id || !this.deps.links) return null;
    const meta = await this.deps.media.findMeta(accountId, id);
    const link = this.publicLink(accountId, url, meta?.filename);
    return link ? { url: link, filename: meta?.filename ?? null } : null;
  }

  /** The file a signed link names: a forged, altered or expired link is a 403. */
  async getByLink(
    claim: { accountId: string; mediaId: string },
    signature: string,
  ): Promise<StoredMedia> {
    const verdict = this.deps.links?.verify(claim, signature, this.deps.clock.now()) ?? 'invalid';
    if (verdict === 'expired') throw new Forbidden('this media link has expired');
    if (verdict === 'invalid') throw new Forbidden('this media link is not valid');
    return this.get({ accountId: claim.accountId }, claim.mediaId);
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

const ACCEPTED_NAMES = 'JPEG, PNG, WebP, PDF, Word, Excel, PowerPoint or OpenDocument';

/**
 * The name an upload is kept under: the part's, without a path, control characters or lone
 * surrogates, at most 200 characters, ending in the extension of the type its bytes show
 * (`scan.pdf` holding a PNG becomes `scan.png`; no name at all, `file.png`).
 */
export function fileNameFor(given: string | null, type: FileType): string {
  const base = (given ?? '')
    .split(/[\\/]/)
    .pop()!
    .replace(
      /[\u0000-\u001f\u007f]|[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g,
      '',
    )
    .trim();
  const dot = base.lastIndexOf('.');
  const ext = dot > 0 ? base.slice(dot + 1).toLowerCase() : '';
  // By code points: a cut through a surrogate pair would leave half of it.
  const stem = [...(dot > 0 ? base.slice(0, dot) : base)].slice(0, 190).join('') || 'file';
  const keep = type.extensions.includes(ext) ? ext : type.extensions[0]!;
  return `${stem}.${keep}`;
}

async function lookupAll(host: string): Promise<string[]> {
  return (await dns.lookup(host, { all: true })).map((a) => a.address);
}
