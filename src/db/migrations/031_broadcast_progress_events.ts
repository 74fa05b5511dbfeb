import { sql, type Kysely } from 'kysely';

// When the broadcast's last `broadcast.updated` event was recorded: the event reports progress at
// most once a second per broadcast, whichever process's transaction moves it on, so the time of
// the last one is kept with the broadcast (a process's own memory would bound only its own).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE broadcasts ADD COLUMN progress_event_at timestamptz`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
