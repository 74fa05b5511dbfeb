import type { ChannelProvider, OutboundMessage, ProviderResolver } from '../../channels/channel.js';
import type { ContactsService } from '../../contacts/contacts.service.js';
import { Batcher } from '../../db/batcher.js';
import type { Tx } from '../../db/database.js';
import type { Channel } from '../../db/schema.js';
import type { Scope } from '../../db/transactor.js';
import { ValidationError } from '../../errors.js';
import type { MediaFetcher, Uploads } from '../media.js';
import type { MessageObserver } from '../message-observer.js';
import { toMessage } from '../messages.present.js';
import type { MessageRow, QueuedMessage } from '../messages.repository.js';
import type { Message, SendMessageBody } from '../messages.schema.js';
import type { QueuedSend, SendPipeline } from '../send-pipeline.js';
import { noIdentity, type MessageQueue, type QueueResult, type SendRequest } from './queue.js';

/** How long the API waits for the provider's answer before answering `queued`. */
export const SEND_WAIT_MS = 10_000;

/** API sends queued per statement; more wait for the next. */
const QUEUE_GROUP_MAX = 200;

/**
 * Sending: an API send queued and handed to its provider, and queued messages handed on (a
 * send job's, a broadcast batch's). The provider is only ever reached through the SendPipeline.
 */
export class SendService {
  /**
   * API sends queued in groups across concurrent requests (group commit): each statement
   * queues the sends that arrived meanwhile, so that a send costs a share of one statement's
   * round trip. (The provider's answers are recorded in groups too, by the pipeline.) A group
   * that fails is run again one send at a time, so one request's failure is its own.
   */
  private readonly queueing = new Batcher<SendRequest, QueueResult>(
    (requests) => this.deps.queue.queueSends(requests),
    { maxBatch: QUEUE_GROUP_MAX, maxConcurrent: 2 },
  );

  constructor(
    private readonly deps: {
      queue: MessageQueue;
      contacts: ContactsService;
      providers: ProviderResolver;
      pipeline: SendPipeline;
      observer: MessageObserver;
      /** How long an API send waits for the provider's answer (SEND_WAIT_MS by default). */
      sendWaitMs?: number;
      fetchMedia: MediaFetcher;
      /** Files uploaded to send (`media_id`); without them `media_id` is refused. */
      uploads?: Uploads;
      log?: { error(obj: object, msg: string): void };
    },
  ) {}

  /**
   * Records the message `queued` with its send job, then (after the commit) hands it to the
   * provider and answers with what the provider said within SEND_WAIT_MS: `sent`, `failed`, or
   * still `queued` (the job tries again).
   */
  async send(scope: Scope, body: SendMessageBody): Promise<Message> {
    checkFields(body);
    const contact = await this.deps.contacts.get(scope, body.contact_id);
    // Decided before anything is written: an unconnected channel is a 422 with nothing stored,
    // and so is a contact the channel's real provider has no way to address.
    const { provider, connectionId } = await this.deps.providers.resolveWithConnection(
      scope.accountId,
      body.channel,
    );
    if (!provider.reachesAnyContact && !contact.identities.some((i) => i.channel === body.channel))
      throw noIdentity(body.channel, contact.id);
    const mediaUrl = await this.mediaOf(scope.accountId, body);
    const queued = await this.queueing.submit({
      scope,
      channel: body.channel,
      provider,
      connectionId,
      contactId: contact.id,
      type: body.type,
      content: body.content ?? null,
      template:
        body.type === 'template'
          ? { name: body.template_name!, params: body.template_params ?? [] }
          : null,
      mediaUrl,
    });
    if (queued.error) throw queued.error;
    const { row, to, job } = queued as Required<Pick<QueueResult, 'row' | 'to' | 'job'>>;
    const attempt = this.queuedSend(scope.accountId, body.channel, job, 1, connectionId, [
      { row, channel: body.channel, contactId: contact.id, ...to },
    ])
      .then((send) => this.deps.pipeline.attempt(send, provider))
      .then((results) => results.get(row.id)?.row ?? null);
    // The wait's timer is cleared as soon as the attempt settles: left to run its 10 s, each
    // send's timer and promise would outlive V8's young generation and pile up in old space.
    let wait: NodeJS.Timeout | undefined;
    const answered = await Promise.race([
      attempt,
      new Promise<null>((resolve) => {
        wait = setTimeout(() => resolve(null), this.deps.sendWaitMs ?? SEND_WAIT_MS).unref();
      }),
    ])
      .catch((err: unknown) => {
        // Recorded and queued: the job sends it when its lease ends.
        this.deps.log?.error({ err, message: row.id }, 'recording a send attempt failed');
        return null;
      })
      .finally(() => clearTimeout(wait));
    return toMessage(answered ?? row);
  }

