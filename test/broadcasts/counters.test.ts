import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BroadcastsRepository } from '../../src/broadcasts/broadcasts.repository.js';
import { newAccount, type TestAccount, type TestApp } from '../helpers.js';
import {
  createBroadcast,
  createContact,
  createPrivateDatabase,
  getBroadcast,
  recipientsOf,
  runnerOf,
  startAppOn,
  type BroadcastJson,
} from './broadcast-helpers.js';

// The broadcast funnel is kept in counter rows beside the broadcast (migration 013), so that the
// transaction recording a batch's answers does not wait for the one queueing the next batch.
let t: TestApp;
let repo: BroadcastsRepository;
let dropDb: () => Promise<void>;
beforeAll(async () => {
  const db = await createPrivateDatabase();
  dropDb = db.drop;
  t = await startAppOn(db.url);
  repo = new BroadcastsRepository(t.db);
});
afterAll(async () => {
  await t?.close();
  await dropDb?.();
});

/** A broadcast that stays scheduled (nothing sends it): its counts move only as the test says. */
async function idleBroadcast(): Promise<{ acc: TestAccount; b: BroadcastJson }> {
  const acc = await newAccount(t);
  await createContact(acc, { tags: ['vip'] });
  const b = await createBroadcast(acc, {
    audience: { tags: ['vip'] },
    scheduled_at: new Date(t.clock.now().getTime() + 24 * 3600_000).toISOString(),
  });
  return { acc, b };
}

const ZERO = { sent: 0, delivered: 0, read: 0, replied: 0, failed: 0 };

describe('broadcast counts', () => {
  it('recording answers does not wait for the transaction that holds the broadcast locked (queueing a batch)', async () => {
    const { acc, b } = await idleBroadcast();
    await t.db.transaction().execute(async (queueing) => {
      expect(await repo.lock(queueing, acc.accountId, b.id)).toBeDefined();
      await t.db.transaction().execute(async (recording) => {
        // Were the counts on the locked row, this would wait for `queueing` and time out.
        await sql`SET LOCAL lock_timeout = '2s'`.execute(recording);
        await repo.addStats(recording, acc.accountId, b.id, { sent: 3, failed: 1 }, new Date());
      });
      // Committed and visible at once, while the broadcast is still locked.
      expect((await getBroadcast(acc, b.id)).stats).toEqual({ ...ZERO, sent: 3, failed: 1 });
    });
  });

  it('stay exact under concurrent recording: every committed delta counted once, rolled-back ones not at all', async () => {
    const { acc, b } = await idleBroadcast();
    const expected = { ...ZERO };
    const writers = Array.from({ length: 60 }, (_, i) => {
      const delta = { sent: 1 + (i % 3), delivered: i % 2, read: i % 5 === 0 ? 1 : 0 };
      const rollBack = i % 7 === 3;
      if (!rollBack) {
        expected.sent += delta.sent;
        expected.delivered += delta.delivered;
        expected.read += delta.read;
      }
      return t.db
        .transaction()
        .execute(async (trx) => {
          await repo.addStats(trx, acc.accountId, b.id, delta, new Date());
          // Held a moment, so that transactions overlap on the pool's connections.
          await sql`SELECT pg_sleep(0.01)`.execute(trx);
          if (rollBack) throw new Error('rolled back');
        })
        .catch((err: Error) => {
          if (err.message !== 'rolled back') throw err;
        });
    });
    await Promise.all(writers);
    expect((await getBroadcast(acc, b.id)).stats).toEqual(expected);
    // One row per connection slot at most, however many transactions added to the counts.
    const { rows } = await sql<{ n: number }>`
      SELECT count(*)::int AS n FROM broadcast_counters
      WHERE account_id = ${acc.accountId} AND broadcast_id = ${b.id}`.execute(t.db);
    expect(rows[0]!.n).toBeGreaterThan(0);
    expect(rows[0]!.n).toBeLessThanOrEqual(16);
  });

  it("add to the broadcast row's own counts (those from before the counter rows), in GET and in the list", async () => {
    const { acc, b } = await idleBroadcast();
    await sql`UPDATE broadcasts SET sent = 7, replied = 2
              WHERE account_id = ${acc.accountId} AND id = ${b.id}`.execute(t.db);
    await t.db
      .transaction()
      .execute((trx) =>
        repo.addStats(trx, acc.accountId, b.id, { sent: 2, replied: 1 }, new Date()),
      );
    const stats = { ...ZERO, sent: 9, replied: 3 };
    expect((await getBroadcast(acc, b.id)).stats).toEqual(stats);
    const list = await acc.call({ method: 'GET', url: '/v1/broadcasts' });
    expect(list.json().data).toEqual([expect.objectContaining({ id: b.id, stats })]);
  });
});

describe('broadcast recipients', () => {
  it('a contact is a recipient once: adding it again fails (and with it, its batch)', async () => {
    const acc = await newAccount(t);
    const c = await createContact(acc, { tags: ['vip'] });
    const b = await createBroadcast(acc, { audience: { tags: ['vip'] } });
    await runnerOf(t).drain();
    expect((await getBroadcast(acc, b.id)).stats).toEqual({ ...ZERO, sent: 1 });
    const [recipient] = await recipientsOf(t.db, acc.accountId, b.id);
    expect(recipient).toMatchObject({ contact_id: c.id, failure_reason: null });
    expect(recipient!.message_id).not.toBeNull();

    await expect(
      t.db.transaction().execute(async (trx) => {
        expect(await repo.recipientsAmong(trx, acc.accountId, b.id, [c.id])).toEqual(
          new Set([c.id]),
        );
        await repo.addRecipients(
          trx,
          acc.accountId,
          b.id,
          [{ contactId: c.id, conversationId: null, messageId: null, failureReason: 'again' }],
          new Date(),
        );
      }),
    ).rejects.toThrow(/broadcast_recipients_pkey/);
    expect(await recipientsOf(t.db, acc.accountId, b.id)).toEqual([recipient]);
  });
});
