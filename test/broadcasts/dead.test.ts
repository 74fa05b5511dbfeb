import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { DeadJobs } from '../../src/jobs/dead-jobs.js';
import { JobQueue } from '../../src/jobs/job-queue.js';
import { newAccount, type TestApp } from '../helpers.js';
import {
  completedEvents,
  createBroadcast,
  createContact,
  createPrivateDatabase,
  freezeClock,
  getBroadcast,
  runnerOf,
  startAppOn,
} from './broadcast-helpers.js';

// A database of this file alone: its runner moves the clock by hours and must claim only these jobs.
// Batches of 2 at 2 a second on webchat: each run of the job sends one batch and continues later.
let t: TestApp;
let dropDb: () => Promise<void>;
beforeAll(async () => {
  const db = await createPrivateDatabase();
  dropDb = db.drop;
  t = await startAppOn(db.url, {
    broadcastBatchSize: 2,
    broadcastRatePerSecond: { whatsapp: 0, instagram: 0, messenger: 0, webchat: 2 },
  });
  freezeClock(t.clock);
});
afterAll(async () => {
  await t?.close();
  await dropDb?.();
});

/** Runs every due job, then moves past the longest retry delay, as many times as asked. */
async function runThroughRetries(rounds: number): Promise<void> {
  const runner = runnerOf(t);
  for (let i = 0; i < rounds; i++) {
    await runner.drain();
    t.clock.advance(15 * 60_000);
  }
}

describe('a job whose retries run out', () => {
  it('ends its broadcast failed with a reason, stats as far as it got, one completed event, and is kept dead', async () => {
    const acc = await newAccount(t);
    for (let i = 0; i < 5; i++) await createContact(acc, { tags: ['vip'] });
    const b = await createBroadcast(acc, { audience: { tags: ['vip'] } });

    // The first batch goes out; then the broadcast's stored audience becomes unusable (a NUL in
    // a tag, which PostgreSQL refuses in a text parameter), so no later batch can run.
    await runnerOf(t).drain();
    expect((await getBroadcast(acc, b.id)).stats.sent).toBe(2);
    await sql`UPDATE broadcasts SET audience = ${'{"tags":["vip\\u0000"]}'}::json
              WHERE account_id = ${acc.accountId} AND id = ${b.id}`.execute(t.db);

    await runThroughRetries(8);

    const got = await getBroadcast(acc, b.id);
    expect(got.status).toBe('failed');
    expect(got.stats).toMatchObject({ sent: 2, failed: 0 });
    const row = await t.db
      .selectFrom('broadcasts')
      .select(['failure_reason', 'completed_at'])
      .where('account_id', '=', acc.accountId)
      .where('id', '=', b.id)
      .executeTakeFirstOrThrow();
    expect(row.failure_reason).toMatch(/^sending stopped after repeated failures: .+/);
    expect(row.completed_at).not.toBeNull();
    // The API shows the reason on the broadcast.
    expect(got.failure_reason).toBe(row.failure_reason);
    const events = await completedEvents(t.db, acc.accountId, b.id);
    expect(events).toEqual([expect.objectContaining({ id: b.id, status: 'failed' })]);

    const dead = await new DeadJobs({ db: t.db, clock: t.clock }).list({
      accountId: acc.accountId,
      limit: 10,
    });
    expect(dead).toEqual([
      expect.objectContaining({
        account_id: acc.accountId,
        kind: 'broadcast.send',
        payload: { v: 1, broadcast_id: b.id },
        attempts: 6, // the first try and the five retries of its schedule
        last_error: expect.stringMatching(/.+/),
        died_at: expect.any(String),
      }),
    ]);

    // Never run again, and the broadcast stays as it ended.
    expect(await runnerOf(t).drain()).toBe(0);
    expect((await getBroadcast(acc, b.id)).status).toBe('failed');
    expect(await completedEvents(t.db, acc.accountId, b.id)).toHaveLength(1);
  });

  it('a scheduled broadcast that cannot start ends failed too', async () => {
    const acc = await newAccount(t);
    await createContact(acc, { tags: ['vip'] });
    const b = await createBroadcast(acc, {
      audience: { tags: ['vip'] },
      scheduled_at: new Date(t.clock.now().getTime() + 10 * 60_000).toISOString(),
    });
    await sql`UPDATE broadcasts SET audience = ${'{"tags":["\\u0000"]}'}::json
              WHERE account_id = ${acc.accountId} AND id = ${b.id}`.execute(t.db);
    await runThroughRetries(9);
    const got = await getBroadcast(acc, b.id);
    expect(got.status).toBe('failed');
    expect(got.stats).toMatchObject({ sent: 0, failed: 0 });
  });

  it('a sandbox status job that cannot run is kept dead with its error; a retry puts it back once', async () => {
    const acc = await newAccount(t);
    const jobId = await t.db.transaction().execute((trx) =>
      new JobQueue(t.clock).enqueue(trx, acc.accountId, 'sandbox.status', {
        v: 1,
        message_id: 'msg_does_not_exist',
        status: 'delivered',
      }),
    );
    await runThroughRetries(6);
    const dead = new DeadJobs({ db: t.db, clock: t.clock });
    expect(await dead.list({ accountId: acc.accountId, limit: 10 })).toEqual([
      expect.objectContaining({
        id: jobId,
        kind: 'sandbox.status',
        attempts: 5,
        last_error: 'message msg_does_not_exist not found',
      }),
    ]);

    await expect(dead.retry('job_unknown')).rejects.toMatchObject({ code: 'not_found' });
    expect(await dead.retry(jobId)).toEqual({
      id: jobId,
      kind: 'sandbox.status',
      account_id: acc.accountId,
    });
    expect(await dead.list({ accountId: acc.accountId, limit: 10 })).toEqual([]);
    // It runs again (due now), fails through its schedule again, and dies again.
    await runThroughRetries(6);
    expect(await dead.list({ accountId: acc.accountId, limit: 10 })).toEqual([
      expect.objectContaining({ id: jobId, attempts: 5 }),
    ]);
  });
});
