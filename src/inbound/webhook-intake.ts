import type { FastifyBaseLogger } from 'fastify';
import type { InboundAdapter } from '../channels/channel.js';
import type { Clock } from '../clock.js';
import type { ConnectionProvider } from '../db/schema.js';
import { Batcher } from '../db/batcher.js';
import type { Transactor } from '../db/transactor.js';
import { AppError, Forbidden, NotFound, Unauthorized } from '../errors.js';
import { newId } from '../ids.js';
import type { HeldJob, JobQueue } from '../jobs/job-queue.js';
import type { JobOutcome } from '../jobs/job-runner.js';
import type { InboundConnections } from './inbound-connections.js';
import type { InboundWebhookRow, InboundWebhooksRepository } from './inbound.repository.js';
import type { ProcessItem, ProcessResult } from './webhook-processing.js';

/**
 * Delays between attempts after unexpected failures (the database away); past the last one the
 * job is kept dead and its webhook stays unprocessed (`processed_at` null) with its bytes.
 */
export const INBOUND_RETRY_DELAYS_MS = [
  1_000,
  5_000,
  30_000,
  120_000,
  600_000,
  3_600_000,
  6 * 3_600_000,
];

/**
 * Webhooks a process works on right after storing them, at most (see storeMany); past this,
 * new ones wait for the job runners, so that a flood costs rows, not memory.
 */
const INLINE_MAX = 1_000;

/**
 * The lease on a webhook's job while the process that stored it works on it: should that
 * process die, a runner takes the job over when the lease ends.
 */
const INLINE_LEASE_MS = 60_000;

/**
 * The way in (DESIGN §4 "Inbound provider webhooks"): the verification handshake, and the signed
 * POST stored durably with its job before it is answered; then worked on at once in-process, its
 * job settled as a runner settles one.
 */
export class WebhookIntake {
  /**
   * Concurrent deliveries are stored together (group commit): Meta posts many webhooks at once
   * under load, and each is answered once its row and job have committed. A group that fails
   * is stored again one webhook at a time, so one cannot fail another.
   */
  private readonly stored = new Batcher<InboundWebhookRow, void>((rows) => this.storeMany(rows), {
    maxBatch: 200,
    maxConcurrent: 2,
  });

  /** Jobs of webhooks processed in-process, deleted together once done. */
  private readonly finishedJobs = new Batcher<HeldJob, void>(
    async (jobs) => {
      await this.deps.jobs.finishMany(this.deps.tx.db, jobs);
      return jobs.map(() => undefined);
    },
    { maxBatch: 500, maxConcurrent: 2 },
  );

  /** Webhooks this process is working on right after storing them (see storeMany). */
  private inline = 0;
  private readonly whenSettled: Array<() => void> = [];

  constructor(
    private readonly deps: {
      tx: Transactor;
      webhooks: InboundWebhooksRepository;
      connections: InboundConnections;
      adapters: Partial<Record<ConnectionProvider, InboundAdapter>>;
      jobs: JobQueue;
      /** Processes a stored webhook (see WebhookProcessing). */
      process: (item: ProcessItem) => Promise<ProcessResult>;
      clock: Clock;
      log: FastifyBaseLogger;
      /** See InboundWebhooksService. */
      inlineMax?: number;
    },
  ) {}

  /** The provider's subscription handshake: its answer when the verify token matches. */
  async verify(
    connectionId: string,
    query: Readonly<Record<string, string | undefined>>,
  ): Promise<string> {
    const connection = await this.deps.connections.byId(connectionId);
    const adapter = connection && this.deps.adapters[connection.provider];
    if (!connection || connection.verify_token === null || !adapter)
      throw new NotFound('channel connection');
    const answer = adapter.handshake(query, connection.verify_token);
    if (answer === null)
      throw new Forbidden(
        'hub.verify_token does not match this connection, or hub.mode is not subscribe',
      );
    return answer;
  }

