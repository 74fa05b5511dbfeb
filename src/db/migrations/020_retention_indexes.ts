import { sql, type Kysely } from 'kysely';

// What the workers' retention run looks for, each found through an index rather than by reading
// the table: stored provider webhooks processed longest ago, anonymous widget visitors not seen
// longest (updated_at is renewed, at most daily, when their session resumes), and the oldest
// aliases of provider message ids. inbound_webhooks_received served only the pruning, which now
// goes by processed_at, so it goes rather than cost every stored webhook an index write.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX inbound_webhooks_processed ON inbound_webhooks (processed_at)
    WHERE processed_at IS NOT NULL`.execute(db);
  await sql`DROP INDEX inbound_webhooks_received`.execute(db);
  await sql`
    CREATE INDEX webchat_visitors_anonymous_seen ON webchat_visitors (updated_at)
    WHERE identifier IS NULL`.execute(db);
  await sql`CREATE INDEX provider_id_aliases_created ON provider_id_aliases (created_at)`.execute(
    db,
  );
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
