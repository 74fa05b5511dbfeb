import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConversationsRepository } from '../../src/conversations/conversations.repository.js';
import { newAccount, startTestApp, type TestAccount, type TestApp } from '../helpers.js';
import { createContact, createUser, expectStatus, receive, sendText } from '../inbox-helpers.js';

// conversation_counts (migration 028) is kept by the triggers on conversations: after every kind
// of write the sums by status, channel and assignee must be exactly what counting the
// conversations gives, and /counts and the lists' totals must say the same.

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

type Key = string;

async function counted(accountId: string): Promise<Record<Key, number>> {
  const { rows } = await sql<{ k: string; n: string }>`
    SELECT status || '/' || channel || '/' || coalesce(assignee_type, '') || ':' || coalesce(assignee_id, '') AS k,
           count(*) AS n
    FROM conversations WHERE account_id = ${accountId} GROUP BY 1`.execute(t.db);
  return Object.fromEntries(rows.map((r) => [r.k, Number(r.n)]));
}

async function kept(accountId: string): Promise<Record<Key, number>> {
  const { rows } = await sql<{ k: string; n: string }>`
    SELECT status || '/' || channel || '/' || assignee_type || ':' || assignee_id AS k, sum(n) AS n
    FROM conversation_counts WHERE account_id = ${accountId} GROUP BY 1 HAVING sum(n) <> 0`.execute(
    t.db,
  );
  return Object.fromEntries(rows.map((r) => [r.k, Number(r.n)]));
}

/** The counters, /counts and the lists' totals against count(*) of the conversations. */
async function expectExact(acc: TestAccount, userId?: string): Promise<void> {
  const truth = await counted(acc.accountId);
  expect(await kept(acc.accountId)).toEqual(truth);
  const open = Object.entries(truth).filter(([k]) => k.startsWith('open/'));
  const sum = (entries: [string, number][]) => entries.reduce((s, [, n]) => s + n, 0);
  const counts = await acc.call({ method: 'GET', url: '/v1/conversations/counts' });
  expectStatus(counts, 200);
  expect(counts.json()).toMatchObject({
    all: sum(open),
    unassigned: sum(open.filter(([k]) => k.endsWith('/:'))),
  });
  for (const [query, expected] of [
    ['status=all', sum(Object.entries(truth))],
    ['status=resolved', sum(Object.entries(truth).filter(([k]) => k.startsWith('resolved/')))],
    ['view=unassigned&status=open', sum(open.filter(([k]) => k.endsWith('/:')))],
    ['status=open&channel=webchat', sum(open.filter(([k]) => k.startsWith('open/webchat/')))],
    ...(userId
      ? ([
          [
            `status=all&assigned_to=${userId}`,
            sum(Object.entries(truth).filter(([k]) => k.endsWith(`/user:${userId}`))),
          ],
        ] as const)
      : []),
  ] as const) {
    const res = await acc.call({ method: 'GET', url: `/v1/conversations?${query}` });
    expectStatus(res, 200);
    expect([query, res.json().total]).toEqual([query, expected]);
  }
}

const post = (acc: TestAccount, url: string, payload?: Record<string, unknown>) =>
  acc.call({ method: 'POST', url, ...(payload ? { payload } : {}) });

