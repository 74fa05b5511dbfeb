import type {
  ChannelProvider,
  InboundMessage,
  OutboundMessage,
  ProviderResolver,
  StatusUpdate,
} from '../channels/channel.js';
import { Batcher } from '../db/batcher.js';
import { CUSTOMER_WINDOW_MS, outsideWindow, windowed } from './window.js';
import { addressOn } from '../contacts/identities.js';
import type { Clock } from '../clock.js';
import { checkPhone, type ContactsService } from '../contacts/contacts.service.js';
import type { Db, Tx } from '../db/database.js';
import type { Channel } from '../db/schema.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { AppError, NotFound, ValidationError } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import { newId } from '../ids.js';
import type { JobQueue, NewJob } from '../jobs/job-queue.js';
import type { ConversationsRepository } from '../conversations/conversations.repository.js';
import type { ApprovedTemplate, TemplatesService } from '../templates/templates.service.js';
import type { FetchedMedia, MediaFetcher } from './media.js';
import type { MessageObserver } from './message-observer.js';
import {
  FORWARD_FROM,
  type MessageRow,
  type MessagesRepository,
  type AtOnceSend,
  type QueuedMessage,
} from './messages.repository.js';
import { SEND_LEASE_MS, type QueuedSend, type SendPipeline } from './send-pipeline.js';
import { toMessage } from './messages.present.js';
import type { Message, SendMessageBody } from './messages.schema.js';

export { CUSTOMER_WINDOW_MS };

/** How long the API waits for the provider's answer before answering `queued`. */
export const SEND_WAIT_MS = 10_000;

export interface QueueResult {
  contactId: string;
  row?: MessageRow;
  error?: AppError;
  /** Where the message goes, read with the contact locked (set with `row`). */
  to?: { phone: string | null; identity: string | null };
  /** The message's own send job, held under `lease` (with `row`, when jobs are `each`). */
  job?: { id: string; lease: Date };
}

/** A batch recorded `queued`, with the send job (held under `lease`) that carries it. */
export interface QueuedBatch {
  results: QueueResult[];
  job: { id: string; lease: Date } | null;
}

/** What is sent: the same for a whole broadcast batch, or one API send's own. */
export interface Draft {
  type: SendMessageBody['type'];
  /** The text, a caption, or a template's rendered text. */
  content: string | null;
  template: TemplateRef | null;
  mediaUrl: string | null;
}

export interface Recipient {
  contactId: string;
  /** This recipient's own message, instead of the batch's. */
  message?: Draft;
}

/** One API send waiting to be queued in a group (see MessagesService.queueSends). */
interface SendRequest {
  scope: Scope;
  channel: Channel;
  provider: ChannelProvider;
  /** The connection the message is queued for (null: the sandbox); its job records it. */
  connectionId: string | null;
  contactId: string;
  type: SendMessageBody['type'];
  content: string | null;
  template: { name: string; params: string[] } | null;
  mediaUrl: string | null;
}

/** API sends queued per transaction; more wait for the next. */
const QUEUE_GROUP_MAX = 200;

/**
 * A real provider can only reach a contact through its id on the channel: on messenger,
 * instagram and webchat the person must have written first, on whatsapp the contact needs a
 * phone. (The sandbox addresses every contact.)
 */
export function noIdentity(channel: Channel, contactId: string): AppError {
  const [why, issue] =
    channel === 'whatsapp'
      ? [
          `contact ${contactId} has no phone: on whatsapp a contact is reached by its phone number; set one with PUT /v1/contacts/${contactId}`,
          'the contact has no phone',
        ]
      : [
          `contact ${contactId} has no ${channel} identity: on ${channel} a contact must write first`,
          `the contact has no ${channel} identity`,
        ];
  return new AppError('validation_error', why, 422, [{ field: 'contact_id', issue }]);
}

/** The event of each status a delivery report moves a message to. */
const STATUS_EVENTS = {
  delivered: 'message.delivered',
  read: 'message.read',
  failed: 'message.failed',
} as const;

/** An inbound message from a sender known by phone (see MessagesService.receiveMany). */
export type PhoneInboundMessage = InboundMessage & {
  from: { phone: string; name?: string | null };
};

/** What every inbound message needs: its text, or its file. */
function checkInbound(inbound: InboundMessage): void {
  if (inbound.type === 'text' && inbound.content === null)
    throw new ValidationError('content', 'is required when type is text');
  if (inbound.type !== 'text' && inbound.mediaUrl === null)
    throw new ValidationError('media_url', `is required when type is ${inbound.type}`);
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
      break;
    case 'template':
      require('template_name');
      forbid('content');
      forbid('media_url');
      break;
    case 'image':
    case 'document':
      require('media_url');
      forbid('template_name');
      forbid('template_params');
      break;
  }
}

