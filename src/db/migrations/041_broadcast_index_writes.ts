import { sql, type Kysely } from 'kysely';

// Fewer index entries for what every message writes (a million-recipient broadcast writes a
// conversation and an event per recipient; see docs/performance.md):
// - events_seq goes: no query orders all accounts' events by seq; the stream reads an account's
//   events through events_stream (account_id, xid, seq).
// - events_created becomes a BRIN index: retention only asks for events older than a week, and
//   events are appended in time order, so a block range summary finds them; a BRIN index is not
//   written by an insert into an unsummarised range (vacuum summarises them).
// - conversations_assignee gives way to conversations_assigned, the same keys for assigned
//   conversations only: it serves `assignee_id = …` (assigned to a user or team, `mine`,
//   unassign-all), and unassigned ones have conversations_unassigned. A new conversation is
//   unassigned, so a broadcast's conversations cost it nothing.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`DROP INDEX events_seq`.execute(db);
  await sql`DROP INDEX events_created`.execute(db);
  await sql`CREATE INDEX events_created ON events USING brin (created_at) WITH (autosummarize = on)`.execute(
    db,
  );
  await sql`
    CREATE INDEX conversations_assigned ON conversations (account_id, assignee_id, updated_at DESC, id DESC)
    WHERE assignee_id IS NOT NULL`.execute(db);
  await sql`DROP INDEX conversations_assignee`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
