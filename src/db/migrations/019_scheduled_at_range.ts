import { sql, type Kysely } from 'kysely';

// Before date-times were held to years 0001-9999 once their offset is applied, a broadcast could
// be scheduled past the end of year 9999 (`9999-12-31T23:59:59-00:01`); such a row cannot be
// written as JSON, so the account's broadcast reads failed. Its time is brought to the last
// instant that can be (it was never going to come anyway), so that it reads, and can be cancelled.
export async function up(db: Kysely<unknown>): Promise<void> {
  await sql`
    UPDATE broadcasts SET scheduled_at = '9999-12-31T23:59:59.999Z'
    WHERE scheduled_at > '9999-12-31T23:59:59.999Z'`.execute(db);
}

export async function down(): Promise<void> {
  throw new Error('migrations are forward-only');
}
