import { sql, type Kysely } from 'kysely';

// The live event stream (src/events/event-stream.ts) reads each account's events in the order of
// the transaction that wrote them, up to the oldest transaction still running, so that no event
// committed late with a low `seq` is ever skipped. Each event therefore keeps the id of its
// writing transaction, and every committed insert wakes the listening API processes.
export async function up(db: Kysely<unknown>): Promise<void> {
  // A constant default is metadata only (no rewrite of a week of events); existing rows, all
  // long committed, read as transaction 1, ordered among themselves by seq. New rows record
  // their own (top-level) transaction id.
  await sql`ALTER TABLE events ADD COLUMN xid xid8 NOT NULL DEFAULT '1'`.execute(db);
  await sql`ALTER TABLE events ALTER COLUMN xid SET DEFAULT pg_current_xact_id()`.execute(db);
  await sql`CREATE INDEX events_stream ON events (account_id, xid, seq)`.execute(db);
  // Delivered when the writing transaction commits, never for one that rolls back; PostgreSQL
  // folds identical notifications of one transaction into one, so a broadcast batch that
  // records many events of an account wakes its streams once.
  await sql`
    CREATE FUNCTION switchboard_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('switchboard_events', NEW.account_id);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION switchboard_notify_event()`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
