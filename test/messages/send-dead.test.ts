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

it('a send job whose retries run out is kept dead, and its queued message fails with its last error', async () => {
  const c = await connectedAccount(e);
  const contact = await createContact(c.acc);
  await contactWrites(e, c, contact);
  e.graph.failNext(c.sendMatcher, 1, META_ERRORS.rateLimitIssues);
  const res = await send(c, { contact_id: contact.id, type: 'text', content: 'stuck' });
  expect(res.json()).toMatchObject({ status: 'queued' });
  const [job] = await jobsOf(e, c.acc.accountId, 'message.send');
  expect(job).toBeDefined();

  // The real handler, made to fail as a run that cannot reach what it needs would.
  const real = e.t.services.jobHandlers.find((h) => h.kind === 'message.send')!;
  const failing = {
    ...real,
    handle: () => Promise.reject(new Error('connection terminated unexpectedly')),
  } as JobHandler;
  // Its last attempt is due now.
  await e.t.db
    .updateTable('jobs')
    .set({ attempts: real.retryDelaysMs.length, run_at: e.t.clock.now() })
    .where('account_id', '=', c.acc.accountId)
    .where('id', '=', job!.id)
    .execute();
  await new JobRunner({
    db: e.t.db,
    clock: e.t.clock,
    log: e.t.app.log,
    handlers: [failing],
    accountId: c.acc.accountId,
  }).drain();

  const [dead] = await jobsOf(e, c.acc.accountId, 'message.send');
  expect(dead!.dead_at).not.toBeNull();
  const row = await messageRow(e, c.acc.accountId, res.json().id);
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
  const c = await connectedAccount(e);
  const contact = await createContact(c.acc);
  await contactWrites(e, c, contact);
  e.graph.failNext(c.sendMatcher, 1, META_ERRORS.rateLimitIssues);
  const res = await send(c, { contact_id: contact.id, type: 'text', content: 'patience' });
  expect(res.json()).toMatchObject({ status: 'queued' });
  const [job] = await jobsOf(e, c.acc.accountId, 'message.send');
  // Eight attempts in (about twenty minutes of throttling), the next run fails outright.
  await e.t.db
    .updateTable('jobs')
    .set({ attempts: 8, run_at: e.t.clock.now() })
    .where('account_id', '=', c.acc.accountId)
    .where('id', '=', job!.id)
    .execute();
  const real = e.t.services.jobHandlers.find((h) => h.kind === 'message.send')!;
  const failing = {
    ...real,
    handle: () => Promise.reject(new Error('deadlock detected')),
  } as JobHandler;
  const before = e.t.clock.now().getTime();
  await new JobRunner({
    db: e.t.db,
    clock: e.t.clock,
    log: e.t.app.log,
    handlers: [failing],
    accountId: c.acc.accountId,
  }).drain();
  const [after] = await jobsOf(e, c.acc.accountId, 'message.send');
  expect(after!.dead_at).toBeNull();
  // Due again after the send schedule's ninth delay.
  const due = after!.run_at.getTime() - SEND_RETRY_DELAYS_MS[8]!;
  expect(due).toBeGreaterThanOrEqual(before);
  expect(due).toBeLessThanOrEqual(e.t.clock.now().getTime());
  expect((await messageRow(e, c.acc.accountId, res.json().id)).status).toBe('queued');
});
