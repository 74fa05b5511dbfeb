import { sql, type Kysely } from 'kysely';

// A channel's broadcast rate is the connection's, shared by every broadcast on it: the next time a
// batch may start on an account's channel, taken by one batch at a time (see BroadcastsService).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    CREATE TABLE channel_pacing (
      account_id text COLLATE "C" NOT NULL,
      channel text COLLATE "C" NOT NULL,
      next_at timestamptz NOT NULL,
      PRIMARY KEY (account_id, channel)
    )`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
