import { Kysely, PostgresDialect, sql, type CompiledQuery } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BroadcastsRepository } from '../../src/broadcasts/broadcasts.repository.js';
import { MessagesRepository } from '../../src/messages/messages.repository.js';
import type { Tables } from '../../src/db/schema.js';
import { createPrivateDatabase } from '../helpers.js';

// The fan-out runs its statements as named prepared statements, which PostgreSQL may answer
// with a generic plan, planned without the parameters' values; on a table that is filling up
// for the first time it has no statistics either. A plan that reads all of a broadcast's
// recipients for every batch makes a large fan-out quadratic, so these tests look at the plan
// itself (which is deterministic) rather than at timings.

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
  // A broadcast part-way through a large first fan-out: many recipients, no statistics yet.
  await sql`ALTER TABLE broadcast_recipients SET (autovacuum_enabled = false)`.execute(db);
  await sql`
    INSERT INTO broadcast_recipients (account_id, broadcast_id, contact_id, created_at)
    SELECT 'acc_plan', 'bc_plan', 'con_' || lpad(i::text, 8, '0'), now()
    FROM generate_series(1, 20000) AS i`.execute(db);
  // And its messages, whose provider answers each batch records: enough that reading them all
  // costs more than looking a batch's up one by one (on a smaller table the planner may rightly
  // read it whole).
  await sql`ALTER TABLE messages SET (autovacuum_enabled = false)`.execute(db);
  await sql`
    INSERT INTO messages (account_id, id, conversation_id, direction, type, content, status,
                          template_name, template_language, template_params, broadcast_id,
                          created_at, updated_at)
    SELECT 'acc_plan', 'msg_' || lpad(i::text, 8, '0'), 'conv_' || i, 'outbound', 'template',
           'Hi there, your order #SPRING-SALE has shipped and will arrive soon', 'queued',
           'order_shipped', 'en', '["there", "#SPRING-SALE"]', 'bc_plan', now(), now()
    FROM generate_series(1, 100000) AS i`.execute(db);
});

afterAll(async () => {
  await db.destroy();
  await database.drop();
});

/** A parameter as an SQL literal (EXECUTE takes no bind parameters): text, arrays of text, dates. */
function literal(value: unknown): string {
  if (value === null) return 'NULL';
  if (Array.isArray(value)) {
    const items = (value as (string | null)[]).map((v) =>
      v === null ? 'NULL' : `"${v.replace(/["\\]/g, '\\$&')}"`,
    );
    return pg.escapeLiteral(`{${items.join(',')}}`);
  }
  if (typeof value === 'string') return pg.escapeLiteral(value);
  if (value instanceof Date) return pg.escapeLiteral(value.toISOString());
  throw new TypeError(`no literal for ${typeof value}`);
}

/** The generic plan of `query`, as a named prepared statement would run it. */
async function genericPlan(query: CompiledQuery): Promise<string> {
  return db.transaction().execute(async (trx) => {
    await sql`SET LOCAL plan_cache_mode = force_generic_plan`.execute(trx);
    await sql`PREPARE plan_probe AS ${sql.raw(query.sql)}`.execute(trx);
    const args = sql.raw(query.parameters.map(literal).join(', '));
    const { rows } = await sql<{
      'QUERY PLAN': string;
    }>`EXPLAIN EXECUTE plan_probe(${args})`.execute(trx);
    await sql`DEALLOCATE plan_probe`.execute(trx);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
}

describe('fan-out statement plans on a table without statistics', () => {
  it("looks a batch's contacts up by the whole recipient key, never by reading the whole broadcast", async () => {
    const reltuples = await sql<{ reltuples: number }>`
      SELECT reltuples FROM pg_class WHERE relname = 'broadcast_recipients'`.execute(db);
    expect(reltuples.rows[0]?.reltuples).toBe(-1); // never analyzed

    statements.length = 0;
    const batch = Array.from(
      { length: 500 },
      (_, i) => `con_${String(30000 + i).padStart(8, '0')}`,
    );
    await db
      .transaction()
      .execute((trx) =>
        new BroadcastsRepository(db).recipientsAmong(trx, 'acc_plan', 'bc_plan', batch),
      );
    const lookup = statements.find((q) => q.sql.includes('FROM broadcast_recipients'));
    expect(lookup).toBeDefined();

    const plan = await genericPlan(lookup!);
    expect(plan).toMatch(/Index (Only )?Scan using broadcast_recipients_pkey/);
    // The contact is part of the index condition: as a filter, every recipient of the
    // broadcast is read for every batch.
    expect(plan).toMatch(/Index Cond: \(.*contact_id = /);
    expect(plan).not.toContain('Filter');
    expect(plan).not.toContain('Seq Scan on broadcast_recipients');
  });

  it('finds only recipients of the given account and broadcast', async () => {
    const repo = new BroadcastsRepository(db);
    const contacts = ['con_00000001', 'con_00000002', 'con_99999999'];
    const among = (accountId: string, broadcastId: string) =>
      db
        .transaction()
        .execute((trx) => repo.recipientsAmong(trx, accountId, broadcastId, contacts));
    expect([...(await among('acc_plan', 'bc_plan'))].sort()).toEqual([
      'con_00000001',
      'con_00000002',
    ]);
    expect((await among('acc_other', 'bc_plan')).size).toBe(0);
    expect((await among('acc_plan', 'bc_other')).size).toBe(0);
  });

  it("records a batch's provider answers by each message's key, never by reading the account's messages", async () => {
    statements.length = 0;
    await db.transaction().execute((trx) =>
      new MessagesRepository(db).recordOutcomes(
        trx,
        'acc_plan',
        Array.from({ length: 500 }, (_, i) => ({
          id: `msg_${String(i + 1).padStart(8, '0')}`,
          status: 'sent' as const,
          providerMessageId: `wamid.${i}`,
        })),
        new Date(),
      ),
    );
    const update = statements.find((q) => q.sql.includes('UPDATE messages'));
    expect(update).toBeDefined();

    const plan = await genericPlan(update!);
    expect(plan).toContain('Index Scan using messages_pkey on messages');
    expect(plan).not.toMatch(/(Seq|Bitmap Heap) Scan on messages/);
  });
});
