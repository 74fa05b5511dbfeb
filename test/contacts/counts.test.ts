import { sql } from 'kysely';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  newAccount,
  randomPhone,
  startTestApp,
  type TestAccount,
  type TestApp,
} from '../helpers.js';
import { expectStatus, receive, sendText } from '../inbox-helpers.js';

// contact_counts and contact_tag_counts (migration 034), and contact_channel_counts (039), are
// kept by the triggers on contacts and conversations: after every kind of write the sums by
// lifecycle stage, by tag and stage, and by channel must be exactly what counting gives, and the list's totals (which read them) must say the same
// as a count of the rows it pages through.

let t: TestApp;
beforeAll(async () => {
  t = await startTestApp();
});
afterAll(() => t.close());

const STAGES = ['lead', 'customer', 'churned'] as const;
const TAGS = ['vip', 'VIP', 'wholesale', 'x'] as const;

async function truth(accountId: string) {
  const { rows } = await sql<{ k: string; n: string }>`
    SELECT coalesce(lifecycle_stage, '') AS k, count(*) AS n
    FROM contacts WHERE account_id = ${accountId} GROUP BY 1`.execute(t.db);
  const { rows: tagged } = await sql<{ k: string; n: string }>`
    SELECT tag || '/' || coalesce(lifecycle_stage, '') AS k, count(*) AS n
    FROM contacts, LATERAL (SELECT DISTINCT unnest(tags) AS tag) t
    WHERE account_id = ${accountId} GROUP BY 1`.execute(t.db);
  const { rows: channels } = await sql<{ k: string; n: string }>`
    SELECT cv.channel AS k, count(DISTINCT c.id) AS n
    FROM contacts c JOIN conversations cv ON cv.account_id = c.account_id AND cv.contact_id = c.id
    WHERE c.account_id = ${accountId} GROUP BY 1`.execute(t.db);
  return {
    stages: Object.fromEntries(rows.map((r) => [r.k, Number(r.n)])),
    tags: Object.fromEntries(tagged.map((r) => [r.k, Number(r.n)])),
    channels: Object.fromEntries(channels.map((r) => [r.k, Number(r.n)])),
  };
}

async function kept(accountId: string) {
  const { rows } = await sql<{ k: string; n: string }>`
    SELECT lifecycle_stage AS k, sum(n) AS n FROM contact_counts
    WHERE account_id = ${accountId} GROUP BY 1 HAVING sum(n) <> 0`.execute(t.db);
  const { rows: tagged } = await sql<{ k: string; n: string }>`
    SELECT tag || '/' || lifecycle_stage AS k, sum(n) AS n FROM contact_tag_counts
    WHERE account_id = ${accountId} GROUP BY 1 HAVING sum(n) <> 0`.execute(t.db);
  const { rows: channels } = await sql<{ k: string; n: string }>`
    SELECT channel AS k, sum(n) AS n FROM contact_channel_counts
    WHERE account_id = ${accountId} GROUP BY 1 HAVING sum(n) <> 0`.execute(t.db);
  return {
    stages: Object.fromEntries(rows.map((r) => [r.k, Number(r.n)])),
    tags: Object.fromEntries(tagged.map((r) => [r.k, Number(r.n)])),
    channels: Object.fromEntries(channels.map((r) => [r.k, Number(r.n)])),
  };
}

/** The list's total, and the number of rows it pages through (100 a page). */
async function listed(acc: TestAccount, query: string): Promise<[number, number, string[]]> {
  const ids: string[] = [];
  let total = -1;
  for (let page = 1; ; page++) {
    const res = await acc.call({
      method: 'GET',
      url: `/v1/contacts?limit=100&page=${page}${query ? `&${query}` : ''}`,
    });
    expectStatus(res, 200);
    const body = res.json<{ data: { id: string }[]; total: number }>();
    if (total === -1) total = body.total;
    ids.push(...body.data.map((c) => c.id));
    if (body.data.length < 100) return [total, ids.length, ids];
  }
}

/**
 * A search's contacts as SPEC.md says (name or phone ILIKE the term anywhere), with the other
 * filters, newest first: what the list must give however it finds them.
 */
async function searched(
  accountId: string,
  term: string,
  other: { tag?: string; lifecycle_stage?: string; channel?: string },
): Promise<string[]> {
  const pattern = `%${term.replace(/[\\%_]/g, '\\$&')}%`;
  const { rows } = await sql<{ id: string }>`
    SELECT id FROM contacts c
    WHERE account_id = ${accountId} AND (name ILIKE ${pattern} OR phone ILIKE ${pattern})
      AND (${other.tag ?? null}::text IS NULL OR tags @> ARRAY[${other.tag ?? null}::text])
      AND (${other.lifecycle_stage ?? null}::text IS NULL OR lifecycle_stage = ${other.lifecycle_stage ?? null})
      AND (${other.channel ?? null}::text IS NULL OR EXISTS (SELECT 1 FROM conversations cv
        WHERE cv.account_id = c.account_id AND cv.contact_id = c.id AND cv.channel = ${other.channel ?? null}))
    ORDER BY created_at DESC, id DESC`.execute(t.db);
  return rows.map((r) => r.id);
}

