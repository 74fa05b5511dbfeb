import { sql } from 'kysely';
import type { Db } from '../db/database.js';
import { deleteInBatches, type PruneTask } from '../db/retention.js';
import { VISITOR_TOKEN_TTL_MS } from './visitor-token.js';
import { VISITOR_SEEN_EVERY_MS } from './webchat.repository.js';

/**
 * A widget visitor that never wrote and was never identified is forgotten once it has not
 * started a session for this long. Its `updated_at` is renewed at session start, at most every
 * VISITOR_SEEN_EVERY_MS, so its latest token was issued before `updated_at` + that; with an
 * hour besides for clocks of other processes, every token it was ever given has lapsed by then.
 */
export const IDLE_VISITOR_RETENTION_MS = VISITOR_TOKEN_TTL_MS + VISITOR_SEEN_EVERY_MS + 3_600_000;

/**
 * Widget visitors that did not start a session since `before` (see IDLE_VISITOR_RETENTION_MS),
 * never wrote and are not identified (or were, under an identity secret since replaced): a row
 * made by a page load, with nothing to keep. Their
 * token has lapsed, so it could only start a new visitor anyway. A visitor holding a
 * conversation (a contact with its webchat identity) or an identifier is kept.
 */
export function pruneIdleVisitors(db: Db, before: Date, batchSize = 5_000): Promise<number> {
  return deleteInBatches(
    db,
    'webchat_visitors',
    (limit) => sql`
      SELECT v.ctid FROM webchat_visitors v
      WHERE v.updated_at < ${before}
        AND (v.identifier IS NULL OR v.vouched_by IS DISTINCT FROM (
          SELECT sha256(c.secrets) FROM channel_connections c
          WHERE c.account_id = v.account_id AND c.channel = 'webchat'))
        AND NOT EXISTS (
          SELECT 1 FROM contact_identities ci
          WHERE ci.account_id = v.account_id AND ci.channel = 'webchat' AND ci.external_id = v.id)
      LIMIT ${limit}`,
    batchSize,
  );
}

/** What webchat keeps for a while and then forgets. */
export const webchatPruneTasks: readonly PruneTask[] = [
  {
    name: 'visitors',
    maxAgeMs: IDLE_VISITOR_RETENTION_MS,
    prune: (db, before) => pruneIdleVisitors(db, before),
  },
];
