import { sql, type Kysely } from 'kysely';

// An import runs in the process that took its file. That process writes `heartbeat_at` with
// every batch and every few seconds between them; an import still `processing` whose
// heartbeat stopped (the process was killed or restarted) is marked failed with its reason by
// the workers' sweep, or when it is read. The partial index keeps that sweep to the imports
// still running.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE contact_imports ADD COLUMN heartbeat_at timestamptz`.execute(db);
  await sql`UPDATE contact_imports SET heartbeat_at = updated_at WHERE status = 'processing'`.execute(
    db,
  );
  await sql`
    CREATE INDEX contact_imports_running ON contact_imports (heartbeat_at)
      WHERE status = 'processing'`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
