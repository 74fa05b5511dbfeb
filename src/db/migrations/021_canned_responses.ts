import { sql, type Kysely } from 'kysely';

// Canned responses: the answers agents insert by typing `/shortcut` in the inbox's composer.
// A shortcut is unique in its account; the list is read in shortcut order, by the same index.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE canned_responses (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      shortcut text COLLATE "C" NOT NULL,
      content text NOT NULL,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`
    CREATE UNIQUE INDEX canned_responses_shortcut ON canned_responses (account_id, shortcut)
  `.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