describe('conversation_counts', () => {
  it('stays exact through new conversations, assign, resolve, reopen, unassign, merge, deletes', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    await expectExact(acc);

    // New conversations on two channels, and one in another account.
    const [a, b, c] = [
      await createContact(acc),
      await createContact(acc),
      await createContact(acc),
    ];
    const convA = (await receive(acc, a.id)).conversation_id as string;
    const convB = (await receive(acc, b.id)).conversation_id as string;
    const webC = await sendText(acc, c.id, 'webchat', 'hello');
    expectStatus(webC, 201);
    const convC = webC.json().conversation_id as string;
    await receive(other, (await createContact(other)).id);
    await expectExact(acc);

    // Assign to a user and a team, resolve, reopen, unassign.
    const user = await createUser(acc);
    const team = await post(acc, '/v1/teams', { name: 'Support', user_ids: [user.id] });
    expectStatus(team, 201);
    expectStatus(await post(acc, `/v1/conversations/${convA}/assign`, { user_id: user.id }), 200);
    expectStatus(
      await post(acc, `/v1/conversations/${convB}/assign`, { team_id: team.json().id }),
      200,
    );
    expectStatus(await post(acc, `/v1/conversations/${convC}/assign`, { user_id: user.id }), 200);
    await expectExact(acc, user.id);
    expectStatus(await post(acc, `/v1/conversations/${convA}/resolve`), 200);
    await expectExact(acc, user.id);
    expectStatus(await post(acc, `/v1/conversations/${convA}/reopen`), 200);
    expectStatus(await post(acc, `/v1/conversations/${convB}/unassign`), 200);
    await expectExact(acc, user.id);
    // Activity alone (a message in an open conversation) changes no count.
    await receive(acc, a.id);
    await expectExact(acc, user.id);
    // A message reopens a resolved conversation.
    expectStatus(await post(acc, `/v1/conversations/${convB}/resolve`), 200);
    await receive(acc, b.id);
    await expectExact(acc, user.id);

    // Merge: the other contact's conversations move, its twin on a channel is folded (deleted).
    // A contact met on Instagram (no phone), who also wrote on webchat, as c did.
    const met = await t.services.messages.receive(
      { accountId: acc.accountId },
      {
        channel: 'instagram',
        from: { identity: String(6_000_000_000_000_000n + BigInt(Date.now() % 1_000_000)) },
        type: 'text',
        content: 'hi',
        mediaUrl: null,
      },
    );
    const d = {
      id: (
        await t.db
          .selectFrom('conversations')
          .select('contact_id')
          .where('account_id', '=', acc.accountId)
          .where('id', '=', met.conversation_id)
          .executeTakeFirstOrThrow()
      ).contact_id,
    };
    await receive(acc, d.id, 'webchat', 'from d');
    expectStatus(await post(acc, `/v1/conversations/${convC}/resolve`), 200);
    await expectExact(acc, user.id);
    expectStatus(await post(acc, `/v1/contacts/${c.id}/merge`, { contact_id: d.id }), 200);
    await expectExact(acc, user.id);

    // A contact deleted (its conversations stay), a team and a user removed (theirs unassigned).
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/contacts/${b.id}` }), 200);
    await expectExact(acc, user.id);
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/teams/${team.json().id}` }), 200);
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/users/${user.id}` }), 200);
    await expectExact(acc);
  });

  it('stays exact under concurrent writers and multi-row upserts', async () => {
    const acc = await newAccount(t);
    const user = await createUser(acc);
    const contacts = await Promise.all(Array.from({ length: 12 }, () => createContact(acc)));
    // Twelve first messages at once, then assignments and resolutions at once.
    const convs = await Promise.all(contacts.map((c) => receive(acc, c.id)));
    await Promise.all(
      convs.map((m, i) =>
        i % 3 === 0
          ? post(acc, `/v1/conversations/${m.conversation_id}/assign`, { user_id: user.id })
          : i % 3 === 1
            ? post(acc, `/v1/conversations/${m.conversation_id}/resolve`)
            : receive(acc, contacts[i]!.id),
      ),
    );
    await expectExact(acc, user.id);
    // One statement opening many (as a broadcast's batch does): new ones inserted, resolved ones
    // reopened, open ones touched.
    const more = await Promise.all(Array.from({ length: 20 }, () => createContact(acc)));
    const repo = new ConversationsRepository(t.db);
    await t.db.transaction().execute((trx) =>
      repo.openMany(
        trx,
        acc.accountId,
        [...contacts, ...more].map((c) => c.id),
        'whatsapp',
        new Date(),
      ),
    );
    await expectExact(acc, user.id);
    // A rolled-back write leaves no count behind.
    await t.db
      .transaction()
      .execute(async (trx) => {
        await trx
          .updateTable('conversations')
          .set({ status: 'resolved' })
          .where('account_id', '=', acc.accountId)
          .execute();
        throw new Error('rollback');
      })
      .catch(() => undefined);
    await expectExact(acc, user.id);
  });
});