  /**
   * Hands queued messages to the provider and records what it said (see SendPipeline); answers
   * with each message's row as it now stands (absent: unchanged, still queued).
   */
  async dispatch(
    accountId: string,
    channel: Channel,
    job: { id: string; lease: Date },
    queued: QueuedMessage[],
    provider?: ChannelProvider,
    attempt = 1,
    /** The connection the messages were queued for (null: the sandbox), when known. */
    connectionId?: string | null,
  ): Promise<Map<string, MessageRow>> {
    const results = await this.deps.pipeline.attempt(
      await this.queuedSend(accountId, channel, job, attempt, connectionId, queued),
      provider,
    );
    const rows = new Map<string, MessageRow>();
    for (const [id, r] of results) if (r.row) rows.set(id, r.row);
    return rows;
  }

  /**
   * Fails what a dead send job still held queued (it could not even be recorded for 24 hours'
   * worth of attempts), with `message.failed` for each; in the transaction that buries the job.
   */
  async failQueued(trx: Tx, accountId: string, ids: string[], reason: string): Promise<void> {
    await this.deps.pipeline.recordFailures(trx, accountId, ids, `sending stopped: ${reason}`);
  }

  /**
   * The media URL an image or document message keeps: an uploaded file's (`media_id`, of this
   * account and of a type the message may carry), or `media_url` fetched and checked. Both
   * before the transaction: a slow media host must not hold a database lock.
   */
  private async mediaOf(accountId: string, body: SendMessageBody): Promise<string | null> {
    if (body.type !== 'image' && body.type !== 'document') return null;
    if (body.media_id === undefined)
      return (await this.deps.fetchMedia(body.media_url!, body.type, accountId)).url;
    if (!this.deps.uploads) throw new ValidationError('media_id', 'uploads are not available');
    const file = await this.deps.uploads.attachable(accountId, body.media_id);
    if (body.type === 'image' && !file.contentType.startsWith('image/'))
      throw new ValidationError('media_id', `is not an image (it is ${file.contentType})`);
    return file.url;
  }

  /**
   * What the provider is given for a queued message; a file of ours goes as a signed link
   * made for this attempt (it expires), with the file's name.
   */
  private async outbound(accountId: string, q: QueuedMessage): Promise<OutboundMessage> {
    const message = toOutbound(accountId, q);
    if (!message.media || !this.deps.uploads) return message;
    const link = await this.deps.uploads.providerLink(accountId, message.media.url);
    return link ? { ...message, media: link } : message;
  }

  /** A send of queued messages, as the pipeline takes it. */
  private async queuedSend(
    accountId: string,
    channel: Channel,
    job: { id: string; lease: Date },
    attempt: number,
    connectionId: string | null | undefined,
    queued: QueuedMessage[],
  ): Promise<QueuedSend> {
    const messages = await Promise.all(queued.map((q) => this.outbound(accountId, q)));
    return {
      accountId,
      channel,
      jobId: job.id,
      // The caller's claim itself: a renewal by the pipeline moves it for the caller too (a job
      // runner settles the job only while locked_until equals it).
      get lease() {
        return job.lease;
      },
      set lease(until: Date) {
        job.lease = until;
      },
      attempt,
      connectionId,
      messages,
      observed: queued.some((q) => this.deps.observer.observes(q.row)),
    };
  }
}

/** What may accompany each message type: a field outside its type is a mistake worth reporting. */
function checkFields(body: SendMessageBody): void {
  const require = (field: keyof SendMessageBody) => {
    if (body[field] === undefined)
      throw new ValidationError(field, `is required when type is ${body.type}`);
  };
  const forbid = (field: keyof SendMessageBody) => {
    if (body[field] !== undefined)
      throw new ValidationError(field, `is not allowed when type is ${body.type}`);
  };
  switch (body.type) {
    case 'text':
      require('content');
      forbid('template_name');
      forbid('template_params');
      forbid('media_url');
      forbid('media_id');
      break;
    case 'template':
      require('template_name');
      forbid('content');
      forbid('media_url');
      forbid('media_id');
      break;
    case 'image':
    case 'document':
      if (body.media_url === undefined && body.media_id === undefined)
        throw new ValidationError(
          'media_url',
          `is required when type is ${body.type} (or media_id, an uploaded file)`,
        );
      if (body.media_url !== undefined && body.media_id !== undefined)
        throw new ValidationError('media_id', 'is not allowed with media_url: give one of them');
      forbid('template_name');
      forbid('template_params');
      break;
  }
}

/** What the provider is given for a queued message. */
function toOutbound(accountId: string, q: QueuedMessage): OutboundMessage {
  const { row } = q;
  const params = row.template_params;
  return {
    accountId,
    messageId: row.id,
    channel: q.channel,
    to: { contactId: q.contactId, phone: q.phone, identity: q.identity },
    type: row.type,
    content: row.content,
    template:
      row.type === 'template' && row.template_name
        ? { name: row.template_name, language: row.template_language ?? 'en', params: params ?? [] }
        : null,
    media: row.media_url ? { url: row.media_url, filename: filenameOf(row.media_url) } : null,
  };
}

/** The last path segment of a URL, as a document's file name; null when there is none. */
function filenameOf(url: string): string | null {
  try {
    const last = new URL(url).pathname.split('/').pop();
    return last ? decodeURIComponent(last).slice(0, 240) || null : null;
  } catch {
    return null;
  }
}
