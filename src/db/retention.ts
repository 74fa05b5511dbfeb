import { sql, type RawBuilder } from 'kysely';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../clock.js';
import type { Db } from './database.js';

/** Stored provider webhooks are kept this long after they were processed (their bytes, for audits). */
export const INBOUND_WEBHOOK_RETENTION_MS = 7 * 86_400_000;
/** A widget visitor that never wrote and was never identified is forgotten after this. */
export const IDLE_VISITOR_RETENTION_MS = 30 * 86_400_000;

/**
 * Runs `DELETE FROM table WHERE ctid IN (<rows>)` until fewer than `batchSize` go, so that no
 * statement holds locks on (or writes WAL for) everything due at once. `rows(limit)` selects the
 * `ctid`s of up to `limit` rows to delete. Returns how many were deleted.
 */
export async function deleteInBatches(
  db: Db,
  table: string,
  rows: (limit: number) => RawBuilder<unknown>,
  batchSize: number,
): Promise<number> {
  let deleted = 0;
  for (;;) {
    const result =
      await sql`DELETE FROM ${sql.table(table)} WHERE ctid IN (${rows(batchSize)})`.execute(db);
    const n = Number(result.numAffectedRows ?? 0n);
    deleted += n;
    if (n < batchSize) return deleted;
  }
}

/**
 * Provider webhooks processed before `before`. One not processed (its job still waiting, or kept
 * dead) keeps its bytes whatever its age, for `switchboard jobs retry`.
 */
export function pruneInboundWebhooks(db: Db, before: Date, batchSize = 1_000): Promise<number> {
  return deleteInBatches(
    db,
    'inbound_webhooks',
    (limit) => sql`
      SELECT ctid FROM inbound_webhooks
      WHERE received_at < ${before} AND processed_at IS NOT NULL
      LIMIT ${limit}`,
    batchSize,
  );
}

/**
 * Widget visitors created before `before` that never wrote and are not identified: a session
 * started by every page load without a kept token, with nothing to keep. Their token, should it
 * come back, starts a new visitor, as an expired one does. A visitor holding a conversation (a
 * contact with its webchat identity) or an identifier is kept.
 */
export function pruneIdleVisitors(db: Db, before: Date, batchSize = 5_000): Promise<number> {
  return deleteInBatches(
    db,
    'webchat_visitors',
    (limit) => sql`
      SELECT v.ctid FROM webchat_visitors v
      WHERE v.created_at < ${before} AND v.identifier IS NULL
        AND NOT EXISTS (
          SELECT 1 FROM contact_identities ci
          WHERE ci.account_id = v.account_id AND ci.channel = 'webchat' AND ci.external_id = v.id)
      LIMIT ${limit}`,
    batchSize,
  );
}

/**
 * Prunes processed provider webhooks and idle widget visitors now and every `everyMs`; the
 * returned function stops it. Run by the workers.
 */
export function scheduleRetention(
  deps: { db: Db; clock: Clock; log: FastifyBaseLogger },
  everyMs = 600_000,
): () => void {
  const run = async () => {
    const now = deps.clock.now().getTime();
    try {
      const webhooks = await pruneInboundWebhooks(
        deps.db,
        new Date(now - INBOUND_WEBHOOK_RETENTION_MS),
      );
      const visitors = await pruneIdleVisitors(deps.db, new Date(now - IDLE_VISITOR_RETENTION_MS));
      if (webhooks + visitors > 0)
        deps.log.info(
          { webhooks, visitors },
          'pruned processed provider webhooks and idle visitors',
        );
    } catch (err) {
      deps.log.warn(
        { err },
        'pruning provider webhooks and visitors failed; next try in 10 minutes',
      );
    }
  };
  void run();
  const timer = setInterval(() => void run(), everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