  /**
   * A signed webhook: checked against the connection's signing secret over the exact bytes, then
   * stored with its processing job in one statement. Nothing is recorded for a bad signature.
   */
  async accept(connectionId: string, body: Buffer, signature: string | undefined): Promise<void> {
    const connection = await this.deps.connections.byId(connectionId);
    const adapter = connection && this.deps.adapters[connection.provider];
    if (!connection || !adapter) throw new NotFound('channel connection');
    const secret = this.deps.connections.secretOf(connection, adapter.secretNames.signing);
    if (secret === null) throw new NotFound('channel connection');
    if (!adapter.isSigned(body, signature, secret))
      throw new Unauthorized('X-Hub-Signature-256 is missing or does not match the body');
    try {
      JSON.parse(body.toString('utf8'));
    } catch {
      throw new AppError('invalid_request', 'request body is not valid JSON');
    }
    await this.stored.submit({
      account_id: connection.account_id,
      id: newId('iwh'),
      connection_id: connection.id,
      body,
      received_at: this.deps.clock.now(),
      processed_at: null,
    });
  }

  /**
   * Webhooks accepted meanwhile, stored with their jobs in one statement. This process then
   * works on them at once, their jobs leased to it meanwhile, instead of waiting for a runner to
   * claim them: the job is the webhook's safety net (a crash, a retry), not its way in. Past
   * INLINE_MAX webhooks in progress, new ones are left to the runners.
   */
  private async storeMany(rows: InboundWebhookRow[]): Promise<void[]> {
    const inline = this.inline + rows.length <= (this.deps.inlineMax ?? INLINE_MAX);
    const lease = new Date(this.deps.clock.now().getTime() + INLINE_LEASE_MS);
    const jobs = this.deps.jobs.rowsOf(
      rows.map((row) => ({
        accountId: row.account_id,
        kind: 'channel.inbound' as const,
        payload: { v: 1 as const, webhook_id: row.id },
        ...(inline ? { leasedUntil: lease } : {}),
      })),
    );
    await this.deps.webhooks.insertWithJobs(rows, jobs);
    const jobIds = jobs.map((j) => j.id);
    if (inline)
      rows.forEach((row, i) => {
        void this.processInline(row, { id: jobIds[i]!, lease });
      });
    return rows.map(() => undefined);
  }

  /**
   * A webhook just stored, processed as its job's first attempt would be, then its job settled
   * as the runner settles one: deleted when done, released for a later attempt otherwise. Should
   * even that fail, the job runs again when its lease ends.
   */
  private async processInline(
    row: InboundWebhookRow,
    job: { id: string; lease: Date },
  ): Promise<void> {
    const { account_id: accountId, id: webhookId } = row;
    this.inline++;
    const log = this.deps.log.child({ webhook: webhookId });
    try {
      let outcome: JobOutcome;
      try {
        // The row just stored: no need to read it back.
        const result = await this.deps.process({
          accountId,
          webhookId,
          attempt: 1,
          row,
          job: { accountId, ...job },
        });
        if ('error' in result) throw result.error;
        // Deleted with the webhook's processed mark already.
        if (result.jobFinished) return;
        outcome = result.outcome;
      } catch (err) {
        log.warn({ err }, 'inbound webhook: processing failed; will retry');
        outcome = {
          status: 'retry',
          afterMs: INBOUND_RETRY_DELAYS_MS[0]!,
          error: err instanceof Error ? err.message : String(err),
        };
      }
      if (outcome.status === 'done') {
        await this.finishedJobs.submit({ accountId, id: job.id, lease: job.lease });
      } else {
        await this.deps.jobs.settle(this.deps.tx.db, accountId, job.id, job.lease, {
          done: false,
          retryAt: new Date(this.deps.clock.now().getTime() + outcome.afterMs),
          error: outcome.status === 'retry' ? outcome.error : '',
        });
      }
    } catch (err) {
      log.error({ err }, 'inbound webhook: settling its job failed; it runs when its lease ends');
    } finally {
      this.inline--;
      if (this.inline === 0) for (const resolve of this.whenSettled.splice(0)) resolve();
    }
  }

  /** Resolves once no webhook is being processed in-process (for shutdown and tests). */
  settled(): Promise<void> {
    if (this.inline === 0) return Promise.resolve();
    return new Promise((resolve) => this.whenSettled.push(resolve));
  }
}
