import { sql, type Kysely } from 'kysely';

// A job whose retries ran out is settled (its handler's onDead) in the transaction that marks
// it dead. Should settling fail, the job is not dead yet: `settling` says it comes back only
// to be settled again, never to run again. Adding a column with a constant default rewrites
// no row.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`ALTER TABLE jobs ADD COLUMN settling boolean NOT NULL DEFAULT false`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
