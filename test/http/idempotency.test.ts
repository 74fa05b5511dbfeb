import type { LightMyRequestResponse } from 'fastify';
import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { pruneIdempotencyKeys } from '../../src/http/idempotency.js';
import { startHttpsServer } from '../https-server.js';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';

// The first bytes of a PNG file, enough for a content-type check.
const PNG = Buffer.from('89504e470d0a1a0a0000000d49484452', 'hex');

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

let keySeq = 0;
function newKey(): string {
  keySeq += 1;
  return `idem-${process.pid}-${Date.now()}-${keySeq}`;
}

function post(acc: TestAccount, key: string, payload: object, url = '/v1/contacts') {
  return acc.call({ method: 'POST', url, payload, headers: { 'idempotency-key': key } });
}

async function total(acc: TestAccount): Promise<number> {
  const res = await acc.call({ method: 'GET', url: '/v1/contacts' });
  return res.json().total as number;
}

async function eventCount(accountId: string): Promise<number> {
  const rows = await t.db
    .selectFrom('events')
    .select('id')
    .where('account_id', '=', accountId)
    .where('type', '=', 'contact.created')
    .execute();
  return rows.length;
}

function expectReplayOf(replay: LightMyRequestResponse, first: LightMyRequestResponse) {
  expect(replay.statusCode).toBe(first.statusCode);
  expect(replay.headers['idempotent-replayed']).toBe('true');
  expect(replay.headers['content-type']).toBe(first.headers['content-type']);
  expect(replay.rawPayload.equals(first.rawPayload)).toBe(true);
}

