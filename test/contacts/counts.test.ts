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

// contact_counts and contact_tag_counts (migration 034) are kept by the triggers on contacts:
// after every kind of write the sums by lifecycle stage, and by tag and stage, must be exactly
// what counting the contacts gives, and the list's totals (which read them) must say the same
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
  return {
    stages: Object.fromEntries(rows.map((r) => [r.k, Number(r.n)])),
    tags: Object.fromEntries(tagged.map((r) => [r.k, Number(r.n)])),
  };
}

async function kept(accountId: string) {
  const { rows } = await sql<{ k: string; n: string }>`
    SELECT lifecycle_stage AS k, sum(n) AS n FROM contact_counts
    WHERE account_id = ${accountId} GROUP BY 1 HAVING sum(n) <> 0`.execute(t.db);
  const { rows: tagged } = await sql<{ k: string; n: string }>`
    SELECT tag || '/' || lifecycle_stage AS k, sum(n) AS n FROM contact_tag_counts
    WHERE account_id = ${accountId} GROUP BY 1 HAVING sum(n) <> 0`.execute(t.db);
  return {
    stages: Object.fromEntries(rows.map((r) => [r.k, Number(r.n)])),
    tags: Object.fromEntries(tagged.map((r) => [r.k, Number(r.n)])),
  };
}

/** The list's total, and the number of rows it pages through (100 a page). */
async function listed(acc: TestAccount, query: string): Promise<[number, number]> {
  let rows = 0;
  let total = -1;
  for (let page = 1; ; page++) {
    const res = await acc.call({
      method: 'GET',
      url: `/v1/contacts?limit=100&page=${page}${query ? `&${query}` : ''}`,
    });
    expectStatus(res, 200);
    const body = res.json<{ data: unknown[]; total: number }>();
    if (total === -1) total = body.total;
    rows += body.data.length;
    if (body.data.length < 100) return [total, rows];
  }
}

/** The counters against count(*), and every total the counters give against the list's rows. */
async function expectExact(acc: TestAccount): Promise<void> {
  const real = await truth(acc.accountId);
  expect(await kept(acc.accountId)).toEqual(real);
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

describe('contact_counts and contact_tag_counts', () => {
  it('stay exact through creates, edits, stages, tags, merges, deletes and imports', async () => {
    const acc = await newAccount(t);
    const other = await newAccount(t);
    await expectExact(acc);

    const a = await contact(acc, { tags: ['vip', 'wholesale'] });
    const b = await contact(acc, { tags: ['VIP'] });
    const c = await contact(acc);
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
      Array.from({ length: 18 }, (_, i) => contact(acc, { tags: i % 2 ? ['vip'] : ['x', 'vip'] })),
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
            : acc.call({ method: 'PUT', url: `/v1/contacts/${m.id}`, payload: { tags: ['x'] } }),
      ),
    );
    await expectExact(acc);
    await t.db
      .transaction()
      .execute(async (trx) => {
        await trx
          .updateTable('contacts')
          .set({ tags: ['rolled-back'], lifecycle_stage: 'lead' })
          .where('account_id', '=', acc.accountId)
          .execute();
        throw new Error('rollback');
      })
      .catch(() => undefined);
    await expectExact(acc);
  });
});
