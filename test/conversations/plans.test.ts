import { Kysely, PostgresDialect, sql, type CompiledQuery, type Transaction } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ConversationsRepository } from '../../src/conversations/conversations.repository.js';
import type { Tables } from '../../src/db/schema.js';
import { createPrivateDatabase } from '../helpers.js';

// The inbox reads a page of conversations at a million of them (bench suite `inbox`): what it
// reads must be a range of an index whose length is what the page shows, not the length of a
// conversation's history or of the account. These tests read the plans, which are
// deterministic, rather than timings.

const ACCOUNT = 'acc_plan';
const LONG = 'conv_long';
const HISTORY = 20_000;
const READ_AT = '2026-01-01T00:00:00Z';

let database: { url: string; drop: () => Promise<void> };
let db: Kysely<Tables>;
const statements: CompiledQuery[] = [];

beforeAll(async () => {
  database = await createPrivateDatabase();
  db = new Kysely<Tables>({
    dialect: new PostgresDialect({ pool: new pg.Pool({ connectionString: database.url, max: 1 }) }),
    log: (event) => {
      if (event.level === 'query') statements.push(event.query);
    },
  });
  // One long conversation read up to a moment near its end (30 messages after it), and one
  // never read.
  await sql`
    INSERT INTO conversations (account_id, id, contact_id, channel, status, last_read_at, created_at, updated_at)
    VALUES (${ACCOUNT}, ${LONG}, 'con_long', 'whatsapp', 'open', ${READ_AT}, now(), now()),
           (${ACCOUNT}, 'conv_unread', 'con_unread', 'whatsapp', 'open', NULL, now(), now())`.execute(
    db,
  );
  await sql`
    INSERT INTO messages (account_id, id, conversation_id, direction, type, content, status, created_at, updated_at)
    SELECT ${ACCOUNT}, 'msg_' || lpad(i::text, 8, '0'), ${LONG},
           CASE WHEN i % 2 = 0 THEN 'inbound' ELSE 'outbound' END, 'text', 'Hello', 'delivered',
           ${READ_AT}::timestamptz + make_interval(secs => i - ${HISTORY - 30}),
           ${READ_AT}::timestamptz + make_interval(secs => i - ${HISTORY - 30})
    FROM generate_series(1, ${HISTORY}) AS i
    UNION ALL
    SELECT ${ACCOUNT}, 'msg_u' || i, 'conv_unread', 'inbound', 'text', 'Hi', 'delivered',
           now() - make_interval(secs => i), now() - make_interval(secs => i)
    FROM generate_series(1, 3) AS i`.execute(db);
  await sql`ANALYZE conversations`.execute(db);
  await sql`ANALYZE messages`.execute(db);
});

afterAll(async () => {
  await db.destroy();
  await database.drop();
});

