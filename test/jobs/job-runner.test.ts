import { randomUUID } from 'node:crypto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { JobQueue, type JobKind } from '../../src/jobs/job-queue.js';
import {
  JobRunner,
  type ClaimedJob,
  type JobHandler,
  type JobOutcome,
} from '../../src/jobs/job-runner.js';
import { startTestApp, type TestApp } from '../helpers.js';
import { freezeClock } from '../inbox-helpers.js';

let t: TestApp;
let queue: JobQueue;
beforeAll(async () => {
  t = await startTestApp();
  // Frozen: delays and leases below are exact, whatever the machine's speed.
  freezeClock(t.clock);
  queue = new JobQueue(t.clock);
});
afterAll(() => t.close());

/**
 * A job kind of this test alone (the jobs table is shared with every other test file), so no
 * other runner ever claims these rows and these runners claim nothing else.
 */
function testKind(): JobKind {
  return `test.${randomUUID()}` as JobKind;
}

function handler(
  kind: JobKind,
  retryDelaysMs: number[],
  handle: (job: ClaimedJob) => Promise<JobOutcome>,
): JobHandler {
  return { kind, retryDelaysMs, handle };
}

function runner(
  handlers: JobHandler[],
  opts: { leaseMs?: number; concurrency?: number; pollIntervalMs?: number } = {},
): JobRunner {
  return new JobRunner({ db: t.db, clock: t.clock, log: t.app.log, handlers, ...opts });
}

async function enqueue(kind: JobKind, n: number, delayMs = 0): Promise<string[]> {
  return t.db.transaction().execute(async (trx) => {
    const ids = [];
    for (let i = 0; i < n; i++) {
      ids.push(
        await queue.enqueue(
          trx,
          'acc_jobtest',
          kind,
          { v: 1, message_id: `msg_${i}`, status: 'delivered' },
          { delayMs },
        ),
      );
    }
    return ids;
  });
}

function rowsOf(kind: JobKind) {
  return t.db
    .selectFrom('jobs')
    .select(['id', 'run_at', 'attempts', 'locked_until', 'last_error'])
    .where('kind', '=', kind)
    .execute();
}

/** Lets other promises (and the database) make progress. */
const tick = () => new Promise<void>((resolve) => setImmediate(resolve));

async function until(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await tick();
}

