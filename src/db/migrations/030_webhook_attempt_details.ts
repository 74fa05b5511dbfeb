import { sql, type Kysely } from 'kysely';

// The delivery log shows what the receiver answered (the start of its body) and, for an attempt
// that failed and will be retried, when the next attempt is due (null when none is).
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    ALTER TABLE webhook_attempts
      ADD COLUMN response_excerpt text,
      ADD COLUMN next_attempt_at timestamptz`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
