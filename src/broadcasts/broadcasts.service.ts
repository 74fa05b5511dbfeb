import type { ChannelProvider, ProviderResolver } from '../channels/channel.js';
import type { Clock } from '../clock.js';
import type { Channel } from '../db/schema.js';
import type { Tx } from '../db/database.js';
import type { Scope, Transactor } from '../db/transactor.js';
import { AppError, Conflict, NotFound, ValidationError } from '../errors.js';
import type { Outbox } from '../events/outbox.js';
import type { PageRequest, PageResult } from '../http/pagination.js';
import { newId } from '../ids.js';
import type { BackgroundGate } from '../jobs/background-gate.js';
import type { JobQueue } from '../jobs/job-queue.js';
import type { Metrics } from '../metrics/metrics.js';
import type { MessagesService } from '../messages/messages.service.js';
import type { TemplatesService } from '../templates/templates.service.js';
import type { BroadcastRow, BroadcastsRepository } from './broadcasts.repository.js';
import type {
  Broadcast,
  BroadcastRecipient,
  CreateBroadcastBody,
  ListBroadcastsQuery,
  ListRecipientsQuery,
  PreviewBroadcastBody,
} from './broadcasts.schema.js';
import {
  checkedAudience,
  checkMessage,
  MIN_SCHEDULE_AHEAD_MS,
  TEMPLATE_FIELDS,
  toBroadcast,
} from './broadcast.js';
import { BroadcastProgress, type ProgressAnnouncer } from './broadcast-progress.js';

export { awaitingCheckMs, MIN_SCHEDULE_AHEAD_MS, toBroadcast } from './broadcast.js';

export class BroadcastsService {
  private readonly progress: BroadcastProgress;

  constructor(
    private readonly deps: {
      tx: Transactor;
      broadcasts: BroadcastsRepository;
      messages: MessagesService;
      providers: ProviderResolver;
      templates: TemplatesService;
      jobs: JobQueue;
      outbox: Outbox;
      clock: Clock;
      batchSize: number;
      ratePerSecond: Record<Channel, number>;
      metrics: Metrics;
      announcer: ProgressAnnouncer;
      /** Interactive sends first: each batch, and each of its provider calls, passes it. */
      gate?: BackgroundGate;
    },
  ) {
    this.progress = new BroadcastProgress(deps);
  }

  async create(scope: Scope, input: CreateBroadcastBody): Promise<Broadcast> {
    const body: CreateBroadcastBody = { ...input, audience: checkedAudience(input.audience) };
    checkMessage(body.message);
    const now = this.deps.clock.now();
    let scheduledAt: Date | null = null;
    if (body.scheduled_at !== undefined) {
      scheduledAt = new Date(body.scheduled_at);
      if (scheduledAt.getTime() < now.getTime() + MIN_SCHEDULE_AHEAD_MS) {
        throw new ValidationError('scheduled_at', 'must be at least 5 minutes in the future');
      }
    }
    // A channel that cannot send (not connected, with the sandbox off) is refused now, as a
    // single send is, rather than accepted and failed later.
    await this.deps.providers.resolve(scope.accountId, body.channel);
    return this.deps.tx.run(scope, async (trx) => {
      if (body.message.type === 'template') {
        // Checked now (404 unknown, 422 not approved or wrong parameters) and again when sending starts.
        await this.deps.templates.renderApproved(
          trx,
          scope.accountId,
          body.message.template_name!,
          body.message.template_params ?? [],
          TEMPLATE_FIELDS,
        );
      }
      const row: BroadcastRow = {
        account_id: scope.accountId,
        id: newId('bc'),
        name: body.name,
        channel: body.channel,
        audience: body.audience,
        message: body.message,
        status: scheduledAt ? 'scheduled' : 'sending',
        scheduled_at: scheduledAt,
        started_at: scheduledAt ? null : now,
        completed_at: null,
        audience_done_at: null,
        rendered_content: null,
        failure_reason: null,
        cursor: null,
        sent: 0,
        delivered: 0,
        read: 0,
        replied: 0,
        failed: 0,
        created_at: now,
        updated_at: now,
      };
      await this.deps.broadcasts.insert(trx, row);
      // Due at scheduled_at itself (or now): the durable scheduler is the job queue.
      await this.deps.jobs.enqueue(
        trx,
        scope.accountId,
        'broadcast.send',
        { v: 1, broadcast_id: row.id },
        { runAt: scheduledAt ?? now },
      );
      return toBroadcast(row);
    });
  }

