import { sql, type Kysely } from 'kysely';

// The inbox's search (GET /v1/conversations?q=): a contact by the start of any word of its name
// (the words as the 'simple' text search configuration splits and lower-cases them), or by the
// start of its phone, email or an identity, ignoring case. Each is an index of its own, so that
// the contacts matching are found by range in an account of a million; the prefix ranges use
// the pattern operators (~>=~, ~<~), which a generic plan can use with parameters where LIKE
// could not.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE INDEX contacts_name_words ON contacts
      USING gin (account_id, to_tsvector('simple', coalesce(name, '')))`.execute(db);
  await sql`
    CREATE INDEX contacts_phone_prefix ON contacts (account_id, phone text_pattern_ops)
    WHERE phone IS NOT NULL`.execute(db);
  await sql`
    CREATE INDEX contacts_email_prefix ON contacts (account_id, lower(email) text_pattern_ops)
    WHERE email IS NOT NULL`.execute(db);
  await sql`
    CREATE INDEX contact_identities_prefix
      ON contact_identities (account_id, lower(external_id) text_pattern_ops)`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
