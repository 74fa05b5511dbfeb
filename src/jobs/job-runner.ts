import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Clock } from '../clock.js';
import { Batcher } from '../db/batcher.js';
import type { Db, Tx } from '../db/database.js';
import { JobQueue, type JobKind, type JobPayloads } from './job-queue.js';
import { PollLoop } from './poll-loop.js';

export interface ClaimedJob<K extends JobKind = JobKind> {
  accountId: string;
  id: string;
  kind: K;
  payload: JobPayloads[K];
  attempts: number;
  /**
   * The claim's lease: the job is this runner's only while locked_until still equals it. A
   * handler that extends its claim (a long send batch) moves this with it, so that the runner
   * still settles the job afterwards (done, retried, or kept dead).
   */
  lease: Date;
}

/**
 * What a handler says happened: done; `continue` (more to do: run again after `afterMs`, a
 * fresh start for the retry count); or `retry` after a failure. Anything thrown is a failure
 * retried on the handler's schedule.
 */
export type JobOutcome =
  | { status: 'done' }
  | { status: 'continue'; afterMs: number }
  | { status: 'retry'; afterMs: number; error: string };

export interface JobHandler<K extends JobKind = JobKind> {
  kind: K;
  /** Delays between attempts after unexpected failures; past the last entry the job dies. */
  retryDelaysMs: readonly number[];
  handle(job: ClaimedJob<K>): Promise<JobOutcome>;
  /**
   * Called once when the job dies (its retries ran out), in the transaction that marks it dead,
   * so that what it worked on reaches a final state exactly when the job is given up.
   */
  onDead?(trx: Tx, job: ClaimedJob<K>, lastError: string): Promise<void>;
}

export interface JobRunnerOptions {
  db: Db;
  clock: Clock;
  log: FastifyBaseLogger;
  handlers: JobHandler[];
  /** How long a claim holds a job; a worker killed mid-job frees it when the lease ends. */
  leaseMs?: number;
  /** Jobs running at once in this process. */
  concurrency?: number;
  /** Only this account's jobs (tests and tools); every account's by default. */
  accountId?: string;
  pollIntervalMs?: number;
  /** How long after a dead job's settling failed it is settled again (see `bury`). */
  settleRetryMs?: number;
}

/** A claimed job; `settling` when it comes back only to be settled (see `bury`). */
type Claimed = ClaimedJob & { settling: boolean; lastError: string | null };

/** Claims due jobs with FOR UPDATE SKIP LOCKED, so any number of runners can share the table. */
export class JobRunner {
  private readonly handlers = new Map<string, JobHandler>();
  private readonly leaseMs: number;
  private readonly concurrency: number;
  private readonly pollIntervalMs: number;
  private readonly settleRetryMs: number;
  private readonly inFlight = new Set<Promise<void>>();
  private readonly loop: PollLoop;
  /**
   * Jobs finished at the same time are deleted together (group commit): a runner busy with
   * short jobs would otherwise spend a round trip on each one's deletion.
   */
  private readonly finished: Batcher<ClaimedJob, void>;

  constructor(private readonly opts: JobRunnerOptions) {
    for (const h of opts.handlers) this.handlers.set(h.kind, h);
    this.leaseMs = opts.leaseMs ?? 60_000;
    this.concurrency = opts.concurrency ?? 32;
    this.pollIntervalMs = opts.pollIntervalMs ?? 100;
    this.settleRetryMs = opts.settleRetryMs ?? 60_000;
    const queue = new JobQueue(opts.clock);
    this.finished = new Batcher<ClaimedJob, void>(
      async (jobs) => {
        await queue.finishMany(
          opts.db,
          jobs.map((job) => ({
            accountId: job.accountId,
            id: job.id,
            lease: job.lease,
          })),
        );
        return jobs.map(() => undefined);
      },
      { maxBatch: 500, maxConcurrent: 2 },
    );
    this.loop = new PollLoop(
      async () => (await this.claimAndStart()) > 0 && this.inFlight.size < this.concurrency,
      this.pollIntervalMs,
      (err, consecutive) =>
        this.opts.log.error(
          { err, consecutive },
          'job runner: claiming jobs failed; retrying with back-off',
        ),
    );
  }

  start(): void {
    this.loop.start();
  }

  /** Stops claiming; jobs already claimed finish first. */
  async stop(): Promise<void> {
    await this.loop.stop();
    await Promise.all(this.inFlight);
  }

  /** Runs every job due now, until none is left (for tests and one-shot maintenance). */
  async drain(maxRounds = 1000): Promise<number> {
    let total = 0;
    for (let i = 0; i < maxRounds; i++) {
      const n = await this.claimAndStart();
      await Promise.all(this.inFlight);
      total += n;
      if (n === 0) break;
    }
    return total;
  }

  /**
   * Claims as many due jobs as there are free slots and starts them without waiting. While
   * jobs run, it waits for a quarter of the slots to free up: a claim per finished job would
   * scan the queue once per job.
   */
  private async claimAndStart(): Promise<number> {
    const free = this.concurrency - this.inFlight.size;
    if (free <= 0) return 0;
    if (this.inFlight.size > 0 && free < Math.ceil(this.concurrency / 4)) return 0;
    const claimed = await this.claim(this.opts.clock.now(), free);
    for (const job of claimed) {
      const task = this.execute(job)
        .catch((err: unknown) =>
          this.opts.log.error(
            { err, job: { id: job.id, kind: job.kind } },
            'job bookkeeping failed',
          ),
        )
        .finally(() => {
          this.inFlight.delete(task);
          this.loop.signal();
        });
      this.inFlight.add(task);
    }
    return claimed.length;
  }

