import { sql, type Kysely } from 'kysely';

export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE webhooks (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      url text NOT NULL,
      events text[] NOT NULL,
      secret text NOT NULL,
      status text NOT NULL CHECK (status IN ('active', 'disabled')),
      disabled_reason text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);

  // One row per (webhook, event): the delivery's state and its retry schedule.
  await sql`
    CREATE TABLE webhook_deliveries (
      account_id text COLLATE "C" NOT NULL,
      webhook_id text COLLATE "C" NOT NULL,
      event_id text COLLATE "C" NOT NULL,
      event_type text NOT NULL,
      state text NOT NULL CHECK (state IN ('pending', 'delivered', 'failed')),
      attempts integer NOT NULL DEFAULT 0,
      next_attempt_at timestamptz NOT NULL,
      locked_until timestamptz,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, webhook_id, event_id)
    )`.execute(db);
  await sql`CREATE INDEX webhook_deliveries_pending ON webhook_deliveries (webhook_id, next_attempt_at) WHERE state = 'pending'`.execute(
    db,
  );
  await sql`CREATE INDEX webhook_deliveries_finished ON webhook_deliveries (updated_at) WHERE state <> 'pending'`.execute(
    db,
  );

  // Every attempt, as GET /v1/webhooks/{id}/deliveries lists them.
  await sql`
    CREATE TABLE webhook_attempts (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      webhook_id text COLLATE "C" NOT NULL,
      event_id text COLLATE "C" NOT NULL,
      event_type text NOT NULL,
      attempt integer NOT NULL,
      status_code integer,
      error text,
      duration_ms integer NOT NULL,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE INDEX webhook_attempts_webhook ON webhook_attempts (account_id, webhook_id, created_at DESC, id DESC)`.execute(
    db,
  );
  await sql`CREATE INDEX webhook_attempts_created ON webhook_attempts (created_at)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
