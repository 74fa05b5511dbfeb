import { sql, type Kysely } from 'kysely';

// Every outbound message now records `message.created`, so a broadcast batch of 500 inserts 500
// events in one statement: migration 011's trigger ran once per row (PostgreSQL folds the
// identical notifications, but not the calls). This one runs once per statement and notifies
// each account the statement wrote events of, once.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION switchboard_notify_events() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('switchboard_events', account_id)
      FROM (SELECT DISTINCT account_id FROM new_events) AS written;
      RETURN NULL;
    END $$`.execute(db);
  await sql`DROP TRIGGER events_notify ON events`.execute(db);
  await sql`
    CREATE TRIGGER events_notify AFTER INSERT ON events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_notify_events()`.execute(db);
  await sql`DROP FUNCTION switchboard_notify_event()`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
