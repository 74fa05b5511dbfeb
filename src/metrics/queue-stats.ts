import { sql } from 'kysely';
import type { Db } from '../db/database.js';

export interface QueueStats {
  jobs: { kind: string; queued: number; due: number; dead: number; oldestDueAgeSeconds: number }[];
  webhookDeliveries: { pending: number; due: number; oldestDueAgeSeconds: number };
}

function ageSeconds(now: Date, since: Date | null): number {
  return since ? Math.max(0, (now.getTime() - since.getTime()) / 1000) : 0;
}

/**
 * The queues as they stand, read at scrape time across every account (an operator's view, so
 * no account scope): the database is the truth, so any API process reports the same figures,
 * whichever processes run the workers.
 */
export async function readQueueStats(
  db: Db,
  now: Date,
  /** The kinds this service runs: reported (as 0) while none is queued, so their series never vanish. */
  jobKinds: readonly string[],
): Promise<QueueStats> {
  // Due: its time has come and no worker holds it (never claimed, or its lease ran out).
  const jobDue = sql`dead_at IS NULL AND run_at <= ${now} AND (locked_until IS NULL OR locked_until < ${now})`;
  const deliveryDue = sql`next_attempt_at <= ${now} AND (locked_until IS NULL OR locked_until < ${now})`;
  const [jobs, deliveries] = await Promise.all([
    sql<{ kind: string; queued: number; due: number; dead: number; oldest_due: Date | null }>`
      SELECT kind,
             count(*) FILTER (WHERE dead_at IS NULL)::int AS queued,
             count(*) FILTER (WHERE dead_at IS NOT NULL)::int AS dead,
             count(*) FILTER (WHERE ${jobDue})::int AS due,
             min(run_at) FILTER (WHERE ${jobDue}) AS oldest_due
      FROM jobs
      GROUP BY kind`.execute(db),
    sql<{ pending: number; due: number; oldest_due: Date | null }>`
      SELECT count(*)::int AS pending,
             count(*) FILTER (WHERE ${deliveryDue})::int AS due,
             min(next_attempt_at) FILTER (WHERE ${deliveryDue}) AS oldest_due
      FROM webhook_deliveries
      WHERE state = 'pending'`.execute(db),
  ]);
  const d = deliveries.rows[0]!;
  const queued = new Set(jobs.rows.map((r) => r.kind));
  const idle = jobKinds
    .filter((kind) => !queued.has(kind))
    .map((kind) => ({ kind, queued: 0, due: 0, dead: 0, oldestDueAgeSeconds: 0 }));
  return {
    jobs: [
      ...idle,
      ...jobs.rows.map((r) => ({
        kind: r.kind,
        queued: r.queued,
        due: r.due,
        dead: r.dead,
        oldestDueAgeSeconds: ageSeconds(now, r.oldest_due),
      })),
    ],
    webhookDeliveries: {
      pending: d.pending,
      due: d.due,
      oldestDueAgeSeconds: ageSeconds(now, d.oldest_due),
    },
  };
}
