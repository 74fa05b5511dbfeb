import { sql, type Kysely } from 'kysely';

// When the team last read a conversation: its inbound messages after this are unread (all of
// them while it is null). Metadata only: no rewrite of the table.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE conversations ADD COLUMN last_read_at timestamptz`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