/** Sending, receiving and delivery status of messages. */
export class MessagesService {
  /**
   * API sends queued in groups across concurrent requests (group commit): each transaction
   * queues the sends that arrived meanwhile, so that a send costs a share of one transaction's
   * round trips. (The provider's answers are recorded in groups too, by the pipeline.) A group
   * that fails is run again one send at a time, so one request's failure is its own.
   */
  private readonly queueing = new Batcher<SendRequest, QueueResult>(
    (requests) => this.queueGroup(requests),
    { maxBatch: QUEUE_GROUP_MAX, maxConcurrent: 2 },
  );

  constructor(
    private readonly deps: {
      tx: Transactor;
      messages: MessagesRepository;
      conversations: ConversationsRepository;
      contacts: ContactsService;
      templates: TemplatesService;
      providers: ProviderResolver;
      pipeline: SendPipeline;
      jobs: JobQueue;
      observer: MessageObserver;
      /** How long a send's first attempt holds its job (SEND_LEASE_MS by default). */
      sendLeaseMs?: number;
      /** How long an API send waits for the provider's answer (SEND_WAIT_MS by default). */
      sendWaitMs?: number;
      outbox: Outbox;
      fetchMedia: MediaFetcher;
      clock: Clock;
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
    const requireIdentity = provider.name !== 'sandbox';
    if (requireIdentity && !contact.identities.some((i) => i.channel === body.channel))
      throw noIdentity(body.channel, contact.id);
    let media: FetchedMedia | null = null;
    if (body.type === 'image' || body.type === 'document') {
      // Fetched before the transaction: a slow media host must not hold a database lock.
      media = await this.deps.fetchMedia(body.media_url!, body.type, scope.accountId);
    }
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
      mediaUrl: media?.url ?? null,
    });
    if (queued.error) throw queued.error;
    const { row, to, job } = queued as Required<Pick<QueueResult, 'row' | 'to' | 'job'>>;
    const send = this.queuedSend(scope.accountId, body.channel, job, 1, connectionId, [
      { row, channel: body.channel, contactId: contact.id, ...to },
    ]);
    const attempt = this.deps.pipeline
      .attempt(send, provider)
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
      this.queuedSend(accountId, channel, job, attempt, connectionId, queued),
      provider,
    );
    const rows = new Map<string, MessageRow>();
    for (const [id, r] of results) if (r.row) rows.set(id, r.row);
    return rows;
  }

  /** A send of queued messages, as the pipeline takes it. */
  private queuedSend(
    accountId: string,
    channel: Channel,
    job: { id: string; lease: Date },
    attempt: number,
    connectionId: string | null | undefined,
    queued: QueuedMessage[],
  ): QueuedSend {
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
      messages: queued.map((q) => toOutbound(accountId, q)),
      observed: queued.some((q) => this.deps.observer.observes(q.row)),
    };
  }

  /**
   * Fails what a dead send job still held queued (it could not even be recorded for 24 hours'
   * worth of attempts), with `message.failed` for each; in the transaction that buries the job.
   */
  async failQueued(trx: Tx, accountId: string, ids: string[], reason: string): Promise<void> {
    await this.deps.pipeline.recordFailures(trx, accountId, ids, `sending stopped: ${reason}`);
  }

  /**
   * One group of API sends: in one statement when none writes an idempotency record and all are
   * of one kind, windowed or not (see `queueAtOnce`), else in one transaction (see `queueSends`).
   */
  private async queueGroup(requests: SendRequest[]): Promise<QueueResult[]> {
    const kinds = new Set(requests.map((r) => windowed(r.channel, r.provider, r.type)));
    if (kinds.size === 1 && requests.every((r) => !r.scope.beforeCommit))
      return this.queueAtOnce(requests, kinds.has(true));
    const queued = await this.deps.tx.db
      .transaction()
      .execute((trx) => this.queueSends(trx, requests));
    for (const [index, request] of requests.entries())
      if (queued[index]!.row) request.scope.afterCommit?.();
    return queued;
  }

  /**
   * The messages of a group of API sends, templates rendered (each read once per account and
   * name); a send whose template cannot be used gets its error instead.
   */
  private async drafts(
    db: Tx | Db,
    requests: SendRequest[],
  ): Promise<{ results: QueueResult[]; drafts: Map<number, Draft> }> {
    const results = new Array<QueueResult>(requests.length);
    const drafts = new Map<number, Draft>();
    const templates = new Map<string, Promise<ApprovedTemplate>>();
    for (const [index, request] of requests.entries()) {
      const { scope, template } = request;
      let content = request.content;
      let ref: TemplateRef | null = null;
      if (template) {
        const key = `${scope.accountId}\u0000${template.name}`;
        let approved = templates.get(key);
        if (!approved) {
          approved = this.deps.templates.findApproved(db, scope.accountId, template.name);
          templates.set(key, approved);
        }
        try {
          const rendered = (await approved).render(template.params);
          content = rendered.content;
          ref = { name: template.name, language: rendered.language, params: template.params };
        } catch (err) {
          if (!(err instanceof AppError)) throw err;
          results[index] = { contactId: request.contactId, error: err };
          continue;
        }
      }
      drafts.set(index, { type: request.type, content, template: ref, mediaUrl: request.mediaUrl });
    }
    return { results, drafts };
  }

  /**
   * Queues a group of API sends that write no idempotency record, all needing the 24-hour
   * window or none, in one statement without a transaction (see MessagesRepository.queueAtOnce),
   * by the rules `queue` applies: a contact gone is a 404, one the channel's real provider
   * cannot reach a 422, one outside its window a 422; each the request's own. Each send has its
   * own job, held by the caller.
   */
  private async queueAtOnce(requests: SendRequest[], inWindow: boolean): Promise<QueueResult[]> {
    const db = this.deps.tx.db;
    const { results, drafts } = await this.drafts(db, requests);
    const now = this.deps.clock.now();
    const lease = new Date(now.getTime() + (this.deps.sendLeaseMs ?? SEND_LEASE_MS));
    const sends: { index: number; send: AtOnceSend }[] = [];
    for (const [index, draft] of drafts) {
      const { scope, channel, provider, connectionId, contactId } = requests[index]!;
      const row = outboundRow(scope.accountId, draft, null, now);
      const [job] = this.deps.jobs.rowsOf([
        sendJob(scope.accountId, [row.id], lease, connectionId),
      ]);
      sends.push({
        index,
        send: { row, contactId, channel, anyContact: provider.name === 'sandbox', job: job! },
      });
    }
    const found = new Map(
      (
        await this.deps.messages.queueAtOnce(
          db,
          sends.map((s) => s.send),
          now,
          inWindow ? new Date(now.getTime() - CUSTOMER_WINDOW_MS) : null,
        )
      ).map((a) => [[a.accountId, a.channel, a.contactId].join('\u0000'), a]),
    );
    for (const { index, send } of sends) {
      const { row, contactId, channel, job } = send;
      const address = found.get([row.account_id, channel, contactId].join('\u0000'));
      if (!address) results[index] = { contactId, error: new NotFound('contact', contactId) };
      else if (!address.reachable)
        results[index] = { contactId, error: noIdentity(channel, contactId) };
      else if (address.conversationId === null)
        results[index] = {
          contactId,
          error: outsideWindow(channel, requests[index]!.provider),
        };
      else
        results[index] = {
          contactId,
          row: { ...row, conversation_id: address.conversationId },
          to: {
            phone: address.phone,
            identity: addressOn(channel, address.phone, address.externalId),
          },
          job: { id: job.id, lease },
        };
    }
    return results;
  }

  /**
   * Queues a group of API sends in the caller's transaction: each account's and channel's sends
   * queued together (see `queue`), each with its own send job and the idempotency record of its
   * request. A send the rules refuse answers its error and leaves the others be.
   */
  private async queueSends(trx: Tx, requests: SendRequest[]): Promise<QueueResult[]> {
    const { results, drafts } = await this.drafts(trx, requests);
    const groups = new Map<string, { index: number; recipient: Recipient }[]>();
    for (const [index, message] of drafts) {
      const request = requests[index]!;
      // Sends that share an account, a channel and its connection are queued together.
      const key = [
        request.scope.accountId,
        request.channel,
        request.provider.name,
        request.connectionId ?? '',
      ].join('\u0000');
      const group = groups.get(key) ?? [];
      groups.set(key, group);
      group.push({ index, recipient: { contactId: request.contactId, message } });
    }
    // In one order (account, then channel), so that groups lock rows in one order everywhere.
    for (const key of [...groups.keys()].sort()) {
      const group = groups.get(key)!;
      const first = requests[group[0]!.index]!;
      const queued = await this.queue(trx, first.scope.accountId, {
        channel: first.channel,
        // Each recipient carries its own message; the batch's is only the default `queue` asks.
        message: group[0]!.recipient.message!,
        broadcastId: null,
        recipients: group.map((g) => g.recipient),
        provider: first.provider,
        connectionId: first.connectionId,
        jobs: 'each',
      });
      queued.results.forEach((result, i) => (results[group[i]!.index] = result));
    }
    for (const [index, request] of requests.entries()) {
      const { row } = results[index]!;
      // The queued message is the response recorded for a retry of an idempotent request.
      if (row && request.scope.beforeCommit) await request.scope.beforeCommit(trx, toMessage(row));
    }
    return results;
  }

  /**
   * The one way into sending, for the API (see `queueSends`) and for broadcasts: the
   * recipients' contacts locked (none can be merged away or deleted meanwhile) with their
   * addresses on the channel, conversations found or created and locked, the 24-hour window
   * checked per recipient, the messages stored `queued` with their send jobs held by the caller
   * (one for the batch, or one each), all in the caller's transaction. A recipient the rules
   * refuse (gone, no identity on the channel for a real provider, outside the window) gets an
   * error instead of a message; the others are unaffected.
   */
  async queue(
    trx: Tx,
    accountId: string,
    batch: {
      channel: Channel;
      /** What every recipient is sent, unless it has a message of its own. */
      message: Draft;
      broadcastId: string | null;
      recipients: Recipient[];
      /**
       * The channel's provider. A real one (not the sandbox) cannot reach a recipient without
       * an identity on the channel; and whether templates may pass the 24-hour window is the
       * provider's rule (Meta allows it on WhatsApp, not on Messenger or Instagram).
       */
      provider: ChannelProvider;
      /** The connection the messages are queued for (null: the sandbox), when known. */
      connectionId?: string | null;
      /** One send job for the whole batch (the default), or one per message. */
      jobs?: 'one' | 'each';
    },
  ): Promise<QueuedBatch> {
    const now = this.deps.clock.now();
    // Sorted, so that concurrent batches lock contacts, then conversations, in one order and
    // never deadlock (a merge locks contacts in id order too, before their conversations).
    const addresses = await this.deps.contacts.lockForMessaging(
      trx,
      accountId,
      [...new Set(batch.recipients.map((r) => r.contactId))],
      batch.channel,
    );
    const refusals = new Map<string, AppError>();
    const to = new Map<string, { phone: string | null; identity: string | null }>();
    for (const { contactId } of batch.recipients) {
      const address = addresses.get(contactId);
      const identity = address ? addressOn(batch.channel, address.phone, address.identity) : null;
      if (!address) refusals.set(contactId, new NotFound('contact', contactId));
      else if (batch.provider.name !== 'sandbox' && identity === null)
        refusals.set(contactId, noIdentity(batch.channel, contactId));
      else to.set(contactId, { phone: address.phone, identity });
    }
    const messageOf = (r: Recipient) => r.message ?? batch.message;
    const isWindowed = (r: Recipient) => windowed(batch.channel, batch.provider, messageOf(r).type);
    const addressable = batch.recipients.filter((r) => to.has(r.contactId));
    const contactsOf = (rs: Recipient[]) => [...new Set(rs.map((r) => r.contactId))].sort();
    // Inside the window there is always a conversation (the contact wrote in it), so a windowed
    // send only locks existing ones and never leaves an empty conversation for a refused recipient.
    const inWindow = contactsOf(addressable.filter(isWindowed));
    const opening = contactsOf(addressable.filter((r) => !isWindowed(r)));
    // A group with both kinds (API sends queued together) first locks every existing
    // conversation it needs in one sorted pass: locking the two sets one after the other could
    // take two rows in opposite orders in two concurrent groups.
    const windowedContacts = new Set(inWindow);
    const existing = await this.deps.conversations.lockExisting(
      trx,
      accountId,
      inWindow.length > 0 && opening.length > 0 ? contactsOf(addressable) : inWindow,
      batch.channel,
    );
    const conversations = new Map([
      ...[...existing].filter(([contactId]) => windowedContacts.has(contactId)),
      ...(opening.length > 0
        ? await this.deps.conversations.openMany(trx, accountId, opening, batch.channel, now)
        : []),
    ]);
    const results: QueueResult[] = [];
    const rows: MessageRow[] = [];
    const touched = new Set<string>();
    for (const recipient of batch.recipients) {
      const refusal = refusals.get(recipient.contactId);
      if (refusal) {
        results.push({ contactId: recipient.contactId, error: refusal });
        continue;
      }
      const conversation = conversations.get(recipient.contactId);
      const last = conversation?.last_inbound_at;
      const inside = isWindowed(recipient);
      if (
        !conversation ||
        (inside && (!last || now.getTime() - last.getTime() >= CUSTOMER_WINDOW_MS))
      ) {
        results.push({
          contactId: recipient.contactId,
          error: outsideWindow(batch.channel, batch.provider),
        });
        continue;
      }
      const row: MessageRow = {
        ...outboundRow(accountId, messageOf(recipient), batch.broadcastId, now),
        conversation_id: conversation.id,
      };
      if (inside) touched.add(conversation.id);
      rows.push(row);
      results.push({ contactId: recipient.contactId, row, to: to.get(recipient.contactId)! });
    }
    if (rows.length === 0) return { results, job: null };
    // Sending is activity and reopens a resolved conversation (openMany did so already).
    if (touched.size > 0)
      await this.deps.conversations.touchOpen(trx, accountId, [...touched], now);
    const lease = new Date(now.getTime() + (this.deps.sendLeaseMs ?? SEND_LEASE_MS));
    // Each API send's own job, or one for the whole batch; written with the messages.
    const jobs = this.deps.jobs.rowsOf(
      (batch.jobs === 'each' ? rows.map((r) => [r.id]) : [rows.map((r) => r.id)]).map((ids) =>
        sendJob(accountId, ids, lease, batch.connectionId, batch.broadcastId),
      ),
    );
    await this.deps.messages.insertWithJobs(trx, rows, jobs);
    if (batch.jobs === 'each') {
      let next = 0;
      for (const result of results) if (result.row) result.job = { id: jobs[next++]!.id, lease };
      return { results, job: null };
    }
    return { results, job: { id: jobs[0]!.id, lease } };
  }

  /**
   * An inbound message: contact and conversation found or created, the window opened, the
   * event recorded. A provider message id already recorded takes effect once: the message as
   * first recorded is returned and nothing else happens.
   */
  async receive(scope: Scope, inbound: InboundMessage): Promise<Message> {
    checkInbound(inbound);
    const providerId = inbound.providerMessageId ?? null;
    if (providerId !== null) {
      const seen = await this.deps.messages.findByProviderId(
        this.deps.tx.db,
        scope.accountId,
        providerId,
      );
      if (seen) return toMessage(seen);
    }
    return this.deps.tx.run(scope, async (trx) => {
      // The contact stays locked until the commit: a merge waits for this message, or this
      // message finds the contact a merge made.
      const from = inbound.from;
      const contact =
        'contactId' in from
          ? await this.deps.contacts.lockInTransaction(trx, scope.accountId, from.contactId)
          : 'identity' in from
            ? await this.deps.contacts.findOrCreateByIdentity(
                trx,
                scope.accountId,
                inbound.channel,
                from.identity,
                from.name ?? null,
              )
            : await this.deps.contacts.findOrCreateByPhone(
                trx,
                scope.accountId,
                from.phone,
                from.name ?? null,
              );
      const now = this.deps.clock.now();
      const conversations = await this.deps.conversations.openMany(
        trx,
        scope.accountId,
        [contact.id],
        inbound.channel,
        now,
      );
      const conversation = conversations.get(contact.id)!;
      const row: MessageRow = {
        account_id: scope.accountId,
        id: newId('msg'),
        conversation_id: conversation.id,
        direction: 'inbound',
        type: inbound.type,
        content: inbound.content,
        media_url: inbound.mediaUrl,
        template_name: null,
        template_language: null,
        template_params: null,
        status: 'delivered',
        failure_reason: null,
        provider_message_id: providerId,
        broadcast_id: null,
        created_at: now,
        updated_at: now,
      };
      if (!(await this.deps.messages.insertInbound(trx, row))) {
        // Recorded meanwhile by a concurrent delivery of the same webhook.
        const seen = await this.deps.messages.findByProviderId(trx, scope.accountId, providerId!);
        return toMessage(seen!);
      }
      // The window opens when the provider says the person wrote, if that is earlier (a late
      // webhook cannot extend it), and never closes earlier than a window already open.
      const opened = inbound.sentAt && inbound.sentAt < now ? inbound.sentAt : now;
      const last = conversation.last_inbound_at;
      await this.deps.conversations.update(trx, scope.accountId, conversation.id, {
        status: 'open',
        last_inbound_at: last !== null && last > opened ? last : opened,
        updated_at: now,
      });
      await this.deps.observer.inboundReceived(trx, scope.accountId, [conversation.id], now);
      const message = toMessage(row);
      await this.deps.outbox.record(trx, scope.accountId, 'message.received', message);
      return message;
    });
  }

  /**
   * Inbound messages from senders known by phone (a provider webhook's, or several webhooks'),
   * recorded as `receive` records each but together: one transaction per account and channel,
   * a few statements however many messages, in the order given. Each result is the message (as
   * first recorded, for a provider id already known) or the error that refused it (a phone that
   * is no phone); a database failure fails the whole call, and nothing of it is kept.
   */
  async receiveMany(
    scope: Scope,
    inbound: PhoneInboundMessage[],
  ): Promise<Array<Message | AppError>> {
    const results: Array<Message | AppError | undefined> = inbound.map((m) => {
      try {
        checkInbound(m);
        checkPhone(m.from.phone);
        return undefined;
      } catch (err) {
        if (err instanceof AppError) return err;
        throw err;
      }
    });
    const providerIds = inbound.flatMap((m) => (m.providerMessageId ? [m.providerMessageId] : []));
    const seen = await this.deps.messages.findByProviderIds(
      this.deps.tx.db,
      scope.accountId,
      providerIds,
    );
    const groups = new Map<Channel, number[]>();
    /** Provider id → the index of its first message in this call; later ones are duplicates. */
    const firstOf = new Map<string, number>();
    const duplicates: Array<[number, number]> = [];
    inbound.forEach((m, i) => {
      if (results[i] !== undefined) return;
      const providerId = m.providerMessageId ?? null;
      const known = providerId === null ? undefined : seen.get(providerId);
      if (known) {
        results[i] = toMessage(known);
        return;
      }
      if (providerId !== null) {
        const first = firstOf.get(providerId);
        if (first !== undefined) return void duplicates.push([i, first]);
        firstOf.set(providerId, i);
      }
      groups.set(m.channel, [...(groups.get(m.channel) ?? []), i]);
    });
    for (const [channel, indexes] of groups) {
      const recorded = await this.recordInbound(
        scope,
        channel,
        indexes.map((i) => inbound[i]!),
      );
      indexes.forEach((i, k) => (results[i] = recorded[k]));
    }
    for (const [i, first] of duplicates) results[i] = results[first];
    return results as Array<Message | AppError>;
  }

  /** receiveMany's transaction: new messages of one channel, none of them known yet. */
  private async recordInbound(
    scope: Scope,
    channel: Channel,
    inbound: PhoneInboundMessage[],
  ): Promise<Message[]> {
    const { accountId } = scope;
    const recorded = await this.deps.tx.run(scope, async (trx) => {
      // Held until the commit, as `receive` holds its contact.
      const contacts = await this.deps.contacts.findOrCreateManyByPhone(
        trx,
        accountId,
        inbound.map((m) => ({ phone: m.from.phone, name: m.from.name ?? null })),
      );
      const now = this.deps.clock.now();
      const conversations = await this.deps.conversations.openMany(
        trx,
        accountId,
        [...contacts.values()].map((c) => c.id),
        channel,
        now,
        { inbound: true, inboundAt: windowsOpened(inbound, contacts, now) },
      );
      const rows: MessageRow[] = inbound.map((m) => ({
        account_id: accountId,
        id: newId('msg'),
        conversation_id: conversations.get(contacts.get(m.from.phone)!.id)!.id,
        direction: 'inbound',
        type: m.type,
        content: m.content,
        media_url: m.mediaUrl,
        template_name: null,
        template_language: null,
        template_params: null,
        status: 'delivered',
        failure_reason: null,
        provider_message_id: m.providerMessageId ?? null,
        broadcast_id: null,
        created_at: now,
        updated_at: now,
      }));
      const inserted = await this.deps.messages.insertInboundMany(trx, rows);
      const added = rows.filter((r) => inserted.has(r.id));
      const touched = [...new Set(added.map((r) => r.conversation_id))];
      await this.deps.observer.inboundReceived(trx, accountId, touched, now);
      const messages = rows.map(toMessage);
      await this.deps.outbox.recordMany(
        trx,
        accountId,
        messages
          .filter((m) => inserted.has(m.id))
          .map((data) => ({ type: 'message.received' as const, data })),
      );
      return { rows, inserted, messages };
    });
    // Recorded meanwhile by a concurrent delivery of the same webhook: the first one's message.
    const lost = recorded.rows.filter((r) => !recorded.inserted.has(r.id));
    const firsts = await this.deps.messages.findByProviderIds(
      this.deps.tx.db,
      accountId,
      lost.map((r) => r.provider_message_id!),
    );
    return recorded.rows.map((row, i) =>
      recorded.inserted.has(row.id)
        ? recorded.messages[i]!
        : toMessage(firsts.get(row.provider_message_id!)!),
    );
  }

  /**
   * A provider's delivery report. Statuses only move forward; a repeated, late or backward
   * update leaves the message as it is and emits nothing.
   */
  async applyStatus(scope: Scope, update: StatusUpdate): Promise<Message> {
    return this.deps.tx.run(scope, async (trx) => {
      const current = await this.deps.messages.find(scope.accountId, update.messageId, trx);
      if (!current) throw new NotFound('message', update.messageId);
      if (current.direction !== 'outbound')
        throw new ValidationError('status', 'only outbound messages have a delivery status');
      return toMessage(await this.advance(trx, scope.accountId, current.id, update));
    });
  }

  /**
   * A status report naming the message by the provider's id. `sent` confirms what is already
   * so. Answers null when no message has that id (yet: the report may overtake the provider's
   * answer to the send), so that the caller can try again later.
   */
  async applyProviderStatus(
    scope: Scope,
    report: {
      providerMessageId: string;
      status: 'sent' | 'delivered' | 'read' | 'failed';
      reason?: string;
    },
  ): Promise<Message | null> {
    return this.deps.tx.run(scope, async (trx) => {
      const current = await this.deps.messages.findByProviderId(
        trx,
        scope.accountId,
        report.providerMessageId,
      );
      if (!current || current.direction !== 'outbound') return null;
      if (report.status === 'sent') return toMessage(current);
      return toMessage(
        await this.advance(trx, scope.accountId, current.id, {
          messageId: current.id,
          status: report.status,
          reason: report.reason,
        }),
      );
    });
  }

  /**
   * Delivery reports naming messages by the provider's id, applied as applyProviderStatus
   * applies each (forward only, each move with its event, the broadcast funnel told), in one
   * transaction and a few statements however many: several reports on one message apply in
   * order. Each result says whether its report moved its message, changed nothing, or names no
   * outbound message of the account (yet).
   */
  async applyProviderStatusMany(
    scope: Scope,
    reports: {
      providerMessageId: string;
      status: 'delivered' | 'read' | 'failed';
      reason: string | null;
    }[],
  ): Promise<Array<'applied' | 'unchanged' | 'unknown'>> {
    if (reports.length === 0) return [];
    const { accountId } = scope;
    return this.deps.tx.run(scope, async (trx) => {
      const rows = await this.deps.messages.lockByProviderIds(trx, accountId, [
        ...new Set(reports.map((r) => r.providerMessageId)),
      ]);
      const byProviderId = new Map(
        rows.filter((r) => r.direction === 'outbound').map((r) => [r.provider_message_id!, r]),
      );
      /** Each reported message: where it started, and where the reports so far have taken it. */
      const moves = new Map<
        string,
        { from: MessageRow['status']; status: MessageRow['status']; reason: string | null }
      >();
      const steps: {
        id: string;
        status: 'delivered' | 'read' | 'failed';
        reason: string | null;
      }[] = [];
      const results = reports.map((report) => {
        const row = byProviderId.get(report.providerMessageId);
        if (!row) return 'unknown' as const;
        const move = moves.get(row.id) ?? {
          from: row.status,
          status: row.status,
          reason: row.failure_reason,
        };
        moves.set(row.id, move);
        if (!FORWARD_FROM[report.status].includes(move.status)) return 'unchanged' as const;
        move.status = report.status;
        move.reason = report.status === 'failed' ? report.reason : null;
        steps.push({ id: row.id, status: move.status, reason: move.reason });
        return 'applied' as const;
      });
      const moved = [...moves].filter(([, m]) => m.status !== m.from);
      if (moved.length === 0) return results;
      const now = this.deps.clock.now();
      const updated = new Map(
        (
          await this.deps.messages.setStatuses(
            trx,
            accountId,
            moved.map(([id, m]) => ({ id, status: m.status, reason: m.reason })),
            now,
          )
        ).map((row) => [row.id, row]),
      );
      await this.deps.observer.outboundChanged(
        trx,
        accountId,
        moved.map(([id, m]) => ({ row: updated.get(id)!, from: m.from })),
      );
      // Each step's event shows the message as that step left it.
      await this.deps.outbox.recordMany(
        trx,
        accountId,
        steps.map((step) => ({
          type: STATUS_EVENTS[step.status],
          data: toMessage({
            ...updated.get(step.id)!,
            status: step.status,
            failure_reason: step.reason,
          }),
        })),
      );
      return results;
    });
  }

  /** Whether a contact of the account already has this identity on the channel. */
  async knowsIdentity(scope: Scope, who: { channel: Channel; identity: string }): Promise<boolean> {
    return (
      (await this.deps.contacts.findByIdentity(scope, who.channel, who.identity)) !== undefined
    );
  }

  /**
   * A report that covers every message up to a point (Messenger's read watermark, a delivery
   * without ids, Instagram's read of one message): every outbound message of the conversation
   * on `channel` of the contact with this identity that the provider accepted, created at or
   * before the bound, moves forward, each with its event, in one transaction. `unknown` when
   * nobody has the identity or the bounding message is not known (yet).
   */
  async applyStatusUpTo(
    scope: Scope,
    report: {
      channel: Channel;
      identity: string;
      status: 'delivered' | 'read';
      upTo: { at: Date } | { providerMessageId: string };
    },
  ): Promise<'applied' | 'unchanged' | 'unknown'> {
    return this.deps.tx.run(scope, async (trx) => {
      const conversationId = await this.deps.messages.conversationOfIdentity(
        trx,
        scope.accountId,
        report.channel,
        report.identity,
      );
      if (!conversationId) return 'unknown';
      let bound: Date;
      if ('at' in report.upTo) {
        bound = report.upTo.at;
      } else {
        const read = await this.deps.messages.findByProviderId(
          trx,
          scope.accountId,
          report.upTo.providerMessageId,
        );
        if (!read || read.conversation_id !== conversationId || read.direction !== 'outbound')
          return 'unknown';
        bound = read.created_at;
      }
      const ids = await this.deps.messages.acceptedUpTo(
        trx,
        scope.accountId,
        conversationId,
        bound,
        report.status === 'read' ? ['sent', 'delivered'] : ['sent'],
      );
      let moved = 0;
      for (const id of ids) {
        const before = await this.deps.messages.find(scope.accountId, id, trx);
        const after = await this.advance(trx, scope.accountId, id, {
          messageId: id,
          status: report.status,
        });
        if (before && after.status !== before.status) moved++;
      }
      return moved > 0 ? 'applied' : 'unchanged';
    });
  }

  private async advance(
    trx: Tx,
    accountId: string,
    id: string,
    update: StatusUpdate,
  ): Promise<MessageRow> {
    const now = this.deps.clock.now();
    const moved = await this.deps.messages.advanceStatus(
      trx,
      accountId,
      id,
      update.status,
      update.reason ?? null,
      now,
    );
    if (!moved) return (await this.deps.messages.find(accountId, id, trx))!;
    await this.deps.observer.outboundChanged(trx, accountId, [moved]);
    const message = toMessage(moved.row);
    await this.deps.outbox.record(trx, accountId, STATUS_EVENTS[update.status], message);
    return moved.row;
  }
}