/** Every search, alone and with each other filter, against what SPEC.md says it finds. */
async function expectSearched(acc: TestAccount): Promise<void> {
  for (const term of SEARCHES) {
    const others: Record<string, string>[] = [
      {},
      { tag: 'vip' },
      { lifecycle_stage: 'customer' },
      { channel: 'webchat' },
    ];
    for (const other of others) {
      const query = new URLSearchParams({ search: term, ...other }).toString();
      const [total, , ids] = await listed(acc, query);
      const expected = await searched(acc.accountId, term, other);
      expect([query, total, ids]).toEqual([query, expected.length, expected]);
    }
  }
}

/** contact_search (migration 038) against the contacts: name and phone as ILIKE compares them. */
async function expectMirrored(accountId: string): Promise<void> {
  const read = (
    q: ReturnType<typeof sql<{ id: string; name: string | null; phone: string | null }>>,
  ) => q.execute(t.db).then((r) => r.rows);
  expect(
    await read(sql`SELECT contact_id AS id, name, phone FROM contact_search
      WHERE account_id = ${accountId} ORDER BY contact_id`),
  ).toEqual(
    await read(sql`SELECT id, lower(name) AS name, lower(phone) AS phone FROM contacts
      WHERE account_id = ${accountId} ORDER BY id`),
  );
}

/** Searches whose totals are counted in contact_search (3 characters or more) and one that is not. */
const SEARCHES = ['ada', 'ADA', 'élo', 'ÉLO', '50%_', 'ove', '555', 'ad'] as const;

/**
 * The counters against count(*), every total the counters give against the list's rows, and
 * contact_search against the contacts with the totals of searches it counts.
 */
async function expectExact(acc: TestAccount): Promise<void> {
  const real = await truth(acc.accountId);
  expect(await kept(acc.accountId)).toEqual(real);
  await expectMirrored(acc.accountId);
  await expectSearched(acc);
  const queries = [
    '',
    ...STAGES.map((s) => `lifecycle_stage=${s}`),
    ...TAGS.map((tag) => `tag=${tag}`),
    ...TAGS.flatMap((tag) => STAGES.map((s) => `tag=${tag}&lifecycle_stage=${s}`)),
    'channel=whatsapp',
    'channel=webchat',
    'channel=instagram',
  ];
  for (const query of queries) {
    const [total, rows] = await listed(acc, query);
    expect([query, total]).toEqual([query, rows]);
  }
}

const contact = async (acc: TestAccount, body: Record<string, unknown> = {}) => {
  const res = await acc.call({
    method: 'POST',
    url: '/v1/contacts',
    payload: { phone: randomPhone(), ...body },
  });
  expectStatus(res, 201);
  return res.json<{ id: string; phone: string }>();
};