  /**
   * How many contacts the audience matches now, by the rules (and the query) a broadcast sends
   * by; refused as creating the broadcast would refuse its channel and audience.
   */
  async preview(scope: Scope, input: PreviewBroadcastBody): Promise<{ total: number }> {
    const audience = checkedAudience(input.audience);
    await this.deps.providers.resolve(scope.accountId, input.channel);
    return { total: await this.deps.broadcasts.countAudience(scope.accountId, audience) };
  }

  /** The broadcast's recipients in the order they were processed, with their messages' status. */
  async recipients(
    scope: Scope,
    id: string,
    query: ListRecipientsQuery,
    page: PageRequest,
  ): Promise<PageResult<BroadcastRecipient>> {
    if (!(await this.deps.broadcasts.find(scope.accountId, id)))
      throw new NotFound('broadcast', id);
    const { rows, total } = await this.deps.broadcasts.recipients(
      scope.accountId,
      id,
      query.status,
      page,
    );
    return { data: rows, total, page: page.page };
  }

  async get(scope: Scope, id: string): Promise<Broadcast> {
    const row = await this.deps.broadcasts.find(scope.accountId, id);
    if (!row) throw new NotFound('broadcast', id);
    return toBroadcast(row);
  }

  async list(
    scope: Scope,
    query: ListBroadcastsQuery,
    page: PageRequest,
  ): Promise<PageResult<Broadcast>> {
    const { rows, total } = await this.deps.broadcasts.list(scope.accountId, query.status, page);
    return { data: rows.map(toBroadcast), total, page: page.page };
  }

  /** A scheduled broadcast goes back to draft; its job finds it so and does nothing. */
  async cancel(scope: Scope, id: string): Promise<Broadcast> {
    return this.deps.tx.run(scope, async (trx) => {
      const row = await this.deps.broadcasts.lock(trx, scope.accountId, id);
      if (!row) throw new NotFound('broadcast', id);
      if (row.status !== 'scheduled')
        throw new Conflict(
          `only a scheduled broadcast can be cancelled; this one is ${row.status}`,
        );
      return toBroadcast(
        await this.progress.patch(trx, row, { status: 'draft', updated_at: this.deps.clock.now() }),
      );
    });
  }

  /**
   * One step of sending: in one transaction, start a due scheduled broadcast, then claim the
   * next batch of recipients and record their messages `queued` with one send job, or finish;
   * after the commit, hand the batch to the provider (SendPipeline). A crash before the commit
   * rolls the batch back whole and the job runs it again (the recipient key makes a second
   * message impossible); a crash after it leaves the send job to a runner when its lease ends.
   */
  async sendNextBatch(
    accountId: string,
    id: string,
  ): Promise<'more' | 'done' | { waitMs: number }> {
    const step = await this.queueNextBatch(accountId, id, true);
    if (step === 'done' || step === 'drained' || 'waitMs' in step)
      return step === 'drained' ? 'done' : step;
    await step.dispatch();
    return 'more';
  }

