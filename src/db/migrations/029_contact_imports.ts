import { sql, type Kysely } from 'kysely';

// CSV imports of contacts (POST /v1/contacts/imports): each import's progress, moved in the same
// transaction as each batch of rows it writes, and the rows it refused (by their line in the
// file). Also an index for the contacts list filtered by lifecycle stage, newest first.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE contact_imports (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      status text NOT NULL CHECK (status IN ('processing', 'completed', 'failed')),
      on_conflict text NOT NULL CHECK (on_conflict IN ('update', 'skip')),
      total_rows integer NOT NULL DEFAULT 0,
      created integer NOT NULL DEFAULT 0,
      updated integer NOT NULL DEFAULT 0,
      skipped integer NOT NULL DEFAULT 0,
      failed integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`
    CREATE TABLE contact_import_errors (
      account_id text COLLATE "C" NOT NULL,
      import_id text COLLATE "C" NOT NULL,
      line integer NOT NULL,
      field text NOT NULL,
      issue text NOT NULL,
      FOREIGN KEY (account_id, import_id) REFERENCES contact_imports (account_id, id) ON DELETE CASCADE
    )`.execute(db);
  await sql`CREATE INDEX contact_import_errors_line ON contact_import_errors (account_id, import_id, line)`.execute(
    db,
  );
  await sql`CREATE INDEX contacts_lifecycle ON contacts (account_id, lifecycle_stage, created_at DESC, id DESC)`.execute(
    db,
  );
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
