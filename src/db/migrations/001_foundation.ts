import { sql, type Kysely } from 'kysely';

// Every tenant table leads its keys with account_id so that it can be sharded by account later.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`CREATE EXTENSION IF NOT EXISTS pg_trgm`.execute(db);
  await sql`CREATE EXTENSION IF NOT EXISTS btree_gin`.execute(db);

  await sql`
    CREATE TABLE accounts (
      id text COLLATE "C" PRIMARY KEY,
      name text NOT NULL,
      plan text NOT NULL CHECK (plan IN ('starter', 'growth', 'enterprise')),
      rate_limit_per_minute integer CHECK (rate_limit_per_minute > 0),
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL
    )`.execute(db);

  await sql`
    CREATE TABLE api_keys (
      account_id text COLLATE "C" NOT NULL REFERENCES accounts (id),
      id text COLLATE "C" NOT NULL,
      name text,
      key_hash text NOT NULL,
      created_at timestamptz NOT NULL,
      revoked_at timestamptz,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE UNIQUE INDEX api_keys_hash ON api_keys (key_hash)`.execute(db);
  await sql`CREATE UNIQUE INDEX api_keys_id ON api_keys (id)`.execute(db);

  await sql`
    CREATE TABLE contacts (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      phone text NOT NULL,
      name text,
      email text,
      tags text[] NOT NULL DEFAULT '{}',
      lifecycle_stage text,
      custom_fields jsonb NOT NULL DEFAULT '{}',
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE UNIQUE INDEX contacts_phone ON contacts (account_id, phone)`.execute(db);
  await sql`CREATE INDEX contacts_newest ON contacts (account_id, created_at DESC, id DESC)`.execute(
    db,
  );
  await sql`CREATE INDEX contacts_tags ON contacts USING gin (account_id, tags)`.execute(db);
  await sql`CREATE INDEX contacts_name_trgm ON contacts USING gin (account_id, name gin_trgm_ops)`.execute(
    db,
  );
  await sql`CREATE INDEX contacts_phone_trgm ON contacts USING gin (account_id, phone gin_trgm_ops)`.execute(
    db,
  );

  await sql`
    CREATE TABLE tags (
      account_id text COLLATE "C" NOT NULL,
      name text NOT NULL,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, name)
    )`.execute(db);

  await sql`
    CREATE TABLE events (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      seq bigint GENERATED ALWAYS AS IDENTITY,
      type text NOT NULL,
      -- json, not jsonb: webhook bodies keep the key order the API uses.
      data json NOT NULL,
      created_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
  await sql`CREATE INDEX events_seq ON events (seq)`.execute(db);

  await sql`
    CREATE TABLE idempotency_keys (
      account_id text COLLATE "C" NOT NULL,
      method text NOT NULL,
      path text NOT NULL,
      key text NOT NULL,
      request_hash text NOT NULL,
      state text NOT NULL CHECK (state IN ('running', 'completed')),
      response_status integer,
      response_body text,
      created_at timestamptz NOT NULL,
      locked_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, method, path, key)
    )`.execute(db);
  await sql`CREATE INDEX idempotency_keys_created ON idempotency_keys (created_at)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
