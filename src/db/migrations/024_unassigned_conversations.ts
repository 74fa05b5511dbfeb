import { sql, type Kysely } from 'kysely';

// The inbox's unassigned view and its count (GET /v1/conversations?view=unassigned, /counts) as a
// range of their own: conversations_recent holds every assignee's too, so the list filtered them
// out row by row and its count(*) read the table (435 ms for 40,000 of 100,000 open
// conversations in an account of 1,000,000, bench suite `inbox`); here both are an index range,
// the count an index-only scan (6 ms).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX conversations_unassigned ON conversations (account_id, status, updated_at DESC, id DESC)
    WHERE assignee_id IS NULL`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
