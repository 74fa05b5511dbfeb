import { sql } from 'kysely';
import type { Db } from '../db/database.js';

export const EVENT_RETENTION_MS = 7 * 86_400_000;

/**
 * Deletes events created before `before`, `batchSize` at a time, so that no single statement
 * holds locks on (or writes WAL for) a whole week of events at once. An event that a delivery
 * still waits to send is kept whatever its age: the dispatcher reads the event when it sends.
 * Returns how many were deleted.
 */
export async function pruneEvents(db: Db, before: Date, batchSize = 5_000): Promise<number> {
  let deleted = 0;
  for (;;) {
    const result = await sql`
      DELETE FROM events WHERE ctid IN (
        SELECT e.ctid FROM events e
        WHERE e.created_at < ${before}
          AND NOT EXISTS (
            SELECT 1 FROM webhook_deliveries d
            WHERE d.account_id = e.account_id AND d.event_id = e.id AND d.state = 'pending')
        LIMIT ${batchSize})`.execute(db);
    const n = Number(result.numAffectedRows ?? 0n);
    deleted += n;
    if (n < batchSize) return deleted;
  }
}
