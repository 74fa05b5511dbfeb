import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDb, type Db } from '../../src/db/database.js';
import { Notifications } from '../../src/realtime/notifications.js';
import { createPrivateDatabase, newAccount, startTestApp, type TestApp } from '../helpers.js';

// The read caches, the event streams and the widget streams hear other processes' changes
// through PostgreSQL's LISTEN/NOTIFY: one listening connection per process serves them all.
let database: { url: string; drop: () => Promise<void> };
let t: TestApp;
let admin: Db;

beforeAll(async () => {
  // A database of its own: the backends counted below are this app's alone.
  database = await createPrivateDatabase();
  admin = createDb(database.url, { max: 1 });
  t = await startTestApp({ databaseUrl: database.url });
});
afterAll(async () => {
  await t?.close();
  await admin?.destroy();
  await database?.drop();
});

/** The backends of the private database that LISTEN (their last statement a LISTEN or a ping). */
async function listeners(): Promise<number[]> {
  const { rows } = await sql<{ pid: number }>`
    SELECT pid FROM pg_stat_activity
    WHERE datname = current_database() AND pid <> pg_backend_pid()
      AND (query LIKE 'LISTEN %' OR query = 'SELECT pg_notify($1, $2)')`.execute(admin);
  return rows.map((r) => r.pid);
}

describe('one listening connection per process', () => {
  it('serves the read caches, the event feed and the webchat wake-ups, and stays one after a reconnection', async () => {
    const acc = await newAccount(t);
    // The event feed's first subscriber, as an open event stream would be.
    const unsubscribe = t.services.eventFeed.subscribe(acc.accountId, () => undefined);
    try {
      await expect.poll(() => t.services.eventFeed.listening).toBe(true);
      expect(t.services.caches.contact.isEnabled).toBe(true);
      expect(t.services.webchat.wakeups.live).toBe(true);
      const pid = t.feed!.listenerPid!;
      expect(t.services.eventFeed.listenerPid).toBe(pid);
      expect(await listeners()).toEqual([pid]);

      await sql`SELECT pg_terminate_backend(${pid})`.execute(admin);
      await expect.poll(() => t.services.eventFeed.listenerPid, { timeout: 5_000 }).not.toBe(pid);
      await expect.poll(() => t.services.eventFeed.listening, { timeout: 5_000 }).toBe(true);
      const again = t.feed!.listenerPid!;
      expect(again).not.toBe(pid);
      expect(t.services.caches.contact.isEnabled).toBe(true);
      expect(t.services.webchat.wakeups.live).toBe(true);
      await expect.poll(() => listeners()).toEqual([again]);
    } finally {
      unsubscribe();
    }
  });
});

describe('Notifications', () => {
  it('hands each topic its notifications, on a channel subscribed to before or while live', async () => {
    const log = { info: () => undefined, warn: () => undefined };
    const notifications = new Notifications({ url: database.url, log });
    const heard: string[] = [];
    const lives: string[] = [];
    notifications.subscribe(
      { channel: 'switchboard_test_a', name: 'one' },
      {
        notify: (key) => heard.push(`one ${key}`),
        live: (live) => lives.push(`one ${live}`),
      },
    );
    try {
      await notifications.start();
      expect(notifications.live).toBe(true);
      notifications.subscribe(
        { channel: 'switchboard_test_b' },
        {
          notify: (key) => heard.push(`b ${key}`),
          live: (live) => lives.push(`b ${live}`),
        },
      );
      await expect.poll(() => lives).toEqual(['one true', 'b true']);
      await sql`SELECT pg_notify('switchboard_test_a', 'one k1'), pg_notify('switchboard_test_a', 'two k2'),
        pg_notify('switchboard_test_a', 'one'), pg_notify('switchboard_test_b', 'whole payload')`.execute(
        admin,
      );
      await expect.poll(() => heard).toEqual(['one k1', 'one null', 'b whole payload']);
    } finally {
      await notifications.stop();
    }
    expect(lives).toEqual(['one true', 'b true', 'one false', 'b false']);
  });
});
