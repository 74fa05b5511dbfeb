import { sql, type Kysely } from 'kysely';

// Messenger and Instagram attachments carry no caption, so a captioned image or document is two
// Send API calls: the attachment's message id names our message, and the caption's is kept here
// as another name for it, so that deliveries and reads naming the caption (Instagram reads name
// the newest message, the caption) apply to the message.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE provider_id_aliases (
      account_id text COLLATE "C" NOT NULL,
      alias text COLLATE "C" NOT NULL,
      provider_message_id text COLLATE "C" NOT NULL,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, alias)
    )`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
