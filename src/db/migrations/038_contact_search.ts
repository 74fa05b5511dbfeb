import { sql, type Kysely } from 'kysely';

// The total of `GET /v1/contacts?search=` counted in a narrow copy of what a search reads.
//
// A search is `name ILIKE '%term%' OR phone ILIKE '%term%'`. Counting a term that a tenth of a
// million contacts match (a common first name) checked 100,000 rows spread over every page of
// `contacts` (337 MB at a million), after intersecting the trigram index's posting tree of the
// account (a million entries) with the term's: 147 ms at the median with the table in memory.
//
// `contact_search` holds, for each contact, only its name and phone as ILIKE compares them
// (lower-cased: in a multi-byte database ILIKE lower-cases both sides and compares them as LIKE
// does), a third of the pages. Its GIN index keys each trigram with its account and column in
// front (`acc_…/n/mar`), as migration 032 keys names, so a term's candidates are a few short
// posting lists of its own account whatever the account's size. A contact holding the term holds
// each of its trigrams, so the keys only narrow; the count then checks each candidate with LIKE.
//
// Kept by statement-level triggers on `contacts` (with transition tables, as the counters of 034),
// in the writing transaction: an update that changes neither name nor phone writes nothing here.
// A search's page comes from here as well (ContactsRepository.list), so the trigram indexes of
// migration 001 on contacts go: one GIN index to write with each contact rather than two.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE contact_search (
      account_id text COLLATE "C" NOT NULL,
      contact_id text COLLATE "C" NOT NULL,
      name text,
      phone text,
      PRIMARY KEY (account_id, contact_id)
    )`.execute(db);
  // Every three-character piece of `value` (already lower-cased), keyed by account and column;
  // none for a value shorter than three characters. A piece that recurs is listed again (GIN
  // keeps each key once). A loop rather than a set-returning query: half the time, and the
  // index calls it for every contact written.
  await sql`
    CREATE FUNCTION contact_trigram_keys(account_id text, col text, value text) RETURNS text[]
      LANGUAGE plpgsql IMMUTABLE PARALLEL SAFE AS $$
      DECLARE
        prefix text := account_id || '/' || col || '/';
        keys text[] := '{}';
      BEGIN
        FOR i IN 1 .. coalesce(length(value), 0) - 2 LOOP
          keys := keys || (prefix || substr(value, i, 3));
        END LOOP;
        RETURN keys;
      END $$`.execute(db);
  await sql`
    CREATE FUNCTION contact_search_keys(account_id text, name text, phone text) RETURNS text[]
      LANGUAGE sql IMMUTABLE PARALLEL SAFE
      RETURN contact_trigram_keys(account_id, 'n', coalesce(name, ''))
        || contact_trigram_keys(account_id, 'p', coalesce(phone, ''))`.execute(db);

  for (const [fn, body] of [
    [
      'switchboard_search_contacts_insert',
      `INSERT INTO contact_search (account_id, contact_id, name, phone)
       SELECT account_id, id, lower(name), lower(phone) FROM new_rows`,
    ],
    [
      'switchboard_search_contacts_update',
      `UPDATE contact_search s SET name = lower(n.name), phone = lower(n.phone)
       FROM new_rows n JOIN old_rows o USING (account_id, id)
       WHERE s.account_id = n.account_id AND s.contact_id = n.id
         AND (n.name IS DISTINCT FROM o.name OR n.phone IS DISTINCT FROM o.phone)`,
    ],
    [
      'switchboard_search_contacts_delete',
      `DELETE FROM contact_search s USING old_rows o
       WHERE s.account_id = o.account_id AND s.contact_id = o.id`,
    ],
  ] as const) {
    await sql`
      CREATE FUNCTION ${sql.raw(fn)}() RETURNS trigger
      LANGUAGE plpgsql AS $$
      BEGIN
        ${sql.raw(body)};
        RETURN NULL;
      END $$`.execute(db);
  }
  // No write of contacts between the triggers and the copy.
  await sql`LOCK TABLE contacts IN SHARE ROW EXCLUSIVE MODE`.execute(db);
  for (const [op, referencing] of [
    ['insert', 'NEW TABLE AS new_rows'],
    ['update', 'OLD TABLE AS old_rows NEW TABLE AS new_rows'],
    ['delete', 'OLD TABLE AS old_rows'],
  ] as const) {
    await sql`
      CREATE TRIGGER ${sql.raw(`contacts_search_${op}`)}
      AFTER ${sql.raw(op.toUpperCase())} ON contacts
      REFERENCING ${sql.raw(referencing)}
      FOR EACH STATEMENT EXECUTE FUNCTION ${sql.raw(`switchboard_search_contacts_${op}`)}()`.execute(
      db,
    );
  }
  await sql`
    INSERT INTO contact_search (account_id, contact_id, name, phone)
    SELECT account_id, id, lower(name), lower(phone) FROM contacts`.execute(db);
  await sql`
    CREATE INDEX contact_search_keys ON contact_search
      USING gin (contact_search_keys(account_id, name, phone))`.execute(db);
  // The index expression's statistics, which the planner estimates a term's reach from.
  await sql`ANALYZE contact_search`.execute(db);
  // A search's page is read through contact_search too (or by walking the newest contacts):
  // the trigram indexes on contacts would only cost every write of a contact.
  await sql`DROP INDEX contacts_name_trgm`.execute(db);
  await sql`DROP INDEX contacts_phone_trgm`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
