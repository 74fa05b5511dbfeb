import type { Insertable } from 'kysely';
import type { ChannelProvider } from '../../channels/channel.js';
import type { Clock } from '../../clock.js';
import { addressOn } from '../../contacts/identities.js';
import type { Db, Tx } from '../../db/database.js';
import type { Author, Channel, JobsTable } from '../../db/schema.js';
import type { Scope } from '../../db/transactor.js';
import { AppError, NotFound } from '../../errors.js';
import { newId } from '../../ids.js';
import type { JobQueue, NewJob } from '../../jobs/job-queue.js';
import type { ApprovedTemplate, TemplatesService } from '../../templates/templates.service.js';
import { toMessage } from '../messages.present.js';
import type { MessageRow } from '../messages.repository.js';
import type { SendMessageBody } from '../messages.schema.js';
import { SEND_LEASE_MS } from '../send-pipeline.js';
import { outsideWindow, windowed, windowStart } from '../window.js';
import type { QueueRepository, QueueSend, QueuedRecipient } from './queue.repository.js';

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

interface TemplateRef {
  name: string;
  language: string;
  params: string[];
}

export interface Recipient {
  contactId: string;
  /** This recipient's own message, instead of the batch's. */
  message?: Draft;
}

/** One API send waiting to be queued in a group (see MessageQueue.queueSends). */
export interface SendRequest {
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

/**
 * The refusal of a contact a real provider cannot reach: on messenger, instagram and webchat
 * the person must have written first, on whatsapp the contact needs a phone.
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

/** A message to queue, with the provider whose rules it follows. */
interface Pending {
  send: QueueSend;
  provider: ChannelProvider;
}

/**
 * The one way into sending, for the API (a group of sends, see `queueSends`) and for broadcasts
 * (`queue`): every message goes through QueueRepository.queue, which applies the rules (the
 * contact found and reachable, the 24-hour window); this names each refusal.
 */
export class MessageQueue {
  constructor(
    private readonly deps: {
      db: Db;
      queue: QueueRepository;
      templates: TemplatesService;
      jobs: JobQueue;
      clock: Clock;
      /** How long a send's first attempt holds its job (SEND_LEASE_MS by default). */
      sendLeaseMs?: number;
    },
  ) {}

