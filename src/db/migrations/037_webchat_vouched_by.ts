import { sql, type Kysely } from 'kysely';

// An identified webchat visitor keeps which identity secret vouched for it: the SHA-256 of the
// connection's sealed secrets at the time (every seal differs, so a rotation or a connection
// made again changes it). An identification counts only while that is still the connection's:
// a rotation ends them all at once by changing one row, and the visitors' identifiers are
// cleared after it in batches, never in one transaction holding every event stream back.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE webchat_visitors ADD COLUMN vouched_by bytea`.execute(db);
  await sql`
    UPDATE webchat_visitors v SET vouched_by = sha256(c.secrets)
    FROM channel_connections c
    WHERE c.account_id = v.account_id AND c.channel = 'webchat' AND c.secrets IS NOT NULL
      AND v.identifier IS NOT NULL`.execute(db);
  // Identified under a connection that is gone: anonymous already for the next connection.
  await sql`
    UPDATE webchat_visitors SET identifier = NULL
    WHERE identifier IS NOT NULL AND vouched_by IS NULL`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