describe('JobRunner', () => {
  it('two runners draining the same due jobs concurrently run each job exactly once', async () => {
    const kind = testKind();
    const ids = await enqueue(kind, 60);
    const calls = new Map<string, number>();
    const counting = handler(kind, [1000], async (job) => {
      calls.set(job.id, (calls.get(job.id) ?? 0) + 1);
      await tick(); // let the other runner claim meanwhile
      return { status: 'done' };
    });
    const a = runner([counting]);
    const b = runner([counting]);
    const [na, nb] = await Promise.all([a.drain(), b.drain()]);
    expect(na + nb).toBe(60);
    expect([...calls.keys()].sort()).toEqual([...ids].sort());
    expect([...calls.values()].every((n) => n === 1)).toBe(true);
    expect(await rowsOf(kind)).toEqual([]);
  });

  it('a job written already leased (one and many at once) is due when its lease ends, not before', async () => {
    const kind = testKind();
    const lease = new Date(t.clock.now().getTime() + 60_000);
    const payload = { v: 1 as const, message_id: 'msg_leased', status: 'delivered' as const };
    await t.db.transaction().execute(async (trx) => {
      await queue.enqueue(trx, 'acc_jobtest', kind, payload, { leasedUntil: lease });
      await queue.enqueueMany(trx, [
        { accountId: 'acc_jobtest', kind, payload, leasedUntil: lease },
        { accountId: 'acc_jobtest', kind, payload, leasedUntil: lease },
      ]);
    });
    // Due at the lease's end: a runner's scan of due jobs (run_at order) never meets it earlier.
    const rows = await rowsOf(kind);
    expect(rows).toHaveLength(3);
    for (const row of rows) {
      expect(row.run_at.getTime()).toBe(lease.getTime());
      expect(row.locked_until?.getTime()).toBe(lease.getTime());
      expect(row.attempts).toBe(1);
    }
    let calls = 0;
    const r = runner([handler(kind, [], async () => ((calls += 1), { status: 'done' }))]);
    t.clock.advance(59_999);
    expect(await r.drain()).toBe(0);
    t.clock.advance(2);
    expect(await r.drain()).toBe(3);
    expect(calls).toBe(3);
  });

  it('a claimed job is due again at the end of its lease, and no sooner', async () => {
    const kind = testKind();
    const [id] = await enqueue(kind, 1);
    let seen: { run_at: Date; locked_until: Date | null } | undefined;
    const r = runner(
      [
        handler(kind, [], async () => {
          seen = (await rowsOf(kind)).find((row) => row.id === id);
          return { status: 'done' };
        }),
      ],
      { leaseMs: 30_000 },
    );
    const lease = t.clock.now().getTime() + 30_000;
    expect(await r.drain()).toBe(1);
    expect(seen?.locked_until?.getTime()).toBe(lease);
    expect(seen?.run_at.getTime()).toBe(lease);
  });

  it('while jobs run, a runner claims again only once a quarter of its slots are free', async () => {
    const kind = testKind();
    await enqueue(kind, 12);
    const running: (() => void)[] = [];
    let started = 0;
    const r = runner(
      [
        handler(kind, [], async () => {
          started++;
          await new Promise<void>((resolve) => running.push(resolve));
          return { status: 'done' };
        }),
      ],
      { concurrency: 8, pollIntervalMs: 5 },
    );
    r.start();
    try {
      await until(async () => started === 8);
      // One slot free of eight: below a quarter, so no claim (polls keep coming every 5 ms).
      running.shift()!();
      await new Promise((resolve) => setTimeout(resolve, 150));
      expect(started).toBe(8);
      // Two free: a claim fills both.
      running.shift()!();
      await until(async () => started === 10);
    } finally {
      let stopped = false;
      const stopping = r.stop().then(() => (stopped = true));
      while (!stopped) {
        running.splice(0).forEach((resolve) => resolve());
        await tick();
      }
      await stopping;
    }
  });

  it('a job not yet due is not run; it runs once its time comes', async () => {
    const kind = testKind();
    await enqueue(kind, 1, 5000);
    let calls = 0;
    const r = runner([handler(kind, [], async () => ((calls += 1), { status: 'done' }))]);
    expect(await r.drain()).toBe(0);
    t.clock.advance(4999);
    expect(await r.drain()).toBe(0);
    t.clock.advance(1);
    expect(await r.drain()).toBe(1);
    expect(calls).toBe(1);
    expect(await rowsOf(kind)).toEqual([]);
  });

  it('a handler that throws is retried after each delay of its schedule, then kept dead after the last', async () => {
    const kind = testKind();
    await enqueue(kind, 1);
    const attempts: number[] = [];
    const r = runner([
      handler(kind, [1000, 5000], async (job) => {
        attempts.push(job.attempts);
        throw new Error(`boom ${job.attempts}`);
      }),
    ]);

    await r.drain();
    expect(attempts).toEqual([1]);
    let [row] = await rowsOf(kind);
    expect(row).toMatchObject({ attempts: 1, locked_until: null, last_error: 'boom 1' });
    expect(row!.run_at.getTime()).toBe(t.clock.now().getTime() + 1000);

    t.clock.advance(999);
    await r.drain();
    expect(attempts).toEqual([1]);
    t.clock.advance(1);
    await r.drain();
    expect(attempts).toEqual([1, 2]);
    [row] = await rowsOf(kind);
    expect(row).toMatchObject({ attempts: 2, last_error: 'boom 2' });
    expect(row!.run_at.getTime()).toBe(t.clock.now().getTime() + 5000);

    t.clock.advance(4999);
    await r.drain();
    expect(attempts).toEqual([1, 2]);
    t.clock.advance(1);
    await r.drain();
    expect(attempts).toEqual([1, 2, 3]);
    // Kept, never run again: dead, with its last error, until someone retries it.
    const [dead] = await t.db
      .selectFrom('jobs')
      .select(['attempts', 'locked_until', 'last_error', 'dead_at'])
      .where('kind', '=', kind)
      .execute();
    expect(dead).toEqual({
      attempts: 3,
      locked_until: null,
      last_error: 'boom 3',
      dead_at: t.clock.now(),
    });

    t.clock.advance(24 * 60 * 60 * 1000);
    await r.drain();
    expect(attempts).toEqual([1, 2, 3]);
  });

  it('a handler that extended its claim and then fails is still retried, then kept dead (the runner fences on the moved lease)', async () => {
    const kind = testKind();
    await enqueue(kind, 1);
    const r = runner(
      [
        handler(kind, [1000], async (job) => {
          // A long batch renews its claim as it goes (as the send pipeline does), then fails.
          const until = new Date(job.lease.getTime() + 30_000);
          expect(await queue.extend(t.db, job.accountId, job.id, job.lease, until)).toBe(true);
          job.lease = until;
          throw new Error(`failed after renewing ${job.attempts}`);
        }),
      ],
      { leaseMs: 10_000 },
    );
    await r.drain();
    let [row] = await rowsOf(kind);
    // Retried on its schedule, not left locked until the renewed lease ends.
    expect(row).toMatchObject({
      attempts: 1,
      locked_until: null,
      last_error: 'failed after renewing 1',
    });
    expect(row!.run_at.getTime()).toBe(t.clock.now().getTime() + 1000);
    t.clock.advance(1000);
    await r.drain();
    const [dead] = await t.db
      .selectFrom('jobs')
      .select(['attempts', 'locked_until', 'dead_at'])
      .where('kind', '=', kind)
      .execute();
    expect(dead).toEqual({ attempts: 2, locked_until: null, dead_at: t.clock.now() });
    [row] = await rowsOf(kind);
    expect(row!.last_error).toBe('failed after renewing 2');
  });

  it("a dying job's onDead hook runs once, in the transaction that marks it dead", async () => {
    const kind = testKind();
    const [id] = await enqueue(kind, 1);
    const seen: { job: string; error: string; deadInTx: boolean }[] = [];
    const h: JobHandler = {
      ...handler(kind, [1000], async () => {
        throw new Error('cannot run');
      }),
      onDead: async (trx, job, lastError) => {
        // Inside the transaction, the job is already marked dead.
        const row = await trx
          .selectFrom('jobs')
          .select('dead_at')
          .where('id', '=', job.id)
          .executeTakeFirstOrThrow();
        seen.push({ job: job.id, error: lastError, deadInTx: row.dead_at !== null });
      },
    };
    const r = runner([h]);
    await r.drain();
    expect(seen).toEqual([]);
    t.clock.advance(1000);
    await r.drain();
    expect(seen).toEqual([{ job: id, error: 'cannot run', deadInTx: true }]);
    t.clock.advance(86_400_000);
    await r.drain();
    expect(seen).toHaveLength(1);
  });

  it('a job whose onDead hook fails is rolled back with it, not dead, and settled again later (not run again) until the hook succeeds', async () => {
    const kind = testKind();
    await enqueue(kind, 1);
    let runs = 0;
    let settles = 0;
    const h: JobHandler = {
      ...handler(kind, [], async () => {
        runs += 1;
        throw new Error('cannot run');
      }),
      onDead: async (trx, _job, lastError) => {
        settles += 1;
        expect(lastError).toBe('cannot run');
        await trx
          .insertInto('tags')
          .values({
            account_id: 'acc_jobtest',
            name: `${kind}.${settles}`,
            created_at: t.clock.now(),
          })
          .execute();
        if (settles < 3) throw new Error('cannot settle');
      },
    };
    const r = new JobRunner({
      db: t.db,
      clock: t.clock,
      log: t.app.log,
      handlers: [h],
      settleRetryMs: 5000,
    });
    const job = async () =>
      t.db
        .selectFrom('jobs')
        .select(['dead_at', 'last_error', 'run_at'])
        .where('kind', '=', kind)
        .executeTakeFirstOrThrow();
    await r.drain();
    expect([runs, settles]).toEqual([1, 1]);
    expect(await job()).toEqual({
      dead_at: null,
      last_error: 'cannot run',
      run_at: new Date(t.clock.now().getTime() + 5000),
    });
    // What the failed hook wrote went with its transaction.
    const tags = () =>
      t.db.selectFrom('tags').select('name').where('name', 'like', `${kind}%`).execute();
    expect(await tags()).toEqual([]);

    t.clock.advance(4999);
    await r.drain();
    expect(settles).toBe(1);
    t.clock.advance(1);
    await r.drain();
    expect([runs, settles]).toEqual([1, 2]);
    expect((await job()).dead_at).toBeNull();

    t.clock.advance(5000);
    await r.drain();
    expect([runs, settles]).toEqual([1, 3]);
    expect(await job()).toMatchObject({ dead_at: t.clock.now(), last_error: 'cannot run' });
    expect(await tags()).toEqual([{ name: `${kind}.3` }]);
    t.clock.advance(86_400_000);
    await r.drain();
    expect([runs, settles]).toEqual([1, 3]);
  });

  it('a handler that fails once and then succeeds runs exactly twice', async () => {
    const kind = testKind();
    await enqueue(kind, 1);
    let calls = 0;
    const r = runner([
      handler(kind, [1000], async () => {
        calls += 1;
        if (calls === 1) throw new Error('transient');
        return { status: 'done' };
      }),
    ]);
    await r.drain();
    t.clock.advance(1000);
    await r.drain();
    t.clock.advance(60_000);
    await r.drain();
    expect(calls).toBe(2);
    expect(await rowsOf(kind)).toEqual([]);
  });

  it('a job whose runner died (lease expired) is picked up again by another runner', async () => {
    const kind = testKind();
    await enqueue(kind, 1);
    // Runner A claims the job, and its handler never finishes: as good as a killed worker.
    let releaseA!: () => void;
    const stuck = new Promise<void>((resolve) => (releaseA = resolve));
    const a = runner([handler(kind, [1000], async () => (await stuck, { status: 'done' }))], {
      leaseMs: 30_000,
    });
    const aDrain = a.drain(1);
    await until(async () => (await rowsOf(kind))[0]?.attempts === 1);

    let bCalls = 0;
    const b = runner([handler(kind, [1000], async () => ((bCalls += 1), { status: 'done' }))], {
      leaseMs: 30_000,
    });
    expect(await b.drain()).toBe(0); // the lease holds
    t.clock.advance(30_000);
    expect(await b.drain()).toBe(0); // still held at the lease's last instant
    t.clock.advance(1);
    expect(await b.drain()).toBe(1);
    expect(bCalls).toBe(1);
    expect(await rowsOf(kind)).toEqual([]);

    releaseA();
    await aDrain;
    expect(await rowsOf(kind)).toEqual([]);
  });

  it('a job with an expired lock (locked_until in the past) is claimed again', async () => {
    const kind = testKind();
    const [id] = await enqueue(kind, 1);
    await t.db
      .updateTable('jobs')
      .set({ locked_until: new Date(t.clock.now().getTime() - 1), attempts: 1 })
      .where('account_id', '=', 'acc_jobtest')
      .where('id', '=', id!)
      .execute();
    const seen: number[] = [];
    const r = runner([
      handler(kind, [1000], async (job) => (seen.push(job.attempts), { status: 'done' })),
    ]);
    expect(await r.drain()).toBe(1);
    expect(seen).toEqual([2]);
    expect(await rowsOf(kind)).toEqual([]);
  });

  it('a runner whose lease expired cannot undo the claim of the runner that took the job over', async () => {
    const kind = testKind();
    await enqueue(kind, 1);
    // A claims the job, stalls past its lease, and then fails.
    let failA!: () => void;
    const stalled = new Promise<void>((resolve) => (failA = resolve));
    const a = runner(
      [
        handler(kind, [1000], async () => {
          await stalled;
          throw new Error('A gave up late');
        }),
      ],
      { leaseMs: 10_000 },
    );
    const aDrain = a.drain(1);
    await until(async () => (await rowsOf(kind))[0]?.attempts === 1);
    t.clock.advance(10_001);

    // B takes the job over and is still working on it when A's late failure arrives.
    let finishB!: () => void;
    const working = new Promise<void>((resolve) => (finishB = resolve));
    let bCalls = 0;
    const b = runner(
      [
        handler(kind, [1000], async () => {
          bCalls += 1;
          await working;
          return { status: 'done' };
        }),
      ],
      { leaseMs: 10_000 },
    );
    const bDrain = b.drain(1);
    await until(async () => (await rowsOf(kind))[0]?.attempts === 2);
    failA();
    await aDrain;

    // B's claim must still stand: no third runner may start the job while B runs it.
    let cCalls = 0;
    const c = runner([handler(kind, [1000], async () => ((cCalls += 1), { status: 'done' }))]);
    t.clock.advance(1000);
    await c.drain();
    expect(cCalls).toBe(0);

    finishB();
    await bDrain;
    expect(bCalls).toBe(1);
    expect(await rowsOf(kind)).toEqual([]);
  });
});
