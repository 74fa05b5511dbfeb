import { afterAll, beforeAll, expect, it } from 'vitest';
import { ClaimKeeper } from '../../src/jobs/claim-keeper.js';
import { JobQueue, type JobKind } from '../../src/jobs/job-queue.js';
import type { ClaimedJob } from '../../src/jobs/job-runner.js';
import { startTestApp, type TestApp } from '../helpers.js';

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const LEASE_MS = 600;

async function claimedJob(): Promise<ClaimedJob> {
  const queue = new JobQueue(t.clock);
  const lease = new Date(t.clock.now().getTime() + LEASE_MS);
  const kind = `test.claim.${Date.now()}` as JobKind;
  const id = await t.db.transaction().execute((trx) =>
    queue.enqueue(trx, 'acc_claims', kind, { v: 1, broadcast_id: 'bc_x' } as never, {
      leasedUntil: lease,
    }),
  );
  return { accountId: 'acc_claims', id, kind, payload: {} as never, attempts: 1, lease };
}

const lockedUntil = async (job: ClaimedJob) =>
  (
    await t.db
      .selectFrom('jobs')
      .select('locked_until')
      .where('account_id', '=', job.accountId)
      .where('id', '=', job.id)
      .executeTakeFirstOrThrow()
  ).locked_until;

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

it('keeps a job claimed past its first lease while the work goes on, moving job.lease with it', async () => {
  const job = await claimedJob();
  const first = job.lease.getTime();
  const release = new ClaimKeeper({ db: t.db, clock: t.clock, jobs: new JobQueue(t.clock) }).keep(
    job,
  );
  try {
    await sleep(LEASE_MS * 2.5);
    // Renewed (more than once): the claim is ahead of now, and it is the one the job holds.
    expect(job.lease.getTime()).toBeGreaterThan(first + LEASE_MS);
    expect((await lockedUntil(job))!.getTime()).toBe(job.lease.getTime());
    expect(job.lease.getTime()).toBeGreaterThan(t.clock.now().getTime());
  } finally {
    await release();
  }
  // Released: renewals stop.
  const held = job.lease.getTime();
  await sleep(LEASE_MS);
  expect(job.lease.getTime()).toBe(held);
});

it('stops when another runner has taken the job over, leaving its claim alone', async () => {
  const job = await claimedJob();
  const theirs = new Date(t.clock.now().getTime() + 60_000);
  await t.db
    .updateTable('jobs')
    .set({ locked_until: theirs })
    .where('account_id', '=', job.accountId)
    .where('id', '=', job.id)
    .execute();
  const before = job.lease.getTime();
  const release = new ClaimKeeper({ db: t.db, clock: t.clock, jobs: new JobQueue(t.clock) }).keep(
    job,
  );
  await sleep(LEASE_MS);
  await release();
  expect(job.lease.getTime()).toBe(before);
  expect((await lockedUntil(job))!.getTime()).toBe(theirs.getTime());
});
