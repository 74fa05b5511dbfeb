import type { Clock } from '../clock.js';
import type { Db } from '../db/database.js';
import type { JobQueue } from './job-queue.js';
import type { ClaimedJob } from './job-runner.js';

/**
 * Keeps a running job's claim while its handler works longer than a lease (a broadcast's send
 * job waiting on slow provider calls): every third of the lease it moves the claim a lease ahead,
 * only while this runner still holds it, and moves `job.lease` with it (the runner settles the
 * job on that). Should the claim be lost, it stops; the job then belongs to whoever took it.
 */
export class ClaimKeeper {
  constructor(private readonly deps: { db: Db; clock: Clock; jobs: Pick<JobQueue, 'extend'> }) {}

  /** Starts keeping `job`'s claim; the returned function stops (and waits for a renewal under way). */
  keep(job: ClaimedJob): () => Promise<void> {
    const leaseMs = Math.max(1_000, job.lease.getTime() - this.deps.clock.now().getTime());
    let renewing: Promise<unknown> = Promise.resolve();
    const timer = setInterval(() => {
      renewing = renewing.then(async () => {
        const until = new Date(this.deps.clock.now().getTime() + leaseMs);
        try {
          if (await this.deps.jobs.extend(this.deps.db, job.accountId, job.id, job.lease, until))
            job.lease = until;
          else clearInterval(timer);
        } catch {
          // The database away: the claim holds as it was, and the next tick tries again.
        }
      });
    }, leaseMs / 3);
    timer.unref();
    return async () => {
      clearInterval(timer);
      await renewing;
    };
  }
}