  /**
   * Queues a batch in the caller's transaction: the messages stored `queued` with their send
   * jobs held by the caller (one for the batch, or one each). A recipient the rules refuse
   * (gone, no identity on the channel for a real provider, outside the window) gets an error
   * instead of a message; the others are unaffected.
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
      /** The channel's provider, whose rules the messages follow (reachability, the window). */
      provider: ChannelProvider;
      /** The connection the messages are queued for (null: the sandbox), when known. */
      connectionId?: string | null;
      /** One send job for the whole batch (the default), or one per message. */
      jobs?: 'one' | 'each';
    },
  ): Promise<QueuedBatch> {
    const now = this.deps.clock.now();
    const lease = this.leaseFrom(now);
    const each = batch.jobs === 'each';
    const job = (ids: string[]) =>
      this.jobRow(sendJob(accountId, ids, lease, batch.connectionId, batch.broadcastId));
    const pending = batch.recipients.map((r): Pending => {
      const row = outboundRow(accountId, r.message ?? batch.message, batch.broadcastId, null, now);
      return {
        send: {
          ...toSend(row, r.contactId, batch.channel, batch.provider),
          ...(each ? { job: job([row.id]) } : {}),
        },
        provider: batch.provider,
      };
    });
    const batchJob = each ? null : job([]);
    const results = await this.run(trx, pending, now, lease, batchJob);
    if (!batchJob || !results.some((r) => r.row)) return { results, job: null };
    return { results, job: { id: batchJob.id, lease } };
  }

  /**
   * Queues a group of API sends, each with its own send job held by the caller: in one
   * statement without a transaction, or, when any writes an idempotency record, in a
   * transaction with those records. A send the rules refuse answers its error and leaves the
   * others be.
   */
  async queueSends(requests: SendRequest[]): Promise<QueueResult[]> {
    if (requests.every((r) => !r.scope.beforeCommit)) return this.queueIn(this.deps.db, requests);
    const queued = await this.deps.db.transaction().execute(async (trx) => {
      const results = await this.queueIn(trx, requests);
      for (const [index, request] of requests.entries()) {
        const { row } = results[index]!;
        // The queued message is the response recorded for a retry of an idempotent request.
        if (row && request.scope.beforeCommit)
          await request.scope.beforeCommit(trx, toMessage(row));
      }
      return results;
    });
    for (const [index, request] of requests.entries())
      if (queued[index]!.row) request.scope.afterCommit?.();
    return queued;
  }

  private async queueIn(db: Tx | Db, requests: SendRequest[]): Promise<QueueResult[]> {
    const { results, drafts } = await this.drafts(db, requests);
    const now = this.deps.clock.now();
    const lease = this.leaseFrom(now);
    const indexes = [...drafts.keys()];
    const pending = indexes.map((index): Pending => {
      const { scope, channel, provider, connectionId, contactId } = requests[index]!;
      const row = outboundRow(scope.accountId, drafts.get(index)!, null, scope.actor ?? null, now);
      const job = this.jobRow(sendJob(scope.accountId, [row.id], lease, connectionId));
      const send = { ...toSend(row, contactId, channel, provider), job };
      // Its `message.created` names who sent it (a request always has a scope's actor).
      if (scope.actor !== undefined) send.actor = scope.actor;
      return { send, provider };
    });
    const queued = await this.run(db, pending, now, lease, null);
    indexes.forEach((index, i) => (results[index] = queued[i]!));
    return results;
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

  /** The messages queued by the one statement, and each one's result (in order). */
  private async run(
    db: Tx | Db,
    pending: Pending[],
    now: Date,
    lease: Date,
    batchJob: Insertable<JobsTable> | null,
  ): Promise<QueueResult[]> {
    const found = await this.deps.queue.queue(
      db,
      pending.map((p) => p.send),
      now,
      { windowStart: windowStart(now), batchJob },
    );
    const byTarget = new Map(found.map((r) => [targetKey(r.accountId, r.channel, r.contactId), r]));
    const queued = new Set(found.flatMap((r) => r.queued));
    return pending.map(({ send, provider }) => resultOf(send, provider, byTarget, queued, lease));
  }

  private leaseFrom(now: Date): Date {
    return new Date(now.getTime() + (this.deps.sendLeaseMs ?? SEND_LEASE_MS));
  }

  private jobRow(job: NewJob): Insertable<JobsTable> {
    return this.deps.jobs.rowsOf([job])[0]!;
  }
}

function targetKey(accountId: string, channel: Channel, contactId: string): string {
  return [accountId, channel, contactId].join('\u0000');
}

/** What became of one message: queued, or the refusal the rules gave it. */
function resultOf(
  send: QueueSend,
  provider: ChannelProvider,
  byTarget: Map<string, QueuedRecipient>,
  queued: Set<string>,
  lease: Date,
): QueueResult {
  const { row, contactId, channel, job } = send;
  const found = byTarget.get(targetKey(row.account_id, channel, contactId));
  if (!found) return { contactId, error: new NotFound('contact', contactId) };
  if (!found.reachable) return { contactId, error: noIdentity(channel, contactId) };
  if (!queued.has(row.id)) return { contactId, error: outsideWindow(channel, provider) };
  return {
    contactId,
    row: { ...row, conversation_id: found.conversationId! },
    to: { phone: found.phone, identity: addressOn(channel, found.phone, found.externalId) },
    ...(job ? { job: { id: job.id, lease } } : {}),
  };
}

function toSend(
  row: Omit<MessageRow, 'conversation_id'>,
  contactId: string,
  channel: Channel,
  provider: ChannelProvider,
): QueueSend {
  return {
    row,
    contactId,
    channel,
    anyContact: provider.reachesAnyContact,
    windowed: windowed(channel, provider, row.type),
  };
}

/** A queued outbound message of `draft`, but for its conversation. */
function outboundRow(
  accountId: string,
  draft: Draft,
  broadcastId: string | null,
  author: Author | null,
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
    author,
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
