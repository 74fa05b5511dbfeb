import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE broadcasts (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      name text NOT NULL,
      channel text NOT NULL,
      audience json NOT NULL,
      message json NOT NULL,
      status text NOT NULL CHECK (status IN ('draft', 'scheduled', 'sending', 'sent', 'failed')),
      scheduled_at timestamptz,
      started_at timestamptz,
      completed_at timestamptz,
      rendered_content text,
      failure_reason text,
      -- Fan-out progress: recipients are taken in contact-id order after this one.
      cursor text COLLATE "C",
      sent integer NOT NULL DEFAULT 0,
      delivered integer NOT NULL DEFAULT 0,
      read integer NOT NULL DEFAULT 0,
      replied integer NOT NULL DEFAULT 0,
      failed integer NOT NULL DEFAULT 0,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE INDEX broadcasts_newest ON broadcasts (account_id, created_at DESC, id DESC)`.execute(
    db,
  );

  // The (broadcast, contact) key is what makes every recipient messaged exactly once.
  await sql`
    CREATE TABLE broadcast_recipients (
      account_id text COLLATE "C" NOT NULL,
      broadcast_id text COLLATE "C" NOT NULL,
      contact_id text COLLATE "C" NOT NULL,
      conversation_id text COLLATE "C",
      message_id text COLLATE "C",
      failure_reason text,
      replied_at timestamptz,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, broadcast_id, contact_id)
    )`.execute(db);
  await sql`
    CREATE INDEX broadcast_recipients_awaiting_reply ON broadcast_recipients (account_id, conversation_id)
    WHERE replied_at IS NULL AND message_id IS NOT NULL`.execute(db);

  await sql`ALTER TABLE messages ADD COLUMN broadcast_id text COLLATE "C"`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
