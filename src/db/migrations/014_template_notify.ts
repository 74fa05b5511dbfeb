import { sql, type Kysely } from 'kysely';

// Approved templates are cached per process (sends read one each): a template changed or deleted
// is announced on switchboard_cache as `template <account> <name>`, as 006 does for contacts.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION switchboard_notify_template() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('switchboard_cache', 'template ' || OLD.account_id || ' ' || OLD.name);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER templates_cache AFTER UPDATE OR DELETE ON templates
    FOR EACH ROW EXECUTE FUNCTION switchboard_notify_template()`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
