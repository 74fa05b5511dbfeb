import { sql, type Kysely } from 'kysely';

// The provider resolver keeps the sandbox for an unconnected channel as it keeps a connected
// provider, so a new connection must be announced too, not only a changed or removed one.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION switchboard_notify_new_connection() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('switchboard_cache', 'connection ' || NEW.account_id || ' ' || NEW.channel);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER channel_connections_cache_insert AFTER INSERT ON channel_connections
    FOR EACH ROW EXECUTE FUNCTION switchboard_notify_new_connection()`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