describe('Idempotency-Key', () => {
  it('replays the first response byte for byte with Idempotent-Replayed: true and creates one contact', async () => {
    const acc = await newAccount(t);
    const key = newKey();
    const body = { phone: randomPhone(), name: 'Once', tags: ['a'], custom_fields: { n: 1 } };
    const first = await post(acc, key, body);
    expect(first.statusCode, first.body).toBe(201);
    expect(first.headers['idempotent-replayed']).toBeUndefined();
    // Key order in the body does not make it another request.
    const reordered = { custom_fields: { n: 1 }, tags: ['a'], name: 'Once', phone: body.phone };
    for (const again of [body, reordered, body]) expectReplayOf(await post(acc, key, again), first);
    expect(await total(acc)).toBe(1);
    expect(await eventCount(acc.accountId)).toBe(1);
  });

  it('answers 422 idempotency_error to the same key with another body, and keeps replaying the original', async () => {
    const acc = await newAccount(t);
    const key = newKey();
    const body = { phone: randomPhone() };
    const first = await post(acc, key, body);
    expect(first.statusCode).toBe(201);
    const other = await post(acc, key, { phone: randomPhone() });
    expect(other.statusCode, other.body).toBe(422);
    expect(other.json().error.code).toBe('idempotency_error');
    expect(other.headers['idempotent-replayed']).toBeUndefined();
    // The refused request must not have replaced what the key stands for.
    expectReplayOf(await post(acc, key, body), first);
    expect(await total(acc)).toBe(1);
  });

  it('replays a 409 conflict, even after the conflict is gone', async () => {
    const acc = await newAccount(t);
    const phone = randomPhone();
    const existing = (
      await acc.call({ method: 'POST', url: '/v1/contacts', payload: { phone } })
    ).json();
    const key = newKey();
    const first = await post(acc, key, { phone });
    expect(first.statusCode).toBe(409);
    expect(first.json().error.code).toBe('conflict');
    await acc.call({ method: 'DELETE', url: `/v1/contacts/${existing.id}` });
    expectReplayOf(await post(acc, key, { phone }), first);
    expect(await total(acc)).toBe(0);
  });

  it('replays a 422 validation error', async () => {
    const acc = await newAccount(t);
    const key = newKey();
    const body = { phone: randomPhone(), email: 'not-an-email' };
    const first = await post(acc, key, body);
    expect(first.statusCode).toBe(422);
    expect(first.json().error.code).toBe('validation_error');
    expectReplayOf(await post(acc, key, body), first);
    const invalidPhone = { phone: '+1 415' };
    const key2 = newKey();
    const first2 = await post(acc, key2, invalidPhone);
    expect(first2.statusCode).toBe(422);
    expectReplayOf(await post(acc, key2, invalidPhone), first2);
  });

  it('is scoped to the account: another account may use the same key', async () => {
    const a = await newAccount(t);
    const b = await newAccount(t);
    const key = newKey();
    const body = { phone: randomPhone() };
    const fromA = await post(a, key, body);
    const fromB = await post(b, key, body);
    expect(fromA.statusCode).toBe(201);
    expect(fromB.statusCode).toBe(201);
    expect(fromB.headers['idempotent-replayed']).toBeUndefined();
    expect(fromB.json().id).not.toBe(fromA.json().id);
    expect(await total(a)).toBe(1);
    expect(await total(b)).toBe(1);
    // And a different body from B is B's own business, not a mismatch with A's.
    expect((await post(b, newKey(), { phone: randomPhone() })).statusCode).toBe(201);
  });

  it('is scoped to the path: the same key on another POST path is a new request', async () => {
    const acc = await newAccount(t);
    const key = newKey();
    const body = { phone: randomPhone() };
    const created = await post(acc, key, body);
    expect(created.statusCode).toBe(201);
    const id = created.json().id as string;
    const lifecycle = await post(
      acc,
      key,
      { lifecycle_stage: 'lead' },
      `/v1/contacts/${id}/lifecycle`,
    );
    expect(lifecycle.statusCode, lifecycle.body).toBe(200);
    expect(lifecycle.headers['idempotent-replayed']).toBeUndefined();
    expect(lifecycle.json().lifecycle_stage).toBe('lead');
    // Each path keeps its own record.
    expectReplayOf(
      await post(acc, key, { lifecycle_stage: 'lead' }, `/v1/contacts/${id}/lifecycle`),
      lifecycle,
    );
    expectReplayOf(await post(acc, key, body), created);
  });

  it('does nothing twice under concurrency: exactly one request creates, the others replay or get 409', async () => {
    const acc = await newAccount(t);
    const key = newKey();
    const body = { phone: randomPhone(), name: 'Concurrent' };
    const results = await Promise.all(Array.from({ length: 8 }, () => post(acc, key, body)));
    const originals = results.filter(
      (r) => r.statusCode === 201 && r.headers['idempotent-replayed'] === undefined,
    );
    expect(originals).toHaveLength(1);
    const original = originals[0]!;
    for (const r of results) {
      if (r === original) continue;
      if (r.statusCode === 409) {
        expect(r.json().error.code).toBe('idempotency_error');
      } else {
        expectReplayOf(r, original);
      }
    }
    expect(await total(acc)).toBe(1);
    expect(await eventCount(acc.accountId)).toBe(1);
    // Once settled, the key replays the original.
    expectReplayOf(await post(acc, key, body), original);
  });

  it('answers 409 idempotency_error while the first request is still running, without recording that answer', async () => {
    const acc = await newAccount(t);
    const body = { phone: randomPhone() };
    const done = await post(acc, newKey(), body);
    expect(done.statusCode).toBe(201);
    const { request_hash } = await t.db
      .selectFrom('idempotency_keys')
      .select('request_hash')
      .where('account_id', '=', acc.accountId)
      .executeTakeFirstOrThrow();
    // Another key for the same body, held by a request in flight.
    const running = newKey();
    const now = t.clock.now();
    await t.db
      .insertInto('idempotency_keys')
      .values({
        account_id: acc.accountId,
        method: 'POST',
        path: '/v1/contacts',
        key: running,
        request_hash,
        state: 'running',
        created_at: now,
        locked_at: now,
      })
      .execute();
    for (let i = 0; i < 2; i++) {
      const res = await post(acc, running, body);
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json().error.code).toBe('idempotency_error');
      expect(res.headers['idempotent-replayed']).toBeUndefined();
    }
    const row = await t.db
      .selectFrom('idempotency_keys')
      .select(['state', 'response_status'])
      .where('account_id', '=', acc.accountId)
      .where('key', '=', running)
      .executeTakeFirstOrThrow();
    expect(row).toEqual({ state: 'running', response_status: null });
  });

  it('lets a retry take over a key whose request died long ago (stale lock), and does the work once', async () => {
    const acc = await newAccount(t);
    const body = { phone: randomPhone() };
    const first = await post(acc, newKey(), body);
    const { request_hash } = await t.db
      .selectFrom('idempotency_keys')
      .select('request_hash')
      .where('account_id', '=', acc.accountId)
      .executeTakeFirstOrThrow();
    await acc.call({ method: 'DELETE', url: `/v1/contacts/${first.json().id}` });
    const dead = newKey();
    const longAgo = new Date(t.clock.now().getTime() - 10 * 60 * 1000);
    await t.db
      .insertInto('idempotency_keys')
      .values({
        account_id: acc.accountId,
        method: 'POST',
        path: '/v1/contacts',
        key: dead,
        request_hash,
        state: 'running',
        created_at: longAgo,
        locked_at: longAgo,
      })
      .execute();
    const retry = await post(acc, dead, body);
    expect(retry.statusCode, retry.body).toBe(201);
    expect(retry.headers['idempotent-replayed']).toBeUndefined();
    expectReplayOf(await post(acc, dead, body), retry);
    expect(await total(acc)).toBe(1);
  });

  it('rolls back a slow request whose key a retry took over meanwhile, so the effect happens once', async () => {
    // The media fetch holds the first request in flight for a while.
    const media = await startHttpsServer(() => ({
      status: 200,
      headers: { 'content-type': 'image/png' },
      body: PNG,
      delayMs: 1_000,
    }));
    try {
      const acc = await newAccount(t);
      const contact = await acc.call({
        method: 'POST',
        url: '/v1/contacts',
        payload: { phone: randomPhone() },
      });
      const key = newKey();
      const slow = post(
        acc,
        key,
        {
          contact_id: contact.json().id,
          channel: 'webchat',
          type: 'image',
          media_url: media.url('/pic.png'),
        },
        '/v1/messages/send',
      );
      await vi.waitFor(() => expect(media.requests).toHaveLength(1));
      // What a retry does once the lock looks stale: it takes the key with a new lock time.
      const takenAt = new Date(t.clock.now().getTime() + 1);
      await t.db
        .updateTable('idempotency_keys')
        .set({ locked_at: takenAt })
        .where('account_id', '=', acc.accountId)
        .where('key', '=', key)
        .execute();

      const res = await slow;
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json().error.code).toBe('idempotency_error');
      const messages = await t.db
        .selectFrom('messages')
        .select('id')
        .where('account_id', '=', acc.accountId)
        .execute();
      expect(messages).toEqual([]);
      const row = await t.db
        .selectFrom('idempotency_keys')
        .select(['state', 'locked_at', 'response_status'])
        .where('account_id', '=', acc.accountId)
        .where('key', '=', key)
        .executeTakeFirstOrThrow();
      expect(row).toEqual({ state: 'running', locked_at: takenAt, response_status: null });
    } finally {
      await media.close();
    }
  });

  it('is scoped to the route: the same route with a trailing slash is the same request', async () => {
    const acc = await newAccount(t);
    const key = newKey();
    const first = await post(acc, key, { name: 'Support' }, '/v1/teams');
    expect(first.statusCode, first.body).toBe(201);
    expectReplayOf(await post(acc, key, { name: 'Support' }, '/v1/teams/'), first);
    const teams = await acc.call({ method: 'GET', url: '/v1/teams' });
    expect(teams.json().total).toBe(1);

    const contact = (await post(acc, newKey(), { phone: randomPhone() })).json();
    const key2 = newKey();
    const stage = { lifecycle_stage: 'lead' };
    const lifecycle = await post(acc, key2, stage, `/v1/contacts/${contact.id}/lifecycle`);
    expect(lifecycle.statusCode, lifecycle.body).toBe(200);
    expectReplayOf(
      await post(acc, key2, stage, `/v1/contacts/${contact.id}/lifecycle/`),
      lifecycle,
    );
  });

  // Users and templates have unique keys: an uncommitted row with the same email or name makes
  // the request's insert wait, which holds it in flight while a retry takes its key over.
  for (const route of [
    {
      url: '/v1/users',
      table: 'users',
      body: (n: string) => ({ name: 'U', email: `${n}@example.com` }),
    },
    {
      url: '/v1/templates',
      table: 'templates',
      body: (n: string) => ({ name: n, body: 'Hi {{1}}' }),
    },
  ] as const) {
    it(`fences ${route.url} like every POST: a request whose key a retry took over writes nothing`, async () => {
      const acc = await newAccount(t);
      const unique = `fence_${keySeq}_${Date.now()}`;
      const body = route.body(unique);
      let release!: () => void;
      const gate = new Promise<void>((resolve) => (release = resolve));
      const now = t.clock.now();
      const blocker = t.db
        .transaction()
        .execute(async (trx) => {
          await trx
            .insertInto(route.table)
            .values({
              account_id: acc.accountId,
              id: `blocker_${unique}`,
              created_at: now,
              ...(route.table === 'users'
                ? { name: 'Blocker', email: (body as { email: string }).email }
                : {
                    name: unique,
                    language: 'en',
                    category: 'utility',
                    body: 'x',
                    status: 'pending',
                    updated_at: now,
                  }),
            })
            .execute();
          await gate;
          throw new Error('rolled back on purpose');
        })
        .catch(() => undefined);
      const key = newKey();
      const slow = post(acc, key, body, route.url);
      await vi.waitFor(async () => {
        const waiting = await sql<{ n: number }>`
          SELECT count(*)::int AS n FROM pg_stat_activity
          WHERE wait_event_type = 'Lock' AND query ILIKE ${`insert into "${route.table}"%`}`.execute(
          t.db,
        );
        expect(waiting.rows[0]!.n).toBeGreaterThan(0);
      });
      await t.db
        .updateTable('idempotency_keys')
        .set({ locked_at: new Date(t.clock.now().getTime() + 1) })
        .where('account_id', '=', acc.accountId)
        .where('key', '=', key)
        .execute();
      release();
      await blocker;
      const res = await slow;
      expect(res.statusCode, res.body).toBe(409);
      expect(res.json().error.code).toBe('idempotency_error');
      const rows = await t.db
        .selectFrom(route.table)
        .select('id')
        .where('account_id', '=', acc.accountId)
        .execute();
      expect(rows).toEqual([]);
    });
  }

  it('does not apply to requests without the header', async () => {
    const acc = await newAccount(t);
    const body = { phone: randomPhone() };
    expect(
      (await acc.call({ method: 'POST', url: '/v1/contacts', payload: body })).statusCode,
    ).toBe(201);
    const second = await acc.call({ method: 'POST', url: '/v1/contacts', payload: body });
    expect(second.statusCode).toBe(409);
    expect(second.headers['idempotent-replayed']).toBeUndefined();
  });

  it('refuses an unusable key with 422', async () => {
    const acc = await newAccount(t);
    const res = await post(acc, 'x'.repeat(256), { phone: randomPhone() });
    expect(res.statusCode).toBe(422);
    expect(res.json().error.details[0].field).toBe('Idempotency-Key');
    expect(await total(acc)).toBe(0);
  });

  it('forgets a key older than 24 hours', async () => {
    // Its own app, so that moving the clock affects no other test.
    const own = await startTestApp();
    try {
      const acc = await newAccount(own);
      const key = newKey();
      const body = { phone: randomPhone() };
      const post1 = () =>
        acc.call({
          method: 'POST',
          url: '/v1/contacts',
          payload: body,
          headers: { 'idempotency-key': key },
        });
      const first = await post1();
      expect(first.statusCode).toBe(201);
      own.clock.advance(23 * 3600 * 1000);
      expectReplayOf(await post1(), first);
      await acc.call({ method: 'DELETE', url: `/v1/contacts/${first.json().id}` });
      own.clock.advance(2 * 3600 * 1000);
      const later = await post1();
      expect(later.statusCode, later.body).toBe(201);
      expect(later.headers['idempotent-replayed']).toBeUndefined();
      expect(later.json().id).not.toBe(first.json().id);
      // The new request is remembered in turn.
      expectReplayOf(await post1(), later);
      // And a forgotten key may be reused with another body.
      own.clock.advance(25 * 3600 * 1000);
      const another = await acc.call({
        method: 'POST',
        url: '/v1/contacts',
        payload: { phone: randomPhone() },
        headers: { 'idempotency-key': key },
      });
      expect(another.statusCode, another.body).toBe(201);
    } finally {
      await own.close();
    }
  });
});

describe('retention', () => {
  it('prunes keys older than 24 h in batches and keeps the younger ones', async () => {
    const acc = await newAccount(t);
    const now = t.clock.now();
    const row = (key: string, ageMs: number) => ({
      account_id: acc.accountId,
      method: 'POST',
      path: '/v1/contacts',
      key,
      request_hash: 'h',
      state: 'completed' as const,
      response_status: 201,
      response_body: '{}',
      created_at: new Date(now.getTime() - ageMs),
      locked_at: new Date(now.getTime() - ageMs),
    });
    const HOUR = 60 * 60 * 1000;
    await t.db
      .insertInto('idempotency_keys')
      .values([
        row('old-1', 25 * HOUR),
        row('old-2', 48 * HOUR),
        row('old-3', 30 * HOUR),
        row('young', 23 * HOUR),
      ])
      .execute();

    // Other tests' keys may be old too (the database is shared), so count only this account's.
    await pruneIdempotencyKeys(t.db, now, 2);
    const left = await t.db
      .selectFrom('idempotency_keys')
      .select('key')
      .where('account_id', '=', acc.accountId)
      .execute();
    expect(left.map((r) => r.key)).toEqual(['young']);
  });
});
