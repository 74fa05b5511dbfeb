import { sql, type RawBuilder } from 'kysely';
import type { FastifyBaseLogger } from 'fastify';
import type { Clock } from '../clock.js';
import { VISITOR_TOKEN_TTL_MS } from '../webchat/visitor-token.js';
import { VISITOR_SEEN_EVERY_MS } from '../webchat/webchat.repository.js';
import type { Db } from './database.js';

/** Stored provider webhooks are kept this long after they were processed (their bytes, for audits). */
export const INBOUND_WEBHOOK_RETENTION_MS = 7 * 86_400_000;
/**
 * A widget visitor that never wrote and was never identified is forgotten once it has not
 * started a session for this long. Its `updated_at` is renewed at session start, at most every
 * VISITOR_SEEN_EVERY_MS, so its latest token was issued before `updated_at` + that; with an
 * hour besides for clocks of other processes, every token it was ever given has lapsed by then.
 */
export const IDLE_VISITOR_RETENTION_MS = VISITOR_TOKEN_TTL_MS + VISITOR_SEEN_EVERY_MS + 3_600_000;
/**
 * Another name of a Messenger or Instagram message (a caption's id) is kept this long: a
 * delivery or read naming the caption later than that is dropped as naming an unknown id, the
 * message keeping the status it had.
 */
export const PROVIDER_ID_ALIAS_RETENTION_MS = 30 * 86_400_000;

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
 * Provider webhooks processed before `before`: a dead one replayed by `switchboard jobs retry`
 * long after it came is kept its full time from then. One not processed (its job still waiting,
 * or kept dead) keeps its bytes whatever its age, for `switchboard jobs retry`. Batches are
 * smaller than elsewhere: each row carries the webhook's bytes.
 */
export function pruneInboundWebhooks(db: Db, before: Date, batchSize = 1_000): Promise<number> {
  return deleteInBatches(
    db,
    'inbound_webhooks',
    (limit) => sql`
      SELECT ctid FROM inbound_webhooks
      WHERE processed_at < ${before} AND processed_at IS NOT NULL
      LIMIT ${limit}`,
    batchSize,
  );
}

/**
 * Widget visitors that did not start a session since `before` (see IDLE_VISITOR_RETENTION_MS),
 * never wrote and are not identified: a row made by a page load, with nothing to keep. Their
 * token has lapsed, so it could only start a new visitor anyway. A visitor holding a
 * conversation (a contact with its webchat identity) or an identifier is kept.
 */
export function pruneIdleVisitors(db: Db, before: Date, batchSize = 5_000): Promise<number> {
  return deleteInBatches(
    db,
    'webchat_visitors',
    (limit) => sql`
      SELECT v.ctid FROM webchat_visitors v
      WHERE v.updated_at < ${before} AND v.identifier IS NULL
        AND NOT EXISTS (
          SELECT 1 FROM contact_identities ci
          WHERE ci.account_id = v.account_id AND ci.channel = 'webchat' AND ci.external_id = v.id)
      LIMIT ${limit}`,
    batchSize,
  );
}

/** Aliases of provider message ids (captions on Messenger and Instagram) made before `before`. */
export function pruneProviderIdAliases(db: Db, before: Date, batchSize = 5_000): Promise<number> {
  return deleteInBatches(
    db,
    'provider_id_aliases',
    (limit) => sql`
      SELECT ctid FROM provider_id_aliases WHERE created_at < ${before} LIMIT ${limit}`,
    batchSize,
  );
}

/**
 * Prunes processed provider webhooks, idle widget visitors and old provider id aliases now and
 * every `everyMs`; the returned function stops it. Run by the workers. A run still going when
 * the next is due (a large backlog, a slow database) makes that one skip: two would compete for
 * the same rows.
 */
export function scheduleRetention(
  deps: { db: Db; clock: Clock; log: FastifyBaseLogger },
  everyMs = 600_000,
): () => void {
  let running = false;
  const prune = async () => {
    const now = deps.clock.now().getTime();
    try {
      const webhooks = await pruneInboundWebhooks(
        deps.db,
        new Date(now - INBOUND_WEBHOOK_RETENTION_MS),
      );
      const visitors = await pruneIdleVisitors(deps.db, new Date(now - IDLE_VISITOR_RETENTION_MS));
      const aliases = await pruneProviderIdAliases(
        deps.db,
        new Date(now - PROVIDER_ID_ALIAS_RETENTION_MS),
      );
      if (webhooks + visitors + aliases > 0)
        deps.log.info(
          { webhooks, visitors, aliases },
          'pruned processed provider webhooks, idle visitors and provider id aliases',
        );
    } catch (err) {
      deps.log.warn(
        { err },
        'pruning provider webhooks, visitors and provider id aliases failed; next try at the next run',
      );
    }
  };
  const run = () => {
    if (running) return;
    running = true;
    void prune().finally(() => (running = false));
  };
  run();
  const timer = setInterval(run, everyMs);
  timer.unref();
  return () => clearInterval(timer);
}
