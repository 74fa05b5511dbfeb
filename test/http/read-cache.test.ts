import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { CacheFeed } from '../../src/db/cache-feed.js';
import { ReadCache } from '../../src/db/read-cache.js';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { testDatabaseUrl } from '../database.js';

// The API caches key owners and contacts in process. These tests change rows the way another
// process would (plain SQL on another connection) and through the API, and check that no read
// is served stale beyond the moment the change feed takes to tell.
let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const SOON = { timeout: 5_000, interval: 20 };

async function createContact(acc: TestAccount, name: string) {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/contacts',
    payload: { phone: randomPhone(), name },
  });
  expect(res.statusCode, res.body).toBe(201);
  return res.json<{ id: string; name: string }>();
}

const read = (acc: TestAccount, id: string) =>
  acc.call({ method: 'GET', url: `/v1/contacts/${id}` });

describe('read caches', () => {
  it('are on while the change feed listens', () => {
    expect(t.feed?.listenerPid).toEqual(expect.any(Number));
    expect(t.services.caches.contact.isEnabled).toBe(true);
    expect(t.services.caches.keys.isEnabled).toBe(true);
  });

  it('a contact changed through the API reads back changed at once: PUT, lifecycle, DELETE', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc, 'Before');
    expect((await read(acc, contact.id)).json().name).toBe('Before');
    expect((await read(acc, contact.id)).json().name).toBe('Before');
    await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${contact.id}`,
      payload: { name: 'After' },
    });
    expect((await read(acc, contact.id)).json().name).toBe('After');
    await acc.call({
      method: 'POST',
      url: `/v1/contacts/${contact.id}/lifecycle`,
      payload: { lifecycle_stage: 'customer' },
    });
    expect((await read(acc, contact.id)).json().lifecycle_stage).toBe('customer');
    await acc.call({ method: 'DELETE', url: `/v1/contacts/${contact.id}` });
    expect((await read(acc, contact.id)).statusCode).toBe(404);
  });

  it('a contact changed or deleted by another process is seen as soon as its change is announced', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc, 'Cached');
    expect((await read(acc, contact.id)).json().name).toBe('Cached');
    await t.db
      .updateTable('contacts')
      .set({ name: 'Elsewhere' })
      .where('account_id', '=', acc.accountId)
      .where('id', '=', contact.id)
      .execute();
    await vi.waitFor(
      async () => expect((await read(acc, contact.id)).json().name).toBe('Elsewhere'),
      SOON,
    );
    await t.db
      .deleteFrom('contacts')
      .where('account_id', '=', acc.accountId)
      .where('id', '=', contact.id)
      .execute();
    await vi.waitFor(async () => expect((await read(acc, contact.id)).statusCode).toBe(404), SOON);
  });

  it('a key revoked, or a plan lowered, by another process is refused as soon as announced', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    const contact = await createContact(acc, 'Key');
    expect((await read(acc, contact.id)).statusCode).toBe(200);
    await t.db
      .updateTable('api_keys')
      .set({ revoked_at: new Date() })
      .where('id', '=', acc.keyId)
      .execute();
    await vi.waitFor(async () => expect((await read(acc, contact.id)).statusCode).toBe(401), SOON);

    expect((await other.call({ method: 'GET', url: '/v1/contacts' })).statusCode).toBe(200);
    await t.db
      .updateTable('accounts')
      .set({ plan: 'starter' })
      .where('id', '=', other.accountId)
      .execute();
    await vi.waitFor(
      async () =>
        expect((await other.call({ method: 'GET', url: '/v1/contacts' })).statusCode).toBe(403),
      SOON,
    );
  });

  it('while the feed is down the caches are off (reads see every change at once), and back on when it reconnects', async () => {
    const acc = await newAccount(t);
    const contact = await createContact(acc, 'One');
    expect((await read(acc, contact.id)).json().name).toBe('One');
    const pid = t.feed!.listenerPid!;
    await sql`SELECT pg_terminate_backend(${pid})`.execute(t.db);
    await vi.waitFor(() => expect(t.services.caches.contact.isEnabled).toBe(false), SOON);
    // Nothing announces this change while the feed is down: only a disabled cache can see it.
    await t.db
      .updateTable('contacts')
      .set({ name: 'Two' })
      .where('account_id', '=', acc.accountId)
      .where('id', '=', contact.id)
      .execute();
    expect((await read(acc, contact.id)).json().name).toBe('Two');
    await vi.waitFor(() => expect(t.feed!.listenerPid).not.toBeNull(), SOON);
    expect(t.feed!.listenerPid).not.toBe(pid);
    expect(t.services.caches.contact.isEnabled).toBe(true);
    expect((await read(acc, contact.id)).json().name).toBe('Two');
    await t.db
      .updateTable('contacts')
      .set({ name: 'Three' })
      .where('account_id', '=', acc.accountId)
      .where('id', '=', contact.id)
      .execute();
    await vi.waitFor(
      async () => expect((await read(acc, contact.id)).json().name).toBe('Three'),
      SOON,
    );
  });

  it('a listening connection that stops answering (a silent partition) is given up: the caches go off', async (ctx) => {
    const cache = new ReadCache<string>({ maxEntries: 10, ttlMs: 60_000 });
    const log = { info: () => undefined, warn: () => undefined };
    const feed = new CacheFeed({
      url: testDatabaseUrl(),
      log,
      heartbeatMs: 200,
      retryMs: 60_000,
    });
    feed.subscribe('contact', cache);
    await feed.start();
    try {
      expect(cache.isEnabled).toBe(true);
      const pid = feed.listenerPid!;
      // The backend, frozen, neither answers nor closes: what a partition looks like from here.
      try {
        process.kill(pid, 'SIGSTOP');
      } catch {
        ctx.skip(); // the database server is not on this machine
      }
      try {
        await vi.waitFor(() => expect(cache.isEnabled).toBe(false), SOON);
        expect(feed.listenerPid).toBeNull();
      } finally {
        process.kill(pid, 'SIGCONT');
      }
    } finally {
      await feed.stop();
    }
  });
});
