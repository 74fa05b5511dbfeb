import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // A job whose retries ran out stays in its table, marked dead with its last error, rather
  // than moving to a table of its own: marking it is one UPDATE of a row the runner already
  // holds, `switchboard jobs retry` only clears the mark (same id, same payload), and the
  // claim's index leaves dead rows out, so they never slow the queue down.
  await sql`ALTER TABLE jobs ADD COLUMN dead_at timestamptz`.execute(db);
  await sql`DROP INDEX jobs_due`.execute(db);
  await sql`CREATE INDEX jobs_due ON jobs (run_at) WHERE dead_at IS NULL`.execute(db);
  await sql`CREATE INDEX jobs_dead ON jobs (dead_at DESC) WHERE dead_at IS NOT NULL`.execute(db);

  // Events are pruned by age (in batches, oldest first).
  await sql`CREATE INDEX events_created ON events (created_at)`.execute(db);

  // Since when every delivery attempt to the webhook has failed (NULL after any success): a
  // webhook failing for long enough is disabled.
  await sql`ALTER TABLE webhooks ADD COLUMN failing_since timestamptz`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
