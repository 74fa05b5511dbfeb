import { JobRunner } from '../../src/jobs/job-runner.js';
import type { TestApp } from '../helpers.js';

/** A job runner of one account's jobs (so that no other test's work is taken). */
export function runnerOf(t: TestApp, accountId: string, leaseMs?: number): JobRunner {
  return new JobRunner({
    db: t.db,
    clock: t.clock,
    log: t.app.log,
    handlers: t.services.jobHandlers,
    accountId,
    leaseMs,
  });
}