  /**
   * The first half of a step: the next batch recorded `queued` (or the broadcast finished, when
   * `mayFinish`; else `drained` says the audience is exhausted), with the call that hands the
   * batch to the provider. The send job can so record batch k+1 while batch k is with the
   * provider; it finishes the broadcast only once every dispatch has returned.
   */
  async queueNextBatch(
    accountId: string,
    id: string,
    mayFinish: boolean,
  ): Promise<'done' | 'drained' | { waitMs: number } | { dispatch: () => Promise<void> }> {
    const found = await this.deps.broadcasts.find(accountId, id);
    if (!found) return 'done';
    const channel = found.channel;
    // Every recipient is queued already: only their messages are waited for, whatever became of
    // the channel's connection or the template since (the messages hold what they need).
    if (found.audience_done_at !== null) {
      if (!mayFinish) return 'drained';
      return this.deps.tx.run({ accountId }, async (trx) => {
        const b = await this.deps.broadcasts.lock(trx, accountId, id);
        if (!b || b.status !== 'sending') return 'done';
        return this.progress.finishOnceSent(trx, b, this.deps.clock.now());
      });
    }
    let provider: ChannelProvider;
    // The connection the batch is queued for: its messages go through that one or none (a retry
    // after the channel was disconnected or connected anew fails them; see SendPipeline).
    let connectionId: string | null;
    try {
      ({ provider, connectionId } = await this.deps.providers.resolveWithConnection(
        accountId,
        channel,
      ));
    } catch (err) {
      if (!(err instanceof AppError)) throw err;
      // The channel is not connected and the sandbox is off: nothing more can be sent. One that
      // had begun (a batch queued) announces its end, as any broadcast that sent does.
      await this.deps.tx.run({ accountId }, (trx) =>
        this.progress.end(
          trx,
          accountId,
          id,
          `cannot send on ${channel}: ${err.message}`,
          found.cursor !== null,
        ),
      );
      return 'done';
    }
    await this.deps.gate?.pass();
    const step = await this.deps.tx.run({ accountId }, async (trx) => {
      let b = await this.deps.broadcasts.lock(trx, accountId, id);
      if (!b) return 'done';
      const now = this.deps.clock.now();
      if (b.status === 'scheduled') {
        // Sending starts at scheduled_at, and so does the audience, even when a worker comes late.
        const startedAt =
          b.scheduled_at && b.scheduled_at.getTime() < now.getTime() ? b.scheduled_at : now;
        b = await this.progress.patch(trx, b, {
          status: 'sending',
          started_at: startedAt,
          updated_at: now,
        });
      }
      if (b.status !== 'sending') return 'done';

      let language: string | null = null;
      if (b.message.type === 'template') {
        try {
          const rendered = await this.deps.templates.renderApproved(
            trx,
            accountId,
            b.message.template_name!,
            b.message.template_params ?? [],
            TEMPLATE_FIELDS,
          );
          language = rendered.language;
          if (b.rendered_content === null)
            b = await this.progress.patch(trx, b, {
              rendered_content: rendered.content,
              updated_at: now,
            });
        } catch (err) {
          if (!(err instanceof AppError)) throw err;
          // Nothing more can be sent (e.g. the template is no longer approved).
          // Its counts may not have caught up with a batch still with the provider: whether a
          // batch was queued says whether it had begun.
          await this.progress.end(trx, accountId, id, err.message, b.cursor !== null);
          return 'done';
        }
      }

      const batch = await this.deps.broadcasts.nextAudienceBatch(
        trx,
        accountId,
        b.audience,
        b.started_at ?? now,
        b.cursor,
        this.batchSize(b.channel),
      );
      if (batch.length === 0) {
        if (!mayFinish) return 'drained';
        b = await this.progress.patch(trx, b, { audience_done_at: now, updated_at: now });
        return this.progress.finishOnceSent(trx, b, now);
      }

      // Paced: the account's channel is taken for this batch's interval, or the batch waits its
      // turn (broadcasts on one connection share its rate).
      const interval = this.batchIntervalMs(b.channel);
      if (interval > 0) {
        const waitMs = await this.deps.broadcasts.takePacingSlot(
          trx,
          accountId,
          b.channel,
          now,
          interval,
        );
        if (waitMs > 0) return { waitMs };
      }

      // Nobody is messaged twice: a contact already a recipient is skipped (and the recipient
      // key fails the batch should one become so meanwhile).
      const already = await this.deps.broadcasts.recipientsAmong(
        trx,
        accountId,
        id,
        batch.map((c) => c.id),
      );
      const recipients = batch.filter((c) => !already.has(c.id)).map((c) => ({ contactId: c.id }));
      const queued = await this.deps.messages.queue(trx, accountId, {
        channel: b.channel,
        message: {
          type: b.message.type,
          content: b.message.type === 'template' ? b.rendered_content : (b.message.content ?? null),
          template:
            b.message.type === 'template'
              ? {
                  name: b.message.template_name!,
                  language: language!,
                  params: b.message.template_params ?? [],
                }
              : null,
          mediaUrl: null,
        },
        broadcastId: id,
        recipients,
        // A real provider cannot reach a contact without an identity on the channel: such a
        // recipient fails with the reason, as one outside the 24-hour window does.
        provider,
        connectionId,
      });
      await this.deps.broadcasts.addRecipients(
        trx,
        accountId,
        id,
        queued.results.map((r) => ({
          contactId: r.contactId,
          conversationId: r.row?.conversation_id ?? null,
          messageId: r.row?.id ?? null,
          failureReason: r.error?.message ?? null,
        })),
        now,
      );
      // Refused by the rules (no identity on the channel, outside the window, merged away or
      // deleted since the batch was read): failed now. The rest count as the provider answers.
      const refused = queued.results.filter((r) => r.error).length;
      if (refused > 0)
        await this.deps.broadcasts.addStats(trx, accountId, id, { failed: refused }, now);
      await this.deps.broadcasts.update(trx, accountId, id, {
        cursor: batch[batch.length - 1]!.id,
        updated_at: now,
      });
      await this.deps.announcer.announce(trx, accountId, [id]);
      return {
        job: queued.job,
        refused,
        messages: queued.results.flatMap((r) =>
          r.row && r.to ? [{ row: r.row, channel, contactId: r.contactId, ...r.to }] : [],
        ),
      };
    });
    if (typeof step === 'string' || 'waitMs' in step) return step;
    return {
      dispatch: async () => {
        let accepted = 0;
        let failed = step.refused;
        if (step.job) {
          const rows = await this.deps.messages.dispatch(
            accountId,
            channel,
            step.job,
            step.messages,
            gated(provider, this.deps.gate),
            1,
            connectionId,
          );
          for (const row of rows.values()) {
            if (row.status === 'failed') failed++;
            else accepted++;
          }
        }
        // Counted once committed: a batch that rolls back is sent again and must not count twice.
        this.deps.metrics.broadcastRecipients(accepted, failed);
      },
    };
  }

