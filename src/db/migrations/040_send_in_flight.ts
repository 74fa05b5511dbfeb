import { sql, type Kysely } from 'kysely';

// What a send job's attempt may have handed to its provider (WhatsApp, Messenger, Instagram:
// no idempotency key, so a call whose answer was lost cannot be repeated safely):
// - `handed_upto`: every message of the job whose id (in text order) is at most this may have
//   been handed out by the attempt holding the claim; '' none; NULL (a job as its first attempt
//   wrote it) every one. Moved ahead, fenced by the claim, before the calls it covers begin.
// - `not_taken`: those of them the provider answered "not now" meanwhile (safe to send again).
// A runner that takes the job over fails the messages still queued that may have been handed
// out (their outcome is unknown) and sends only the others. Nullable columns without a default
// rewrite no row.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE jobs ADD COLUMN handed_upto text, ADD COLUMN not_taken text[]`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
