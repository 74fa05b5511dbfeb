import { sql, type Kysely } from 'kysely';

// People who sign in to the inbox: a user's role and password (a scrypt hash), the invite links
// that set a password (a first admin's has no user yet), sessions (only a hash of the cookie's
// token is kept), the failed sign-ins that the brute-force limits count, and who wrote a message
// or a note through a session. The added columns are metadata only: no rewrite of a table.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE users
      ADD COLUMN role text NOT NULL DEFAULT 'agent' CHECK (role IN ('admin', 'agent')),
      ADD COLUMN password_hash text
  `.execute(db);
  // Sign-in finds a user by email across accounts.
  await sql`CREATE INDEX users_email_any ON users (lower(email))`.execute(db);

  await sql`
    CREATE TABLE invites (
      token_hash text COLLATE "C" PRIMARY KEY,
      account_id text COLLATE "C" NOT NULL,
      user_id text COLLATE "C",
      role text NOT NULL CHECK (role IN ('admin', 'agent')),
      expires_at timestamptz NOT NULL,
      created_at timestamptz NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX invites_user ON invites (account_id, user_id)`.execute(db);

  await sql`
    CREATE TABLE sessions (
      token_hash text COLLATE "C" PRIMARY KEY,
      account_id text COLLATE "C" NOT NULL,
      user_id text COLLATE "C" NOT NULL,
      csrf_token text NOT NULL,
      created_at timestamptz NOT NULL,
      last_seen_at timestamptz NOT NULL,
      expires_at timestamptz NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX sessions_user ON sessions (account_id, user_id)`.execute(db);
  await sql`CREATE INDEX sessions_expires ON sessions (expires_at)`.execute(db);

  await sql`
    CREATE TABLE sign_in_failures (
      email text NOT NULL,
      address text NOT NULL,
      at timestamptz NOT NULL
    )`.execute(db);
  await sql`CREATE INDEX sign_in_failures_email ON sign_in_failures (email, at)`.execute(db);
  await sql`CREATE INDEX sign_in_failures_address ON sign_in_failures (address, at)`.execute(db);

  await sql`ALTER TABLE messages ADD COLUMN author jsonb`.execute(db);
  await sql`ALTER TABLE notes ADD COLUMN author jsonb`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
