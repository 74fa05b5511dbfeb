import { sql, type Kysely } from 'kysely';

// A webchat visitor is a browser holding a visitor token. It becomes a contact when it first
// writes (anonymous: identity = the visitor id) or when the site vouches for who it is
// (identify: the contact with that identifier as its webchat identity). Several visitors (two
// devices) may share one contact.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE webchat_visitors (
      account_id text COLLATE "C" NOT NULL,
      id text COLLATE "C" NOT NULL,
      contact_id text COLLATE "C",
      identifier text,
      created_at timestamptz NOT NULL,
      updated_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, id)
    )`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
