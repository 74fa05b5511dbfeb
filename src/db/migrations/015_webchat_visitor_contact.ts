import { sql, type Kysely } from 'kysely';

// A visitor is whichever contact holds its webchat identity (the verified identifier, else the
// visitor id), read with the visitor: identities follow merges and go with deleted contacts. The
// contact id the row kept beside that could only fall out of date, so it goes.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE webchat_visitors DROP COLUMN contact_id`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
