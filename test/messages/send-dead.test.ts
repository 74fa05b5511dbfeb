import { afterAll, afterEach, beforeAll, expect, it } from 'vitest';
import { JobRunner, type JobHandler } from '../../src/jobs/job-runner.js';
import { SEND_RETRY_DELAYS_MS } from '../../src/messages/send-pipeline.js';
import { META_ERRORS } from '../fake-graph/server.js';
import {
  connectedAccount,
  contactWrites,
  createContact,
  events,
  jobsOf,
  messageRow,
  send,
  startE2E,
  type Connected,
  type E2E,
} from '../channels/whatsapp-e2e-helpers.js';

// A send job that cannot even run (its handler fails every time, as with the database away for
// a day) ends as a dead job, and its messages do not stay `queued` for ever: they fail with the
// job's last error and `message.failed`, in the transaction that buries the job.

let e: E2E;
beforeAll(async () => {
  e = await startE2E();
});
afterEach(() => e.graph.reset());
afterAll(() => e?.close());

/** A message Graph throttled once: queued, with its send job. */
async function queuedMessage(content: string) {
  const c = await connectedAccount(e);
  const contact = await createContact(c.acc);
  await contactWrites(e, c, contact);
  e.graph.failNext(c.sendMatcher, 1, META_ERRORS.rateLimitIssues);
  const res = await send(c, { contact_id: contact.id, type: 'text', content });
  expect(res.json()).toMatchObject({ status: 'queued' });
  const [job] = await jobsOf(e, c.acc.accountId, 'message.send');
  expect(job).toBeDefined();
  return { c, messageId: res.json<{ id: string }>().id, jobId: job!.id };
}

/**
 * Runs the job, due now at attempt `attempts`, with the real handler made to fail as a run that
 * cannot reach what it needs would.
 */
async function failRun(c: Connected, jobId: string, attempts: number, error: string) {
  const real = e.t.services.jobHandlers.find((h) => h.kind === 'message.send')!;
  const failing = { ...real, handle: () => Promise.reject(new Error(error)) } as JobHandler;
  await e.t.db
    .updateTable('jobs')
    .set({ attempts, run_at: e.t.clock.now() })
    .where('account_id', '=', c.acc.accountId)
    .where('id', '=', jobId)
    .execute();
  await new JobRunner({
    db: e.t.db,
    clock: e.t.clock,
    log: e.t.app.log,
    handlers: [failing],
    accountId: c.acc.accountId,
  }).drain();
}

it('a send job whose retries run out is kept dead, and its queued message fails with its last error', async () => {
  const { c, messageId, jobId } = await queuedMessage('stuck');
  // Its last attempt.
  const real = e.t.services.jobHandlers.find((h) => h.kind === 'message.send')!;
  await failRun(c, jobId, real.retryDelaysMs.length, 'connection terminated unexpectedly');

  const [dead] = await jobsOf(e, c.acc.accountId, 'message.send');
  expect(dead!.dead_at).not.toBeNull();
  const row = await messageRow(e, c.acc.accountId, messageId);
  expect(row).toMatchObject({
    status: 'failed',
    failure_reason: 'sending stopped: connection terminated unexpectedly',
  });
  expect((await events(e, c.acc.accountId, 'message.failed')).map((x) => x.data)).toEqual([
    expect.objectContaining({ id: row.id, status: 'failed' }),
  ]);
  // Only the one attempt that was throttled ever reached Graph.
  expect(e.graph.find(c.sendMatcher)).toHaveLength(1);
});

it('a run that fails after twenty throttled minutes is one more retry on the send schedule, not the end', async () => {
  const { c, messageId, jobId } = await queuedMessage('patience');
  // Eight attempts in (about twenty minutes of throttling), the next run fails outright.
  const before = e.t.clock.now().getTime();
  await failRun(c, jobId, 8, 'deadlock detected');
  const [after] = await jobsOf(e, c.acc.accountId, 'message.send');
  expect(after!.dead_at).toBeNull();
  // Due again after the send schedule's ninth delay.
  const due = after!.run_at.getTime() - SEND_RETRY_DELAYS_MS[8]!;
  expect(due).toBeGreaterThanOrEqual(before);
  expect(due).toBeLessThanOrEqual(e.t.clock.now().getTime());
  expect((await messageRow(e, c.acc.accountId, messageId)).status).toBe('queued');
});
