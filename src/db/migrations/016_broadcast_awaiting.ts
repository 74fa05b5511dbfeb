import { sql, type Kysely } from 'kysely';

// A broadcast whose every recipient has been queued may still have messages the provider has not
// accepted yet (retrying after throttling): it stays `sending` until none is left `queued`, and
// this says when its audience ran out, so that the send job only has those messages to wait for.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE broadcasts ADD COLUMN audience_done_at timestamptz`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