describe('contact_counts, contact_tag_counts and contact_channel_counts', () => {
  it('stay exact through creates, edits, stages, tags, merges, deletes and imports', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    await expectExact(acc);

    const a = await contact(acc, { tags: ['vip', 'wholesale'], name: 'Élodie Ada' });
    const b = await contact(acc, { tags: ['VIP'], name: 'ADA LOVELACE' });
    const c = await contact(acc, { name: '50%_off' });
    await contact(other, { tags: ['vip'] });
    await expectExact(acc);

    // A stage set, changed and cleared; an edit that changes neither stage nor tags.
    for (const [id, stage] of [
      [a.id, 'lead'],
      [b.id, 'customer'],
      [a.id, 'customer'],
      [c.id, 'churned'],
      [c.id, null],
    ] as const) {
      const res = await acc.call({
        method: 'POST',
        url: `/v1/contacts/${id}/lifecycle`,
        payload: { lifecycle_stage: stage },
      });
      expectStatus(res, 200);
    }
    await expectExact(acc);
    const edited = await acc.call({
      method: 'PUT',
      url: `/v1/contacts/${a.id}`,
      payload: { name: 'Ada' },
    });
    expectStatus(edited, 200);
    await expectExact(acc);
    // A phone changed, and a name cleared.
    expectStatus(
      await acc.call({
        method: 'PUT',
        url: `/v1/contacts/${b.id}`,
        payload: { phone: randomPhone() },
      }),
      200,
    );
    expectStatus(
      await acc.call({ method: 'PUT', url: `/v1/contacts/${c.id}`, payload: { name: null } }),
      200,
    );
    await expectExact(acc);
    // Tags replaced.
    for (const [id, tags] of [
      [a.id, ['x']],
      [b.id, ['vip', 'x', 'wholesale']],
      [c.id, []],
    ] as const) {
      expectStatus(
        await acc.call({ method: 'PUT', url: `/v1/contacts/${id}`, payload: { tags } }),
        200,
      );
    }
    await expectExact(acc);

    // Conversations on two channels: the channel's total is its contacts'.
    await receive(acc, a.id);
    await receive(acc, b.id);
    expectStatus(await sendText(acc, c.id, 'webchat', 'hello'), 201);
    await expectExact(acc);

    // A merge folds one contact (its tags too) into another, and deletes it: one met on
    // Instagram (no phone) into a.
    const met = await t.services.messages.receive(
      { accountId: acc.accountId },
      {
        channel: 'instagram',
        from: { identity: String(6_100_000_000_000_000n + BigInt(Date.now() % 1_000_000)) },
        type: 'text',
        content: 'hi',
        mediaUrl: null,
      },
    );
    const { contact_id: d } = await t.db
      .selectFrom('conversations')
      .select('contact_id')
      .where('account_id', '=', acc.accountId)
      .where('id', '=', met.conversation_id)
      .executeTakeFirstOrThrow();
    // Both with a webchat conversation (the sandbox's): d's is folded into a's by the merge.
    await receive(acc, a.id, 'webchat');
    await receive(acc, d, 'webchat');
    await expectExact(acc);
    expectStatus(
      await acc.call({ method: 'PUT', url: `/v1/contacts/${d}`, payload: { tags: ['VIP', 'x'] } }),
      200,
    );
    await expectExact(acc);
    expectStatus(
      await acc.call({
        method: 'POST',
        url: `/v1/contacts/${a.id}/merge`,
        payload: { contact_id: d },
      }),
      200,
    );
    await expectExact(acc);
    expectStatus(await acc.call({ method: 'DELETE', url: `/v1/contacts/${c.id}` }), 200);
    await expectExact(acc);

    // An import: new contacts, updates of existing ones, a phone repeated in the file.
    const phones = Array.from({ length: 6 }, () => randomPhone());
    const csv = [
      'phone,tags,lifecycle_stage',
      `${phones[0]},vip;x,lead`,
      `${phones[1]},wholesale,customer`,
      `${phones[2]},,`,
      `${phones[0]},vip,churned`,
      `${a.phone},VIP,lead`,
      `${phones[3]},vip;vip,lead`,
    ].join('\n');
    const res = await acc.call({
      method: 'POST',
      url: '/v1/contacts/imports',
      headers: { 'content-type': 'text/csv' },
      payload: csv,
    });
    expectStatus(res, 202);
    await t.services.contactImports.settled();
    await expectExact(acc);
  });

  it('stay exact under concurrent writers, and a rolled-back write leaves no count', async () => {
    const acc = await newAccount(t);
    const made = await Promise.all(
      Array.from({ length: 18 }, (_, i) =>
        contact(acc, { tags: i % 2 ? ['vip'] : ['x', 'vip'], name: `Ada ${i}` }),
      ),
    );
    await Promise.all(
      made.map((m, i) =>
        i % 3 === 0
          ? acc.call({ method: 'DELETE', url: `/v1/contacts/${m.id}` })
          : i % 3 === 1
            ? acc.call({
                method: 'POST',
                url: `/v1/contacts/${m.id}/lifecycle`,
                payload: { lifecycle_stage: STAGES[i % 3] },
              })
            : acc.call({
                method: 'PUT',
                url: `/v1/contacts/${m.id}`,
                payload: { tags: ['x'], name: `Lovelace ${i}` },
              }),
      ),
    );
    await expectExact(acc);
    await t.db
      .transaction()
      .execute(async (trx) => {
        await trx
          .updateTable('contacts')
          .set({ tags: ['rolled-back'], lifecycle_stage: 'lead', name: 'Ada rolled back' })
          .where('account_id', '=', acc.accountId)
          .execute();
        throw new Error('rollback');
      })
      .catch(() => undefined);
    await expectExact(acc);
  });

  it("a search's pages come newest first, each with the search's exact total", async () => {
    const acc = await newAccount(t);
    const made: string[] = [];
    for (let i = 0; i < 12; i++)
      made.push((await contact(acc, { name: i < 10 ? `Ada ${i}` : `Grace ${i}` })).id);
    const expected = made.slice(0, 10).reverse();
    // Two a page; the term in another case than the names.
    const seen: string[] = [];
    for (let page = 1; page <= 6; page++) {
      const res = await acc.call({
        method: 'GET',
        url: `/v1/contacts?limit=2&page=${page}&search=ADA`,
      });
      expectStatus(res, 200);
      const body = res.json<{ data: { id: string }[]; total: number }>();
      expect(body.total).toBe(10);
      seen.push(...body.data.map((c) => c.id));
    }
    expect(seen).toEqual(expected);
  });
});
