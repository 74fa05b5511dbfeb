import { sql, type Kysely } from 'kysely';

// The inbox's search by name, indexed per account. Migration 025's GIN index held `account_id`
// as a key of its own beside the name's words, so a search in an account of a million contacts
// intersected that account's posting tree (a million entries) with the words': 40 ms for a full
// name that six contacts have. Here each word is one key with its account in front
// (`acc_…/lucy`), so a word's prefix is one short range of the index whatever the account's
// size, and no account reads another's words. The query side is built by the same functions
// (contact_name_query), so both lower-case and split words alike.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE FUNCTION contact_name_keys(account_id text, name text) RETURNS tsvector
      LANGUAGE sql IMMUTABLE PARALLEL SAFE
      RETURN array_to_tsvector(ARRAY(
        SELECT account_id || '/' || word
        FROM unnest(tsvector_to_array(to_tsvector('simple'::regconfig, coalesce(name, '')))) AS word))`.execute(
    db,
  );
  // Every word of q as the start of a key of the account (all of them, in any order); null when
  // q has no word.
  await sql`
    CREATE FUNCTION contact_name_query(account_id text, q text) RETURNS tsquery
      LANGUAGE sql IMMUTABLE PARALLEL SAFE
      RETURN (
        SELECT string_agg(quote_literal(account_id || '/' || word) || ':*', ' & ')::tsquery
        FROM unnest(tsvector_to_array(to_tsvector('simple'::regconfig, q))) AS word)`.execute(db);
  await sql`
    CREATE INDEX contacts_name_keys ON contacts
      USING gin (contact_name_keys(account_id, name))`.execute(db);
  await sql`DROP INDEX contacts_name_words`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
