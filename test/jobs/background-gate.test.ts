import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../src/config.js';
import { createDb, type Db } from '../../src/db/database.js';
import { BackgroundGate, INTERACTIVE_CHANNEL } from '../../src/jobs/background-gate.js';
import { Notifications } from '../../src/realtime/notifications.js';
import {
  createBroadcast,
  createContact,
  createPrivateDatabase,
  messagesOf,
  runnerOf,
  sleep,
  startAppOn,
} from '../broadcasts/broadcast-helpers.js';
import { newAccount, type TestApp } from '../helpers.js';

// Interactive sends first: background work (a broadcast's batches and provider calls) waits at
// the gate while an API send is in flight here, or for yieldMs after one began in any process.

/** How long `pass()` took to resolve, in ms (rounded down). */
async function timed(p: Promise<void>): Promise<number> {
  const started = performance.now();
  await p;
  return Math.floor(performance.now() - started);
}

describe('the background gate in one process', () => {
  it('lets background work through at once while no interactive send is in flight or recent', async () => {
    const gate = new BackgroundGate({ yieldMs: 50 });
    expect(gate.closed).toBe(false);
    expect(await timed(gate.pass())).toBeLessThan(5);
  });

  it('holds a pass while an interactive send is in flight, and releases it when the send ends and yieldMs has passed', async () => {
    const gate = new BackgroundGate({ yieldMs: 50, maxWaitMs: 5_000 });
    const done = gate.interactive();
    expect(gate.closed).toBe(true);
    let passed = false;
    const pass = timed(gate.pass()).then((ms) => ((passed = true), ms));
    await sleep(150);
    expect(passed).toBe(false);
    done();
    // Begun 150 ms ago: its hold is over, the pass goes as soon as the send ends.
    expect(await pass).toBeGreaterThanOrEqual(149);
    expect(gate.closed).toBe(false);

    // A short send: the gate stays closed for yieldMs after it began.
    const started = performance.now();
    gate.interactive()();
    await gate.pass();
    expect(performance.now() - started).toBeGreaterThanOrEqual(49);
  });

  it('never holds a pass longer than maxWaitMs, however long interactive work lasts', async () => {
    const gate = new BackgroundGate({ yieldMs: 20, maxWaitMs: 60 });
    const done = gate.interactive();
    const ms = await timed(gate.pass());
    expect(ms).toBeGreaterThanOrEqual(59);
    expect(ms).toBeLessThan(500);
    expect(gate.closed).toBe(true);
    done();
  });

  it('with yieldMs 0 never closes and publishes nothing', async () => {
    let published = 0;
    const gate = new BackgroundGate({ yieldMs: 0, publish: async () => published++ });
    const done = gate.interactive();
    gate.listener.notify(null);
    expect(gate.closed).toBe(false);
    expect(await timed(gate.pass())).toBeLessThan(5);
    done();
    expect(published).toBe(0);
  });
});

describe('BACKGROUND_YIELD_MS', () => {
  it('is off (0) by default, and anything but 0 to 1000 is refused', () => {
    expect(loadConfig({}).backgroundYieldMs).toBe(0);
    expect(loadConfig({ BACKGROUND_YIELD_MS: '0' }).backgroundYieldMs).toBe(0);
    expect(loadConfig({ BACKGROUND_YIELD_MS: '250' }).backgroundYieldMs).toBe(250);
    for (const bad of ['-1', '1001', '2.5', 'fast'])
      expect(() => loadConfig({ BACKGROUND_YIELD_MS: bad })).toThrow(ConfigError);
  });
});

describe('the background gate across processes (NOTIFY on PostgreSQL)', () => {
  let database: { url: string; drop: () => Promise<void> };
  let db: Db;
  let feed: Notifications;
  beforeAll(async () => {
    database = await createPrivateDatabase();
    db = createDb(database.url, { max: 2 });
    feed = new Notifications({ url: database.url, log: { info: () => {}, warn: () => {} } });
  });
  afterAll(async () => {
    await feed?.stop();
    await db?.destroy();
    await database?.drop();
  });

  it("holds a worker's pass after an API process's send began, and publishes at most once every yieldMs / 2", async () => {
    let published = 0;
    const api = new BackgroundGate({
      yieldMs: 300,
      publish: () => {
        published++;
        return sql`SELECT pg_notify(${INTERACTIVE_CHANNEL}, '')`.execute(db);
      },
    });
    const worker = new BackgroundGate({ yieldMs: 300, maxWaitMs: 5_000 });
    feed.subscribe({ channel: INTERACTIVE_CHANNEL }, worker.listener);
    await feed.start();
    expect(feed.live).toBe(true);
    expect(worker.closed).toBe(false);

    const heardAt = performance.now();
    const done = api.interactive();
    api.interactive()(); // a second send at once: no second NOTIFY
    expect(published).toBe(1);
    await expect.poll(() => worker.closed, { timeout: 2_000, interval: 5 }).toBe(true);
    done();
    await worker.pass();
    // Held for yieldMs after it heard (which was after the send began).
    expect(performance.now() - heardAt).toBeGreaterThanOrEqual(299);
    expect(worker.closed).toBe(false);
    worker.stop();
  });
});

describe("a broadcast's batches at the gate", () => {
  let t: TestApp;
  let drop: () => Promise<void>;
  beforeAll(async () => {
    const database = await createPrivateDatabase();
    drop = database.drop;
    t = await startAppOn(database.url, { broadcastBatchSize: 2, backgroundYieldMs: 250 });
  });
  afterAll(async () => {
    await t?.close();
    await drop?.();
  });

  it('queue and send nothing while an API send is in flight, and go on once it has ended', async () => {
    const acc = await newAccount(t);
    for (let i = 0; i < 3; i++) await createContact(acc, { tags: ['gate'] });
    const b = await createBroadcast(acc, { audience: { tags: ['gate'] } });

    const done = t.services.gate.interactive();
    let drained = false;
    const run = runnerOf(t)
      .drain()
      .then(() => (drained = true));
    await sleep(400);
    expect(drained).toBe(false);
    expect(await messagesOf(t.db, acc.accountId, b.id)).toEqual([]);
    const released = performance.now();
    done();
    await run;
    const messages = await messagesOf(t.db, acc.accountId, b.id);
    expect(messages.map((m) => m.status)).toEqual(['sent', 'sent', 'sent']);
    // Released when the send ended, not by the pass's own limit (4 × 250 ms from the start).
    expect(performance.now() - released).toBeLessThan(500);
  });
});
