import { sql, type Kysely } from 'kysely';

// How many contacts an account has, by lifecycle stage and by tag and stage, kept by the writes
// that change them, so that the total of GET /v1/contacts unfiltered, or filtered by tag and
// lifecycle stage only, reads a few rows instead of counting contacts. At 1,000,000 contacts the
// count was a scan of all of them: the first page 122 ms at the median, a tag held by 8 % 151 ms
// (bench suite `contacts-table`, one connection).
//
// As conversation_counts (migration 028): statement-level triggers with transition tables add
// +1 for each row as it is now and -1 for each row as it was; an update that changes neither the
// stage nor the tags sums to nothing and writes nothing. Each connection adds to its own slot
// (its backend pid modulo 8). No stage is '' in lifecycle_stage. A tag a contact holds twice
// counts once, as `tags @> ARRAY[tag]` matches it once.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE contact_counts (
      account_id text COLLATE "C" NOT NULL,
      lifecycle_stage text NOT NULL,
      slot smallint NOT NULL,
      n bigint NOT NULL,
      PRIMARY KEY (account_id, lifecycle_stage, slot)
    )`.execute(db);
  await sql`
    CREATE TABLE contact_tag_counts (
      account_id text COLLATE "C" NOT NULL,
      tag text NOT NULL,
      lifecycle_stage text NOT NULL,
      slot smallint NOT NULL,
      n bigint NOT NULL,
      PRIMARY KEY (account_id, tag, lifecycle_stage, slot)
    )`.execute(db);
  // One function for the three triggers: a missing transition table is read as empty.
  for (const [fn, rows] of [
    [
      'switchboard_count_contacts_insert',
      'SELECT account_id, tags, lifecycle_stage, 1 AS d FROM new_rows',
    ],
    [
      'switchboard_count_contacts_delete',
      'SELECT account_id, tags, lifecycle_stage, -1 AS d FROM old_rows',
    ],
    [
      'switchboard_count_contacts_update',
      `SELECT account_id, tags, lifecycle_stage, 1 AS d FROM new_rows
       UNION ALL
       SELECT account_id, tags, lifecycle_stage, -1 FROM old_rows`,
    ],
  ] as const) {
    await sql`
      CREATE FUNCTION ${sql.raw(fn)}() RETURNS trigger
      LANGUAGE plpgsql AS $$
      BEGIN
        INSERT INTO contact_counts AS k (account_id, lifecycle_stage, slot, n)
        SELECT account_id, coalesce(lifecycle_stage, ''), pg_backend_pid() % 8, sum(d)
        FROM (${sql.raw(rows)}) changes
        GROUP BY 1, 2
        HAVING sum(d) <> 0
        ORDER BY 1, 2
        ON CONFLICT (account_id, lifecycle_stage, slot) DO UPDATE SET n = k.n + excluded.n;
        INSERT INTO contact_tag_counts AS k (account_id, tag, lifecycle_stage, slot, n)
        SELECT account_id, t.tag, coalesce(lifecycle_stage, ''), pg_backend_pid() % 8, sum(d)
        FROM (${sql.raw(rows)}) changes
        CROSS JOIN LATERAL (SELECT DISTINCT unnest(changes.tags) AS tag) t
        GROUP BY 1, 2, 3
        HAVING sum(d) <> 0
        ORDER BY 1, 2, 3
        ON CONFLICT (account_id, tag, lifecycle_stage, slot) DO UPDATE SET n = k.n + excluded.n;
        RETURN NULL;
      END $$`.execute(db);
  }
  // No write of contacts between the triggers and the first counts.
  await sql`LOCK TABLE contacts IN SHARE ROW EXCLUSIVE MODE`.execute(db);
  for (const [op, referencing] of [
    ['insert', 'NEW TABLE AS new_rows'],
    ['update', 'OLD TABLE AS old_rows NEW TABLE AS new_rows'],
    ['delete', 'OLD TABLE AS old_rows'],
  ] as const) {
    await sql`
      CREATE TRIGGER ${sql.raw(`contacts_count_${op}`)}
      AFTER ${sql.raw(op.toUpperCase())} ON contacts
      REFERENCING ${sql.raw(referencing)}
      FOR EACH STATEMENT EXECUTE FUNCTION ${sql.raw(`switchboard_count_contacts_${op}`)}()`.execute(
      db,
    );
  }
  await sql`
    INSERT INTO contact_counts (account_id, lifecycle_stage, slot, n)
    SELECT account_id, coalesce(lifecycle_stage, ''), 0, count(*)
    FROM contacts
    GROUP BY 1, 2`.execute(db);
  await sql`
    INSERT INTO contact_tag_counts (account_id, tag, lifecycle_stage, slot, n)
    SELECT c.account_id, t.tag, coalesce(c.lifecycle_stage, ''), 0, count(*)
    FROM contacts c
    CROSS JOIN LATERAL (SELECT DISTINCT unnest(c.tags) AS tag) t
    GROUP BY 1, 2, 3`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