interface TemplateRef {
  name: string;
  language: string;
  params: string[];
}

/**
 * When each contact's 24-hour window opens for these messages, where that is before `now`: the
 * latest of their messages' provider times (each capped at `now`).
 */
function windowsOpened(
  inbound: PhoneInboundMessage[],
  contacts: Map<string, { id: string }>,
  now: Date,
): Map<string, Date> {
  const at = new Map<string, Date>();
  for (const m of inbound) {
    const id = contacts.get(m.from.phone)!.id;
    const sent = m.sentAt && m.sentAt < now ? m.sentAt : now;
    const before = at.get(id);
    if (!before || sent > before) at.set(id, sent);
  }
  return at;
}

/** A queued outbound message of `draft`, but for its conversation. */
function outboundRow(
  accountId: string,
  draft: Draft,
  broadcastId: string | null,
  now: Date,
): Omit<MessageRow, 'conversation_id'> {
  return {
    account_id: accountId,
    id: newId('msg'),
    direction: 'outbound',
    type: draft.type,
    content: draft.content,
    media_url: draft.mediaUrl,
    template_name: draft.template?.name ?? null,
    template_language: draft.template?.language ?? null,
    template_params: draft.template ? draft.template.params : null,
    status: 'queued',
    failure_reason: null,
    provider_message_id: null,
    broadcast_id: broadcastId,
    created_at: now,
    updated_at: now,
  };
}

/** The send job of queued messages, held by its caller until `lease` (its first attempt). */
function sendJob(
  accountId: string,
  messageIds: string[],
  lease: Date,
  connectionId: string | null | undefined,
  broadcastId: string | null = null,
): NewJob {
  return {
    accountId,
    kind: 'message.send',
    payload: {
      v: 1,
      message_ids: messageIds,
      ...(connectionId !== undefined ? { connection_id: connectionId } : {}),
      ...(broadcastId !== null ? { broadcast_id: broadcastId } : {}),
    },
    leasedUntil: lease,
  };
}

/** An attempt at queued messages under their send job's claim (see SendPipeline). */

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