  /**
   * The broadcast's sending job died (its retries ran out): the broadcast ends `failed` with the
   * reason, its stats as far as they got, and `broadcast.completed` as for any other end. Runs
   * in the transaction that marks the job dead; a broadcast already final is left alone.
   */
  async failForGood(trx: Tx, accountId: string, id: string, reason: string): Promise<void> {
    await this.progress.end(
      trx,
      accountId,
      id,
      `sending stopped after repeated failures: ${reason}`,
      true,
    );
  }

  batchSize(channel: Channel): number {
    const rate = this.deps.ratePerSecond[channel];
    return rate > 0 ? Math.min(this.deps.batchSize, rate) : this.deps.batchSize;
  }

  /**
   * After a paced batch: how long until the channel it took is free again. Its next batch falls
   * due then, just after a broadcast waiting for the channel (due a moment before), so that they
   * take turns.
   */
  pacingWaitMs(accountId: string, channel: Channel): Promise<number> {
    return this.deps.broadcasts.pacingWaitMs(accountId, channel, this.deps.clock.now());
  }

  /** How long one batch must take at least, to keep the channel's rate; 0 without a limit. */
  batchIntervalMs(channel: Channel): number {
    const rate = this.deps.ratePerSecond[channel];
    return rate > 0 ? Math.ceil((this.batchSize(channel) * 1000) / rate) : 0;
  }

  async channelOf(accountId: string, id: string): Promise<Channel | undefined> {
    return (await this.deps.broadcasts.find(accountId, id))?.channel;
  }
}

/** The provider, its calls each held back while the gate is closed (see BackgroundGate). */
function gated(provider: ChannelProvider, gate: BackgroundGate | undefined): ChannelProvider {
  if (!gate) return provider;
  return {
    name: provider.name,
    templatesBypassWindow: provider.templatesBypassWindow,
    reachesAnyContact: provider.reachesAnyContact,
    send: async (message, signal) => {
      await gate.pass();
      return provider.send(message, signal);
    },
  };
}
