import { sql, type Kysely } from 'kysely';

// The search (GET /v1/conversations?q=) with a status: conversations_recent also holds each
// conversation's contact, so that the page's ids and the total are read from the index alone
// (each entry's contact checked against those that match q) instead of every open row of the
// account from the table: for a four-letter q matching 4,577 of 1,000,000 contacts, the count
// read 100,000 open rows (a bitmap heap scan, 3,700 pages, 84-122 ms); as an index-only scan,
// 1,700 index pages, 12-20 ms (bench suite `inbox`, docs/performance.md). The same ranges as
// before serve the inbox's other lists and /counts. Built under another name, then swapped in.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX conversations_recent_contact
      ON conversations (account_id, status, updated_at DESC, id DESC) INCLUDE (contact_id)`.execute(
    db,
  );
  await sql`DROP INDEX conversations_recent`.execute(db);
  await sql`ALTER INDEX conversations_recent_contact RENAME TO conversations_recent`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
