import { sql, type Kysely } from 'kysely';

// Every committed change to what the read caches hold is announced on switchboard_cache (see
// CacheFeed): by triggers, so that no write path (nor an operator's SQL) can forget to.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION switchboard_notify_contact() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('switchboard_cache', 'contact ' || OLD.account_id || ' ' || OLD.id);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER contacts_cache AFTER UPDATE OR DELETE ON contacts
    FOR EACH ROW EXECUTE FUNCTION switchboard_notify_contact()`.execute(db);
  // Keys and plans change rarely: any change empties every process's key-owner cache.
  await sql`
    CREATE FUNCTION switchboard_notify_keys() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('switchboard_cache', 'keys');
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER api_keys_cache AFTER UPDATE OR DELETE ON api_keys
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_notify_keys()`.execute(db);
  await sql`
    CREATE TRIGGER accounts_cache AFTER UPDATE OR DELETE ON accounts
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_notify_keys()`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