  /**
   * Due jobs, claimed until `lease`. A claimed job is also due again at its lease's end
   * (`run_at`): should its runner die, it runs then; and jobs running meanwhile never lie in
   * front of the next claim's scan of due jobs, which walks `run_at` in order.
   */
  private async claim(now: Date, limit: number): Promise<Claimed[]> {
    const kinds = [...this.handlers.keys()];
    if (kinds.length === 0) return [];
    const lease = new Date(now.getTime() + this.leaseMs);
    const rows = await sql<{
      account_id: string;
      id: string;
      kind: JobKind;
      payload: unknown;
      attempts: number;
      last_error: string | null;
      settling: boolean;
    }>`
      UPDATE jobs SET locked_until = ${lease}, run_at = ${lease}, attempts = jobs.attempts + 1
      FROM (
        SELECT account_id, id FROM jobs
        WHERE run_at <= ${now} AND dead_at IS NULL
          AND (locked_until IS NULL OR locked_until < ${now}) AND kind = ANY(${kinds})
          AND (${this.opts.accountId ?? null}::text IS NULL OR account_id = ${this.opts.accountId ?? null})
        ORDER BY run_at
        LIMIT ${limit}
        FOR UPDATE SKIP LOCKED
      ) due
      WHERE jobs.account_id = due.account_id AND jobs.id = due.id
      RETURNING jobs.account_id, jobs.id, jobs.kind, jobs.payload, jobs.attempts, jobs.last_error, jobs.settling`.execute(
      this.opts.db,
    );
    return rows.rows.map((r) => ({
      accountId: r.account_id,
      id: r.id,
      kind: r.kind,
      payload: r.payload as JobPayloads[JobKind],
      attempts: r.attempts,
      lease,
      lastError: r.last_error,
      settling: r.settling,
    }));
  }

  private async execute(job: Claimed): Promise<void> {
    const handler = this.handlers.get(job.kind);
    if (!handler) return;
    if (job.settling) {
      await this.bury(handler, job, job.lastError ?? 'its retries ran out');
      return;
    }
    let outcome: JobOutcome;
    try {
      outcome = await handler.handle(job);
    } catch (err) {
      const error = err instanceof Error ? err.message : String(err);
      const delay = handler.retryDelaysMs[job.attempts - 1];
      if (delay === undefined) {
        this.opts.log.error(
          { err, job: { id: job.id, kind: job.kind } },
          'job failed for the last time; kept as a dead job',
        );
        await this.bury(handler, job, error);
        return;
      }
      this.opts.log.warn({ err, job: { id: job.id, kind: job.kind } }, 'job failed; will retry');
      outcome = { status: 'retry', afterMs: delay, error };
    }
    if (outcome.status === 'done') {
      await this.finish(job);
    } else if (outcome.status === 'continue') {
      await this.opts.db
        .updateTable('jobs')
        .set({
          run_at: new Date(this.opts.clock.now().getTime() + outcome.afterMs),
          locked_until: null,
          attempts: 0,
          last_error: null,
        })
        .where('account_id', '=', job.accountId)
        .where('id', '=', job.id)
        .where('locked_until', '=', job.lease)
        .execute();
    } else {
      await this.opts.db
        .updateTable('jobs')
        .set({
          run_at: new Date(this.opts.clock.now().getTime() + outcome.afterMs),
          locked_until: null,
          last_error: outcome.error.slice(0, 2000),
        })
        .where('account_id', '=', job.accountId)
        .where('id', '=', job.id)
        .where('locked_until', '=', job.lease)
        .execute();
    }
  }

  /**
   * Marks the job dead with its last error and lets its handler settle what the job worked on,
   * in one transaction. Should the handler's hook fail, nothing of it is kept and the job is
   * not dead yet: it comes back after `settleRetryMs` and is settled again (not run again),
   * until the hook succeeds, so that what it worked on (a broadcast `sending`) always reaches
   * its final state.
   */
  private async bury(handler: JobHandler, job: ClaimedJob, error: string): Promise<void> {
    try {
      await this.opts.db.transaction().execute(async (trx) => {
        const dead = await trx
          .updateTable('jobs')
          .set({
            dead_at: this.opts.clock.now(),
            locked_until: null,
            last_error: error.slice(0, 2000),
            settling: false,
          })
          .where('account_id', '=', job.accountId)
          .where('id', '=', job.id)
          .where('locked_until', '=', job.lease)
          .executeTakeFirst();
        // Only the runner still holding the lease settles the job, and only once.
        if (dead.numUpdatedRows > 0n && handler.onDead) await handler.onDead(trx, job, error);
      });
    } catch (err) {
      this.opts.log.error(
        { err, job: { id: job.id, kind: job.kind } },
        'settling a dead job failed; it is settled again later',
      );
      await this.opts.db
        .updateTable('jobs')
        .set({
          run_at: new Date(this.opts.clock.now().getTime() + this.settleRetryMs),
          locked_until: null,
          last_error: error.slice(0, 2000),
          settling: true,
        })
        .where('account_id', '=', job.accountId)
        .where('id', '=', job.id)
        .where('locked_until', '=', job.lease)
        .execute();
    }
  }

  /** Only while this runner's lease still stands: a runner that lost it must not touch the job. */
  private async finish(job: ClaimedJob): Promise<void> {
    await this.finished.submit(job);
  }
}
