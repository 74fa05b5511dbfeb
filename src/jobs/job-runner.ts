import type { FastifyBaseLogger } from 'fastify';
import { sql } from 'kysely';
import type { Clock } from '../clock.js';
import type { Db } from '../db/database.js';
import type { JobKind, JobPayloads } from './job-queue.js';

export interface ClaimedJob<K extends JobKind = JobKind> {
  accountId: string;
  id: string;
  kind: K;
  payload: JobPayloads[K];
  attempts: number;
}

/** What a handler says happened; anything thrown counts as a retryable failure. */
export type JobOutcome = { status: 'done' } | { status: 'retry'; afterMs: number; error: string };

export interface JobHandler<K extends JobKind = JobKind> {
  kind: K;
  /** Seconds between attempts after unexpected failures; past the last entry the job is dropped. */
  retryDelaysMs: number[];
  handle(job: ClaimedJob<K>): Promise<JobOutcome>;
}

export interface JobRunnerOptions {
  db: Db;
  clock: Clock;
  log: FastifyBaseLogger;
  handlers: JobHandler[];
  /** How long a claim holds a job; a worker killed mid-job frees it when the lease ends. */
  leaseMs?: number;
  batchSize?: number;
  pollIntervalMs?: number;
}

/** Claims due jobs with FOR UPDATE SKIP LOCKED, so any number of runners can share the table. */
export class JobRunner {
  private readonly handlers = new Map<string, JobHandler>();
  private readonly leaseMs: number;
  private readonly batchSize: number;
  private readonly pollIntervalMs: number;
  private running = false;
  private loop: Promise<void> | null = null;
  private wake: (() => void) | null = null;

  constructor(private readonly opts: JobRunnerOptions) {
    for (const h of opts.handlers) this.handlers.set(h.kind, h as JobHandler);
    this.leaseMs = opts.leaseMs ?? 60_000;
    this.batchSize = opts.batchSize ?? 50;
    this.pollIntervalMs = opts.pollIntervalMs ?? 100;
  }

  start(): void {
    if (this.running) return;
    this.running = true;
    this.loop = this.run();
  }

  /** Stops claiming; jobs already claimed finish first. */
  async stop(): Promise<void> {
    this.running = false;
    this.wake?.();
    await this.loop;
    this.loop = null;
  }

  /** Runs every job due now, until none is left (for tests and one-shot maintenance). */
  async drain(maxRounds = 1000): Promise<number> {
    let total = 0;
    for (let i = 0; i < maxRounds; i++) {
      const n = await this.runBatch();
      total += n;
      if (n === 0) break;
    }
    return total;
  }

  private async run(): Promise<void> {
    while (this.running) {
      let n = 0;
      try {
        n = await this.runBatch();
      } catch (err) {
        this.opts.log.error({ err }, 'job runner: claiming jobs failed');
      }
      if (n < this.batchSize && this.running) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, this.pollIntervalMs);
          this.wake = () => {
            clearTimeout(timer);
            resolve();
          };
        });
        this.wake = null;
      }
    }
  }

  private async runBatch(): Promise<number> {
    const now = this.opts.clock.now();
    const claimed = await this.claim(now);
    await Promise.all(claimed.map((job) => this.execute(job)));
    return claimed.length;
  }

  private async claim(now: Date): Promise<ClaimedJob[]> {
    const kinds = [...this.handlers.keys()];
    if (kinds.length === 0) return [];
    const rows = await sql<{ account_id: string; id: string; kind: JobKind; payload: unknown; attempts: number }>`
      UPDATE jobs SET locked_until = ${new Date(now.getTime() + this.leaseMs)}, attempts = jobs.attempts + 1
      FROM (
        SELECT account_id, id FROM jobs
        WHERE run_at <= ${now} AND (locked_until IS NULL OR locked_until < ${now}) AND kind = ANY(${kinds})
        ORDER BY run_at
        LIMIT ${this.batchSize}
        FOR UPDATE SKIP LOCKED
      ) due
      WHERE jobs.account_id = due.account_id AND jobs.id = due.id
      RETURNING jobs.account_id, jobs.id, jobs.kind, jobs.payload, jobs.attempts`.execute(this.opts.db);
    return rows.rows.map((r) => ({
      accountId: r.account_id,
      id: r.id,
      kind: r.kind,
      payload: r.payload as JobPayloads[JobKind],
      attempts: r.attempts,
    }));
  }

  private async execute(job: ClaimedJob): Promise<void> {
    const handler = this.handlers.get(job.kind);
    if (!handler) return;
    let outcome: JobOutcome;
    try {
      outcome = await handler.handle(job);
    } catch (err) {
      const delay = handler.retryDelaysMs[job.attempts - 1];
      if (delay === undefined) {
        this.opts.log.error({ err, job: { id: job.id, kind: job.kind } }, 'job failed for the last time; dropped');
        await this.finish(job);
        return;
      }
      this.opts.log.warn({ err, job: { id: job.id, kind: job.kind } }, 'job failed; will retry');
      outcome = { status: 'retry', afterMs: delay, error: err instanceof Error ? err.message : String(err) };
    }
    if (outcome.status === 'done') {
      await this.finish(job);
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
        .execute();
    }
  }

  private async finish(job: ClaimedJob): Promise<void> {
    await this.opts.db.deleteFrom('jobs').where('account_id', '=', job.accountId).where('id', '=', job.id).execute();
  }
}
