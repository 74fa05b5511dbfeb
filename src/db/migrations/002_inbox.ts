import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE users (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      name text NOT NULL,
      email text NOT NULL,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE UNIQUE INDEX users_email ON users (account_id, lower(email))`.execute(db);

  await sql`
    CREATE TABLE teams (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      name text NOT NULL,
      user_ids text[] NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);

  await sql`
    CREATE TABLE templates (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      name text NOT NULL,
      language text NOT NULL,
      category text NOT NULL,
      body text NOT NULL,
      status text NOT NULL CHECK (status IN ('pending', 'approved', 'rejected')),
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE UNIQUE INDEX templates_name ON templates (account_id, name)`.execute(db);

  await sql`
    CREATE TABLE conversations (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      contact_id text COLLATE "C" NOT NULL,
      channel text NOT NULL,
      status text NOT NULL CHECK (status IN ('open', 'resolved')),
      assignee_type text CHECK (assignee_type IN ('user', 'team')),
      assignee_id text COLLATE "C",
      last_inbound_at timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  // Exactly one conversation per (contact, channel): the key that makes creation race-safe.
  await sql`CREATE UNIQUE INDEX conversations_contact_channel ON conversations (account_id, contact_id, channel)`.execute(
    db,
  );
  await sql`CREATE INDEX conversations_recent ON conversations (account_id, status, updated_at DESC, id DESC)`.execute(
    db,
  );
  await sql`CREATE INDEX conversations_assignee ON conversations (account_id, assignee_id, updated_at DESC, id DESC)`.execute(
    db,
  );

  await sql`
    CREATE TABLE messages (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      conversation_id text COLLATE "C" NOT NULL,
      direction text NOT NULL CHECK (direction IN ('inbound', 'outbound')),
      type text NOT NULL CHECK (type IN ('text', 'template', 'image', 'document')),
      content text,
      media_url text,
      template_name text,
      status text NOT NULL CHECK (status IN ('sent', 'delivered', 'read', 'failed')),
      failure_reason text,
      provider_message_id text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE INDEX messages_conversation ON messages (account_id, conversation_id, created_at, id)`.execute(
    db,
  );

  await sql`
    CREATE TABLE notes (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      conversation_id text COLLATE "C" NOT NULL,
      content text NOT NULL,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE INDEX notes_conversation ON notes (account_id, conversation_id, created_at, id)`.execute(
    db,
  );

  // The durable job queue: rows are written in the transaction that causes them and claimed
  // with FOR UPDATE SKIP LOCKED under a lease, so any number of workers can share it.
  await sql`
    CREATE TABLE jobs (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      kind text NOT NULL,
      payload jsonb NOT NULL,
      run_at timestamptz NOT NULL,
      attempts integer NOT NULL DEFAULT 0,
      locked_until timestamptz,
      last_error text,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE INDEX jobs_due ON jobs (run_at)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
