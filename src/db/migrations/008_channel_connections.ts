import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  // One connection per account and channel. Secrets (tokens, app secrets) are one encrypted
  // blob (AES-256-GCM under SECRETS_KEY), never a column a query could print. The webhook
  // route finds a connection by its id alone, so ids are unique across accounts too.
  await sql`
    CREATE TABLE channel_connections (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      channel text NOT NULL CHECK (channel IN ('whatsapp', 'instagram', 'messenger', 'webchat')),
      provider text NOT NULL,
      status text NOT NULL CHECK (status IN ('active', 'error')),
      error text,
      settings jsonb NOT NULL,
      secrets bytea,
      verify_token text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id),
      UNIQUE (account_id, channel)
    )`.execute(db);
  await sql`CREATE UNIQUE INDEX channel_connections_id ON channel_connections (id)`.execute(db);
  await sql`
    CREATE FUNCTION switchboard_notify_connection() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN
      PERFORM pg_notify('switchboard_cache', 'connection ' || OLD.account_id || ' ' || OLD.channel);
      RETURN NULL;
    END $$`.execute(db);
  await sql`
    CREATE TRIGGER channel_connections_cache AFTER UPDATE OR DELETE ON channel_connections
    FOR EACH ROW EXECUTE FUNCTION switchboard_notify_connection()`.execute(db);

  // Provider webhooks as received (the exact bytes whose signature was checked), stored before
  // answering 200 and processed from here by a job, so a crash loses nothing.
  await sql`
    CREATE TABLE inbound_webhooks (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      connection_id text COLLATE "C" NOT NULL,
      body bytea NOT NULL,
      received_at timestamptz NOT NULL,
      processed_at timestamptz,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE INDEX inbound_webhooks_received ON inbound_webhooks (received_at)`.execute(db);

  // A message is `queued` until its provider has answered.
  await sql`ALTER TABLE messages DROP CONSTRAINT messages_status_check`.execute(db);
  await sql`ALTER TABLE messages ADD CONSTRAINT messages_status_check
    CHECK (status IN ('queued', 'sent', 'delivered', 'read', 'failed'))`.execute(db);
  // A queued template message is sent (or re-sent) from its row: the provider needs the
  // template's language and parameters, not only its rendered text.
  await sql`ALTER TABLE messages ADD COLUMN template_language text`.execute(db);
  await sql`ALTER TABLE messages ADD COLUMN template_params jsonb`.execute(db);
  // Status webhooks name messages by the provider's id; an inbound message's provider id makes
  // a redelivered webhook take effect once.
  await sql`CREATE UNIQUE INDEX messages_provider_id ON messages (account_id, provider_message_id)
    WHERE provider_message_id IS NOT NULL`.execute(db);

  // Media received from providers, kept by the service and served at GET /v1/media/{id}.
  await sql`
    CREATE TABLE media (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      content_type text NOT NULL,
      filename text,
      size integer NOT NULL,
      bytes bytea NOT NULL,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);

  // Templates submitted to (or imported from) Meta carry Meta's id and the reason of a rejection.
  await sql`ALTER TABLE templates ADD COLUMN provider_template_id text`.execute(db);
  await sql`ALTER TABLE templates ADD COLUMN rejection_reason text`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
