import { sql, type Kysely } from 'kysely';

// A broadcast's funnel counts, added to by the transactions that change its messages' statuses.
// They used to be columns of the broadcast's own row, so the transaction recording the provider's
// answers to one batch waited for the one queueing the next (which holds that row locked from
// start to commit). Each connection now adds to its own slot (its backend pid modulo the slot
// count): concurrent transactions never wait on one another's counts, and a broadcast has at most
// that many rows to sum when read. The columns of `broadcasts` stay, as the counts up to now (and
// those of a process of the previous release while a deployment rolls): stats = columns + slots.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE broadcast_counters (
      account_id text COLLATE "C" NOT NULL,
      broadcast_id text COLLATE "C" NOT NULL,
      slot smallint NOT NULL,
      sent integer NOT NULL DEFAULT 0,
      delivered integer NOT NULL DEFAULT 0,
      read integer NOT NULL DEFAULT 0,
      replied integer NOT NULL DEFAULT 0,
      failed integer NOT NULL DEFAULT 0,
      PRIMARY KEY (account_id, broadcast_id, slot)
    )`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
