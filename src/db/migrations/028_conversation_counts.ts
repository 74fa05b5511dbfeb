import { sql, type Kysely } from 'kysely';

// How many conversations an account has by status, channel and assignee, kept by the writes that
// change them, so that GET /v1/conversations/counts and the total of a list filtered only by
// those read a few rows instead of counting conversations (at 1,000,000 conversations of which
// 100,000 open, /counts was an index-only scan of every open one: 58 ms at the median, 190 ms at
// the 99th percentile; bench suite `inbox`).
//
// Statement-level triggers with transition tables: a statement adds +1 for each row as it is
// now and -1 for each row as it was, summed by (status, channel, assignee); an update that
// changes none of them (activity, a read, a window) sums to nothing and writes nothing. Each
// connection adds to its own slot (its backend pid modulo 8, as broadcast_counters), so
// concurrent transactions seldom wait on one another's counts; a count is the sum of its slots.
// Unassigned is '' in assignee_type and assignee_id.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE conversation_counts (
      account_id text COLLATE "C" NOT NULL,
      status text NOT NULL,
      channel text NOT NULL,
      assignee_type text NOT NULL,
      assignee_id text COLLATE "C" NOT NULL,
      slot smallint NOT NULL,
      n bigint NOT NULL,
      PRIMARY KEY (account_id, status, channel, assignee_type, assignee_id, slot)
    )`.execute(db);
  await sql`
    CREATE FUNCTION switchboard_count_conversations() RETURNS trigger
    LANGUAGE plpgsql AS $$
    BEGIN
      IF TG_OP = 'INSERT' THEN
        INSERT INTO conversation_counts AS k
          (account_id, status, channel, assignee_type, assignee_id, slot, n)
        SELECT account_id, status, channel, coalesce(assignee_type, ''), coalesce(assignee_id, ''),
               pg_backend_pid() % 8, count(*)
        FROM new_rows
        GROUP BY 1, 2, 3, 4, 5
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (account_id, status, channel, assignee_type, assignee_id, slot)
          DO UPDATE SET n = k.n + excluded.n;
      ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO conversation_counts AS k
          (account_id, status, channel, assignee_type, assignee_id, slot, n)
        SELECT account_id, status, channel, coalesce(assignee_type, ''), coalesce(assignee_id, ''),
               pg_backend_pid() % 8, -count(*)
        FROM old_rows
        GROUP BY 1, 2, 3, 4, 5
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (account_id, status, channel, assignee_type, assignee_id, slot)
          DO UPDATE SET n = k.n + excluded.n;
      ELSE
        INSERT INTO conversation_counts AS k
          (account_id, status, channel, assignee_type, assignee_id, slot, n)
        SELECT account_id, status, channel, assignee_type, assignee_id, pg_backend_pid() % 8, sum(d)
        FROM (
          SELECT account_id, status, channel, coalesce(assignee_type, '') AS assignee_type,
                 coalesce(assignee_id, '') AS assignee_id, 1 AS d
          FROM new_rows
          UNION ALL
          SELECT account_id, status, channel, coalesce(assignee_type, ''), coalesce(assignee_id, ''), -1
          FROM old_rows
        ) changes
        GROUP BY 1, 2, 3, 4, 5
        HAVING sum(d) <> 0
        ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT (account_id, status, channel, assignee_type, assignee_id, slot)
          DO UPDATE SET n = k.n + excluded.n;
      END IF;
      RETURN NULL;
    END $$`.execute(db);
  // No write of conversations between the triggers and the first counts.
  await sql`LOCK TABLE conversations IN SHARE ROW EXCLUSIVE MODE`.execute(db);
  for (const [op, referencing] of [
    ['insert', 'NEW TABLE AS new_rows'],
    ['update', 'OLD TABLE AS old_rows NEW TABLE AS new_rows'],
    ['delete', 'OLD TABLE AS old_rows'],
  ] as const) {
    await sql`
      CREATE TRIGGER ${sql.raw(`conversations_count_${op}`)}
      AFTER ${sql.raw(op.toUpperCase())} ON conversations
      REFERENCING ${sql.raw(referencing)}
      FOR EACH STATEMENT EXECUTE FUNCTION switchboard_count_conversations()`.execute(db);
  }
  await sql`
    INSERT INTO conversation_counts (account_id, status, channel, assignee_type, assignee_id, slot, n)
    SELECT account_id, status, channel, coalesce(assignee_type, ''), coalesce(assignee_id, ''), 0,
           count(*)
    FROM conversations
    GROUP BY 1, 2, 3, 4, 5`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
