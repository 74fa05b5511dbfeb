import { Kysely, PostgresDialect, sql, type CompiledQuery } from 'kysely';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { BroadcastsRepository } from '../../src/broadcasts/broadcasts.repository.js';
import { MessagesRepository } from '../../src/messages/messages.repository.js';
import { QueueRepository } from '../../src/messages/sending/queue.repository.js';
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

/** A parameter as an SQL literal (EXECUTE takes no bind parameters): text, booleans, numbers, dates, arrays of them. */
function literal(value: unknown): string {
  if (value === null || value === undefined) return 'NULL';
  if (Array.isArray(value)) {
    const items = (value as unknown[]).map((v) =>
      v === null || v === undefined ? 'NULL' : `"${scalar(v).replace(/["\\]/g, '\\$&')}"`,
    );
    return pg.escapeLiteral(`{${items.join(',')}}`);
  }
  return pg.escapeLiteral(scalar(value));
}

function scalar(value: unknown): string {
  if (typeof value === 'string') return value;
  if (typeof value === 'boolean' || typeof value === 'number') return String(value);
  if (value instanceof Date) return value.toISOString();
  throw new TypeError(`no literal for ${typeof value}`);
}

/**
 * The plan of `query` as a named prepared statement would run it (`generic`, planned without the
 * parameters' values), or as an unnamed one does (`custom`, planned for them).
 */
async function planOf(query: CompiledQuery, mode: 'generic' | 'custom'): Promise<string> {
  return db.transaction().execute(async (trx) => {
    await sql`SET LOCAL plan_cache_mode = ${sql.raw(mode === 'generic' ? 'force_generic_plan' : 'force_custom_plan')}`.execute(
      trx,
    );
    await sql`PREPARE plan_probe AS ${sql.raw(query.sql)}`.execute(trx);
    const args = sql.raw(query.parameters.map(literal).join(', '));
    const { rows } = await sql<{
      'QUERY PLAN': string;
    }>`EXPLAIN EXECUTE plan_probe(${args})`.execute(trx);
    await sql`DEALLOCATE plan_probe`.execute(trx);
    return rows.map((r) => r['QUERY PLAN']).join('\n');
  });
}

const genericPlan = (query: CompiledQuery) => planOf(query, 'generic');

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

    // Planned for its values too (it returns every column, so it is never prepared by name):
    // the batch's 500 rows must not make a hash of the account's messages look cheaper.
    await sql`ANALYZE messages`.execute(db);
    for (const mode of ['generic', 'custom'] as const) {
      const plan = await planOf(update!, mode);
      expect(plan).toContain('Index Scan using messages_pkey on messages');
      expect(plan).not.toMatch(/(Seq|Bitmap Heap) Scan on messages/);
      expect(plan).not.toContain('Hash');
    }
  });

  it("queues a batch by looking each recipient's contact and conversation up by key", async () => {
    await sql`
      INSERT INTO contacts (account_id, id, phone, name, tags, custom_fields, created_at, updated_at)
      SELECT 'acc_plan', 'con_' || lpad(i::text, 8, '0'), '+1415' || lpad(i::text, 7, '0'),
             'Plan ' || i, '{}', '{}', now(), now()
      FROM generate_series(1, 20000) AS i`.execute(db);
    // Half of them with a conversation on the channel already.
    await sql`
      INSERT INTO conversations (account_id, id, contact_id, channel, status, created_at, updated_at)
      SELECT 'acc_plan', 'conv_q' || i, 'con_' || lpad(i::text, 8, '0'), 'webchat', 'open', now(), now()
      FROM generate_series(1, 20000, 2) AS i`.execute(db);
    // Webhooks of many accounts (never analyzed), a few of this one subscribed to
    // message.created: each message's event finds its account's by key.
    await sql`
      INSERT INTO webhooks (account_id, id, url, events, secret_box, status, created_at, updated_at)
      SELECT CASE WHEN i <= 3 THEN 'acc_plan' ELSE 'acc_hook' || i END, 'wh_' || i,
             'https://example.com/hook', '{message.created,contact.created}', decode('00', 'hex'), 'active',
             now(), now()
      FROM generate_series(1, 20000) AS i`.execute(db);
    await sql`ANALYZE contacts`.execute(db);
    await sql`ANALYZE conversations`.execute(db);
    statements.length = 0;
    const now = new Date();
    const sends = Array.from({ length: 500 }, (_, i) => ({
      row: {
        account_id: 'acc_plan',
        id: `msg_q${i}`,
        direction: 'outbound' as const,
        type: 'text' as const,
        content: 'Hello',
        media_url: null,
        template_name: null,
        template_language: null,
        template_params: null,
        status: 'queued' as const,
        failure_reason: null,
        provider_message_id: null,
        broadcast_id: 'bc_plan',
        created_at: now,
        author: null,
        updated_at: now,
      },
      contactId: `con_${String(i + 1).padStart(8, '0')}`,
      channel: 'webchat' as const,
      anyContact: true,
      windowed: i % 2 === 0,
    }));
    await db
      .transaction()
      .execute(async (trx) => {
        await new QueueRepository().queue(trx, sends, now, { windowStart: now });
        throw new Rollback();
      })
      .catch((err: unknown) => {
        if (!(err instanceof Rollback)) throw err;
      });
    const queue = statements.find((q) => q.sql.includes('WITH target AS'));
    expect(queue).toBeDefined();
    const plan = await planOf(queue!, 'custom');
    expect(plan).toContain('Index Scan using contacts_pkey on contacts');
    expect(plan).toContain('Index Scan using conversations_contact_channel on conversations');
    expect(plan).toContain('Index Scan using conversations_pkey on conversations');
    // The message.created events' webhooks: by the account's key, once per account.
    expect(plan).toMatch(/Index Scan (using|on) webhooks_pkey/);
    expect(plan).toMatch(/Index Cond: \(account_id = event\.account_id\)/);
    expect(plan).not.toContain('Seq Scan on webhooks');
    expect(plan).not.toMatch(
      /(Seq|Bitmap Heap) Scan on (contacts|conversations|contact_identities)/,
    );
  });
});

class Rollback extends Error {}