/** EXPLAIN ANALYZE of `query` with its parameters, as a generic or a custom plan. */
async function analyze(query: CompiledQuery, mode: 'generic' | 'custom'): Promise<string> {
  return db.transaction().execute(async (trx) => {
    await sql`SET LOCAL plan_cache_mode = ${sql.raw(mode === 'generic' ? 'force_generic_plan' : 'force_custom_plan')}`.execute(
      trx,
    );
    const { rows } = await trx.executeQuery<{ 'QUERY PLAN': string }>({
      ...query,
      sql: `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ${query.sql}`,
    });
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
}

/** The messages read from messages_conversation by the plan's index scans (actual rows). */
function messagesRead(plan: string): number {
  let read = 0;
  const lines = plan.split('\n');
  for (const [i, line] of lines.entries()) {
    if (!/Index (Only )?Scan( Backward)? using messages_conversation/.test(line)) continue;
    const rows = Number(/rows=(\d+)/.exec(line)?.[1] ?? 0);
    const loops = Number(/loops=(\d+)/.exec(line)?.[1] ?? 1);
    // Rows the index returned that a filter then dropped were read too.
    const removed =
      /Rows Removed by Filter: (\d+)/.exec(lines[i + 2] ?? '')?.[1] ??
      /Rows Removed by Filter: (\d+)/.exec(lines[i + 3] ?? '')?.[1];
    read += (rows + Number(removed ?? 0)) * loops;
  }
  return read;
}

describe('inbox statement plans', () => {
  it("counts a conversation's unread messages from when it was last read, not over its history", async () => {
    const repo = new ConversationsRepository(db);
    statements.length = 0;
    const summaries = await repo.summaries(ACCOUNT, [LONG, 'conv_unread']);
    expect(summaries.get(LONG)?.unread_count).toBe(15);
    expect(summaries.get('conv_unread')?.unread_count).toBe(3);
    const query = statements.find((q) => q.sql.includes('unread_count'));
    expect(query).toBeDefined();
    for (const mode of ['generic', 'custom'] as const) {
      const plan = await analyze(query!, mode);
      expect(plan).toMatch(/Index Cond: \(.*created_at > COALESCE\(c\.last_read_at/);
      // The newest message of each, the 30 after the read and the 3 never read: never the 20,000.
      expect(messagesRead(plan)).toBeLessThan(100);
    }
  });

  it('marks a long conversation read by looking only at what came after its last read', async () => {
    const repo = new ConversationsRepository(db);
    statements.length = 0;
    await rolledBack(async (trx) => {
      expect(await repo.markRead(trx, ACCOUNT, LONG, new Date())).toBeDefined();
    });
    const update = statements.find((q) => q.sql.startsWith('update "conversations"'));
    expect(update).toBeDefined();
    let plan = '';
    await rolledBack(async (trx) => {
      const { rows } = await trx.executeQuery<{ 'QUERY PLAN': string }>({
        ...update!,
        sql: `EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ${update!.sql}`,
      });
      plan = rows.map((r) => r['QUERY PLAN']).join('\n');
    });
    expect(plan).toMatch(/Index Cond: \(.*created_at > COALESCE\(c\.last_read_at/);
    expect(messagesRead(plan)).toBeLessThan(100);
  });
});

describe('inbox view plans', () => {
  beforeAll(async () => {
    // An account of 20,000 conversations: 2,000 open, 400 of them unassigned.
    await sql`
      INSERT INTO conversations (account_id, id, contact_id, channel, status, assignee_type, assignee_id,
                                 created_at, updated_at)
      SELECT 'acc_views', 'conv_v' || lpad(i::text, 6, '0'), 'con_v' || i, 'whatsapp',
             CASE WHEN i % 10 = 0 THEN 'open' ELSE 'resolved' END,
             CASE WHEN i % 25 = 0 THEN NULL ELSE 'user' END,
             CASE WHEN i % 25 = 0 THEN NULL ELSE 'usr_' || (i % 7) END,
             now() - make_interval(secs => i), now() - make_interval(secs => i)
      FROM generate_series(1, 20000) AS i`.execute(db);
    await sql`VACUUM ANALYZE conversations`.execute(db);
  });

  it('lists the unassigned open view as a range of conversations_unassigned, its total from counters', async () => {
    const repo = new ConversationsRepository(db);
    statements.length = 0;
    const { rows, total } = await repo.list(
      'acc_views',
      { status: 'open', unassigned: true },
      { page: 3, limit: 20 },
    );
    expect(total).toBe(400);
    expect(rows).toHaveLength(20);
    const page = statements.find((q) => q.sql.includes('limit'));
    // The total is the sum of the view's counters (migration 028), not a count of conversations.
    const count = statements.find((q) => q.sql.includes('conversation_counts'));
    for (const mode of ['generic', 'custom'] as const) {
      const pagePlan = await analyze(page!, mode);
      expect(pagePlan).toContain('Index Scan using conversations_unassigned');
      expect(pagePlan).not.toContain('Rows Removed by Filter');
      const countPlan = await analyze(count!, mode);
      expect(countPlan).toContain('using conversation_counts_pkey');
      expect(countPlan).not.toMatch(/Scan (using \w+ )?on conversations /);
    }
  });

  it("lists a user's conversations as a range of conversations_assigned, which holds only assigned ones", async () => {
    const repo = new ConversationsRepository(db);
    statements.length = 0;
    const { rows } = await repo.list(
      'acc_views',
      { status: 'all', mine: 'usr_3' },
      { page: 2, limit: 20 },
    );
    expect(rows).toHaveLength(20);
    const page = statements.find((q) => q.sql.includes('limit'));
    for (const mode of ['generic', 'custom'] as const) {
      const pagePlan = await analyze(page!, mode);
      expect(pagePlan).toContain('Index Scan using conversations_assigned');
      expect(pagePlan).not.toContain('Rows Removed by Filter');
    }
    // A new conversation is unassigned: it costs this index no entry (migration 041). The index
    // holds as many entries as the table has assigned conversations, whatever their account.
    const { rows: sizes } = await sql<{ entries: string }>`
      SELECT count(*)::text AS entries FROM conversations WHERE assignee_id IS NOT NULL`.execute(
      db,
    );
    const { rows: stats } = await sql<{ tuples: string }>`
      SELECT reltuples::bigint::text AS tuples FROM pg_class WHERE relname = 'conversations_assigned'`.execute(
      db,
    );
    expect(Number(stats[0]!.tuples)).toBe(Number(sizes[0]!.entries));
  });

  it('counts the open, the unassigned and the mine from their counters', async () => {
    const repo = new ConversationsRepository(db);
    statements.length = 0;
    expect(await repo.openCounts('acc_views', undefined, null)).toEqual({
      all: 2000,
      unassigned: 400,
      mine: null,
    });
    const counts = statements.at(-1)!;
    for (const mode of ['generic', 'custom'] as const) {
      const plan = await analyze(counts, mode);
      // One range of conversation_counts (migration 028): the account's open counters.
      expect(plan).toContain('using conversation_counts_pkey');
      expect(plan).not.toMatch(/Scan (using \w+ )?on conversations /);
    }
    // On one channel: the channel is a filter of the same ranges.
    expect(await repo.openCounts('acc_views', 'webchat', null)).toEqual({
      all: 0,
      unassigned: 0,
      mine: null,
    });
    // A user's own, counted beside them: usr_3 holds 1 in 7 of the assigned open ones.
    expect(await repo.openCounts('acc_views', undefined, 'usr_3')).toEqual({
      all: 2000,
      unassigned: 400,
      mine: 229,
    });
  });
});

describe('inbox search plans', () => {
  beforeAll(async () => {
    // An account of 20,000 contacts, one conversation each: 2,000 open; 1 contact in 50 is a
    // Lucy (400, every one of them open), and one of them a Lucy Martinez.
    await sql`
      INSERT INTO contacts (account_id, id, name, created_at, updated_at)
      SELECT 'acc_search', 'con_s' || i,
             CASE WHEN i = 50 THEN 'Lucy Martinez' WHEN i % 50 = 0 THEN 'Lucy ' || i ELSE 'Other ' || i END,
             now(), now()
      FROM generate_series(1, 20000) AS i`.execute(db);
    await sql`
      INSERT INTO conversations (account_id, id, contact_id, channel, status, created_at, updated_at)
      SELECT 'acc_search', 'conv_s' || lpad(i::text, 6, '0'), 'con_s' || i, 'whatsapp',
             CASE WHEN i % 10 = 0 THEN 'open' ELSE 'resolved' END,
             now() - make_interval(secs => i), now() - make_interval(secs => i)
      FROM generate_series(1, 20000) AS i`.execute(db);
    await sql`VACUUM ANALYZE contacts`.execute(db);
    await sql`VACUUM ANALYZE conversations`.execute(db);
  });

  it("finds a status's conversations whose contact matches q without reading the status's rows", async () => {
    const repo = new ConversationsRepository(db);
    statements.length = 0;
    const { rows, total } = await repo.list(
      'acc_search',
      { status: 'open', q: 'luc' },
      { page: 2, limit: 20 },
    );
    expect(total).toBe(400);
    expect(rows.map((r) => r.id)).toEqual(
      Array.from({ length: 20 }, (_, k) => `conv_s${String(50 * (21 + k)).padStart(6, '0')}`),
    );
    // One statement for the page's ids and the total, then the 20 rows by key.
    expect(statements).toHaveLength(2);
    const [ids, byKey] = statements as [CompiledQuery, CompiledQuery];
    expect(ids.sql).toContain('count(*) over ()');
    const plan = await analyze(ids, 'custom');
    // The 2,000 open ones are index entries (with their contact), never rows of the table.
    expect(plan).toContain('Index Only Scan using conversations_recent');
    expect(plan).not.toMatch(/(Bitmap Heap|Seq) Scan on conversations/);
    expect(await analyze(byKey, 'custom')).toMatch(/Index Scan using conversations_pkey/);
    // Past the last page: no rows, and the total counted apart.
    const past = await repo.list(
      'acc_search',
      { status: 'open', q: 'luc' },
      { page: 21, limit: 20 },
    );
    expect(past).toEqual({ rows: [], total: 400 });
  });

  it('answers a narrow q through the contacts it matches', async () => {
    const repo = new ConversationsRepository(db);
    const { rows, total } = await repo.list(
      'acc_search',
      { status: 'all', q: 'Lucy Martinez' },
      { page: 1, limit: 20 },
    );
    expect(total).toBe(1);
    expect(rows.map((r) => r.contact_id)).toEqual(['con_s50']);
    expect(
      await repo.list('acc_search', { status: 'all', q: 'nobody' }, { page: 1, limit: 20 }),
    ).toEqual({ rows: [], total: 0 });
  });
});

/** Runs `work` in a transaction that is then rolled back, so the data stays as it was. */
async function rolledBack(work: (trx: Transaction<Tables>) => Promise<void>): Promise<void> {
  const rollback = new Error('rollback');
  await db
    .transaction()
    .execute(async (trx) => {
      await work(trx);
      throw rollback;
    })
    .catch((err: unknown) => {
      if (err !== rollback) throw err;
    });
}
