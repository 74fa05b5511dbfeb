import { sql, type Kysely } from 'kysely';

// How many of an account's contacts have a conversation on each channel, kept by the writes that
// change it, so that the total of `GET /v1/contacts?channel=` reads a few rows instead of joining
// the contacts with the channel's conversations (at 1,000,000 contacts, a channel that 15 % of
// them use: p50 480 ms with one connection, p99 2.6 s with four; bench suite `contacts-table`).
//
// A conversation is one contact's on one channel (unique per account, contact and channel), so
// the count is that of the channel's conversations whose contact still exists: a deleted
// contact's conversations stay, and stop counting with its deletion. Each connection adds to its
// own slot (its backend pid modulo 8), as the other counters. Kept by:
// - conversations inserted and deleted (statement-level, transition tables): ±1 for each whose
//   contact exists;
// - a conversation moved to another contact or channel (a merge; row-level, only then): -1 for
//   what it was, +1 for what it is, each if its contact exists;
// - contacts deleted (statement-level): -1 for each of their conversations.
// Writes of conversations take the contact FOR KEY SHARE first, so no contact is deleted between
// a conversation's insert and its count.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE contact_channel_counts (
      account_id text COLLATE "C" NOT NULL,
      channel text NOT NULL,
      slot smallint NOT NULL,
      n bigint NOT NULL,
      PRIMARY KEY (account_id, channel, slot)
    )`.execute(db);
  const add = (rows: string) => `
    INSERT INTO contact_channel_counts AS k (account_id, channel, slot, n)
    SELECT account_id, channel, pg_backend_pid() % 8, sum(d)
    FROM (${rows}) changes
    GROUP BY 1, 2
    HAVING sum(d) <> 0
    ORDER BY 1, 2
    ON CONFLICT (account_id, channel, slot) DO UPDATE SET n = k.n + excluded.n`;
  const live = (alias: string) =>
    `EXISTS (SELECT 1 FROM contacts c WHERE c.account_id = ${alias}.account_id AND c.id = ${alias}.contact_id)`;
  for (const [fn, body] of [
    [
      'switchboard_count_contact_channels_insert',
      add(`SELECT account_id, channel, 1 AS d FROM new_rows r WHERE ${live('r')}`),
    ],
    [
      'switchboard_count_contact_channels_delete',
      add(`SELECT account_id, channel, -1 AS d FROM old_rows r WHERE ${live('r')}`),
    ],
    [
      'switchboard_count_contact_channels_move',
      add(`SELECT NEW.account_id AS account_id, NEW.channel AS channel, 1 AS d WHERE ${live('NEW')}
           UNION ALL
           SELECT OLD.account_id, OLD.channel, -1 WHERE ${live('OLD')}`),
    ],
    [
      'switchboard_count_contact_channels_forget',
      add(`SELECT cv.account_id, cv.channel, -1 AS d
           FROM old_rows o JOIN conversations cv ON cv.account_id = o.account_id AND cv.contact_id = o.id`),
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
  // No write of either table between the triggers and the first counts.
  await sql`LOCK TABLE conversations, contacts IN SHARE ROW EXCLUSIVE MODE`.execute(db);
  await sql`
    CREATE TRIGGER conversations_channel_count_insert AFTER INSERT ON conversations
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_count_contact_channels_insert()`.execute(db);
  await sql`
    CREATE TRIGGER conversations_channel_count_delete AFTER DELETE ON conversations
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_count_contact_channels_delete()`.execute(db);
  await sql`
    CREATE TRIGGER conversations_channel_count_move AFTER UPDATE OF contact_id, channel ON conversations
    FOR EACH ROW
    WHEN (OLD.contact_id IS DISTINCT FROM NEW.contact_id OR OLD.channel IS DISTINCT FROM NEW.channel)
    EXECUTE FUNCTION switchboard_count_contact_channels_move()`.execute(db);
  await sql`
    CREATE TRIGGER contacts_channel_count_delete AFTER DELETE ON contacts
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION switchboard_count_contact_channels_forget()`.execute(db);
  await sql`
    INSERT INTO contact_channel_counts (account_id, channel, slot, n)
    SELECT cv.account_id, cv.channel, 0, count(*)
    FROM conversations cv
    WHERE ${sql.raw(live('cv'))}
    GROUP BY 1, 2`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
